#pragma once

// Counting the work of an implementation exactly: a scalar type that counts its arithmetic
// operations, and the exact fit of a count to a polynomial in the problem's dimensions.

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "hla/reference/linalg.hpp"

namespace hla::proofs {

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

// c * prod_i x_i^e_i over the variables of a CountCheck.
struct Monomial {
  std::vector<int> exponents;
  Rational coefficient = 1;
};

// The exact polynomial (exponent of variable i in [lowest_i, highest_i]) that agrees with
// `count` on a grid of (highest_i - lowest_i + 1) values per variable, from 2 up, confirmed at
// points off the grid. It describes the count for sizes >= 2. Throws hla::Error when no such polynomial
// reproduces the count.
std::vector<Monomial> fit_polynomial(const std::function<Rational(const std::vector<Index>&)>& count,
                                     const std::vector<int>& lowest, const std::vector<int>& highest);

// Whether the polynomial is O(sum of `stated`) as every variable (each >= 1) grows: every term
// lies below the convex hull of the stated exponents (checked against each stated term and each
// pair of them).
bool within_order(const std::vector<Monomial>& polynomial, const std::vector<Monomial>& stated);

// "3 d^2 + 2 d dv - 1/2 C^-1": the polynomial in the variables' names.
std::string format_polynomial(const std::vector<Monomial>& polynomial,
                              const std::vector<std::string>& variables);

}  // namespace hla::proofs

template <>
struct Eigen::NumTraits<hla::proofs::Counted> : Eigen::GenericNumTraits<hla::proofs::Counted> {
  using Real = hla::proofs::Counted;
  using NonInteger = hla::proofs::Counted;
  using Literal = hla::proofs::Counted;
  using Nested = hla::proofs::Counted;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 0,
    ReadCost = 1,
    AddCost = 1,
    MulCost = 1,
  };
  static hla::proofs::Counted epsilon() { return 0; }
  static hla::proofs::Counted dummy_precision() { return 0; }
  static int digits10() { return 0; }
};

namespace hla {
template <>
inline proofs::Counted from_rational<proofs::Counted>(const Rational& x) {
  return proofs::Counted(x.convert_to<double>());
}
}  // namespace hla
