#pragma once

// `hla fuzz`: fuzzing campaigns over the laws of the scan operators (fuzz/), run with the
// libFuzzer binaries built beside hla (build/fuzzers/), and the explanation of a saved input.

#include <iosfwd>
#include <string>

namespace hla::cli {

struct FuzzOptions {
  std::string operator_id;
  double seconds = 60;
  int jobs = 1;
  std::string corpus;   // start from (and add to) this directory; empty: a fresh empty corpus
  std::string explain;  // a saved input to decode and check instead of fuzzing
};

// The operators, one per line: id, lawful or the finding that breaks it, description.
void list_fuzz_operators(std::ostream& out);

// Runs the campaign with a live progress line on `progress` and the summary on `out`.
// Returns 0 when no law was violated, 1 when one was (the counterexample is printed).
// Throws hla::Error when the fuzzers are missing or a fuzzer fails for another reason.
int run_fuzz(const FuzzOptions& options, std::ostream& out, std::ostream& progress);

// Decodes a saved input, checks the operator's laws on it and prints the minimized
// counterexample (returns 1) or that every law holds there (returns 0).
int explain_fuzz_input(const FuzzOptions& options, std::ostream& out);

}  // namespace hla::cli
