#pragma once

// Generic pieces of the claims: the laws of a scan operator (checking/laws.hpp) as the sides of
// a claim, on segments cut from a case's tokens, and the exclusive-scan-then-include procedure of
// Thm 4.1 and Alg. 1/4.

#include <string>
#include <utility>
#include <vector>

#include "hla/checking/laws.hpp"
#include "hla/fast/scan.hpp"
#include "hla/proofs/claim.hpp"
#include "hla/reference/definition.hpp"

namespace hla::proofs {

using checking::column;
using checking::components;
using checking::Named;
using checking::token_summaries;

// Appends one part per component of a law's two summaries: lhs from the first, rhs from the second.
template <class T, class Summary>
void compare(Sides<T>& sides, const std::string& prefix, const std::pair<Summary, Summary>& law) {
  const Named<T> x = components(law.first), y = components(law.second);
  for (std::size_t i = 0; i < x.size(); ++i) sides.push_back({prefix + x[i].first, x[i].second, y[i].second});
}

// (A (+) B) (+) C against A (+) (B (+) C) on the case's three segments.
template <class Segments, class T>
Sides<T> associativity(const Segments& seg, const Case<T>& c) {
  const auto x = checking::segment_summaries(seg, token_summaries(seg, c.tokens), c.segments);
  Sides<T> sides;
  compare(sides, "", checking::associativity(seg, x[0], x[1], x[2]));
  return sides;
}

// E (+) A = A = A (+) E on the case's one segment.
template <class Segments, class T>
Sides<T> identity_laws(const Segments& seg, const Case<T>& c) {
  const auto x = checking::segment_summaries(seg, token_summaries(seg, c.tokens), c.segments);
  Sides<T> sides;
  compare(sides, "left ", checking::left_identity(seg, x[0]));
  compare(sides, "right ", checking::right_identity(seg, x[0]));
  return sides;
}

// Thm 4.1's procedure: an exclusive Blelloch scan of the token segments, then I_t = P_t (+) T_t.
template <class Segments, class T>
std::vector<typename Segments::Summary> scan_inclusive(const Segments& seg, const Sequence<T>& s) {
  const auto tokens = token_summaries(seg, s);
  auto prefixes = tokens;
  fast::exclusive_scan(
      prefixes, seg.identity(), [&seg](const auto& a, const auto& b) { return seg.combine(a, b); }, 1);
  for (std::size_t t = 0; t < tokens.size(); ++t) prefixes[t] = seg.combine(prefixes[t], tokens[t]);
  return prefixes;
}

// The two-level form (Sec. 4.2, Alg. 4): chunks of `chunk` tokens, an exclusive scan inside each
// chunk and one across the chunk summaries, then I_t = carry (+) P_t^loc (+) T_t.
template <class Segments, class T>
std::vector<typename Segments::Summary> two_level_inclusive(const Segments& seg, const Sequence<T>& s,
                                                            Index chunk) {
  using Summary = typename Segments::Summary;
  const auto tokens = token_summaries(seg, s);
  const auto combine = [&seg](const Summary& a, const Summary& b) { return seg.combine(a, b); };
  const Index n = s.length();
  std::vector<Summary> local = tokens, carry;
  for (Index begin = 0; begin < n; begin += chunk) {
    const Index end = std::min(n, begin + chunk);
    std::vector<Summary> part(tokens.begin() + begin, tokens.begin() + end);
    fast::exclusive_scan(part, seg.identity(), combine, 1);
    carry.push_back(seg.combine(part.back(), tokens[end - 1]));
    std::copy(part.begin(), part.end(), local.begin() + begin);
  }
  fast::exclusive_scan(carry, seg.identity(), combine, 1);
  std::vector<Summary> out;
  for (Index t = 0; t < n; ++t)
    out.push_back(seg.combine(seg.combine(carry[t / chunk], local[t]), tokens[t]));
  return out;
}

// Stacks per-token states component by component (rows t = 1..n of each flattened component).
template <class T, class Summary>
Named<T> stacked(const std::vector<Summary>& states) {
  Named<T> out;
  for (std::size_t t = 0; t < states.size(); ++t) {
    const Named<T> x = components(states[t]);
    if (out.empty()) {
      for (const auto& [name, m] : x) out.push_back({name, Matrix<T>(states.size(), m.size())});
    }
    for (std::size_t i = 0; i < x.size(); ++i)
      out[i].second.row(t) = Eigen::Map<const RowVector<T>>(x[i].second.data(), x[i].second.size());
  }
  return out;
}

template <class T, class Summary>
void compare_states(Sides<T>& sides, const std::vector<Summary>& a, const std::vector<Summary>& b) {
  const Named<T> x = stacked<T>(a), y = stacked<T>(b);
  for (std::size_t i = 0; i < x.size(); ++i) sides.push_back({x[i].first + "_t", x[i].second, y[i].second});
}

// The read-outs num_t, den_t of per-token inclusive states.
template <class Segments, class T>
Terms<T> read_states(const Segments& seg, const std::vector<typename Segments::Summary>& states,
                     const Sequence<T>& s) {
  Terms<T> out{Matrix<T>(s.length(), s.value_dim()), Vector<T>(s.length())};
  for (Index t = 0; t < s.length(); ++t) {
    const fast::Readout<T> r = seg.read(states[t], s.q.row(t).transpose());
    out.num.row(t) = r.num;
    out.den(t) = r.den;
  }
  return out;
}

// The step inside Thm 4.1's proof: at every t, the state after t - 1 serial steps (+) the token's
// own summary T_t against the serial state after t steps.
template <class Segments, class T>
Sides<T> one_step(const Segments& seg, const std::vector<typename Segments::Summary>& serial,
                  const Sequence<T>& s) {
  const auto tokens = token_summaries(seg, s);
  std::vector<typename Segments::Summary> stepped;
  for (std::size_t t = 0; t < tokens.size(); ++t)
    stepped.push_back(seg.combine(t == 0 ? seg.identity() : serial[t - 1], tokens[t]));
  Sides<T> sides;
  compare_states(sides, stepped, serial);
  return sides;
}

// Parts comparing terms: "num" and "den".
template <class T>
Sides<T> terms_sides(const Terms<T>& lhs, const Terms<T>& rhs) {
  return {{"num", lhs.num, rhs.num}, {"den", column(lhs.den), column(rhs.den)}};
}

}  // namespace hla::proofs
