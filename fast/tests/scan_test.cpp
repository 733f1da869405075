// The scan operators' laws, and the chunk-parallel scans against streaming and the reference.

#include "hla/fast/scan.hpp"

#include <catch2/catch.hpp>

#include "hla/checking/counterexample.hpp"
#include "hla/checking/laws.hpp"
#include "hla/fast/chunked.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

namespace {

// Every (variant, masked, form) that the catalogue gives a scan operator, with decay unless that
// is unavailable or a finding breaks its laws there (F3, F4).
struct OperatorCase {
  std::string name;
  Variant variant;
  bool masked;
  fast::Form form;
  bool decay_allowed;
};

const std::vector<OperatorCase>& operator_cases() {
  static const std::vector<OperatorCase> cases = [] {
    std::vector<OperatorCase> out;
    for (const Variant variant : all_variants) {
      for (const bool masked : {true, false}) {
        for (const fast::Form form : {fast::Form::published, fast::Form::corrected}) {
          const OperatorSpec plain{.variant = variant, .masked = masked};
          const OperatorSpec decayed{.variant = variant, .masked = masked, .decay = Rational(1, 2)};
          if ((!masked && !supports_unmasked(variant)) ||
              fast::unavailable(plain, fast::Implementation::scan, form))
            continue;
          const fast::Finding* f = fast::finding_for(decayed, fast::Implementation::scan, form);
          const bool decay_allowed = !fast::unavailable(decayed, fast::Implementation::scan, form) &&
                                     (f == nullptr || f->fuzz_ids.empty());
          out.push_back({describe(plain) + " " + std::string(fast::form_name(form)) +
                             (decay_allowed ? "" : " (gamma = 1)"),
                         variant, masked, form, decay_allowed});
        }
      }
    }
    return out;
  }();
  return cases;
}

// Every law of the operator on s cut into segments of these lengths.
template <class Segments, class T>
void check_laws(const Segments& seg, const Sequence<T>& s, const std::vector<Index>& lengths) {
  if (const auto broken = checking::first_broken_law(seg, s, lengths))
    RC_FAIL(broken->law + " at " + broken->where);
}

OperatorSpec spec_for(const OperatorCase& c, const Rational& gamma) {
  OperatorSpec spec;
  spec.variant = c.variant;
  spec.masked = c.masked;
  spec.decay = c.decay_allowed ? gamma : Rational(1);
  return spec;
}

}  // namespace

TEMPLATE_TEST_CASE("scan/operators are associative with identity and fold homomorphically",
                   "[scan][laws][exact]", Rational, ModP) {
  for (const OperatorCase& c : operator_cases()) {
    property(c.name, [&c] {
      const OperatorSpec spec = spec_for(c, *testing::gen_decay().as("gamma"));
      const auto d = *testing::gen_position(1, 4).as("d");
      const auto dv = *testing::gen_position(1, 4).as("dv");
      const auto n = *testing::gen_position(0, 10).as("n");
      const Sequence<TestType> s = convert<TestType>(*testing::gen_sequence(n, d, dv, true).as("sequence"));
      const auto i = *testing::gen_position(0, n + 1).as("first cut");
      const auto j = *testing::gen_position(i, n + 1).as("second cut");
      fast::with_segments<TestType>(spec, c.form, d, dv, [&](const auto& seg) {
        check_laws(seg, s, {i, j - i, n - j});
      });
    });
  }
}

TEMPLATE_TEST_CASE("scan/the masked moment operator is lawful and reads out masked hla2",
                   "[scan][laws][exact]", Rational, ModP) {
  property("F = S C - G segments", [] {
    OperatorSpec spec = *testing::gen_spec(Variant::hla2).as("spec");
    spec.masked = true;
    const Sequence<TestType> s = convert<TestType>(*testing::gen_any_sequence(10, 3).as("sequence"));
    const Index n = s.length();
    const auto i = *testing::gen_position(0, n + 1).as("first cut");
    const auto j = *testing::gen_position(i, n + 1).as("second cut");
    const fast::Hla2MomentSegments<TestType> seg(
        s.key_dim(), s.value_dim(), from_rational<TestType>(spec.decay), from_rational<TestType>(spec.ridge));
    check_laws(seg, s, {i, j - i, n - j});
    const Terms<TestType> expected = reference::terms(spec, s);
    const auto tokens = checking::token_summaries(seg, s);
    for (Index t = 0; t < n; ++t) {
      const fast::Readout<TestType> r =
          seg.read(checking::fold(seg, tokens, 0, t + 1), s.q.row(t).transpose());
      RC_ASSERT(r.num == RowVector<TestType>(expected.num.row(t)));
      RC_ASSERT(r.den == expected.den(t));
    }
  });
}

TEMPLATE_TEST_CASE("scan/equals streaming and the reference exactly", "[scan][exact]", Rational, ModP) {
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": scan == streaming == reference",
        [variant] {
          const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          const Sequence<TestType> s = convert<TestType>(*testing::gen_any_sequence(40, 4).as("sequence"));
          fast::ScanOptions options;
          options.chunk = *testing::gen_position(1, s.length() + 4).as("chunk");
          options.threads = static_cast<int>(*testing::gen_position(1, 5).as("threads"));
          const fast::Form form = fast::default_form(spec, fast::Implementation::scan);
          const fast::Form stream_form = fast::default_form(spec, fast::Implementation::streaming);
          const Terms<TestType> scanned = fast::scan_terms(spec, form, s, options);
          const Terms<TestType> streamed = fast::streaming_terms(spec, stream_form, s);
          const Terms<TestType> expected = reference::terms(spec, s);
          RC_ASSERT(scanned.num == streamed.num);
          RC_ASSERT(scanned.den == streamed.den);
          RC_ASSERT(scanned.num == expected.num);
          RC_ASSERT(scanned.den == expected.den);
        },
        300);
  }
}

// Thm 7.2: the printed third-order scan reproduces Alg. 3 at gamma = 1 (and so inherits F2).
TEST_CASE("scan/published third-order scan equals published streaming", "[scan][exact][hla3]") {
  property(
      "Thm 7.2",
      [] {
        OperatorSpec spec = *testing::gen_spec(Variant::hla3).as("spec");
        spec.masked = true;
        spec.decay = 1;
        const Sequence<Rational> s = *testing::gen_any_sequence(16, 3).as("sequence");
        fast::ScanOptions options;
        options.chunk = *testing::gen_position(1, s.length() + 2).as("chunk");
        options.threads = static_cast<int>(*testing::gen_position(1, 3).as("threads"));
        const Terms<Rational> scanned = fast::scan_terms(spec, fast::Form::published, s, options);
        const Terms<Rational> streamed = fast::streaming_terms(spec, fast::Form::published, s);
        RC_ASSERT(scanned.num == streamed.num);
        RC_ASSERT(scanned.den == streamed.den);
      },
      100);
}

TEST_CASE("scan/exclusive Blelloch scan of any length and thread count", "[scan]") {
  property("prefix sums of strings (a non-commutative monoid)", [] {
    const auto words =
        *rc::gen::container<std::vector<std::string>>(rc::gen::string<std::string>()).as("words");
    const int threads = static_cast<int>(*testing::gen_position(1, 5).as("threads"));
    std::vector<std::string> scanned = words;
    fast::exclusive_scan(
        scanned, std::string(), [](const std::string& a, const std::string& b) { return a + b; }, threads);
    std::string prefix;
    for (std::size_t i = 0; i < words.size(); ++i) {
      RC_ASSERT(scanned[i] == prefix);
      prefix += words[i];
    }
  });
}

namespace {

// Three single-token segments a, b, c with d = dv = 1: (q, k, v) each.
Sequence<Rational> three_tokens(std::array<int, 3> a, std::array<int, 3> b, std::array<int, 3> c) {
  Sequence<Rational> s{Matrix<Rational>(3, 1), Matrix<Rational>(3, 1), Matrix<Rational>(3, 1)};
  Index t = 0;
  for (const auto& token : {a, b, c}) {
    s.q(t, 0) = token[0];
    s.k(t, 0) = token[1];
    s.v(t, 0) = token[2];
    ++t;
  }
  return s;
}

// ((a b) c) versus (a (b c)) of the three single-token segments of s.
template <class Segments>
auto both_groupings(const Segments& seg, const Sequence<Rational>& s) {
  const auto t = checking::token_summaries(seg, s);
  return checking::associativity(seg, t[0], t[1], t[2]);
}

}  // namespace

TEST_CASE("scan/F3: the printed decay-aware masked hla2 operator is not associative",
          "[scan][findings][hla2]") {
  // gamma = 1/2, c = 0. The groupings' G differ by rho_b rho_c (1 - rho_c) S_b C_a, their h by
  // rho_b rho_c (1 - rho_c) S_b m_a: with a = (q 1, k 0, v 1), b = (q 0, k 1, v 0), both are 1/8.
  // Minimal: a = (q 1, k 0, v 0) already breaks h (two non-zero entries).
  const Rational gamma(1, 2);
  const fast::Hla2Segments<Rational> published(1, 1, gamma, 0, true, fast::Form::published),
      corrected(1, 1, gamma, 0, true, fast::Form::corrected);
  for (const int v : {1, 0}) {
    const Sequence<Rational> s = three_tokens({1, 0, v}, {0, 1, 0}, {0, 0, 0});
    const auto [left, right] = both_groupings(published, s);
    CHECK(left.cross_value(0, 0) - right.cross_value(0, 0) == Rational(v, 8));
    CHECK(left.cross_mass(0) - right.cross_mass(0) == Rational(1, 8));
    const auto [fixed_left, fixed_right] = both_groupings(corrected, s);
    CHECK(fixed_left == fixed_right);
  }
}

TEST_CASE("scan/F4: the printed decay-aware ahla operator is not associative", "[scan][findings][ahla]") {
  // gamma = 1/2, c = 0. The groupings' E differ by rho_b rho_c (1 - rho_c) R_b P_a, their n by
  // rho_b rho_c (1 - rho_c) R_b m_a: with a = (q 0, k 1, v 1), b = (q 1, k 1, v 0), both are 1/8.
  // Minimal: v_a = 0 already breaks n (three non-zero entries).
  const Rational gamma(1, 2);
  const fast::AhlaSegments<Rational> published(1, 1, gamma, fast::Form::published),
      corrected(1, 1, gamma, fast::Form::corrected);
  for (const int v : {1, 0}) {
    const Sequence<Rational> s = three_tokens({0, 1, v}, {1, 1, 0}, {0, 0, 0});
    const auto [left, right] = both_groupings(published, s);
    CHECK(left.routed_value(0, 0) - right.routed_value(0, 0) == Rational(v, 8));
    CHECK(left.routed_mass(0) - right.routed_mass(0) == Rational(1, 8));
    const auto [fixed_left, fixed_right] = both_groupings(corrected, s);
    CHECK(fixed_left == fixed_right);
  }
}

TEST_CASE("scan/F3 and F4 counterexamples are minimal", "[scan][findings]") {
  // Over all three-token inputs with entries in {-1, 0, 1} (d = dv = 1, gamma = 1/2), the fewest
  // non-zero entries that break associativity; 10 means none does. Fewer than three segments
  // cannot break it, and d = dv = 1 is the smallest dimension.
  const auto smallest_failure = [](const auto& seg) {
    const auto breaks = [&seg](const Sequence<Rational>& s) {
      const auto [left, right] = both_groupings(seg, s);
      return !(left == right);
    };
    // All 3^9 inputs, fewest non-zero entries first.
    auto found = checking::exhaustive_search({.first_n = 3, .last_n = 3, .max_d = 1, .max_nonzero = 9},
                                             checking::zero_tokens, breaks);
    if (!found) return 10L;
    const auto e = checking::entries(*found);
    return static_cast<long>(std::count_if(e.begin(), e.end(), [](const Rational* x) { return *x != 0; }));
  };
  const Rational gamma(1, 2);
  CHECK(smallest_failure(fast::Hla2Segments<Rational>(1, 1, gamma, 0, true, fast::Form::published)) == 2);
  CHECK(smallest_failure(fast::AhlaSegments<Rational>(1, 1, gamma, fast::Form::published)) == 3);
  CHECK(smallest_failure(fast::Hla2Segments<Rational>(1, 1, gamma, 0, true, fast::Form::corrected)) ==
        10);  // none
  CHECK(smallest_failure(fast::AhlaSegments<Rational>(1, 1, gamma, fast::Form::corrected)) == 10);
}

// Every chunk form the catalogue offers (masked hla3's is the toolkit's own, built on F2's summary).
TEMPLATE_TEST_CASE("chunked/equals the reference exactly", "[chunked][exact]", Rational, ModP) {
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": chunked == reference",
        [variant] {
          const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          const Sequence<TestType> s = convert<TestType>(*testing::gen_any_sequence(40, 4).as("sequence"));
          fast::ScanOptions options;
          options.chunk = *testing::gen_position(1, s.length() + 4).as("chunk");
          options.threads = static_cast<int>(*testing::gen_position(1, 5).as("threads"));
          const fast::Form form = fast::default_form(spec, fast::Implementation::chunked);
          RC_PRE(!fast::unavailable(spec, fast::Implementation::chunked, form));  // hla3: masked only
          const Terms<TestType> chunked = fast::chunked_terms(spec, form, s, options);
          const Terms<TestType> expected = reference::terms(spec, s);
          RC_ASSERT(chunked.num == expected.num);
          RC_ASSERT(chunked.den == expected.den);
        },
        300);
  }
}

TEST_CASE("chunked/F5 and F6: the printed chunk forms drop a cross-chunk term", "[chunked][findings]") {
  // n = 2 in chunks of one token, d = dv = 1.
  const fast::ScanOptions one_token_chunks{1, 1};
  const auto check = [&](Variant variant, const Sequence<Rational>& s, const Rational& published_o2,
                         const Rational& reference_o2) {
    OperatorSpec spec;
    spec.variant = variant;
    const Terms<Rational> expected = reference::terms(spec, s);
    CHECK(fast::chunked_terms(spec, fast::Form::published, s, one_token_chunks).num(1, 0) == published_o2);
    CHECK(expected.num(1, 0) == reference_o2);
    CHECK(fast::chunked_terms(spec, fast::Form::corrected, s, one_token_chunks).num == expected.num);
  };
  const auto tokens = [](std::initializer_list<int> q, std::initializer_list<int> k,
                         std::initializer_list<int> v) {
    Sequence<Rational> s{Matrix<Rational>(2, 1), Matrix<Rational>(2, 1), Matrix<Rational>(2, 1)};
    s.q << *q.begin(), *(q.begin() + 1);
    s.k << *k.begin(), *(k.begin() + 1);
    s.v << *v.begin(), *(v.begin() + 1);
    return s;
  };
  // F5: Figure 1(C) misses q_2^T S^K_1 q_2 v_2 = (q_2.k_1)(k_1.q_2) v_2.
  check(Variant::hla2, tokens({0, 1}, {1, 0}, {0, 1}), 0, 1);
  // F6: Figure 2(C)'s R_{<t} misses i = t: (q_2.k_2)(q_2.k_1) v_1.
  check(Variant::ahla, tokens({0, 1}, {1, 1}, {1, 0}), 0, 1);
}
