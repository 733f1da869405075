#pragma once

#include "hla/reference/linalg.hpp"

namespace hla::checking {

// The absolute-value semiring: every value is |x| and subtraction adds. Running an algorithm
// in Gauge<Rational> on |q|, |k|, |v| gives, for each output, the sum of the absolute values
// of all the monomials that the algorithm adds and subtracts (cancelled ones included): the
// quantity that a rounding-error bound of that algorithm scales with.
template <class T>
class Gauge {
 public:
  Gauge() = default;
  template <class U, std::enable_if_t<std::is_constructible_v<T, U>, int> = 0>
  Gauge(const U& x) : value_(abs_value(T(x))) {}

  const T& value() const { return value_; }

  friend Gauge operator+(const Gauge& a, const Gauge& b) { return raw(a.value_ + b.value_); }
  friend Gauge operator-(const Gauge& a, const Gauge& b) { return raw(a.value_ + b.value_); }
  friend Gauge operator*(const Gauge& a, const Gauge& b) { return raw(a.value_ * b.value_); }
  Gauge operator-() const { return *this; }
  Gauge& operator+=(const Gauge& b) { return *this = *this + b; }
  Gauge& operator-=(const Gauge& b) { return *this = *this - b; }
  Gauge& operator*=(const Gauge& b) { return *this = *this * b; }
  friend bool operator==(const Gauge& a, const Gauge& b) { return a.value_ == b.value_; }
  friend bool operator!=(const Gauge& a, const Gauge& b) { return a.value_ != b.value_; }

 private:
  T value_{0};
  static T abs_value(const T& x) { return x < 0 ? T(-x) : x; }
  static Gauge raw(T x) {
    Gauge g;
    g.value_ = std::move(x);
    return g;
  }
};

}  // namespace hla::checking

// The name that fast/tests/gpu_test.cpp and reports/src/gpu_candidates.cpp still use.
namespace hla::testing {
using checking::Gauge;
}

template <>
inline hla::checking::Gauge<hla::Rational> hla::from_rational<hla::checking::Gauge<hla::Rational>>(
    const Rational& x) {
  return x;
}

template <class T>
struct Eigen::NumTraits<hla::checking::Gauge<T>>
    : hla::ExactNumTraits<hla::checking::Gauge<T>, false, true, 4, 8> {};
