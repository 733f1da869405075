#pragma once

#include <iosfwd>
#include <string>

#include "hla/reports/check_options.hpp"

namespace hla::cli {

struct CheckRequest {
  reports::CheckOptions options;
  reports::Layout layout = reports::Layout::nd;
  std::string q_path, k_path, v_path, o_path, json_path, report_dir;
  std::string grad_path, dq_path, dk_path, dv_path;  // --grad: dO and the kernel's gradients
};

// Reads the arrays, checks the candidate output (--o) and gradients (--grad), prints the summaries to
// `out` and writes the JSON. Returns 0 when everything checked passes, 1 when something fails; throws hla::Error with a one-line message on bad input
// (shapes, layout, head counts, dtypes, values not in --precision, non-finite values, files).
int run_check(const CheckRequest& request, std::ostream& out);

}  // namespace hla::cli
