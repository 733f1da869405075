// Sequence parallelism (fast/ranks.hpp): a sequence split across any number of ranks, in slices of
// any lengths (uneven, empty), has the scan's and the definition's outputs and gradients bit for bit
// in Z/p; what cannot be split is refused with a reason, and a rank's failure reaches the caller
// without leaving the others waiting.

#include "hla/fast/ranks.hpp"

#include <algorithm>
#include <atomic>
#include <catch2/catch.hpp>
#include <limits>

#include "hla/testing/generators.hpp"
#include "hla/testing/gradients.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::fast::Form;
using hla::fast::Implementation;
using hla::testing::property;

namespace {

// Any spec of `variant` in either form that splits (a refusal must be a finding's), its forward and
// backward across ranks against the scan's and the definition's, in Z/p.
void split_equals_reference(Variant variant) {
  const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
  const Form form = *rc::gen::element(Form::published, Form::corrected).as("form");
  RC_PRE(!fast::unavailable(spec, Implementation::scan, form));
  if (fast::ranks_unavailable(spec, Implementation::scan, form)) {
    RC_ASSERT(fast::finding_for(spec, Implementation::scan, form) != nullptr);
    RC_DISCARD("a printed form that is not the operator does not split");
  }
  const Sequence<ModP> s = convert<ModP>(*testing::gen_any_sequence(24, 3).as("sequence"));
  const Matrix<ModP> d_out = convert<ModP>(*testing::gen_matrix(s.length(), s.value_dim(), false).as("dO"));
  RC_PRE(testing::denominators_nonzero(spec, reference::terms(spec, s)));
  const fast::Slices slices = fast::slices_of_lengths(testing::gen_slice_lengths(s.length(), 5));
  const fast::ScanOptions options{*testing::gen_position(1, 6).as("chunk"),
                                  static_cast<int>(*testing::gen_position(1, 3).as("threads a rank"))};

  const Terms<ModP> split = fast::ranks_terms(spec, form, s, slices, options);
  const Terms<ModP> exact = reference::terms(spec, s);
  RC_ASSERT(split.num == exact.num);
  RC_ASSERT(split.den == exact.den);
  const Terms<ModP> scan = fast::scan_terms(spec, form, s, options);
  RC_ASSERT(split.num == scan.num);
  RC_ASSERT(split.den == scan.den);

  const Gradients<ModP> g = fast::ranks_gradients(spec, form, s, d_out, slices, options);
  const Gradients<ModP> e = reference::gradients(spec, s, d_out);
  RC_ASSERT(g.dq == e.dq);
  RC_ASSERT(g.dk == e.dk);
  RC_ASSERT(g.dv == e.dv);
  RC_ASSERT(g.output == e.output);
  RC_ASSERT(g.terms.num == exact.num);
}

}  // namespace

TEST_CASE("ranks/split across ranks, the outputs and gradients equal the definition's exactly - ModP",
          "[ranks][exact]") {
  for (const Variant variant : all_variants)
    property(
        std::string(variant_name(variant)) +
            ": terms, O, dQ, dK, dV across 1 to 5 ranks equal the scan's "
            "and reference's",
        [=] { split_equals_reference(variant); }, 150);
}

// In float64 on small integers without decay or normalization every value is an integer (or a half,
// with a ridge) far below 2^53, so the split's arithmetic is exact: its outputs and gradients equal the
// definition's, computed in rationals, bit for bit.
TEST_CASE("ranks/split across ranks in float64 on small integers, the outputs and gradients are exact",
          "[ranks]") {
  for (const Variant variant : all_variants)
    property(
        std::string(variant_name(variant)) + ": float64 terms, dQ, dK, dV across ranks equal the exact ones",
        [variant] {
          OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          spec.decay = 1;
          spec.normalize = false;
          spec.eps = 0;
          const Form form = fast::default_form(spec, Implementation::scan);
          const Sequence<Rational> s = *testing::gen_any_sequence(16, 3).as("sequence");
          const Matrix<Rational> d_out = *testing::gen_matrix(s.length(), s.value_dim(), false).as("dO");
          const fast::Slices slices = fast::slices_of_lengths(testing::gen_slice_lengths(s.length(), 4));
          const fast::ScanOptions options{*testing::gen_position(1, 5).as("chunk"), 1};
          const Gradients<double> g =
              fast::ranks_gradients(spec, form, convert<double>(s), convert<double>(d_out), slices, options);
          const Gradients<Rational> e = reference::gradients(spec, s, d_out);
          RC_ASSERT(g.terms.num == convert<double>(e.terms.num));
          RC_ASSERT(g.dq == convert<double>(e.dq));
          RC_ASSERT(g.dk == convert<double>(e.dk));
          RC_ASSERT(g.dv == convert<double>(e.dv));
          RC_ASSERT(fast::ranks_terms(spec, form, convert<double>(s), slices, options).num ==
                    convert<double>(e.terms.num));
        },
        60);
}

TEST_CASE("ranks/even slices cover the sequence in order, none longer than ceil(n / ranks)", "[ranks]") {
  property("even_slices", [] {
    const Index n = *testing::gen_position(0, 200).as("n");
    const int ranks = static_cast<int>(*testing::gen_position(1, 40).as("ranks"));
    const fast::Slices slices = fast::even_slices(n, ranks);
    RC_ASSERT(slices.ranks() == ranks);
    fast::validate(slices, n);
    for (int r = 0; r < ranks; ++r) RC_ASSERT(slices.length(r) <= (n + ranks - 1) / ranks);
  });
}

TEST_CASE("ranks/what cannot be split is refused with a reason", "[ranks]") {
  const OperatorSpec decayed{.variant = Variant::hla2, .decay = Rational(1, 2)};
  const auto printed = fast::ranks_unavailable(decayed, Implementation::scan, Form::published);
  REQUIRE(printed);
  CHECK_THAT(*printed, Catch::Contains("F3") && Catch::Contains("corrected form splits"));
  CHECK_FALSE(fast::ranks_unavailable(decayed, Implementation::scan, Form::corrected));
  const auto other = fast::ranks_unavailable(OperatorSpec{}, Implementation::chunked, Form::published);
  REQUIRE(other);
  CHECK_THAT(*other, Catch::Contains("--impl chunked does not split"));
  CHECK_FALSE(fast::ranks_unavailable(decayed, Implementation::gpu_scan, Form::corrected));
  CHECK_FALSE(fast::ranks_unavailable(decayed, Implementation::gpu_scan, Form::corrected, true));
  const auto gpu_backward = fast::ranks_unavailable(decayed, Implementation::gpu_scan, Form::published, true);
  REQUIRE(gpu_backward);
  CHECK_THAT(*gpu_backward, Catch::Contains("F3"));
  CHECK_FALSE(fast::ranks_unavailable(decayed, Implementation::gpu_fast, Form::published));
  CHECK_FALSE(fast::ranks_unavailable(decayed, Implementation::gpu_fast, Form::published, true));
  const OperatorSpec third{.variant = Variant::hla3};
  CHECK_FALSE(fast::ranks_unavailable(third, Implementation::gpu_fast, Form::published));
  CHECK_THAT(*fast::ranks_unavailable(third, Implementation::gpu_fast, Form::published, true),
             Catch::Contains("the fast backward covers hla2 and ahla"));
  CHECK_THAT(*fast::ranks_unavailable(decayed, Implementation::gpu_scan, Form::published),
             Catch::Contains("F3"));

  const Sequence<double> s{Matrix<double>::Ones(6, 2), Matrix<double>::Ones(6, 2),
                           Matrix<double>::Ones(6, 2)};
  CHECK_THROWS_WITH(fast::ranks_terms(decayed, Form::published, s, fast::even_slices(6, 2), {}),
                    Catch::Contains("F3"));
  CHECK_THROWS_WITH(fast::even_slices(6, 0), "--ranks: must be from 1 to 1024, got 0");
  const std::vector<Index> too_short{2, 3};
  CHECK_THROWS_WITH(
      fast::ranks_terms(OperatorSpec{}, Form::published, s, fast::slices_of_lengths(too_short), {}),
      Catch::StartsWith("--slices: the slices must cover the 6 tokens in order"));
  const std::vector<Index> negative{7, -1};
  CHECK_THROWS_WITH(fast::slices_of_lengths(negative), "--slices: a slice's length must be >= 0, got -1");
  CHECK_THROWS_WITH(fast::ranks_terms(OperatorSpec{}, Form::published, s, fast::even_slices(6, 5), {1, 256}),
                    "--ranks, --threads: at most 1024 threads in all, got 5 ranks of 256");
  const std::vector<Index> huge{std::numeric_limits<Index>::max(), 1};
  CHECK_THROWS_WITH(fast::slices_of_lengths(huge), Catch::StartsWith("--slices: the lengths add up past"));
  const Terms<double> short_den{Matrix<double>::Ones(6, 2), Vector<double>::Ones(3)};
  CHECK_THROWS_WITH(fast::ranks_gradients(OperatorSpec{}, Form::published, s,
                                          Upstream<double>::readouts(short_den), fast::even_slices(6, 2), {}),
                    "gradients: the readouts' adjoints must have the readouts' shapes");
  const Matrix<double> d_out = Matrix<double>::Ones(5, 2);
  CHECK_THROWS_WITH(
      fast::ranks_gradients(OperatorSpec{}, Form::published, s, d_out, fast::even_slices(6, 2), {}),
      "gradients: dO must have the shape of O");
}

// A zero normalized denominator in Z/p is named by its place in the sequence, not in its slice.
TEST_CASE("ranks/a zero denominator names its token in the whole sequence", "[ranks]") {
  const OperatorSpec spec{.variant = Variant::linear, .normalize = true, .eps = 1};
  Matrix<ModP> q(3, 1), k(3, 1), v(3, 1);
  q << ModP(1), ModP(1), ModP(1);
  k << ModP(1), ModP(1), ModP(-3);  // den = 1, 2, -1: den + eps is zero at token 2
  v << ModP(1), ModP(2), ModP(3);
  const Sequence<ModP> s{q, k, v};
  const Matrix<ModP> d_out = v;
  CHECK_THROWS_WITH(reference::gradients(spec, s, d_out), Catch::Contains("token 2 (den + eps)"));
  const std::vector<Index> lengths{2, 1};
  CHECK_THROWS_WITH(
      fast::ranks_gradients(spec, Form::published, s, d_out, fast::slices_of_lengths(lengths), {}),
      Catch::Contains("token 2 (den + eps)"));
}

TEST_CASE("ranks/a rank's failure reaches the caller and releases the ranks waiting for it", "[ranks]") {
  for (const int failing : {0, 2, 3}) {
    for (const int gathers_before : {0, 1}) {
      fast::ThreadExchange<int> exchange(4);
      std::atomic<int> finished = 0;
      CHECK_THROWS_WITH(fast::run_ranks(
                            4,
                            [&](int r) {
                              for (int i = 0; i < 3; ++i) {
                                if (r == failing && i == gathers_before)
                                  throw Error("rank " + std::to_string(r) + " failed");
                                exchange.all_gather(r, r);
                              }
                              ++finished;
                            },
                            [&] { exchange.abandon(); }),
                        "rank " + std::to_string(failing) + " failed");
      CHECK(finished == 0);
      CHECK_THROWS_WITH(exchange.all_gather(0, 0), "another rank failed");  // spent: refuses at once
    }
  }
  fast::ThreadExchange<int> exchange(3);
  std::vector<std::vector<int>> seen(3);
  fast::run_ranks(
      3, [&](int r) { seen[r] = exchange.all_gather(r, 10 * r); }, [&] { exchange.abandon(); });
  for (const auto& all : seen) CHECK(all == std::vector<int>{0, 10, 20});
}
