#pragma once

#include <Eigen/Core>
#include <boost/multiprecision/eigen.hpp>

#include "hla/reference/scalar.hpp"

namespace hla {
// Eigen's traits of an exact or instrumented scalar (Z/p here; the checking kit's Counted, Gauge
// and Depth): no rounding, so no epsilon or precision; only the flags and costs differ.
template <class T, bool Signed, bool Initialize, int Add, int Mul>
struct ExactNumTraits : Eigen::GenericNumTraits<T> {
  using Real = T;
  using NonInteger = T;
  using Literal = T;
  using Nested = T;
  enum {
    IsComplex = 0,
    IsInteger = 0,
    IsSigned = Signed,
    RequireInitialization = Initialize,
    ReadCost = 1,
    AddCost = Add,
    MulCost = Mul,
  };
  static T epsilon() { return T(0); }
  static T dummy_precision() { return T(0); }
  static int digits10() { return 0; }
};
}  // namespace hla

// The prime field: values need no initialisation.
template <>
struct Eigen::NumTraits<hla::ModP> : hla::ExactNumTraits<hla::ModP, true, false, 1, 3> {};

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
