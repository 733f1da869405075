#pragma once

#include <boost/multiprecision/gmp.hpp>
#include <boost/multiprecision/mpfr.hpp>
#include <cmath>
#include <concepts>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>

#include "hla/reference/error.hpp"
#include "hla/reference/mod_prime.hpp"

namespace hla {

// Expression templates off: no dangling expressions in `auto`, and Eigen sees plain values.
using Rational =
    boost::multiprecision::number<boost::multiprecision::gmp_rational, boost::multiprecision::et_off>;
// 78 decimal digits: a significand of 261 bits (at least 256).
using Mpfr = boost::multiprecision::number<boost::multiprecision::mpfr_float_backend<78>,
                                           boost::multiprecision::et_off>;

// The number types every algorithm is instantiated with, named as on the command line.
enum class ScalarKind { exact, mpfr, f64, f32, modp };
std::string_view scalar_kind_name(ScalarKind kind);
std::optional<ScalarKind> parse_scalar_kind(std::string_view name);

template <class T>
struct TypeTag {
  using type = T;
};

// Calls f(TypeTag<T>{}) with the number type that `kind` names.
template <class F>
decltype(auto) with_scalar(ScalarKind kind, F&& f) {
  switch (kind) {
    case ScalarKind::exact:
      return f(TypeTag<Rational>{});
    case ScalarKind::mpfr:
      return f(TypeTag<Mpfr>{});
    case ScalarKind::f64:
      return f(TypeTag<double>{});
    case ScalarKind::f32:
      return f(TypeTag<float>{});
    case ScalarKind::modp:
      return f(TypeTag<ModP>{});
  }
  throw Error("unknown scalar kind");
}

template <class T>
inline constexpr bool is_exact_v = std::is_same_v<T, Rational> || std::is_same_v<T, ModP>;

// The image of an exact rational in T: exact for Rational, the field image for ModP
// (@pre the denominator is not a multiple of p), correctly rounded for the floating types.
template <class T>
T from_rational(const Rational& x);

// Correctly rounded to nearest double (ties to even), subnormals included.
double to_double(const Rational& x);
double to_double(const Mpfr& x);
inline double to_double(double x) {
  return x;
}
inline double to_double(float x) {
  return x;
}

// The exact value of a finite binary floating-point number. @pre x is finite
Rational exact_value(const Mpfr& x);
inline Rational exact_value(double x) {
  return Rational(x);
}
inline Rational exact_value(float x) {
  return Rational(x);
}

// The residue in [0, p) of a rational whose denominator is prime to p.
ModP to_mod_prime(const Rational& x);

// Parses "3", "-0.125", "1e-3", "2/3" exactly. Throws hla::Error naming `what` otherwise.
Rational parse_rational(std::string_view text, std::string_view what);
std::string format_rational(const Rational& x);

// a / b, where a zero divisor in exact arithmetic is an error instead of undefined behaviour;
// floating types follow IEEE 754 (inf or NaN). The bound-tracking scalars (Gauge, Depth) have no
// division: for them it is an error, so that code normalizing only on request compiles for them.
template <class T>
T checked_divide(const T& a, const T& b, std::string_view what) {
  if constexpr (!requires { a / b; }) {
    throw Error(std::string(what) + ": this scalar type has no division (a bound is taken of num and den)");
  } else {
    if constexpr (is_exact_v<T>) {
      if (b == T(0)) throw Error(std::string(what) + ": division by zero in exact arithmetic");
    }
    return a / b;
  }
}

template <class T>
T power(const T& base, long exponent) {
  T result(1);
  T factor = base;
  for (; exponent > 0; exponent >>= 1) {
    if (exponent & 1) result = result * factor;
    factor = factor * factor;
  }
  return result;
}

}  // namespace hla
