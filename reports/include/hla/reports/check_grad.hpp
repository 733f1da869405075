#pragma once

// hla check --grad: a kernel's backward (dQ, dK, dV of <dO, O>) against the exact gradients, with
// the forward check's two criteria (docs/check.md "Gradients"):
// - Sound: every entry within the a-priori rounding bound of the toolkit's backward of the declared
//   precision (the streaming backward's, or the scan's where --algorithm names it: gamma(K) times
//   the gauge, fast/tests/rounding_test.cpp), plus the final rounding to the output format and the
//   reference's own error.
// - Tight: per head and gradient, the candidate's rms distance from the correctly rounded reference
//   at most `tight_factor` times that of the toolkit's streaming backward of the same precision.
// Normalized operators (--eps-policy add, the backward's division): the bound adds the readouts'
// adjoints' own error through the division (backward_bound.hpp); an entry that depends on a
// denominator the bounds cannot tell from zero has no finite bound and is counted, not compared.

#include <iosfwd>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "hla/reference/gradient.hpp"
#include "hla/reports/check.hpp"

namespace hla::reports {

// One (batch, query/key head): its q, k, v as the candidate read them (before the scale), the
// cotangent dO and the candidate's gradients (dQ with respect to the q read, before the scale).
// With grouped queries, `group` value heads share q and k: v, dO and dV hold them side by side
// (value head head * group + g in columns g dv .. (g + 1) dv - 1), and dQ, dK are the sums over
// the group.
struct GradientHead {
  Index batch = 0, head = 0;
  Sequence<double> tokens;
  Matrix<double> d_out;
  Gradients<double> candidate;
  Index group = 1;
};

inline constexpr const char* gradient_names[3] = {"dQ", "dK", "dV"};

struct GradientCheckResult {
  static constexpr double tight_factor = CheckResult::tight_factor;
  static constexpr double tight_floor_units = CheckResult::tight_floor_units;

  bool sound = false, tight = false, passed = false;
  double worst_ratio = 0;  // max over entries of |g - g_ref| / sound bound
  int worst_part = 0;      // 0, 1, 2: dQ, dK, dV (gradient_names)
  Position worst;
  // The earliest token with an entry outside the sound bound, and its gradient.
  std::optional<Position> first_failure;
  int first_failure_part = 0;
  // Per gradient: the worst ratio to the sound bound, and in the head with the largest tight ratio
  // the rms distances from the rounded reference in units of the output format at its rms
  // gradient (the candidate's and the toolkit's own).
  double part_ratio[3] = {0, 0, 0};
  double distance_units[3] = {0, 0, 0}, own_distance_units[3] = {0, 0, 0};
  double tight_ratio = 0;  // max over heads and gradients of the distance over the tight limit
  int tight_part = 0;
  Position tight_head;  // its batch and head
  // On FAIL, the diagnosis in the head with the largest tight ratio: each backward mistake of the
  // catalogue that applies (fast::backward_mistakes), with the candidate's distance from its
  // gradients over the tight limit (the largest over dQ, dK, dV), the closest first; `matches`
  // those within it.
  std::vector<CheckResult::Diagnosed> diagnosis;
  std::vector<std::string> matches;
  Position diagnosed;          // its batch and head
  std::string own_name;        // "float32 streaming backward"
  std::string bound_name;      // "streaming backward", "scan backward (chunks of 64)"
  std::string reference_name;  // "float64 streaming backward (CPU)"
  long entries = 0;
  long unbounded = 0;  // entries without a finite bound, not compared
  Index heads = 0, n = 0;
};

// @pre heads non-empty, all of one shape, values finite and representable in options.precision.
// Throws hla::Error for what cannot be checked (another --eps-policy than add, no entry with a
// finite bound).
GradientCheckResult check_gradients(const CheckOptions& options, const std::vector<GradientHead>& heads);

// The arrays as check_arrays reads them, with dO, dQ, dK, dV: dO and dV in v's shape, dQ and dK in
// q's (with grouped queries, dQ and dK sum over each query/key head's value heads). Throws
// hla::Error with one line naming the array (and the entry) for bad input.
GradientCheckResult check_gradient_arrays(const CheckOptions& options, Layout layout, const ArrayView& q,
                                          const ArrayView& k, const ArrayView& v, const ArrayView& d_out,
                                          const ArrayView& dq, const ArrayView& dk, const ArrayView& dv);

// One value head's gradients in float64 by the streaming backward with a backward mistake of the
// catalogue (fast::backward_mistakes, by id) in every token's step: tokens and dQ as the candidate
// reads and writes them (q before options.scale). The diagnosis compares the candidate with these.
Gradients<double> mistaken_gradients(const CheckOptions& options, std::string_view id,
                                     const Sequence<double>& tokens, const Matrix<double>& d_out);

// The verdict line and the figures behind it, as check_summary gives them for an output.
std::string gradient_check_summary(const GradientCheckResult& result, const CheckOptions& options);
void write_gradient_check_json(const GradientCheckResult& result, const CheckOptions& options, std::ostream& out);

}  // namespace hla::reports
