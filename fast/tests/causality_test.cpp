// Strict causality and the mask structure of every masked operator, for the reference and both
// streaming forms, exactly and in floating point (bit for bit).

#include <bit>
#include <catch2/catch.hpp>
#include <cstring>

#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

namespace {

// An implementation in its default form (equal to the reference) or as printed.
struct Evaluation {
  fast::Implementation impl;
  bool published = false;
};
constexpr Evaluation reference_form{fast::Implementation::reference},
    streaming_default{fast::Implementation::streaming},
    streaming_published{fast::Implementation::streaming, true}, scan_default{fast::Implementation::scan};

template <class T>
Terms<T> run(Evaluation e, const OperatorSpec& spec, const Sequence<T>& s) {
  const fast::Form form = e.published ? fast::Form::published : fast::default_form(spec, e.impl);
  switch (e.impl) {
    case fast::Implementation::reference:
      return reference::terms(spec, s);
    case fast::Implementation::streaming:
      return fast::streaming_terms(spec, form, s);
    case fast::Implementation::scan:  // uneven chunks of 3, two threads
      return fast::scan_terms(spec, form, s, fast::ScanOptions{3, 2});
    default:
      throw Error("no causality case for " + std::string(fast::implementation_name(e.impl)));
  }
}

std::string name(Evaluation e) {
  if (e.impl == fast::Implementation::reference) return "reference";
  return std::string(fast::implementation_name(e.impl)) +
         (e.published ? " (published form)" : " (default form)");
}

// Bit-for-bit equality for floats (so -0 != +0 and NaN == NaN of the same payload), == otherwise.
template <class T>
bool identical(const T& a, const T& b) {
  if constexpr (std::is_floating_point_v<T>) {
    return std::memcmp(&a, &b, sizeof(T)) == 0;
  } else {
    return a == b;
  }
}

template <class T>
bool rows_identical(const Terms<T>& a, const Terms<T>& b, Index rows) {
  for (Index t = 0; t < rows; ++t) {
    if (!identical(a.den(t), b.den(t))) return false;
    for (Index c = 0; c < a.num.cols(); ++c) {
      if (!identical(a.num(t, c), b.num(t, c))) return false;
    }
  }
  return true;
}

}  // namespace

TEMPLATE_TEST_CASE("causality/changing a later token leaves earlier outputs unchanged", "[causality]",
                   Rational, double, float) {
  for (const Variant variant : all_variants) {
    for (const Evaluation impl : {reference_form, streaming_default, streaming_published, scan_default}) {
      property(
          std::string(variant_name(variant)) + ", " + name(impl) + ": outputs before p fixed",
          [=] {
            const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            const Sequence<Rational> s = *testing::gen_any_sequence(16, 4, 2).as("sequence");
            const auto p = *testing::gen_position(1, s.length()).as("changed position p (0-based)");
            Sequence<Rational> changed = s;
            changed.q.row(p) = *testing::gen_matrix(1, s.key_dim(), true).as("new q_p");
            changed.k.row(p) = *testing::gen_matrix(1, s.key_dim(), true).as("new k_p");
            changed.v.row(p) = *testing::gen_matrix(1, s.value_dim(), true).as("new v_p");
            const Terms<TestType> before = run(impl, spec, convert<TestType>(s));
            const Terms<TestType> after = run(impl, spec, convert<TestType>(changed));
            RC_ASSERT(rows_identical(before, after, p));
          },
          40);
    }
  }
}

namespace {

// Which queries and keys o_t can depend on when v_s is the only non-zero value (s <= t), read
// off each masked operator's index set (docs/operators.md): everything else must not matter.
bool query_reaches(const OperatorSpec& spec, Index r, Index s, Index t) {
  switch (spec.variant) {
    case Variant::linear:
      return r == t;
    case Variant::hla2:
      return r == s || r == t;  // (q_t.k_i)(k_i.q_s): q_s and q_t
    case Variant::ahla:
      return s <= r && r <= t;  // q_i for s <= i <= t
    case Variant::hla3:
      return s <= r && r <= t;  // the middle index u >= s
  }
  return true;
}
bool key_reaches(const OperatorSpec& spec, Index r, Index s, Index t) {
  switch (spec.variant) {
    case Variant::linear:
      return r == s;
    case Variant::hla2:
      return r <= s;  // i <= j = s
    case Variant::ahla:
      return s <= r && r <= t;  // s <= i
    case Variant::hla3:
      return r <= t;
  }
  return true;
}

}  // namespace

TEST_CASE("mask structure/with one non-zero value the unreachable queries and keys do not matter",
          "[causality][mask][exact]") {
  for (const Variant variant : all_variants) {
    for (const Evaluation impl : {reference_form, streaming_default, scan_default}) {
      property(
          std::string(variant_name(variant)) + ", " + name(impl),
          [=] {
            OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            spec.masked = true;
            Sequence<Rational> s = *testing::gen_any_sequence(10, 3, 2).as("sequence");
            const Index n = s.length();
            const auto source = *testing::gen_position(0, n).as("source s: the only non-zero v");
            const auto t = *testing::gen_position(source, n).as("output t");
            for (Index r = 0; r < n; ++r) {
              if (r != source) s.v.row(r).setZero();
            }
            std::vector<std::pair<bool, Index>> unreachable;  // (is a query, position) up to t
            for (Index r = 0; r <= t; ++r) {
              if (!query_reaches(spec, r, source, t)) unreachable.emplace_back(true, r);
              if (!key_reaches(spec, r, source, t)) unreachable.emplace_back(false, r);
            }
            RC_PRE(!unreachable.empty());
            const auto [change_query, r] =
                *rc::gen::elementOf(unreachable).as("changed (is query, position)");
            Sequence<Rational> changed = s;
            (change_query ? changed.q : changed.k).row(r) =
                *testing::gen_matrix(1, s.key_dim(), true).as("new row");
            const Terms<Rational> before = run(impl, spec, s);
            const Terms<Rational> after = run(impl, spec, changed);
            RC_ASSERT(before.num.row(t) == after.num.row(t));
            for (Index earlier = 0; earlier < source; ++earlier) RC_ASSERT(before.num.row(earlier).isZero());
          },
          60);
    }
  }
}

TEST_CASE("mask structure/published hla3 reads a query the mask excludes",
          "[causality][mask][findings][hla3]") {
  // v_2 is the only non-zero value, so o_2 may depend on q_u only for u >= 2 (F2).
  OperatorSpec spec;
  spec.variant = Variant::hla3;
  Sequence<Rational> s{Matrix<Rational>::Ones(2, 1), Matrix<Rational>::Ones(2, 1), Matrix<Rational>(2, 1)};
  s.v << 0, 1;
  Sequence<Rational> changed = s;
  changed.q(0, 0) = 2;
  for (const fast::Form form : {fast::Form::published, fast::Form::corrected}) {
    const Terms<Rational> before = fast::streaming_terms(spec, form, s);
    const Terms<Rational> after = fast::streaming_terms(spec, form, changed);
    INFO(fast::form_name(form));
    CHECK((before.num(1, 0) == after.num(1, 0)) == (form == fast::Form::corrected));
  }
}
