#pragma once

#include <algorithm>
#include <numeric>
#include <optional>
#include <vector>

#include "hla/fast/streaming.hpp"

namespace hla::testing {

struct Counterexample {
  Sequence<Rational> sequence;
  Terms<Rational> published;
  Terms<Rational> reference;
};

// The first input on which the published streaming form disagrees with the reference (in the
// numerator, or in the denominator when `denominator`), in this order: smallest n, then d, then
// dv, then fewest non-zero entries, then smallest magnitudes, then lexicographically over
// q, k, v (row-major) with 0 < 1 < -1 < 2 < -2. Entries range over [-max_abs, max_abs].
inline std::optional<Counterexample> minimal_counterexample(const OperatorSpec& spec, bool denominator,
                                                            Index max_n, Index max_d, int max_abs) {
  std::vector<int> alphabet{0};
  for (int a = 1; a <= max_abs; ++a) alphabet.insert(alphabet.end(), {a, -a});
  for (Index n = 1; n <= max_n; ++n) {
    for (Index d = 1; d <= max_d; ++d) {
      for (Index dv = 1; dv <= max_d; ++dv) {
        const Index entries = n * (2 * d + dv);
        std::size_t count = 1;
        for (Index e = 0; e < entries; ++e) count *= alphabet.size();
        if (count > 2'000'000) return std::nullopt;
        std::vector<std::vector<int>> digits(count, std::vector<int>(entries));
        for (std::size_t c = 0; c < count; ++c) {
          std::size_t rest = c;
          for (Index e = entries - 1; e >= 0; --e, rest /= alphabet.size())
            digits[c][e] = rest % alphabet.size();
        }
        const auto key = [](const std::vector<int>& x) {
          const long nonzero = std::count_if(x.begin(), x.end(), [](int a) { return a != 0; });
          const long magnitude = std::accumulate(x.begin(), x.end(), 0L);  // digit 2a-1, 2a grow with |a|
          return std::tuple(nonzero, magnitude, x);
        };
        std::stable_sort(digits.begin(), digits.end(),
                         [&](const auto& a, const auto& b) { return key(a) < key(b); });
        for (const auto& x : digits) {
          Sequence<Rational> s{Matrix<Rational>(n, d), Matrix<Rational>(n, d), Matrix<Rational>(n, dv)};
          Index e = 0;
          for (Matrix<Rational>* m : {&s.q, &s.k, &s.v}) {
            for (Index r = 0; r < m->rows(); ++r) {
              for (Index c = 0; c < m->cols(); ++c) (*m)(r, c) = alphabet[x[e++]];
            }
          }
          Terms<Rational> published = fast::streaming_terms(spec, fast::Form::published, s);
          Terms<Rational> expected = reference::terms(spec, s);
          const bool differs = denominator ? published.den != expected.den : published.num != expected.num;
          if (differs) return Counterexample{std::move(s), std::move(published), std::move(expected)};
        }
      }
    }
  }
  return std::nullopt;
}

}  // namespace hla::testing
