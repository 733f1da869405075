#pragma once

// A-priori rounding depth: run an implementation on this number type instead of float or double
// and every output says how many roundings any monomial of it can have passed through, whatever
// order the sums are evaluated in. docs/operators.md ("Rounding bounds of the error report")
// gives the argument; in short, with the standard model fl(a op b) = (a op b)(1 + delta),
// |delta| <= u, and exactly representable inputs (Higham, Accuracy and Stability of Numerical
// Algorithms, Lemma 3.1):
//   - a product of values whose monomials carry at most Ka and Kb roundings carries Ka + Kb + 1,
//     unless a factor is an exact power of two (or zero), which rounds nothing;
//   - a sum of m summands with at most K roundings each, formed in ANY order (BLAS kernels,
//     blocking and FMA included), carries at most K + m - 1: the depth of a leaf in any binary
//     tree of m leaves is at most m - 1. So a value that is a sum keeps its summands' largest
//     count and their number, and is only resolved to one count when it enters a product.
// Then |computed - exact| <= gamma(K) * gauge, gamma(K) = K u / (1 - K u), for every output.
// Constants (gamma, eps, ridge, masks, 0 and 1) are tracked by value while the arithmetic on them
// stays exact in a `Bits`-bit significand, so attenuations gamma^l that are exact cost nothing.
// Each constant is tracked twice: as computed, and as Gauge computes it (subtraction
// adds magnitudes, so a mask 1 - 1 is 0 but its gauge 2); an operation counts nothing only when it
// is exact in both, so the same counts bound the rounding of the gauge's own run in floating point.

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>

#include "hla/reference/linalg.hpp"

namespace hla::checking {

template <int Bits>
class Depth {
  static_assert(Bits == 24 || Bits == 53, "constants are tracked for float and double");

 public:
  Depth() = default;  // the exact zero
  Depth(int c) : Depth(static_cast<double>(c)) {}
  Depth(double c) {
    if (representable(c)) {
      constant_ = c;
      gauge_ = std::abs(c);
    } else {  // rounded when stored: one rounding
      max_ = 1;
      leaves_ = 1;
    }
  }
  // A data value (an input): exact, no rounding yet.
  static Depth input() {
    Depth x;
    x.leaves_ = 1;
    return x;
  }

  // Roundings that any monomial of this value may carry.
  std::int64_t count() const { return leaves_ <= 0 ? 0 : std::int64_t(max_) + leaves_ - 1; }
  bool is_constant() const { return leaves_ < 0; }
  bool is_zero() const { return is_constant() && constant_ == 0 && gauge_ == 0; }

  // The operators are forced inline: Eigen's product kernels call them for every multiply-add, and
  // the common case, two values that are not constants, is two integer operations.
  [[gnu::always_inline]] friend Depth operator+(const Depth& a, const Depth& b) {
    if (!a.is_constant() && !b.is_constant()) return sum(std::max(a.max_, b.max_), a.leaves_ + b.leaves_);
    if (a.is_zero()) return b;
    if (b.is_zero()) return a;
    if (a.is_constant() && b.is_constant()) {
      const double s = a.constant_ + b.constant_, g = a.gauge_ + b.gauge_;
      if (exact_sum(a.constant_, b.constant_, s) && exact_sum(a.gauge_, b.gauge_, g)) return constant(s, g);
    }
    Depth out;
    out.max_ = std::max(a.summand_max(), b.summand_max());
    out.leaves_ = a.summands() + b.summands();
    return out;
  }
  friend Depth operator-(const Depth& a, const Depth& b) { return a + (-b); }
  Depth operator-() const {
    Depth out = *this;
    out.constant_ = -constant_;  // the gauge of -x is that of x
    return out;
  }
  [[gnu::always_inline]] friend Depth operator*(const Depth& a, const Depth& b) {
    if (!a.is_constant() && !b.is_constant())
      return sum(static_cast<std::int32_t>(a.count() + b.count() + 1), 1);
    if (a.is_zero() || b.is_zero()) return Depth();
    if (a.is_constant() && b.is_constant()) {
      const double p = a.constant_ * b.constant_, g = a.gauge_ * b.gauge_;
      if (std::fma(a.constant_, b.constant_, -p) == 0 && representable(p) &&
          std::fma(a.gauge_, b.gauge_, -g) == 0 && representable(g))
        return constant(p, g);
    }
    if (a.exact_scale()) return b;  // x 2^e: no rounding, the structure of b is kept
    if (b.exact_scale()) return a;
    Depth out;
    out.max_ = static_cast<std::int32_t>(a.count() + b.count() + 1);
    out.leaves_ = 1;
    return out;
  }
  Depth& operator+=(const Depth& b) { return *this = *this + b; }
  Depth& operator-=(const Depth& b) { return *this = *this - b; }
  Depth& operator*=(const Depth& b) { return *this = *this * b; }
  // Structural equality, for summaries' defaulted ==; never used to decide arithmetic.
  friend bool operator==(const Depth& a, const Depth& b) {
    return a.constant_ == b.constant_ && a.gauge_ == b.gauge_ && a.max_ == b.max_ && a.leaves_ == b.leaves_;
  }

 private:
  double constant_ = 0;       // the value, while is_constant()
  double gauge_ = 0;          // its value in the gauge's arithmetic (>= |constant_|)
  std::int32_t max_ = 0;      // the largest count among the summands
  std::int32_t leaves_ = -1;  // the number of summands; -1: an exact constant

  static Depth sum(std::int32_t max, std::int32_t leaves) {
    Depth x;
    x.max_ = max;
    x.leaves_ = leaves;
    return x;
  }
  static Depth constant(double c, double g) {
    Depth x;
    x.constant_ = c;
    x.gauge_ = g;
    return x;
  }
  static bool exact_sum(double a, double b, double s) {
    const double bp = s - a;  // TwoSum: the rounding error of s, exactly
    return (a - (s - bp)) + (b - bp) == 0 && representable(s);
  }
  // Exact in a Bits-bit significand and in the normal range (subnormals lose bits: not exact).
  static bool representable(double c) {
    if (c == 0) return true;
    if (!std::isfinite(c)) return false;
    if constexpr (Bits == 24) {
      return static_cast<double>(static_cast<float>(c)) == c &&
             std::abs(c) >= std::numeric_limits<float>::min() &&
             std::abs(c) <= std::numeric_limits<float>::max();
    } else {
      return std::abs(c) >= std::numeric_limits<double>::min();
    }
  }
  // A non-zero constant with a significand of 1: multiplying by it is exact.
  bool exact_scale() const {
    return is_constant() && constant_ != 0 &&
           (std::bit_cast<std::uint64_t>(constant_) & ((1ull << 52) - 1)) == 0;
  }
  // A constant enters a sum as one summand with no rounding.
  std::int32_t summand_max() const { return is_constant() ? 0 : max_; }
  std::int32_t summands() const { return is_constant() ? 1 : leaves_; }
};

// A constant of the spec (gamma, eps, ridge) as the implementation sees it: exact when it is a
// Bits-bit binary number, else rounded once.
template <int Bits>
Depth<Bits> depth_constant(const Rational& x) {
  const double rounded = to_double(x);
  if (Rational(rounded) == x) return Depth<Bits>(rounded);
  return Depth<Bits>(std::numeric_limits<double>::quiet_NaN());  // not representable: one rounding
}

}  // namespace hla::checking

template <>
inline hla::checking::Depth<53> hla::from_rational<hla::checking::Depth<53>>(const Rational& x) {
  return hla::checking::depth_constant<53>(x);
}
template <>
inline hla::checking::Depth<24> hla::from_rational<hla::checking::Depth<24>>(const Rational& x) {
  return hla::checking::depth_constant<24>(x);
}

// Eigen's product kernels multiply and add through pmul, padd, pmadd and conj_helper, which GCC
// leaves as calls for a class scalar; these specializations inline them (docs/perf.md, "The error report's
// depth runs").
#define HLA_DEPTH_PACKET_MATH(BITS)                                                         \
  template <>                                                                               \
  [[gnu::always_inline]] inline hla::checking::Depth<BITS>                                  \
  Eigen::internal::pmul<hla::checking::Depth<BITS>>(const hla::checking::Depth<BITS>& a,    \
                                                    const hla::checking::Depth<BITS>& b) {  \
    return a * b;                                                                           \
  }                                                                                         \
  template <>                                                                               \
  [[gnu::always_inline]] inline hla::checking::Depth<BITS>                                  \
  Eigen::internal::padd<hla::checking::Depth<BITS>>(const hla::checking::Depth<BITS>& a,    \
                                                    const hla::checking::Depth<BITS>& b) {  \
    return a + b;                                                                           \
  }                                                                                         \
  template <>                                                                               \
  [[gnu::always_inline]] inline hla::checking::Depth<BITS>                                  \
  Eigen::internal::pmadd<hla::checking::Depth<BITS>>(const hla::checking::Depth<BITS>& a,   \
                                                     const hla::checking::Depth<BITS>& b,   \
                                                     const hla::checking::Depth<BITS>& c) { \
    return a * b + c;                                                                       \
  }
HLA_DEPTH_PACKET_MATH(24)
HLA_DEPTH_PACKET_MATH(53)
#undef HLA_DEPTH_PACKET_MATH
// The general product kernel's multiply-add goes through conj_helper (no conjugation for a real type).
template <int Bits>
struct Eigen::internal::conj_helper<hla::checking::Depth<Bits>, hla::checking::Depth<Bits>, false, false> {
  using D = hla::checking::Depth<Bits>;
  using ResultType = D;
  [[gnu::always_inline]] D pmadd(const D& x, const D& y, const D& c) const { return x * y + c; }
  [[gnu::always_inline]] D pmul(const D& x, const D& y) const { return x * y; }
};

template <int Bits>
struct Eigen::NumTraits<hla::checking::Depth<Bits>>
    : hla::ExactNumTraits<hla::checking::Depth<Bits>, true, true, 2, 2> {};
