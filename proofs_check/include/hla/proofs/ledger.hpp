#pragma once

// The ledger: every claim checked, with its verdict and evidence.

#include <iosfwd>
#include <optional>
#include <string>
#include <vector>

#include "hla/proofs/claim.hpp"
#include "hla/proofs/options.hpp"

namespace hla::proofs {

// An input on which the two sides differ, with the first part that differs.
struct Counterexample {
  Case<Rational> input;
  std::string part;
  Matrix<Rational> lhs, rhs;
  std::string method;  // how it was found and why it is minimal
};

struct Entry {
  std::string id;
  int page = 0;
  std::string statement;
  bool holds = false;
  std::string corrected_by, corrects;
  std::string evidence;  // a few words for the table
  // identities
  int cases = 0, field_cases = 0;
  std::string sizes;       // the sizes tried
  double field_bound = 0;  // Schwartz-Zippel: chance that a false identity passes one Z/p case
  std::string scope;       // what the finite checks imply for all n
  std::optional<Counterexample> counterexample;
  // counts
  std::string counted, stated, unit;
  std::string condition;  // a failing count's condition ("C >= d"), checked both ways
  bool holds_when = false, holds_reversed = false;
};

// Checks every claim; progress (one line per claim) goes to `progress`.
std::vector<Entry> run_ledger(const std::vector<Claim>& claims, const LedgerOptions& options,
                              std::ostream& progress);

// Checks one claim: identities on options.cases + options.field_cases random cases (a seed
// derived from options.seed and the claim's id), then, if they differ, the minimal counterexample.
Entry check_claim(const Claim& claim, const LedgerOptions& options);

// Re-evaluates a recorded counterexample exactly: whether the two sides still differ there.
bool differs_at(const Claim& claim, const Counterexample& counterexample);

void print_table(const std::vector<Entry>& entries, std::ostream& out);
void write_json(const std::vector<Entry>& entries, const LedgerOptions& options, std::ostream& out);
void write_markdown(const std::vector<Entry>& entries, const LedgerOptions& options, std::ostream& out);

}  // namespace hla::proofs
