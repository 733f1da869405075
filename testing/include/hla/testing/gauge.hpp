#pragma once

#include "hla/reference/linalg.hpp"

namespace hla::testing {

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

}  // namespace hla::testing

template <>
inline hla::testing::Gauge<hla::Rational> hla::from_rational<hla::testing::Gauge<hla::Rational>>(
    const Rational& x) {
  return x;
}

template <class T>
struct Eigen::NumTraits<hla::testing::Gauge<T>> : Eigen::GenericNumTraits<hla::testing::Gauge<T>> {
  using Real = hla::testing::Gauge<T>;
  using NonInteger = Real;
  using Literal = Real;
  using Nested = Real;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 0,
    RequireInitialization = 1,
    ReadCost = 1,
    AddCost = 4,
    MulCost = 8
  };
  static Real epsilon() { return Real(0); }
  static Real dummy_precision() { return Real(0); }
  static int digits10() { return 0; }
};
