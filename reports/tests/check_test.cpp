// hla check on kernels written as a user writes them: recurrent hla2 in float32 on bf16 inputs,
// correct (two evaluation orders) and with the mistakes kernel authors make, at a decay of 0.999.
// The correct ones pass on every seed; each faulty one fails.

#include "hla/reports/check.hpp"

#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <random>
#include <set>

#include "hla/fast/catalogue.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using namespace hla::reports;

namespace {

std::uint64_t test_seed() {
  return testing::seed_from("HLA_CHECK_SEED", "check test");
}

enum class Mistake { none, other_order, decay_exponent, dropped_carry, missing_scale, printed_decay };

// Masked hla2 with decay g in F, as a user's recurrent kernel: S = g S + k k^T,
// C = g C + q v^T, G = g^2 G + g k (k^T C_{t-1}), o_t = q_t^T (S C - G), q scaled first; or with
// one of the mistakes.
template <class F>
Matrix<double> user_kernel(const Sequence<double>& s, F g, F scale, Mistake mistake, Format out) {
  using M = Eigen::Matrix<F, Eigen::Dynamic, Eigen::Dynamic>;
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
  M S = M::Zero(d, d), C = M::Zero(d, dv), G = M::Zero(d, dv);
  Matrix<double> o(n, dv);
  for (Index t = 0; t < n; ++t) {
    const M q = s.q.row(t).transpose().cast<F>() * scale, k = s.k.row(t).transpose().cast<F>();
    const M v = s.v.row(t).cast<F>();
    if (mistake == Mistake::dropped_carry && t == n / 2) {  // a chunk boundary whose carry is lost
      S.setZero();
      C.setZero();
      G.setZero();
    }
    const F age = mistake == Mistake::decay_exponent || mistake == Mistake::printed_decay ? g : g * g;
    const F gain = mistake == Mistake::printed_decay ? F(1) : g;  // Sec. 4.3 as printed: g G + k k^T C
    G = age * G + gain * k * (k.transpose() * C);
    S = g * S + k * k.transpose();
    C = g * C + q * v;
    const M row = mistake == Mistake::other_order ? M((q.transpose() * S) * C - q.transpose() * G)
                                                  : M(q.transpose() * (S * C - G));
    for (Index c = 0; c < dv; ++c) o(t, c) = round_to(out, double(row(0, c)));
  }
  return o;
}

// Masked hla2 without decay in F, as a user's chunk-parallel kernel: per chunk of C tokens, with
// W = Q K^T masked to i <= a and the carries S0, C0, G0 of the tokens before,
//   o_a = q_a^T (S0 C0 - G0) + [(Q S0 Q^T) . L] V + [((W . L)(K Q^T . U)) . L] V
// (U: i <= j), then S0 += K^T K, G0 += K^T K C0 + K^T [(K Q^T . L_strict) V], C0 += Q^T V.
template <class F>
Matrix<double> chunked_kernel(const Sequence<double>& s, F scale, Index chunk, Format out) {
  using M = Eigen::Matrix<F, Eigen::Dynamic, Eigen::Dynamic>;
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
  M S0 = M::Zero(d, d), C0 = M::Zero(d, dv), G0 = M::Zero(d, dv);
  Matrix<double> o(n, dv);
  for (Index b = 0; b < n; b += chunk) {
    const Index c = std::min(chunk, n - b);
    const M Q = s.q.middleRows(b, c).cast<F>() * scale, K = s.k.middleRows(b, c).cast<F>();
    const M V = s.v.middleRows(b, c).cast<F>();
    const M lower = M(M::Ones(c, c).template triangularView<Eigen::Lower>());
    const M strict = M(M::Ones(c, c).template triangularView<Eigen::StrictlyLower>());
    const M W = (Q * K.transpose()).cwiseProduct(lower),
            KQ = (K * Q.transpose()).cwiseProduct(lower.transpose());
    const M result = Q * (S0 * C0 - G0) + (Q * S0 * Q.transpose()).cwiseProduct(lower) * V +
                     (W * KQ).cwiseProduct(lower) * V;
    for (Index a = 0; a < c; ++a)
      for (Index j = 0; j < dv; ++j) o(b + a, j) = round_to(out, double(result(a, j)));
    G0 += K.transpose() * (K * C0) + K.transpose() * ((K * Q.transpose()).cwiseProduct(strict) * V);
    S0 += K.transpose() * K;
    C0 += Q.transpose() * V;
  }
  return o;
}

struct Problem {
  std::vector<HeadInput> heads;
  CheckOptions options;
};

Problem problem(std::uint64_t seed, Mistake mistake, Format out_format) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  const Index n = 192, d = 16, heads = 4;
  Problem p;
  p.options.spec.variant = Variant::hla2;
  p.options.spec.decay = Rational(999, 1000);
  p.options.scale = 0.25;  // d^-1/2
  p.options.precision = Format::bf16;
  p.options.output_format = out_format;
  p.options.chunk = 32;
  p.options.threads = 1;
  const auto draw = [&](Index rows, Index cols, double sd) {
    Matrix<double> m(rows, cols);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = round_to(Format::bf16, sd * normal(rng));
    return m;
  };
  for (Index h = 0; h < heads; ++h) {
    HeadInput head{0, h, {draw(n, d, 1), draw(n, d, 0.25), draw(n, d, 1)}, {}};
    const bool this_head = mistake != Mistake::missing_scale || h == 1;
    const float scale = this_head && mistake == Mistake::missing_scale ? 1.0f : 0.25f;
    head.output =
        user_kernel<float>(head.tokens, 0.999f, scale, this_head ? mistake : Mistake::none, out_format);
    p.heads.push_back(std::move(head));
  }
  return p;
}

}  // namespace

TEST_CASE("check/rounding to bf16 f16 and f32 is to nearest with ties to even", "[check]") {
  CHECK(round_to(Format::bf16, 1 + 0x1p-8) == 1);               // a tie: to even
  CHECK(round_to(Format::bf16, 1 + 3 * 0x1p-8) == 1 + 0x1p-6);  // a tie: to even, upwards
  CHECK(round_to(Format::bf16, 1 + 0x1p-8 + 0x1p-30) == 1 + 0x1p-7);
  CHECK(round_to(Format::f16, 65504) == 65504);
  CHECK(round_to(Format::f16, 65520) == INFINITY);  // halfway to 2^16: rounds to infinity
  CHECK(round_to(Format::f16, 65519) == 65504);
  CHECK(round_to(Format::f16, 0x1p-25) == 0);          // a tie below the smallest subnormal
  CHECK(round_to(Format::f16, 0x1.8p-25) == 0x1p-24);  // above it
  CHECK(round_to(Format::f16, -3 * 0x1p-26) == -0x1p-24);
  CHECK(round_to(Format::f32, 0.1) == double(0.1f));
  CHECK(round_to(Format::f64, 0.1) == 0.1);
  // Exactly one rounding from double: 1 + 2^-8 + 2^-40 rounds up in bf16 (rounding to float first
  // would give the tie 1 + 2^-8, then 1).
  CHECK(round_to(Format::bf16, 1 + 0x1p-8 + 0x1p-40) == 1 + 0x1p-7);
}

TEST_CASE("check/correct kernels pass on every seed", "[check]") {
  const std::uint64_t seed = test_seed();
  double largest = 0;  // of the tight ratio, printed: docs/check.md quotes it
  for (const Format out : {Format::bf16, Format::f32}) {
    for (const Mistake m : {Mistake::none, Mistake::other_order}) {
      for (std::uint64_t i = 0; i < 4; ++i) {
        INFO("seed " << seed + i << " (HLA_CHECK_SEED), output " << format_name(out) << ", order " << int(m));
        const Problem p = problem(seed + i, m, out);
        const CheckResult r = check(p.options, p.heads);
        INFO(check_summary(r, p.options));
        CHECK(r.passed);
        CHECK(r.sound);
        CHECK(r.tight);
        CHECK(r.undefined == 0);
        CHECK(r.outputs == 4 * 192 * 16);
        largest = std::max(largest, r.tight_ratio);
      }
    }
  }
  std::cout << "largest tight ratio of a correct kernel: " << largest << "\n";
}

TEST_CASE("check/correct recurrent and chunked kernels in float64 float32 and bf16 pass up to d = 128",
          "[check]") {
  const std::uint64_t seed = test_seed();
  struct Case {
    Format precision, out;  // inputs, output; float64 arithmetic for f64, float32 otherwise
    bool chunked;           // at gamma = 1; recurrent at gamma = 0.999
    Index n, d;
  };
  for (const Case& c :
       {Case{Format::f64, Format::f64, false, 48, 8}, Case{Format::f64, Format::f64, true, 48, 8},
        Case{Format::f32, Format::f32, false, 128, 32}, Case{Format::f32, Format::f32, true, 128, 32},
        Case{Format::bf16, Format::bf16, true, 128, 64}, Case{Format::bf16, Format::f32, false, 96, 64},
        Case{Format::bf16, Format::bf16, false, 64, 128}, Case{Format::bf16, Format::f32, true, 64, 128}}) {
    for (std::uint64_t i = 0; i < 3; ++i) {
      INFO("seed " << seed + i << " (HLA_CHECK_SEED), inputs " << format_name(c.precision) << ", output "
                   << format_name(c.out) << (c.chunked ? ", chunked" : ", recurrent") << ", n = " << c.n
                   << ", d = " << c.d);
      std::mt19937_64 rng(seed + i);
      std::normal_distribution<double> normal;
      const double scale = 1 / std::sqrt(double(c.d));
      const auto draw = [&] {
        Matrix<double> m(c.n, c.d);
        for (Index j = 0; j < m.size(); ++j) m.data()[j] = round_to(c.precision, normal(rng));
        return m;
      };
      CheckOptions options;
      options.spec.variant = Variant::hla2;
      options.spec.decay = c.chunked ? Rational(1) : Rational(999, 1000);
      options.scale = round_to(c.precision == Format::f64 ? Format::f64 : Format::f32, scale);
      options.precision = c.precision;
      options.output_format = c.out;
      options.chunk = 16;
      options.threads = 1;
      HeadInput head{0, 0, {draw(), draw(), draw()}, {}};
      if (c.precision == Format::f64) {
        head.output = c.chunked
                          ? chunked_kernel<double>(head.tokens, options.scale, 16, c.out)
                          : user_kernel<double>(head.tokens, 0.999, options.scale, Mistake::none, c.out);
        options.spec.decay = c.chunked ? Rational(1) : exact_value(0.999);
      } else {
        const float g = 0.999f, s32 = float(options.scale);
        head.output = c.chunked ? chunked_kernel<float>(head.tokens, s32, 16, c.out)
                                : user_kernel<float>(head.tokens, g, s32, Mistake::none, c.out);
        if (!c.chunked) options.spec.decay = exact_value(double(g));  // the kernel's decay, 0.999f
      }
      const CheckResult r = check(options, {head});
      INFO(check_summary(r, options));
      CHECK(r.passed);
      CHECK(r.sound);
      CHECK(r.tight);
    }
  }
}

TEST_CASE("check/the mistakes kernel authors make fail", "[check]") {
  const std::uint64_t seed = test_seed();
  struct Case {
    Mistake mistake;
    const char* what;
    std::optional<std::string> diagnosis;  // the closest match, or none
  };
  for (const Case& c :
       {Case{Mistake::decay_exponent, "G = g G + g k k^T C: the decay exponent off by one", {"decay-once"}},
        Case{Mistake::printed_decay, "G = g G + k k^T C: Sec. 4.3 as printed", {"sec-4.3"}},
        Case{Mistake::dropped_carry, "the carry dropped at one chunk boundary", std::nullopt},
        Case{Mistake::missing_scale, "the query scale missing on one head of four", {"no-scale"}}}) {
    for (const Format out : {Format::bf16, Format::f32}) {
      INFO(c.what << ", output " << format_name(out) << ", seed " << seed << " (HLA_CHECK_SEED)");
      const Problem p = problem(seed, c.mistake, out);
      const CheckResult r = check(p.options, p.heads);
      INFO(check_summary(r, p.options));
      CHECK_FALSE(r.passed);
      CHECK_FALSE(r.tight);
      if (c.diagnosis) {
        REQUIRE_FALSE(r.matches.empty());
        CHECK(r.matches.front() == *c.diagnosis);
      } else {
        CHECK(r.matches.empty());
      }
      if (c.mistake == Mistake::dropped_carry) {
        REQUIRE(r.first_departure);
        CHECK(r.first_departure->token == 96);  // where the carry was lost
      }
      if (c.mistake == Mistake::missing_scale) {
        REQUIRE(r.first_departure);
        CHECK(r.first_departure->head == 1);
        CHECK(r.worst.head == 1);
      }
    }
  }
}

TEST_CASE("check/the criterion sound accepts what is within the sound bound alone", "[check]") {
  const std::uint64_t seed = test_seed();
  Problem p = problem(seed, Mistake::none, Format::f32);
  for (HeadInput& h : p.heads) h.output.row(50) *= 1 + 0x1p-10;  // a bump within the loose bound
  const CheckResult tight = check(p.options, p.heads);
  INFO(check_summary(tight, p.options) << "seed " << seed);
  CHECK(tight.sound);
  CHECK_FALSE(tight.tight);
  CHECK_FALSE(tight.passed);
  REQUIRE(tight.first_departure);
  CHECK(tight.first_departure->token == 50);
  p.options.criterion = Criterion::sound;
  CHECK(check(p.options, p.heads).passed);
}

TEST_CASE("check/every diagnosis form is reachable: an output that is the form is named", "[check]") {
  const std::uint64_t seed = test_seed();
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal;
  struct Options {
    Variant variant;
    bool normalize;
    Rational decay;
  };
  std::set<std::string> named_forms;
  for (const Options& o :
       {Options{Variant::hla2, false, Rational(99, 100)}, Options{Variant::hla2, true, Rational(99, 100)},
        Options{Variant::ahla, true, Rational(99, 100)}, Options{Variant::hla2, false, Rational(1)},
        Options{Variant::ahla, false, Rational(1)}, Options{Variant::hla3, false, Rational(1)}}) {
    CheckOptions options;
    options.spec.variant = o.variant;
    options.spec.normalize = o.normalize;
    options.spec.eps = o.normalize ? Rational(1, 2) : Rational(0);
    options.spec.decay = o.decay;
    options.scale = 0.5;
    options.precision = Format::f32;
    options.chunk = 8;
    options.threads = 1;
    const Index n = 48, d = 4;
    const auto draw = [&](double sd) {
      Matrix<double> m(n, d);
      for (Index i = 0; i < m.size(); ++i) m.data()[i] = round_to(Format::f32, sd * normal(rng));
      return m;
    };
    // Positive keys and queries keep the normalized denominators away from zero.
    HeadInput head{0, 0, {draw(1).cwiseAbs(), draw(0.5).cwiseAbs(), draw(1)}, {}};
    const Sequence<double> scaled{head.tokens.q * options.scale, head.tokens.k, head.tokens.v};
    for (const DiagnosisForm& f : diagnosis_forms(options, d, d)) {
      INFO(variant_name(o.variant) << (o.normalize ? " normalized" : "") << ", form " << f.id << ", seed "
                                   << seed);
      head.output =
          f.output(scaled, head.tokens).unaryExpr([](double x) { return round_to(Format::f32, x); });
      const CheckResult r = check(options, {head});
      INFO(check_summary(r, options));
      CHECK_FALSE(r.passed);
      // Named among the closest (signed-clamp and clamp coincide where every denominator is positive).
      const auto named =
          std::find_if(r.diagnosis.begin(), r.diagnosis.end(), [&](const auto& x) { return x.id == f.id; });
      REQUIRE(named != r.diagnosis.end());
      CHECK(named->ratio == r.diagnosis.front().ratio);
      CHECK(std::find(r.matches.begin(), r.matches.end(), f.id) != r.matches.end());
      named_forms.insert(f.id);
    }
  }
  // Every mistake of the catalogue was among them (eps-policy as eps-policy-<policy>,
  // other-operator as ahla or hla2).
  for (const fast::Mistake& m : fast::mistakes()) {
    INFO("the catalogue's mistake " << m.id);
    const std::string id(m.id);
    CHECK(std::any_of(named_forms.begin(), named_forms.end(), [&](const std::string& f) {
      return f == id || f.rfind(id + "-", 0) == 0 || (id == "other-operator" && (f == "ahla" || f == "hla2"));
    }));
  }
}
