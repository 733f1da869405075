#pragma once

// Gauge (hla/reference/gauge.hpp) as an Eigen scalar, and the operator's constants in it:
// exactly in Gauge<Rational>; in Gauge<double> as their doubles (gamma, eps and ridge are dyadic
// in the report, so those are exact).

#include "hla/reference/gauge.hpp"
#include "hla/reference/linalg.hpp"

template <>
inline hla::Gauge<hla::Rational> hla::from_rational<hla::Gauge<hla::Rational>>(const Rational& x) {
  return x;
}
template <>
inline hla::Gauge<double> hla::from_rational<hla::Gauge<double>>(const Rational& x) {
  return to_double(x);
}

template <class T>
struct Eigen::NumTraits<hla::Gauge<T>> : hla::ExactNumTraits<hla::Gauge<T>, false, true, 4, 8> {};
