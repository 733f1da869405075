// The disagreements between the paper's printed streaming forms and the reference, each on its
// recorded minimal counterexample (docs/findings.md), and the corrected forms on the same inputs.

#include <catch2/catch.hpp>

#include "hla/checking/counterexample.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

namespace {

// One column per token: n = 2, d = dv = 1.
Sequence<Rational> tokens(std::initializer_list<int> q, std::initializer_list<int> k,
                          std::initializer_list<int> v) {
  const auto column = [](std::initializer_list<int> xs) {
    Matrix<Rational> m(static_cast<Index>(xs.size()), 1);
    Index r = 0;
    for (const int x : xs) m(r++, 0) = x;
    return m;
  };
  return {column(q), column(k), column(v)};
}

OperatorSpec spec_of(Variant variant, Rational decay) {
  OperatorSpec spec;
  spec.variant = variant;
  spec.decay = decay;
  return spec;
}

void check_finding(const OperatorSpec& spec, const Sequence<Rational>& s, bool denominator,
                   const Rational& published_value, const Rational& reference_value) {
  const Terms<Rational> reference = reference::terms(spec, s);
  const Terms<Rational> published = fast::streaming_terms(spec, fast::Form::published, s);
  const Terms<Rational> corrected = fast::streaming_terms(spec, fast::Form::corrected, s);
  const Index last = s.length() - 1;
  if (denominator) {
    CHECK(published.den(last) == published_value);
    CHECK(reference.den(last) == reference_value);
    CHECK(published.den != reference.den);
  } else {
    CHECK(published.num(last, 0) == published_value);
    CHECK(reference.num(last, 0) == reference_value);
    CHECK(published.num != reference.num);
  }
  CHECK(corrected.num == reference.num);
  CHECK(corrected.den == reference.den);
  // Minimal: the exhaustive search (n <= 2, d = dv = 1, entries in {-1, 0, 1}) finds this very
  // input first.
  const auto differs = [&](const Sequence<Rational>& x) {
    const Terms<Rational> printed = fast::streaming_terms(spec, fast::Form::published, x);
    const Terms<Rational> expected = reference::terms(spec, x);
    return denominator ? printed.den != expected.den : printed.num != expected.num;
  };
  const auto found =
      checking::exhaustive_search({.first_n = 1, .last_n = 2, .max_d = 1}, checking::zero_tokens, differs);
  REQUIRE(found.has_value());
  CHECK(found->q == s.q);
  CHECK(found->k == s.k);
  CHECK(found->v == s.v);
}

}  // namespace

TEST_CASE("findings/F1: decayed hla2 cross-summaries of Sec. 4.3 are not the masked operator",
          "[findings][hla2][exact]") {
  const OperatorSpec spec = spec_of(Variant::hla2, Rational(1, 2));
  SECTION("numerator") {
    check_finding(spec, tokens({1, 1}, {0, 1}, {1, 0}), false, Rational(-1, 2), 0);
  }
  SECTION("denominator") {
    check_finding(spec, tokens({1, 1}, {0, 1}, {0, 0}), true, Rational(1, 2), 1);
  }
}

TEST_CASE("findings/F2: Thm 7.1's masked third-order streaming is not the masked operator",
          "[findings][hla3][exact]") {
  SECTION("numerator") {
    check_finding(spec_of(Variant::hla3, 1), tokens({0, 1}, {1, 0}, {1, 0}), false, 0, 1);
  }
  SECTION("denominator") {
    check_finding(spec_of(Variant::hla3, 1), tokens({0, 1}, {1, 0}, {0, 0}), true, 0, 1);
  }
  SECTION("numerator, with decay (Alg. 3)") {
    check_finding(spec_of(Variant::hla3, Rational(1, 2)), tokens({0, 1}, {1, 0}, {1, 0}), false,
                  Rational(-3, 4), Rational(1, 4));
  }
}

// With a single token every cross-summary is zero, so no counterexample has n = 1.
TEST_CASE("findings/published forms agree with the reference on one token", "[findings][exact]") {
  for (const Variant variant : {Variant::hla2, Variant::hla3}) {
    property(std::string(variant_name(variant)) + ": n = 1", [variant] {
      OperatorSpec spec = *testing::gen_spec(variant).as("spec");
      spec.masked = true;
      const auto d = *rc::gen::inRange(1, 7).as("d");
      const auto dv = *rc::gen::inRange(1, 7).as("dv");
      const Sequence<Rational> s = *testing::gen_sequence(1, d, dv, true).as("sequence");
      const Terms<Rational> published = fast::streaming_terms(spec, fast::Form::published, s);
      const Terms<Rational> expected = reference::terms(spec, s);
      RC_ASSERT(published.num == expected.num);
      RC_ASSERT(published.den == expected.den);
    });
  }
}

// F1 is about decay only: the published hla2 disagrees for every gamma < 1 on F1's input.
TEST_CASE("findings/F1 holds for every decay below one", "[findings][hla2][exact]") {
  property("gamma in (0, 1)", [] {
    const Rational gamma = *testing::gen_decay().as("gamma");
    RC_PRE(gamma != 1);
    const OperatorSpec spec = spec_of(Variant::hla2, gamma);
    const Sequence<Rational> s = tokens({1, 1}, {0, 1}, {1, 0});
    // Published o_2 = gamma - 1 (docs/findings.md), reference o_2 = 0.
    RC_ASSERT(fast::streaming_terms(spec, fast::Form::published, s).num(1, 0) == gamma - 1);
    RC_ASSERT(reference::terms(spec, s).num(1, 0) == 0);
  });
}
