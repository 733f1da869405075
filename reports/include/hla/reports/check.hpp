#pragma once

// hla check: someone else's kernel output against the exact operator, with a verdict from two
// criteria (docs/check.md).
// - Sound: every output within the a-priori rounding bound of an implementation of the declared
//   precision (the loosest of the toolkit's own, or the one --algorithm names), plus the final
//   rounding to the output format and the reference's own error.
// - Tight: per head, the candidate's distance from the correctly rounded reference, counted in
//   units of the output format, at most `tight_factor` times that of the toolkit's own
//   implementations of the same precision on the same inputs.

#include <functional>
#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hla/reference/scalar.hpp"
#include "hla/reference/sequence.hpp"
#include "hla/reports/check_options.hpp"

namespace hla::reports {

// Round to nearest, ties to even, into the format (overflow to infinity, gradual underflow).
double round_to(Format format, double x);

// One (batch, head): its q, k, v as the candidate read them (before the scale) and its output.
struct HeadInput {
  Index batch = 0, head = 0;
  Sequence<double> tokens;
  Matrix<double> output;
};

struct Position {
  Index batch = 0, head = 0, token = 0, column = 0;
};

struct CheckResult {
  static constexpr double tight_factor = 4;
  // Distances below 4 units of the output format at the rms output, in all, always pass.
  static constexpr double tight_floor_units = 4;

  bool sound = false, tight = false, passed = false;
  double worst_ratio = 0;  // max over outputs of |o - o_ref| / sound bound
  Position worst;
  std::optional<Position> first_failure;    // the earliest token outside the sound bound
  std::optional<Position> first_departure;  // the earliest token whose distance passes the tight limit
  double normwise_u = 0;                    // ||o - o_ref||_F / ||o_ref||_F in units of the arithmetic's u
  double own_normwise_u = 0;                // the same for the toolkit's implementation named own_name
  double tight_ratio = 0;                   // max over heads of the distance over the tight limit's base
  // In the worst head: rms distance from the rounded reference, in units of the output format at
  // the rms output, of the candidate and of the toolkit's implementation named own_name.
  double distance_units = 0, own_distance_units = 0;
  std::string own_name;        // "float32 chunked": the toolkit's loosest implementation there
  std::string reference_name;  // "float64 streaming (CPU)": what computed the reference
  std::vector<double> growth;  // worst ratio in each eighth of the sequence
  // Per token: the worst ratio to the sound bound over heads and columns; the rms distance from
  // the rounded reference over the heads' outputs, in output units at the rms output, of the
  // candidate and of the toolkit's loosest implementation in each head.
  std::vector<double> token_ratio, token_distance_units, own_token_distance_units;
  Index chunk_boundary = 0;  // > 0: every first failure sits at a multiple of it
  // On FAIL, the diagnosis in the head with the largest tight ratio: every printed form with a
  // finding and every common mistake that applies (diagnosis_forms), each with the candidate's
  // distance from it over the tight limit's base, the closest first; `matches` those within the
  // tight factor (two forms closer to each other than the output format resolves both match).
  struct Diagnosed {
    std::string id, description;
    double ratio = 0;
  };
  std::vector<Diagnosed> diagnosis;
  std::vector<std::string> matches;
  Position diagnosed;  // its batch and head
  long undefined = 0;  // normalized outputs whose exact denominator the bounds cannot separate from 0
  long outputs = 0;
  Index heads = 0, n = 0;
};

// A form a failing output may match: an id (the ledger's for a printed form, e.g. sec-4.3,
// eq-4.1-decay, thm-7.1, fig-1c; a name for a mistake), one sentence, and its output in float64
// from the scaled tokens and the tokens as read.
struct DiagnosisForm {
  std::string id, description;
  std::function<Matrix<double>(const Sequence<double>& scaled, const Sequence<double>& read)> output;
};
// The printed forms with a finding and the common mistakes that apply to these options and heads
// of d key and dv value features.
std::vector<DiagnosisForm> diagnosis_forms(const CheckOptions& options, Index d, Index dv);

// @pre count >= 1; head(i) for i < count, all of one shape, values finite and representable in
// options.precision (the command line checks it). Heads are built when checked, a few at a
// time. Throws hla::Error for options the toolkit cannot check.
CheckResult check(const CheckOptions& options, std::size_t count,
                  const std::function<HeadInput(std::size_t)>& head);
CheckResult check(const CheckOptions& options, const std::vector<HeadInput>& heads);

// An array as the check reads it: a name for messages (its file), its shape and its values in C
// order (not owned), as double or, for float32 and float16 files, as float (the other null).
struct ArrayView {
  std::string name;
  std::vector<std::int64_t> shape;
  const double* values = nullptr;
  const float* narrow = nullptr;
};
// Checks the arrays against the layout and each other (q and k alike; v and o alike, with as many
// heads as q or a multiple of them: grouped queries, each group's value heads consecutive) and
// their values (finite; q, k, v in options.precision), then checks o. Throws hla::Error with one
// line naming the array (and the entry) for bad input.
CheckResult check_arrays(const CheckOptions& options, Layout layout, const ArrayView& q, const ArrayView& k,
                         const ArrayView& v, const ArrayView& o);

// The operator's output on the arrays, in v's shape and layout (C order): the streaming form,
// proven equal to the definition, in `scalar` (exact rationals, 261-bit MPFR or float64), with
// options' scale (applied in float64) and eps policy, rounded to float64 at the end. The arrays
// are checked as check_arrays checks them (finite values; any precision). A normalized output whose
// divisor is exactly zero is an error in exact arithmetic, inf or NaN otherwise.
std::vector<double> reference_arrays(const CheckOptions& options, Layout layout, ScalarKind scalar,
                                     const ArrayView& q, const ArrayView& k, const ArrayView& v);

// The first line ("PASS", "FAIL (within the sound bound, outside the tight criterion)",
// "FAIL (outside the sound bound)") and the figures behind it, one per line.
std::string check_summary(const CheckResult& result, const CheckOptions& options);
void write_check_json(const CheckResult& result, const CheckOptions& options, std::ostream& out);

// hla check --report DIR: check.md (the summary, the diagnosis table, the plot), tokens.csv (the
// per-token series) and error.png (drawn from it by reports/plot_check.py, matplotlib), written as
// hla report writes its directory (io::StagedDirectory: swapped in when complete).
// @pre io::check_output_directory("--report", dir) passed
void write_check_report(const CheckResult& result, const CheckOptions& options, const std::string& dir,
                        std::ostream& progress);

}  // namespace hla::reports
