#pragma once

// The absolute-value semiring, on host and device: every value is |x| and subtraction adds.
// Running an algorithm in Gauge<Rational> on |q|, |k|, |v| gives, for each output, the sum of the
// absolute values of all the monomials that the algorithm adds and subtracts (cancelled ones
// included): the quantity that a rounding-error bound of that algorithm scales with. Gauge<double>
// computes it in double (an upper bound after gauge_upper_bound), also in the GPU kernels.
// Its Eigen traits and from_rational images: hla/checking/gauge.hpp.

#include <type_traits>
#include <utility>

#include "hla/reference/host_device.hpp"

namespace hla {

template <class T>
class Gauge {
 public:
  using value_type = T;

  Gauge() = default;
  template <class U, std::enable_if_t<std::is_constructible_v<T, U>, int> = 0>
  HLA_HOST_DEVICE Gauge(const U& x) : value_(abs_value(T(x))) {}

  HLA_HOST_DEVICE const T& value() const { return value_; }

  HLA_HOST_DEVICE friend Gauge operator+(const Gauge& a, const Gauge& b) { return raw(a.value_ + b.value_); }
  HLA_HOST_DEVICE friend Gauge operator-(const Gauge& a, const Gauge& b) { return raw(a.value_ + b.value_); }
  HLA_HOST_DEVICE friend Gauge operator*(const Gauge& a, const Gauge& b) { return raw(a.value_ * b.value_); }
  HLA_HOST_DEVICE Gauge operator-() const { return *this; }
  HLA_HOST_DEVICE Gauge& operator+=(const Gauge& b) { return *this = *this + b; }
  HLA_HOST_DEVICE Gauge& operator-=(const Gauge& b) { return *this = *this - b; }
  HLA_HOST_DEVICE Gauge& operator*=(const Gauge& b) { return *this = *this * b; }
  HLA_HOST_DEVICE friend bool operator==(const Gauge& a, const Gauge& b) { return a.value_ == b.value_; }
  HLA_HOST_DEVICE friend bool operator!=(const Gauge& a, const Gauge& b) { return a.value_ != b.value_; }

 private:
  T value_{0};
  HLA_HOST_DEVICE static T abs_value(const T& x) { return x < 0 ? T(-x) : x; }
  HLA_HOST_DEVICE static Gauge raw(T x) {
    Gauge g;
    g.value_ = std::move(x);
    return g;
  }
};

}  // namespace hla
