#include "hla/reference/scalar.hpp"

#include <mpfr.h>

#include <cctype>

namespace hla {
namespace {

// Rounds with MPFR's exponent range narrowed to IEEE binary64's, so that subnormal results are
// rounded once, as a double would be (the MPFR manual's mpfr_subnormalize idiom).
double round_to_double(auto&& set_value) {
  const mpfr_exp_t saved_emin = mpfr_get_emin();
  const mpfr_exp_t saved_emax = mpfr_get_emax();
  mpfr_set_emin(-1073);
  mpfr_set_emax(1024);
  mpfr_t x;
  mpfr_init2(x, 53);
  int ternary = set_value(x);
  ternary = mpfr_check_range(x, ternary, MPFR_RNDN);
  mpfr_subnormalize(x, ternary, MPFR_RNDN);
  const double result = mpfr_get_d(x, MPFR_RNDN);
  mpfr_clear(x);
  mpfr_set_emin(saved_emin);
  mpfr_set_emax(saved_emax);
  return result;
}

ModP integer_to_mod_prime(const mpz_t z) {
  mpz_t p, r;
  mpz_init_set_ui(p, 1);
  mpz_mul_2exp(p, p, 61);
  mpz_sub_ui(p, p, 1);
  mpz_init(r);
  mpz_fdiv_r(r, z, p);  // 0 <= r < p, also for negative z
  const ModP result = ModP::from_residue(mpz_get_ui(r));
  mpz_clear(r);
  mpz_clear(p);
  return result;
}

}  // namespace

std::string_view scalar_kind_name(ScalarKind kind) {
  switch (kind) {
    case ScalarKind::exact:
      return "exact";
    case ScalarKind::mpfr:
      return "mpfr";
    case ScalarKind::f64:
      return "f64";
    case ScalarKind::f32:
      return "f32";
    case ScalarKind::modp:
      return "modp";
  }
  return "?";
}

std::optional<ScalarKind> parse_scalar_kind(std::string_view name) {
  for (const ScalarKind k :
       {ScalarKind::exact, ScalarKind::mpfr, ScalarKind::f64, ScalarKind::f32, ScalarKind::modp}) {
    if (scalar_kind_name(k) == name) return k;
  }
  return std::nullopt;
}

double to_double(const Rational& x) {
  return round_to_double([&](mpfr_t out) { return mpfr_set_q(out, x.backend().data(), MPFR_RNDN); });
}

double to_double(const Mpfr& x) {
  return round_to_double([&](mpfr_t out) { return mpfr_set(out, x.backend().data(), MPFR_RNDN); });
}

Rational exact_value(const Mpfr& x) {
  Rational result;
  mpfr_get_q(result.backend().data(), x.backend().data());
  return result;
}

ModP to_mod_prime(const Rational& x) {
  const ModP numerator = integer_to_mod_prime(mpq_numref(x.backend().data()));
  if (mpz_cmp_ui(mpq_denref(x.backend().data()), 1) == 0) return numerator;  // no inverse to take
  const ModP denominator = integer_to_mod_prime(mpq_denref(x.backend().data()));
  if (denominator == ModP(0)) {
    throw Error("rational " + format_rational(x) +
                " has no image in Z/p: its denominator is a multiple of p");
  }
  return numerator / denominator;
}

template <>
Rational from_rational<Rational>(const Rational& x) {
  return x;
}
template <>
ModP from_rational<ModP>(const Rational& x) {
  return to_mod_prime(x);
}
template <>
double from_rational<double>(const Rational& x) {
  return to_double(x);
}
template <>
float from_rational<float>(const Rational& x) {
  // Rounding to double first could round twice; MPFR rounds once to 24 bits.
  mpfr_t r;
  mpfr_init2(r, 24);
  mpfr_set_q(r, x.backend().data(), MPFR_RNDN);
  const float result = mpfr_get_flt(r, MPFR_RNDN);
  mpfr_clear(r);
  return result;
}
template <>
Mpfr from_rational<Mpfr>(const Rational& x) {
  Mpfr result;
  mpfr_set_q(result.backend().data(), x.backend().data(), MPFR_RNDN);
  return result;
}

Rational parse_rational(std::string_view text, std::string_view what) {
  const auto fail = [&] {
    return Error(std::string(what) + ": '" + std::string(text) + "' is not a decimal or p/q rational number");
  };
  if (const auto slash = text.find('/'); slash != std::string_view::npos) {
    // An integer or decimal over an integer: "1/3/4" and "1/2.5" are not rationals here.
    const std::string_view below = text.substr(slash + 1);
    const std::size_t digits_from = !below.empty() && (below[0] == '+' || below[0] == '-') ? 1 : 0;
    if (below.size() == digits_from ||
        below.find_first_not_of("0123456789", digits_from) != std::string_view::npos)
      throw Error(std::string(what) + ": '" + std::string(text) +
                  "' is not a decimal or p/q rational number (q an integer)");
    const Rational numerator = parse_rational(text.substr(0, slash), what);
    const Rational denominator = parse_rational(below, what);
    if (denominator == 0)
      throw Error(std::string(what) + ": '" + std::string(text) + "' has a zero denominator");
    return numerator / denominator;
  }
  // [sign] digits [. digits] [(e|E) [sign] digits], read exactly as a rational.
  std::size_t i = 0;
  bool negative = false;
  if (i < text.size() && (text[i] == '+' || text[i] == '-')) negative = text[i++] == '-';
  std::string digits;
  long fraction_digits = 0;
  bool seen_point = false;
  for (; i < text.size(); ++i) {
    const char c = text[i];
    if (std::isdigit(static_cast<unsigned char>(c))) {
      digits += c;
      if (seen_point) ++fraction_digits;
    } else if (c == '.' && !seen_point) {
      seen_point = true;
    } else {
      break;
    }
  }
  if (digits.empty()) throw fail();
  long exponent = 0;
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    ++i;
    bool exponent_negative = false;
    if (i < text.size() && (text[i] == '+' || text[i] == '-')) exponent_negative = text[i++] == '-';
    const std::size_t start = i;
    for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
      if (i - start >= 4)
        throw Error(std::string(what) + ": exponent of '" + std::string(text) + "' is too large");
      exponent = 10 * exponent + (text[i] - '0');
    }
    if (i == start) throw fail();
    if (exponent_negative) exponent = -exponent;
  }
  if (i != text.size()) throw fail();
  digits.erase(0,
               std::min(digits.find_first_not_of('0'), digits.size() - 1));  // a leading 0 means octal to GMP
  Rational value{boost::multiprecision::mpz_int(digits)};
  const long scale = exponent - fraction_digits;
  const Rational ten_power = power(Rational(10), scale < 0 ? -scale : scale);
  value = scale < 0 ? value / ten_power : value * ten_power;
  return negative ? -value : value;
}

std::string format_rational(const Rational& x) {
  return x.str();
}

}  // namespace hla
