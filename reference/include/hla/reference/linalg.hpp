#pragma once

#include <Eigen/Core>
#include <boost/multiprecision/eigen.hpp>

#include "hla/reference/scalar.hpp"

// Eigen learns the prime field: exact, so no epsilon, and values need no initialisation.
template <>
struct Eigen::NumTraits<hla::ModP> : Eigen::GenericNumTraits<hla::ModP> {
  using Real = hla::ModP;
  using NonInteger = hla::ModP;
  using Literal = hla::ModP;
  using Nested = hla::ModP;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = 1,
    RequireInitialization = 0,
    ReadCost = 1,
    AddCost = 1,
    MulCost = 3,
  };
  static hla::ModP epsilon() { return hla::ModP(0); }
  static hla::ModP dummy_precision() { return hla::ModP(0); }
  static int digits10() { return 0; }
};

namespace hla {

using Index = Eigen::Index;

template <class T>
using Matrix = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
template <class T>
using Vector = Eigen::Matrix<T, Eigen::Dynamic, 1>;
template <class T>
using RowVector = Eigen::Matrix<T, 1, Eigen::Dynamic>;

// Maps every entry of a matrix of exact rationals into T (see from_rational).
template <class T>
Matrix<T> convert(const Matrix<Rational>& m) {
  return m.unaryExpr([](const Rational& x) { return from_rational<T>(x); });
}

}  // namespace hla
