#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "hla/fast/implementation.hpp"
#include "hla/reference/operator_spec.hpp"
#include "hla/reports/options.hpp"

namespace hla::reports {

struct AuditRow {
  OperatorSpec spec;                    // decay = 1/2 stands for "a random gamma < 1 per case"
  fast::Implementation implementation;  // GPU rows are checked in Z/p only (exact_agree stays 0)
  fast::Form form;
  bool expected_equal;  // false for published forms recorded in docs/findings.md
  std::string finding;  // e.g. "F1"; empty when none
  int exact_agree = 0, modp_agree = 0, cases = 0;
  std::string first_difference;  // "n=2 d=1 dv=1 seed=..." for the first disagreeing case
};

// CPU rows for every operator; GPU rows too where the build has CUDA and a device is present.
std::vector<AuditRow> run_audit(const AuditOptions& options, std::ostream& progress);

// Why the audit has no GPU rows ("" when it has them).
std::string audit_gpu_absent_reason();

struct AuditVerdict {
  bool unexpected_difference = false;  // a form that claims to equal the reference did not
  std::vector<std::string> unreached;  // findings that no case showed (n or the cases too few)
};

// One line per row, and what they say together.
AuditVerdict print_audit(const std::vector<AuditRow>& rows, std::ostream& out);

}  // namespace hla::reports
