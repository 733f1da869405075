// Floating-point streaming against the exact reference, within an a-priori bound.
//
// Bound (docs/operators.md, "Rounding"): every streaming state is a sum of monomials in the
// inputs built by + and x, and each monomial of a state at token t passes through at most
// K_t = (order + 1) (2t + 2d + 4) roundings (2 per recurrence step, d per dot product, 1 per
// product, for each of the at most order + 1 factors). With exactly representable inputs and
// dyadic gamma, ridge and eps, the standard model fl(a op b) = (a op b)(1 + delta), |delta| <= u,
// gives componentwise
//     |num_hat_t - num_t| <= gamma(K_t) * gauge_t,   gamma(K) = K u / (1 - K u),
// with u = 2^-53, 2^-24 and 2^-261 for double, float and Mpfr, where gauge_t is the same algorithm run on
// |q|, |k|, |v| with every subtraction turned into an addition (Gauge). Likewise for den_t.

#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>

#include "hla/checking/instances.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/random.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

namespace {

template <class F>
Rational u() {
  return power(Rational(1, 2), std::numeric_limits<F>::digits);  // unit roundoff 2^-p
}

// K_t for streaming at token t (0-based).
Rational depth_bound(const OperatorSpec& spec, Index t, Index d) {
  return Rational((order(spec.variant) + 1) * (2 * (t + 1) + 2 * d + 4));
}

// |rounded - exact| <= gamma(K) gauge for row t, numerator and denominator.
template <class F>
void check_within_bound(const Terms<Rational>& exact, const Terms<F>& rounded,
                        const Terms<Gauge<Rational>>& gauge, Index t, const Rational& depth,
                        const Rational& unit_roundoff) {
  const Rational factor = depth * unit_roundoff / (1 - depth * unit_roundoff);  // gamma(K)
  for (Index c = 0; c < exact.num.cols(); ++c) {
    RC_ASSERT(abs(exact_value(rounded.num(t, c)) - exact.num(t, c)) <= factor * gauge.num(t, c).value());
  }
  RC_ASSERT(abs(exact_value(rounded.den(t)) - exact.den(t)) <= factor * gauge.den(t).value());
}

// Gaussian inputs scaled by 1/sqrt(d), rounded to F, held as exact rationals.
template <class F>
Sequence<Rational> representable_gaussian(std::uint64_t seed, Index n, Index d, Index dv) {
  Rng rng(seed);
  Sequence<Rational> s = gaussian_sequence(rng, n, d, dv);
  for (Matrix<Rational>* m : {&s.q, &s.k, &s.v}) {
    *m = m->unaryExpr([](const Rational& x) { return exact_value(from_rational<F>(x)); });
  }
  return s;
}

}  // namespace

TEMPLATE_TEST_CASE("rounding/floating streaming stays within the a-priori bound", "[rounding]", double, float,
                   Mpfr) {
  using F = TestType;
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": |num_hat - num| <= gamma(K_t) gauge_t",
        [variant] {
          OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          spec.decay =
              *rc::gen::element(Rational(1), Rational(1, 2), Rational(3, 4), Rational(7, 8)).as("gamma");
          const auto seed = *rc::gen::arbitrary<std::uint64_t>().as("input seed");
          const auto n = *testing::gen_position(0, 65).as("n");
          const auto d = *testing::gen_position(1, 9).as("d");
          const auto dv = *testing::gen_position(1, 9).as("dv");
          const Sequence<Rational> s = representable_gaussian<F>(seed, n, d, dv);
          const fast::Form form = fast::default_form(spec, fast::Implementation::streaming);
          const Terms<Rational> exact = reference::terms(spec, s);
          const Terms<F> rounded = fast::streaming_terms(spec, form, convert<F>(s));
          const Sequence<Gauge<Rational>> magnitudes{s.q.cast<Gauge<Rational>>(), s.k.cast<Gauge<Rational>>(),
                                                     s.v.cast<Gauge<Rational>>()};
          const Terms<Gauge<Rational>> gauge = fast::streaming_terms(spec, form, magnitudes);
          for (Index t = 0; t < n; ++t) {
            check_within_bound(exact, rounded, gauge, t, depth_bound(spec, t, d), u<F>());
          }
        },
        25);
  }
}

// The scan's bound: a token's contribution passes through at most L = 2 ceil(log2 C) +
// 2 ceil(log2 B) + 4 combines (up- and down-sweep within the chunk and across the B chunks, then
// the local inclusion); each field's rounding depth grows by at most 2 per combine for the moments
// and by the sum of its factors' depths plus d + 4 for a cross-term, so every field of an
// order-r summary stays below (r + 1)(2L + 2d + 8), read-out included. gamma in {1, 1/2} keeps
// every attenuation rho = gamma^l exact.
TEMPLATE_TEST_CASE("rounding/floating scan stays within the a-priori bound", "[rounding][scan]", double,
                   float) {
  using F = TestType;
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) + ": |num_hat - num| <= gamma(K) gauge",
        [variant] {
          OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          spec.decay = *rc::gen::element(Rational(1), Rational(1, 2)).as("gamma");
          const auto seed = *rc::gen::arbitrary<std::uint64_t>().as("input seed");
          const auto n = *testing::gen_position(0, 65).as("n");
          const auto d = *testing::gen_position(1, 9).as("d");
          const auto dv = *testing::gen_position(1, 9).as("dv");
          fast::ScanOptions options;
          options.chunk = *testing::gen_position(1, 17).as("chunk");
          options.threads = static_cast<int>(*testing::gen_position(1, 3).as("threads"));
          const Sequence<Rational> s = representable_gaussian<F>(seed, n, d, dv);
          const fast::Form form = fast::default_form(spec, fast::Implementation::scan);
          const Terms<Rational> exact = reference::terms(spec, s);
          const Terms<F> rounded = fast::scan_terms(spec, form, convert<F>(s), options);
          const Sequence<Gauge<Rational>> magnitudes{s.q.cast<Gauge<Rational>>(), s.k.cast<Gauge<Rational>>(),
                                                     s.v.cast<Gauge<Rational>>()};
          const Terms<Gauge<Rational>> gauge = fast::scan_terms(spec, form, magnitudes, options);
          const auto log2_ceil = [](Index x) {
            return x <= 1 ? 0 : 64 - std::countl_zero(std::uint64_t(x - 1));
          };
          const Index chunks = (n + options.chunk - 1) / options.chunk;
          const Index levels = 2 * log2_ceil(options.chunk) + 2 * log2_ceil(chunks) + 4;
          const Rational depth = Rational((order(spec.variant) + 1) * (2 * levels + 2 * d + 8));
          for (Index t = 0; t < n; ++t) check_within_bound(exact, rounded, gauge, t, depth, u<F>());
        },
        25);
  }
}

TEST_CASE("rounding/the bound is not vacuous", "[rounding]") {
  // On Gaussian inputs the observed error is far below the worst case but far above zero, so the
  // bound tests a real quantity: a dropped cross-term (F1) would exceed it by many orders.
  OperatorSpec spec;
  spec.variant = Variant::hla2;
  spec.decay = Rational(1, 2);
  const Sequence<Rational> s = representable_gaussian<double>(7, 32, 4, 4);
  const Terms<Rational> exact = reference::terms(spec, s);
  const Terms<double> published = fast::streaming_terms(spec, fast::Form::published, convert<double>(s));
  const Terms<double> corrected = fast::streaming_terms(spec, fast::Form::corrected, convert<double>(s));
  const double scale = to_double(Rational(exact.num.cwiseAbs().maxCoeff()));
  const auto worst = [&](const Terms<double>& x) {
    double e = 0;
    for (Index t = 0; t < 32; ++t) {
      for (Index c = 0; c < 4; ++c) e = std::max(e, std::abs(x.num(t, c) - to_double(exact.num(t, c))));
    }
    return e / scale;
  };
  CHECK(worst(corrected) < 1e-13);
  CHECK(worst(published) > 1e-3);
}

// The backward (fast/backward.hpp) of an unnormalized operator: every entry of dQ, dK, dV is a
// polynomial in q, k, v and dO built by + and x, so the argument above applies entry by entry,
// with K from the same backward run on checking::Depth (the roundings any monomial may pass
// through, whatever order the sums take: checking/depth.hpp) and the gauge from the same
// backward run on |q|, |k|, |v|, |dO| in Gauge (subtractions as additions):
//     |g_hat - g| <= gamma(K) gauge  for every entry g of dQ, dK, dV.
TEMPLATE_TEST_CASE(
    "rounding/floating streaming scan and chunked backward stay within gamma(K) times their gauge",
    "[rounding][backward]", double, float) {
  using F = TestType;
  using D = checking::Depth<std::numeric_limits<F>::digits>;
  using fast::Implementation;
  for (const Implementation impl : {Implementation::streaming, Implementation::scan, Implementation::chunked})
    for (const Variant variant : all_variants) {
      property(
          std::string(variant_name(variant)) + ": " + std::string(fast::implementation_name(impl)) +
              " backward, |g_hat - g| <= gamma(K) gauge",
          [impl, variant] {
            OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            spec.normalize = false;  // the bound is for polynomials: num and den, not their quotient
            spec.eps = 0;
            spec.decay =
                *rc::gen::element(Rational(1), Rational(1, 2), Rational(3, 4), Rational(7, 8)).as("gamma");
            const auto seed = *rc::gen::arbitrary<std::uint64_t>().as("input seed");
            const auto n = *testing::gen_position(1, 33).as("n");
            const auto d = *testing::gen_position(1, 7).as("d");
            const auto dv = *testing::gen_position(1, 7).as("dv");
            const Index every = *testing::gen_position(1, n + 2).as("checkpoint or chunk");
            const Sequence<Rational> s = representable_gaussian<F>(seed, n, d, dv);
            const Matrix<Rational> d_out = representable_gaussian<F>(seed + 1, n, 1, dv).v;
            const fast::Form form = fast::default_form(spec, impl);
            RC_PRE(
                !fast::backward_unavailable(spec, impl, form));  // hla3's chunk form is the masked operator's
            const auto backward = [&]<class T>(const Sequence<T>& x, const Matrix<T>& dx) {
              if (impl == Implementation::streaming) return fast::streaming_gradients(spec, form, x, dx, every);
              if (impl == Implementation::chunked)
                return fast::chunked_gradients(spec, form, x, dx, fast::ScanOptions{every, 2});
              return fast::scan_gradients(spec, form, x, dx, fast::ScanOptions{every, 1});
            };
            const Gradients<Rational> exact = reference::gradients(spec, s, d_out);
            const Gradients<F> rounded = backward(convert<F>(s), Matrix<F>(convert<F>(d_out)));
            const auto gauge_of = [](const Matrix<Rational>& m) { return Matrix<Gauge<Rational>>(m.cast<Gauge<Rational>>()); };
            const Gradients<Gauge<Rational>> gauge =
                backward(Sequence<Gauge<Rational>>{gauge_of(s.q), gauge_of(s.k), gauge_of(s.v)}, gauge_of(d_out));
            const auto symbolic = [](Index rows, Index cols) { return Matrix<D>(Matrix<D>::Constant(rows, cols, D::input())); };
            const Gradients<D> depth =
                backward(Sequence<D>{symbolic(n, d), symbolic(n, d), symbolic(n, dv)}, symbolic(n, dv));
            const Rational unit = u<F>();
            const auto within = [&](const Matrix<Rational>& g, const Matrix<F>& g_hat, const Matrix<Gauge<Rational>>& m,
                                    const Matrix<D>& k) {
              for (Index i = 0; i < g.size(); ++i) {
                const Rational depth_k(k.data()[i].count());
                RC_ASSERT(depth_k * unit < Rational(1, 2));
                const Rational factor = depth_k * unit / (1 - depth_k * unit);
                RC_ASSERT(abs(exact_value(g_hat.data()[i]) - g.data()[i]) <= factor * m.data()[i].value());
              }
            };
            within(exact.dq, rounded.dq, gauge.dq, depth.dq);
            within(exact.dk, rounded.dk, gauge.dk, depth.dk);
            within(exact.dv, rounded.dv, gauge.dv, depth.dv);
          },
          25);
    }
}
