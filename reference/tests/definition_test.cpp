// The reference's matrix forms against the paper's printed index sums (a second, independent
// transcription of each definition), and the structure every masked operator must have.

#include "hla/reference/definition.hpp"

#include <catch2/catch.hpp>

#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

namespace {

Rational dot(const Matrix<Rational>& a, Index i, const Matrix<Rational>& b, Index j) {
  return a.row(i).dot(b.row(j));
}

// o_t and den_t as index sums, transcribed from the paper (Fig. 1A, Eq. 6.1, Thm 7.1's proof)
// with the decay weights of docs/operators.md.
Terms<Rational> index_sums(const OperatorSpec& spec, const Sequence<Rational>& s) {
  const Index n = s.length();
  const auto g = [&](Index age) { return power(spec.decay, static_cast<long>(age)); };
  const auto& q = s.q;
  const auto& k = s.k;
  Terms<Rational> out{Matrix<Rational>::Zero(n, s.value_dim()), Vector<Rational>::Zero(n)};
  const auto add = [&](Index t, Index j, const Rational& weight) {
    out.num.row(t) += weight * s.v.row(j);
    out.den(t) += weight;
  };
  for (Index t = 0; t < n; ++t) {
    switch (spec.variant) {
      case Variant::linear:
        for (Index j = 0; j <= t; ++j) add(t, j, g(t - j) * dot(q, t, k, j));
        break;
      case Variant::hla2:
        for (Index j = 0; j <= t; ++j) {
          for (Index i = 0; i <= (spec.masked ? j : t); ++i) {
            add(t, j, g(t - i) * g(t - j) * dot(q, t, k, i) * dot(q, j, k, i));
          }
          add(t, j, spec.ridge * g(t - j) * dot(q, t, q, j));
        }
        break;
      case Variant::ahla:
        for (Index j = 0; j <= t; ++j) {
          for (Index i = j; i <= t; ++i) add(t, j, g(t - j) * dot(q, t, k, i) * dot(q, i, k, j));
        }
        break;
      case Variant::hla3:
        for (Index u = 0; u <= t; ++u) {
          const Index last = spec.masked ? u : t;
          for (Index i = 0; i <= last; ++i) {
            for (Index j = 0; j <= last; ++j) {
              add(t, j, g(t - i) * g(t - u) * g(t - j) * dot(q, t, k, i) * dot(k, i, q, u) * dot(q, u, k, j));
            }
          }
        }
        break;
    }
  }
  return out;
}

}  // namespace

TEST_CASE("reference/matrix forms equal the printed index sums", "[reference][exact]") {
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": weights(Q, K) V equals the index sums",
        [variant] {
          const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          const Sequence<Rational> s = *testing::gen_any_sequence(8, 3).as("sequence");
          const Terms<Rational> expected = index_sums(spec, s);
          const Terms<Rational> actual = reference::terms(spec, s);
          RC_ASSERT(actual.num == expected.num);
          RC_ASSERT(actual.den == expected.den);
        },
        60);
  }
}

TEST_CASE("reference/weights are lower triangular", "[reference][exact][causality]") {
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": no weight above the diagonal",
        [variant] {
          const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          const Sequence<Rational> s = *testing::gen_any_sequence(8, 3).as("sequence");
          const Matrix<Rational> m = reference::weights(spec, s.q, s.k);
          for (Index t = 0; t < m.rows(); ++t) {
            for (Index j = t + 1; j < m.cols(); ++j) RC_ASSERT(m(t, j) == 0);
          }
        },
        60);
  }
}

TEST_CASE("reference/the masked block has the stated weights", "[reference][exact]") {
  const Matrix<Rational> ones = Matrix<Rational>::Ones(4, 4);
  const Matrix<Rational> mask = reference::lower(ones, Rational(1, 3));
  CHECK(mask(3, 0) == Rational(1, 27));
  CHECK(mask(2, 2) == 1);
  CHECK(mask(1, 2) == 0);
  CHECK(reference::ages(3, Rational(1, 2)) ==
        RowVector<Rational>::Map(std::vector<Rational>{Rational(1, 4), Rational(1, 2), 1}.data(), 3));
}
