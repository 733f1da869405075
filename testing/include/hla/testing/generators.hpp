#pragma once

#include <rapidcheck.h>

#include <algorithm>
#include <ostream>
#include <vector>

#include "hla/fast/catalogue.hpp"
#include "hla/reference/operator_spec.hpp"
#include "hla/reference/sequence.hpp"

namespace hla {

// How RapidCheck prints counterexamples.
inline void showValue(const OperatorSpec& spec, std::ostream& os) {
  os << describe(spec);
}
inline void showValue(const Rational& x, std::ostream& os) {
  os << x.str();
}
template <class T>
void showValue(const Matrix<T>& m, std::ostream& os) {
  os << "[";
  for (Index r = 0; r < m.rows(); ++r) {
    os << (r ? ", [" : "[");
    for (Index c = 0; c < m.cols(); ++c) os << (c ? ", " : "") << m(r, c);
    os << "]";
  }
  os << "]";
}
inline void showValue(const Sequence<Rational>& s, std::ostream& os) {
  os << "q = ";
  showValue(s.q, os);
  os << "\nk = ";
  showValue(s.k, os);
  os << "\nv = ";
  showValue(s.v, os);
}

}  // namespace hla

namespace hla::testing {

// An integer in [-bound, bound] that shrinks towards 0 through 1, -1, 2, -2, ...
inline rc::Gen<int> gen_small_integer(int bound) {
  return rc::gen::map(rc::gen::resize(100, rc::gen::inRange(0, 2 * bound + 1)),
                      [](int i) { return i % 2 == 1 ? (i + 1) / 2 : -(i / 2); });
}

// Integers in [-3, 3], or dyadic rationals m / 2^e with |m| <= 8 and e in [0, 3].
inline rc::Gen<Rational> gen_entry(bool dyadic) {
  if (!dyadic) return rc::gen::map(gen_small_integer(3), [](int x) { return Rational(x); });
  return rc::gen::apply([](int m, int e) { return Rational(m, 1 << e); }, gen_small_integer(8),
                        rc::gen::resize(100, rc::gen::inRange(0, 4)));
}

inline rc::Gen<Matrix<Rational>> gen_matrix(Index rows, Index cols, bool dyadic) {
  return rc::gen::map(
      rc::gen::container<std::vector<Rational>>(static_cast<std::size_t>(rows * cols), gen_entry(dyadic)),
      [rows, cols](const std::vector<Rational>& xs) {
        Matrix<Rational> m(rows, cols);
        for (Index i = 0; i < rows * cols; ++i) m(i / cols, i % cols) = xs[i];
        return m;
      });
}

inline rc::Gen<Sequence<Rational>> gen_sequence(Index n, Index d, Index dv, bool dyadic) {
  return rc::gen::apply(
      [](Matrix<Rational> q, Matrix<Rational> k, Matrix<Rational> v) {
        return Sequence<Rational>{std::move(q), std::move(k), std::move(v)};
      },
      gen_matrix(n, d, dyadic), gen_matrix(n, d, dyadic), gen_matrix(n, dv, dyadic));
}

// Uniform in [lo, hi) whatever RapidCheck's current size (it scales plain ranges with its size
// parameter, which would make most cases tiny); shrinks towards lo.
inline rc::Gen<Index> gen_position(Index lo, Index hi) {
  return rc::gen::resize(100, rc::gen::inRange(lo, hi));
}

// n uniform in [min_n, max_n], d and dv uniform in [1, max_d], entries integer or dyadic.
inline rc::Gen<Sequence<Rational>> gen_any_sequence(int max_n, int max_d, int min_n = 0) {
  return rc::gen::mapcat(gen_position(min_n, max_n + 1), [max_d](Index n) {
    return rc::gen::mapcat(gen_position(1, max_d + 1), [n, max_d](Index d) {
      return rc::gen::mapcat(gen_position(1, max_d + 1), [n, d](Index dv) {
        return rc::gen::mapcat(rc::gen::arbitrary<bool>(),
                               [n, d, dv](bool dyadic) { return gen_sequence(n, d, dv, dyadic); });
      });
    });
  });
}

// The lengths of 1 to max_ranks slices of n tokens, cut at uniform points in [0, n] (empty slices
// included): a sequence split across ranks (fast/slices.hpp).
inline std::vector<Index> gen_slice_lengths(Index n, int max_ranks) {
  const Index ranks = *gen_position(1, max_ranks + 1).as("ranks");
  std::vector<Index> cuts;
  for (Index r = 1; r < ranks; ++r) cuts.push_back(*gen_position(0, n + 1).as("cut"));
  std::sort(cuts.begin(), cuts.end());
  std::vector<Index> lengths;
  Index at = 0;
  for (const Index cut : cuts) {
    lengths.push_back(cut - at);
    at = cut;
  }
  lengths.push_back(n - at);
  return lengths;
}

// gamma = a / b with 1 <= a <= b <= 8 (often 1: no decay).
inline rc::Gen<Rational> gen_decay() {
  return rc::gen::mapcat(gen_position(1, 9), [](Index b) {
    return rc::gen::map(gen_position(1, b + 1), [b](Index a) { return Rational(a, b); });
  });
}

// Any valid combination of options for `variant`.
inline rc::Gen<OperatorSpec> gen_spec(Variant variant) {
  return rc::gen::apply(
      [variant](bool unmasked, bool normalize, int eps_numerator, int ridge_numerator, bool decayed,
                Rational gamma) {
        OperatorSpec spec;
        spec.variant = variant;
        spec.masked = !(unmasked && supports_unmasked(variant));
        spec.normalize = normalize;
        spec.eps = normalize ? Rational(eps_numerator < 0 ? -eps_numerator : eps_numerator, 4) : Rational(0);
        spec.ridge = supports_ridge(variant) ? Rational(ridge_numerator, 2) : Rational(0);
        spec.decay = decayed ? gamma : Rational(1);
        return spec;
      },
      rc::gen::arbitrary<bool>(), rc::gen::arbitrary<bool>(), gen_small_integer(4).as("eps"),
      gen_small_integer(2), rc::gen::arbitrary<bool>(), gen_decay());
}

}  // namespace hla::testing
