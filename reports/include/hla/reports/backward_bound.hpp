#pragma once

// The a-priori rounding bound of a backward pass (docs/error_report.md, "The backward's bound").
//
// A backward run computes c_hat, the adjoints of its readouts num and den, from its own forward
// pass's readouts (reference::finish_adjoint: dO itself and zero when unnormalized), then B(x, c_hat),
// the backward of <c, (num, den)>, which is linear in c. Per entry of dQ, dK, dV:
//   |g_hat - g| <= gamma_b(K) G(|x|, |c_hat|) + G(|x|, E),
// K the backward's rounding depths and G its gauge (the same algorithm started from given readout
// adjoints, in Depth<bits> and in Gauge<double>), and E >= |c_hat - c| entrywise: zero when
// unnormalized; normalized, from the readouts' own bound (gamma_b(K_fwd) times their gauge, both of
// the same run's forward pass) carried through the division by den + eps.

#include <cstdint>
#include <functional>

#include "hla/checking/depth.hpp"
#include "hla/checking/gauge.hpp"
#include "hla/reference/gradient.hpp"
#include "hla/reference/operator_spec.hpp"

namespace hla::reports {

// The bound of one backward run, and the gauge G(|x|, |c_hat|) (an upper bound of the exact one)
// that a componentwise error is measured against.
struct BackwardBound {
  Gradients<double>
      bound;  // infinite where the denominator bound of a token it depends on does not exclude zero
  Gradients<double> gauge;  // .terms: the forward readouts' gauge, an upper bound
};

// @param readouts  the run's forward num and den; `adjoints` c_hat as the run computed them (widened
//                  exactly, or rounded to nearest from MPFR)
// @param depth     the backward's depths in a significand of `bits` bits (or fewer), .terms those of
//                  its forward readouts
// @param gauge_of  the backward from given readout adjoints' magnitudes, on |q|, |k|, |v|, in
//                  Gauge<double> (.terms: its forward readouts' gauge)
BackwardBound backward_bound(const OperatorSpec& spec, int bits, const Matrix<double>& d_out,
                             const Terms<double>& readouts, const Terms<double>& adjoints,
                             const Gradients<std::int64_t>& depth,
                             const std::function<Gradients<double>(const Terms<double>&)>& gauge_of);

// The depths of a backward for n tokens in Depth<Bits>: `run(sequence, upstream)` (any backward,
// generic over the number type) on symbolic inputs and readout adjoints, den's exactly zero when
// unnormalized as finish_adjoint makes it; .terms holds those of its forward readouts.
template <int Bits, class Run>
Gradients<std::int64_t> backward_depths(const OperatorSpec& spec, Index n, Index d, Index dv,
                                        const Run& run) {
  using D = checking::Depth<Bits>;
  const auto input = [](Index rows, Index cols) {
    return Matrix<D>(Matrix<D>::Constant(rows, cols, D::input()));
  };
  const Terms<D> adjoints{input(n, dv),
                          spec.normalize ? Vector<D>(input(n, 1)) : Vector<D>(Vector<D>::Constant(n, D()))};
  const Gradients<D> g =
      run(Sequence<D>{input(n, d), input(n, d), input(n, dv)}, Upstream<D>::readouts(adjoints));
  const auto count = [](const auto& m) {
    return Matrix<std::int64_t>(m.unaryExpr([](const D& x) { return x.count(); }));
  };
  return {count(g.dq),
          count(g.dk),
          count(g.dv),
          {},
          {count(g.terms.num), Vector<std::int64_t>(count(g.terms.den))}};
}

// The same backward in Gauge<double> on |q|, |k|, |v| and the given readout adjoints' magnitudes;
// .terms holds its forward readouts' gauge.
template <class Run>
Gradients<double> backward_gauge(const Sequence<double>& s, const Terms<double>& adjoints, const Run& run) {
  using G = Gauge<double>;
  const Terms<G> magnitudes{adjoints.num.cast<G>(), adjoints.den.cast<G>()};
  const Gradients<G> g =
      run(Sequence<G>{s.q.cast<G>(), s.k.cast<G>(), s.v.cast<G>()}, Upstream<G>::readouts(magnitudes));
  const auto value = [](const auto& m) {
    return Matrix<double>(m.unaryExpr([](const G& x) { return x.value(); }));
  };
  return {
      value(g.dq), value(g.dk), value(g.dv), {}, {value(g.terms.num), Vector<double>(value(g.terms.den))}};
}

// The gauges of dQ, dK, dV computed in double, bounded from above as gauge_upper_bound does for
// num and den: divided by 1 - gamma_53(K) for the depths K (NaN, from zero times an infinite
// adjoint error, and overflow as infinity).
Gradients<double> gradient_gauge_upper_bound(const Gradients<double>& computed,
                                             const Gradients<std::int64_t>& depth);

// E >= |c_hat - c| entrywise (infinite at a token whose denominator bound does not exclude zero);
// zero unnormalized. `readout_gauge` an upper bound of the readouts' exact gauge.
Terms<double> adjoint_error(const OperatorSpec& spec, int bits, const Matrix<double>& d_out,
                            const Terms<double>& readouts, const Terms<double>& readout_gauge,
                            const Terms<std::int64_t>& readout_depth);

}  // namespace hla::reports
