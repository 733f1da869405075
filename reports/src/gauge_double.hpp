#pragma once

// Gauge<double> learns the operator's constants: gamma, eps and ridge are dyadic in the report,
// so their doubles are exact.

#include "hla/testing/gauge.hpp"

template <>
inline hla::testing::Gauge<double> hla::from_rational<hla::testing::Gauge<double>>(const Rational& x) {
  return to_double(x);
}
