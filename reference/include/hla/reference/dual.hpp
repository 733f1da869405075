#pragma once

// Dual numbers a + b e with e^2 = 0, over an exact scalar (Rational or ModP): forward-mode
// differentiation of any code written for a generic scalar. Run the n x n definition on
// (q + e dq, k + e dk, v + e dv) and every output's e-part is its exact directional derivative:
// the check of the hand-written reverse mode (gradient.hpp) that shares no code with it.

#include "hla/reference/linalg.hpp"

namespace hla {

template <class T>
class Dual {
 public:
  Dual() = default;
  // A constant (no derivative part): T(0), T(1), an integer or a value of T.
  template <class U, std::enable_if_t<std::is_constructible_v<T, U>, int> = 0>
  Dual(const U& value) : value_(value) {}
  Dual(T value, T derivative) : value_(std::move(value)), derivative_(std::move(derivative)) {}

  const T& value() const { return value_; }
  const T& derivative() const { return derivative_; }

  friend Dual operator+(const Dual& a, const Dual& b) { return {a.value_ + b.value_, a.derivative_ + b.derivative_}; }
  friend Dual operator-(const Dual& a, const Dual& b) { return {a.value_ - b.value_, a.derivative_ - b.derivative_}; }
  friend Dual operator*(const Dual& a, const Dual& b) {
    return {a.value_ * b.value_, a.value_ * b.derivative_ + a.derivative_ * b.value_};
  }
  // @pre b.value() != 0 (the callers check, as for T)
  friend Dual operator/(const Dual& a, const Dual& b) {
    const T quotient = a.value_ / b.value_;
    return {quotient, (a.derivative_ - quotient * b.derivative_) / b.value_};
  }
  Dual operator-() const { return {-value_, -derivative_}; }
  Dual& operator+=(const Dual& b) { return *this = *this + b; }
  Dual& operator-=(const Dual& b) { return *this = *this - b; }
  Dual& operator*=(const Dual& b) { return *this = *this * b; }
  Dual& operator/=(const Dual& b) { return *this = *this / b; }
  friend bool operator==(const Dual& a, const Dual& b) {
    return a.value_ == b.value_ && a.derivative_ == b.derivative_;
  }
  friend bool operator!=(const Dual& a, const Dual& b) { return !(a == b); }

 private:
  T value_{0}, derivative_{0};
};

// The operator's constants (gamma, eps, ridge) have no derivative part.
template <>
inline Dual<Rational> from_rational<Dual<Rational>>(const Rational& x) {
  return x;
}
template <>
inline Dual<ModP> from_rational<Dual<ModP>>(const Rational& x) {
  return to_mod_prime(x);
}

// a + e b, entrywise.
template <class T>
Matrix<Dual<T>> dual(const Matrix<T>& a, const Matrix<T>& b) {
  Matrix<Dual<T>> out(a.rows(), a.cols());
  for (Index i = 0; i < a.size(); ++i) out.data()[i] = Dual<T>(a.data()[i], b.data()[i]);
  return out;
}

}  // namespace hla

template <class T>
struct Eigen::NumTraits<hla::Dual<T>> : hla::ExactNumTraits<hla::Dual<T>, true, true, 2, 4> {};
