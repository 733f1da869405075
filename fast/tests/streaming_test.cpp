#include "hla/fast/streaming.hpp"

#include <catch2/catch.hpp>

#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

// Every variant and option, in the form that claims to equal the reference: numerators and
// denominators compared with ==, before any division.
TEMPLATE_TEST_CASE("streaming/equals the reference exactly", "[streaming][exact]", Rational, ModP) {
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": streaming terms == reference terms",
        [variant] {
          const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          const Sequence<TestType> s = convert<TestType>(*testing::gen_any_sequence(24, 6).as("sequence"));
          const Terms<TestType> expected = reference::terms(spec, s);
          const Terms<TestType> actual =
              fast::streaming_terms(spec, fast::default_form(spec, fast::Implementation::streaming), s);
          RC_ASSERT(actual.num == expected.num);
          RC_ASSERT(actual.den == expected.den);
        },
        1000);
  }
}

TEST_CASE("streaming/published hla2 masked equals the reference without decay", "[streaming][exact][hla2]") {
  property("Thm 3.1 as printed, gamma = 1", [] {
    OperatorSpec spec = *testing::gen_spec(Variant::hla2).as("spec");
    spec.masked = true;
    spec.decay = 1;
    const Sequence<Rational> s = *testing::gen_any_sequence(24, 6).as("sequence");
    const Terms<Rational> expected = reference::terms(spec, s);
    const Terms<Rational> actual = fast::streaming_terms(spec, fast::Form::published, s);
    RC_ASSERT(actual.num == expected.num);
    RC_ASSERT(actual.den == expected.den);
  });
}

TEST_CASE("streaming/normalized output equals the reference's", "[streaming][exact]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": o_t = num_t / (den_t + eps) exactly", [variant] {
      OperatorSpec spec = *testing::gen_spec(variant).as("spec");
      spec.normalize = true;
      const Sequence<Rational> s = *testing::gen_any_sequence(12, 4).as("sequence");
      const Terms<Rational> terms = reference::terms(spec, s);
      for (Index t = 0; t < s.length(); ++t) RC_PRE(terms.den(t) + spec.eps != 0);
      RC_ASSERT(fast::streaming_output(spec, fast::default_form(spec, fast::Implementation::streaming), s) ==
                reference::output(spec, s));
    });
  }
}

TEST_CASE("streaming/a zero denominator in exact arithmetic is an error", "[streaming][exact]") {
  OperatorSpec spec;
  spec.variant = Variant::hla2;
  spec.normalize = true;
  const Sequence<Rational> s{Matrix<Rational>::Zero(2, 2), Matrix<Rational>::Ones(2, 2),
                             Matrix<Rational>::Ones(2, 1)};
  CHECK_THROWS_WITH(fast::streaming_output(spec, fast::Form::corrected, s),
                    Catch::Contains("token 1: normalized denominator"));
  CHECK_THROWS_AS(reference::output(spec, convert<ModP>(s)), Error);
  CHECK(std::isnan(fast::streaming_output(spec, fast::Form::corrected, convert<double>(s))(0, 0)));
}

TEST_CASE("streaming/empty sequence gives empty output", "[streaming]") {
  for (const Variant variant : all_variants) {
    OperatorSpec spec;
    spec.variant = variant;
    const Sequence<Rational> s{Matrix<Rational>(0, 3), Matrix<Rational>(0, 3), Matrix<Rational>(0, 2)};
    const Matrix<Rational> out =
        fast::streaming_output(spec, fast::default_form(spec, fast::Implementation::streaming), s);
    CHECK(out.rows() == 0);
    CHECK(out.cols() == 2);
    CHECK(reference::output(spec, s).rows() == 0);
  }
}
