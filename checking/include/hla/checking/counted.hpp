#pragma once

// A scalar type that counts its arithmetic operations, for exact operation counts.

#include <cstdint>
#include <type_traits>

#include "hla/reference/linalg.hpp"

namespace hla::checking {

// Non-trivial arithmetic operations done on Counted values by this thread.
std::uint64_t& operation_count();

// A double that counts the arithmetic a formula needs: products and quotients of two operands
// that are neither 0 nor +-1, and sums and differences of two non-zero operands. What a library
// adds around the formula (scaling by alpha = 1, accumulating into a zero-initialised result,
// zero padding of triangular blocks) is not counted, so the count of a matrix product is the
// textbook m k n products and m (k - 1) n sums. Run an implementation on inputs that avoid 0 and
// +-1 (see counting_input) and read operation_count() before and after.
class Counted {
 public:
  Counted() = default;
  template <class Number, std::enable_if_t<std::is_arithmetic_v<Number>, int> = 0>
  Counted(Number x) : value_(static_cast<double>(x)) {}

  friend Counted operator+(Counted a, Counted b) { return sum(a.value_ + b.value_, a, b); }
  friend Counted operator-(Counted a, Counted b) { return sum(a.value_ - b.value_, a, b); }
  friend Counted operator*(Counted a, Counted b) { return product(a.value_ * b.value_, a, b); }
  friend Counted operator/(Counted a, Counted b) { return product(a.value_ / b.value_, a, b); }
  Counted operator-() const { return Counted(-value_); }
  Counted operator+() const { return *this; }
  Counted& operator+=(Counted b) { return *this = *this + b; }
  Counted& operator-=(Counted b) { return *this = *this - b; }
  Counted& operator*=(Counted b) { return *this = *this * b; }
  Counted& operator/=(Counted b) { return *this = *this / b; }
  friend bool operator==(Counted a, Counted b) { return a.value_ == b.value_; }
  friend bool operator!=(Counted a, Counted b) { return a.value_ != b.value_; }
  friend bool operator<(Counted a, Counted b) { return a.value_ < b.value_; }

 private:
  bool trivial_factor() const { return value_ == 0 || value_ == 1 || value_ == -1; }
  static Counted sum(double x, Counted a, Counted b) {
    if (a.value_ != 0 && b.value_ != 0) ++operation_count();
    return Counted(x);
  }
  static Counted product(double x, Counted a, Counted b) {
    if (!a.trivial_factor() && !b.trivial_factor()) ++operation_count();
    return Counted(x);
  }
  double value_ = 0;
};

// Deterministic inputs in (1, 2) for counting: never 0 or +-1, and no exact cancellations.
Matrix<Counted> counting_input(Index rows, Index cols, std::uint64_t salt);

}  // namespace hla::checking

template <>
struct Eigen::NumTraits<hla::checking::Counted>
    : hla::ExactNumTraits<hla::checking::Counted, true, false, 1, 1> {};

namespace hla {
template <>
inline checking::Counted from_rational<checking::Counted>(const Rational& x) {
  return checking::Counted(x.convert_to<double>());
}
}  // namespace hla
