#include <catch2/catch.hpp>
#include <cmath>
#include <limits>

#include "hla/reference/linalg.hpp"
#include "hla/testing/property.hpp"

using hla::ModP;
using hla::Rational;

namespace {
rc::Gen<ModP> gen_residue() {
  return rc::gen::map(rc::gen::arbitrary<std::uint64_t>(),
                      [](std::uint64_t x) { return ModP::from_residue(x); });
}
Rational dyadic(long numerator, int exponent) {  // numerator * 2^exponent
  Rational x(numerator);
  return exponent >= 0 ? x * hla::power(Rational(2), exponent) : x / hla::power(Rational(2), -exponent);
}
}  // namespace

TEST_CASE("scalar/mod prime/is a field", "[scalar][modp][exact]") {
  using hla::testing::property;
  property("addition and multiplication are associative and distributive", [] {
    const ModP a = *gen_residue(), b = *gen_residue(), c = *gen_residue();
    RC_ASSERT((a + b) + c == a + (b + c));
    RC_ASSERT((a * b) * c == a * (b * c));
    RC_ASSERT(a * (b + c) == a * b + a * c);
    RC_ASSERT(a - b + b == a);
  });
  property("every non-zero element has an inverse", [] {
    const ModP a = *gen_residue().as("a");
    RC_PRE(a != ModP(0));
    RC_ASSERT(a * a.inverse() == ModP(1));
  });
  property("residues stay canonical", [] {
    const ModP a = *gen_residue(), b = *gen_residue();
    for (const ModP x : {a + b, a - b, a * b, -a}) RC_ASSERT(x.residue() < ModP::modulus);
  });
  property("integers map homomorphically", [] {
    const auto x = *rc::gen::inRange<std::int64_t>(-(1ll << 40), 1ll << 40);
    const auto y = *rc::gen::inRange<std::int64_t>(-(1ll << 20), 1ll << 20);
    RC_ASSERT(ModP(x) * ModP(y) == ModP(x * y));
    RC_ASSERT(ModP(x) + ModP(y) == ModP(x + y));
    RC_ASSERT(hla::to_mod_prime(Rational(x)) == ModP(x));
  });
  CHECK(ModP(-1).residue() == ModP::modulus - 1);
  CHECK(ModP(std::numeric_limits<std::int64_t>::min()) == -ModP(std::uint64_t{1} << 63));
  CHECK(hla::to_mod_prime(Rational(1, 2)) * ModP(2) == ModP(1));
  CHECK_THROWS_AS(hla::to_mod_prime(Rational(1) / Rational(ModP::modulus)), hla::Error);
}

TEST_CASE("scalar/to_double/rounds once to nearest even", "[scalar][rounding]") {
  CHECK(hla::to_double(Rational(1, 3)) == 1.0 / 3.0);
  CHECK(hla::to_double(Rational(1, 10)) == 0.1);
  // Halfway between 1 and 1 + 2^-52 goes to the even 1; just above goes up.
  CHECK(hla::to_double(1 + dyadic(1, -53)) == 1.0);
  CHECK(hla::to_double(1 + dyadic(3, -53)) == 1.0 + std::ldexp(1.0, -51));
  CHECK(hla::to_double(1 + dyadic(1, -53) + dyadic(1, -200)) == 1.0 + std::ldexp(1.0, -52));
  // Subnormals round once: 2^-1075 is a tie between 0 and 2^-1074, so it goes to 0.
  CHECK(hla::to_double(dyadic(1, -1075)) == 0.0);
  CHECK(hla::to_double(dyadic(3, -1076)) == std::ldexp(1.0, -1074));
  CHECK(hla::to_double(dyadic(1, 1024)) == std::numeric_limits<double>::infinity());
  CHECK(hla::to_double(-Rational(7, 2)) == -3.5);
  // float: one rounding from the rational, not two through double.
  const Rational just_above_tie = 1 + dyadic(1, -24) + dyadic(1, -60);
  CHECK(hla::from_rational<float>(just_above_tie) == 1.0f + std::ldexp(1.0f, -23));
}

TEST_CASE("scalar/parse_rational/reads decimals and p/q exactly", "[scalar][parse]") {
  CHECK(hla::parse_rational("2/3", "--eps") == Rational(2, 3));
  CHECK(hla::parse_rational("-0.125", "--eps") == Rational(-1, 8));
  CHECK(hla::parse_rational("1e-3", "--eps") == Rational(1, 1000));
  CHECK(hla::parse_rational("2.5E2", "--eps") == Rational(250));
  CHECK(hla::parse_rational("+7", "--eps") == Rational(7));
  CHECK(hla::parse_rational("0.1", "--eps") != Rational(0.1));  // exact tenth, not the double
  for (const char* bad :
       {"", "abc", "1/0", "1.2.3", "1e", "--1", "0x10", "1/2/", "nan", "inf", "1e9999999"}) {
    INFO(bad);
    CHECK_THROWS_AS(hla::parse_rational(bad, "--eps"), hla::Error);
  }
}

TEST_CASE("scalar/eigen/products agree across number types", "[scalar][eigen]") {
  // Boost 1.74's Eigen integration: every scalar must support the products the algorithms use.
  hla::Matrix<Rational> a(3, 2), b(2, 3);
  a << 1, Rational(1, 2), -2, 3, 0, Rational(-3, 4);
  b << 2, -1, Rational(1, 4), 0, 5, 1;  // dyadic: the double products are exact too
  const hla::Matrix<Rational> exact = a * b;
  CHECK(hla::convert<ModP>(exact) == hla::Matrix<ModP>(hla::convert<ModP>(a) * hla::convert<ModP>(b)));
  CHECK(hla::convert<double>(exact) ==
        hla::Matrix<double>(hla::convert<double>(a) * hla::convert<double>(b)));
  const hla::Matrix<hla::Mpfr> product = hla::convert<hla::Mpfr>(a) * hla::convert<hla::Mpfr>(b);
  for (hla::Index i = 0; i < 3; ++i) {
    for (hla::Index j = 0; j < 3; ++j) CHECK(hla::to_double(product(i, j)) == hla::to_double(exact(i, j)));
  }
}
