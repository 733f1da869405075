#pragma once

// Gauge<double> learns the operator's constants: gamma, eps and ridge are dyadic in the report,
// so their doubles are exact.

#include "hla/checking/gauge.hpp"

template <>
inline hla::checking::Gauge<double> hla::from_rational<hla::checking::Gauge<double>>(const Rational& x) {
  return to_double(x);
}
