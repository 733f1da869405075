#pragma once

#include <iosfwd>
#include <string>

#include "hla/reports/check_options.hpp"

namespace hla::cli {

struct CheckRequest {
  reports::CheckOptions options;
  reports::Layout layout = reports::Layout::nd;
  std::string q_path, k_path, v_path, o_path, json_path, report_dir;
};

// Reads the arrays, checks the candidate output, prints the summary to `out` and writes the JSON.
// Returns 0 when it passes, 1 when it fails; throws hla::Error with a one-line message on bad input
// (shapes, layout, head counts, dtypes, values not in --precision, non-finite values, files).
int run_check(const CheckRequest& request, std::ostream& out);

}  // namespace hla::cli
