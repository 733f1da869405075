#include "hla/reports/backward_bound.hpp"

#include <cmath>

#include "hla/reports/candidates.hpp"

namespace hla::reports {

namespace {

constexpr double slack = 1 + 0x1p-48;  // room for the few roundings of these formulas in double

}  // namespace

Terms<double> adjoint_error(const OperatorSpec& spec, int bits, const Matrix<double>& d_out,
                            const Terms<double>& readouts, const Terms<double>& readout_gauge,
                            const Terms<std::int64_t>& readout_depth) {
  const Index n = d_out.rows(), dv = d_out.cols();
  Terms<double> out{Matrix<double>::Zero(n, dv), Vector<double>::Zero(n)};
  if (!spec.normalize) return out;  // c_hat = (dO, 0) exactly
  const double eps = to_double(spec.eps);
  const auto gamma = [bits](std::int64_t k) { return gamma_bound(k, bits); };
  // The run adds eps rounded to its precision, this code eps rounded to double: each within
  // eps_error of the exact eps.
  const double eps_error = eps * (std::ldexp(1.0, -bits) + 0x1p-53) * slack;
  for (Index t = 0; t < n; ++t) {
    // D = den + eps exactly; the run divides by D_hat = fl(den_hat + eps_run), den_hat within N of
    // den, so den_hat + eps_run is within N' = N + eps_error of D.
    const double n_den = (gamma(readout_depth.den(t)) * readout_gauge.den(t) + eps_error) * slack;
    // center is within 2^-53 |center| + eps_error of den_hat + eps_run, plus 2^-53 |den_hat| where
    // den_hat was rounded from MPFR to double.
    const double center = readouts.den(t) + eps;
    const double off = (eps_error + (bits > 53 ? std::abs(readouts.den(t)) * 0x1p-53 : 0)) * slack;
    const double d_up = (std::abs(center) * (1 + 0x1p-52) + off) * slack;
    const double d_down = (std::abs(center) * (1 - 0x1p-52) - off) / slack;
    // c_num = dO / D; the run's dO / D_hat, rounded, is dO / D'' with |D'' - (den_hat + eps)| <=
    // gamma(2) |den_hat + eps| (two roundings). So |D'' - D| <= e_d, and both exceed `low`.
    const double e_d = (n_den + gamma(2) * d_up) * slack;
    const double low = d_down - e_d - std::abs(center) * 0x1p-52;
    // c_den = -(dO . num) / D^2; the run's -fl(W_hat / fl(D_hat D_hat)) is -W_hat / S'' with
    // |S'' - (den_hat + eps)^2| <= gamma(4) (den_hat + eps)^2, and |D^2 - (den_hat + eps)^2| <= N (2 |D~| +
    // N).
    const double e_s = (gamma(4) * d_up * d_up + n_den * (2 * d_up + n_den)) * slack;
    const double low_s =
        std::min(d_down * d_down * (1 - gamma(4)), (d_down - n_den) * (d_down - n_den)) / slack;
    if (!(low > 0) || !(d_down > n_den) || !(low_s > 0)) {
      out.num.row(t).setConstant(INFINITY);
      out.den(t) = INFINITY;
      continue;
    }
    // W = dO . num, formed in dv products: |W_hat - W| <= gamma(dv) A + sum |dO| N_num, |W_hat| <= (1 +
    // gamma(dv)) A.
    double a = 0, e_w = 0;
    for (Index c = 0; c < dv; ++c) {
      const double g = std::abs(d_out(t, c));
      a += g * std::abs(readouts.num(t, c));
      e_w += g * gamma(readout_depth.num(t, c)) * readout_gauge.num(t, c);
      out.num(t, c) = g * e_d / (low * low) * slack;
    }
    a *= slack;
    e_w = (e_w + gamma(dv) * a) * slack;
    const double w = (1 + gamma(dv)) * a * slack;
    out.den(t) = (e_w / low_s + (w + e_w) * e_s / (low_s * low_s)) * slack;
  }
  return out;
}

Gradients<double> gradient_gauge_upper_bound(const Gradients<double>& computed,
                                             const Gradients<std::int64_t>& depth) {
  const auto up = [](const Matrix<double>& g, const Matrix<std::int64_t>& k) {
    Matrix<double> out(g.rows(), g.cols());
    for (Index i = 0; i < g.size(); ++i) {
      const double x = g.data()[i] / (1 - gamma_bound(k.data()[i], 53)) * (1 + 0x1p-50);
      out.data()[i] = x < INFINITY ? x : INFINITY;  // NaN (0 times an infinite adjoint error) too
    }
    return out;
  };
  return {up(computed.dq, depth.dq), up(computed.dk, depth.dk), up(computed.dv, depth.dv), {}, {}};
}

namespace {

Gradients<double> gradient_bound(int bits, const Gradients<std::int64_t>& depth, const Gradients<double>& g1,
                                 const Gradients<double>& g2) {
  const auto bound = [bits](const Matrix<std::int64_t>& k, const Matrix<double>& a, const Matrix<double>& b) {
    Matrix<double> out(a.rows(), a.cols());
    for (Index i = 0; i < a.size(); ++i) {
      const double x = (gamma_bound(k.data()[i], bits) * a.data()[i] + b.data()[i]) * (1 + 0x1p-50);
      out.data()[i] = x < INFINITY ? x : INFINITY;
    }
    return out;
  };
  return {
      bound(depth.dq, g1.dq, g2.dq), bound(depth.dk, g1.dk, g2.dk), bound(depth.dv, g1.dv, g2.dv), {}, {}};
}

}  // namespace

BackwardBound backward_bound(const OperatorSpec& spec, int bits, const Matrix<double>& d_out,
                             const Terms<double>& readouts, const Terms<double>& adjoints,
                             const Gradients<std::int64_t>& depth,
                             const std::function<Gradients<double>(const Terms<double>&)>& gauge_of) {
  // |c_hat|, rounded up past a rounding to nearest of an MPFR value
  const Terms<double> magnitude{adjoints.num.cwiseAbs() * (1 + 0x1p-52),
                                adjoints.den.cwiseAbs() * (1 + 0x1p-52)};
  const Gradients<double> g1 = gauge_of(magnitude);
  BackwardBound out;
  out.gauge = gradient_gauge_upper_bound(g1, depth);
  out.gauge.terms = gauge_upper_bound(g1.terms, depth.terms);
  Gradients<double> g2{Matrix<double>::Zero(g1.dq.rows(), g1.dq.cols()),
                       Matrix<double>::Zero(g1.dk.rows(), g1.dk.cols()),
                       Matrix<double>::Zero(g1.dv.rows(), g1.dv.cols()),
                       {},
                       {}};
  if (spec.normalize)
    g2 = gradient_gauge_upper_bound(
        gauge_of(adjoint_error(spec, bits, d_out, readouts, out.gauge.terms, depth.terms)), depth);
  out.bound = gradient_bound(bits, depth, out.gauge, g2);
  return out;
}

}  // namespace hla::reports
