#pragma once

// Counting the work of an implementation exactly: the exact fit of an operation count
// (checking::Counted) to a polynomial in the problem's dimensions.

#include <functional>
#include <string>
#include <vector>

#include "hla/reference/linalg.hpp"

namespace hla::proofs {

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

// x_larger >= x_smaller: a condition on two of the variables (their indices).
struct Order {
  int larger = 0, smaller = 0;
};
// within_order on the sizes where `where` holds: x_larger = y x_smaller with y >= 1 maps them
// onto all sizes >= 1, and a term's exponent of x_larger adds to its exponent of x_smaller.
bool within_order(const std::vector<Monomial>& polynomial, const std::vector<Monomial>& stated, Order where);

// "3 d^2 + 2 d dv - 1/2 C^-1": the polynomial in the variables' names.
std::string format_polynomial(const std::vector<Monomial>& polynomial,
                              const std::vector<std::string>& variables);

}  // namespace hla::proofs
