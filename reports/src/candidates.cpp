#include "hla/reports/candidates.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "hla/checking/instances.hpp"
#include "hla/fast/gpu_types.hpp"
#include "hla/reports/backward_bound.hpp"

namespace hla::reports {

std::string_view input_format_name(InputFormat format) {
  switch (format) {
    case InputFormat::f64:
      return "float64";
    case InputFormat::f32:
      return "float32";
    case InputFormat::bf16:
      return "bf16";
  }
  return "?";
}

double round_input(InputFormat format, double x) {
  switch (format) {
    case InputFormat::f64:
      return x;
    case InputFormat::f32:
      return static_cast<float>(x);
    case InputFormat::bf16: {
      const auto bits = std::bit_cast<std::uint32_t>(static_cast<float>(x));
      return std::bit_cast<float>(std::uint32_t(fast::gpu::bfloat16_from_float_bits(bits).bits) << 16);
    }
  }
  return x;
}

namespace {

using checking::Depth;
using fast::Implementation;

template <class T>
Terms<double> widen(const Terms<T>& t) {
  const auto to = [](const T& x) { return static_cast<double>(x); };
  return {t.num.unaryExpr(to), t.den.unaryExpr(to)};
}

template <int Bits>
Terms<std::int64_t> counts(const Terms<Depth<Bits>>& t) {
  return {t.num.unaryExpr([](const Depth<Bits>& x) { return x.count(); }),
          t.den.unaryExpr([](const Depth<Bits>& x) { return x.count(); })};
}

// Runs one algorithm (a generic callable over the number type) in F.
template <class F, class Algorithm>
CandidateRun run_in(const Algorithm& algorithm, const OperatorSpec& spec, const Sequence<double>& s,
                    Index chunk) {
  const Sequence<F> working{s.q.cast<F>(), s.k.cast<F>(), s.v.cast<F>()};
  const Terms<F> terms = algorithm(spec, working, chunk);
  CandidateRun out;
  out.terms = widen(terms);
  out.output = reference::finish(spec, terms).template cast<double>();
  return out;
}

// The same algorithm in Gauge<double>, on |q|, |k|, |v|.
template <class Algorithm>
Terms<double> gauge_of(const Algorithm& algorithm, const OperatorSpec& spec, const Sequence<double>& s,
                       Index chunk) {
  using G = Gauge<double>;
  const Sequence<G> magnitudes{s.q.cast<G>(), s.k.cast<G>(), s.v.cast<G>()};
  const Terms<G> gauge = algorithm(spec, magnitudes, chunk);
  return {gauge.num.unaryExpr([](const G& x) { return x.value(); }),
          gauge.den.unaryExpr([](const G& x) { return x.value(); })};
}

// The same algorithm on symbolic inputs: rounding depths for a significand of `Bits` bits.
template <int Bits, class Algorithm>
Depths depth_in(const Algorithm& algorithm, const OperatorSpec& spec, Index n, Index d, Index dv,
                Index chunk) {
  using D = Depth<Bits>;
  const auto input = [](Index rows, Index cols) { return Matrix<D>::Constant(rows, cols, D::input()); };
  return counts(algorithm(spec, Sequence<D>{input(n, d), input(n, d), input(n, dv)}, chunk));
}

// Each algorithm forward (operator()) and backward (gradients), generic over the number type.
struct Streaming {
  static constexpr Implementation impl = Implementation::streaming;
  template <class T>
  Terms<T> operator()(const OperatorSpec& spec, const Sequence<T>& s, Index) const {
    return fast::streaming_terms(spec, fast::default_form(spec, impl), s);
  }
  template <class T>
  Gradients<T> gradients(const OperatorSpec& spec, const Sequence<T>& s, const Upstream<T>& upstream,
                         Index) const {
    return fast::streaming_gradients<T>(spec, fast::default_form(spec, impl), s, upstream);
  }
};
struct Scan {
  static constexpr Implementation impl = Implementation::scan;
  template <class T>
  Terms<T> operator()(const OperatorSpec& spec, const Sequence<T>& s, Index chunk) const {
    return fast::scan_terms(spec, fast::default_form(spec, impl), s, fast::ScanOptions{chunk, 1});
  }
  template <class T>
  Gradients<T> gradients(const OperatorSpec& spec, const Sequence<T>& s, const Upstream<T>& upstream,
                         Index chunk) const {
    return fast::scan_gradients<T>(spec, fast::default_form(spec, impl), s, upstream,
                                   fast::ScanOptions{chunk, 1});
  }
};
struct Chunked {
  static constexpr Implementation impl = Implementation::chunked;
  template <class T>
  Terms<T> operator()(const OperatorSpec& spec, const Sequence<T>& s, Index chunk) const {
    return fast::chunked_terms(spec, fast::default_form(spec, impl), s, fast::ScanOptions{chunk, 1});
  }
  template <class T>
  Gradients<T> gradients(const OperatorSpec& spec, const Sequence<T>& s, const Upstream<T>& upstream,
                         Index chunk) const {
    return fast::chunked_gradients<T>(spec, fast::default_form(spec, impl), s, upstream,
                                      fast::ScanOptions{chunk, 1});
  }
};

template <class T, class U>
Matrix<T> cast_matrix(const Matrix<U>& m) {
  return m.unaryExpr([](const U& x) { return T(x); });
}

// The backward in F on inputs and dO exactly representable in F, and the readouts' adjoints it
// computed (finish_adjoint of its own readouts, as inside the run).
template <class F, class Algorithm>
BackwardRun backward_in(const Algorithm& algorithm, const OperatorSpec& spec, const Sequence<double>& s,
                        const Matrix<double>& d_out, Index chunk) {
  const Sequence<F> working{s.q.cast<F>(), s.k.cast<F>(), s.v.cast<F>()};
  const Matrix<F> d_out_f = d_out.cast<F>();
  const Gradients<F> g = algorithm.gradients(spec, working, Upstream<F>(d_out_f), chunk);
  const Terms<F> adjoints = reference::finish_adjoint(spec, g.terms, d_out_f);
  return {{g.dq.template cast<double>(), g.dk.template cast<double>(), g.dv.template cast<double>(),
           g.output.template cast<double>(), widen(g.terms)},
          widen(adjoints)};
}

// The backward from given readout adjoints, in Gauge<double> and in Depth<Bits> (backward_bound.hpp).
template <class Algorithm>
Gradients<double> backward_gauge_of(const Algorithm& algorithm, const OperatorSpec& spec,
                                    const Sequence<double>& s, const Terms<double>& adjoints, Index chunk) {
  return backward_gauge(s, adjoints, [&](const auto& seq, const auto& upstream) {
    return algorithm.gradients(spec, seq, upstream, chunk);
  });
}
template <int Bits, class Algorithm>
Gradients<std::int64_t> backward_depth_in(const Algorithm& algorithm, const OperatorSpec& spec, Index n,
                                          Index d, Index dv, Index chunk) {
  return backward_depths<Bits>(spec, n, d, dv, [&](const auto& seq, const auto& upstream) {
    return algorithm.gradients(spec, seq, upstream, chunk);
  });
}

template <class Algorithm>
void add_rows(std::vector<Candidate>& out, Implementation impl, bool uses_chunk) {
  const std::string name(fast::implementation_name(impl));
  const auto covers = [impl](const OperatorSpec& spec) {
    return !fast::unavailable(spec, impl, fast::default_form(spec, impl));
  };
  // Depths are taken with constants exact only when they fit 24 bits, for float64 as well: a
  // constant exact in 24 bits is exact in 53, so these depths bound float64's too (they differ
  // only for gamma = 15/16, whose powers stay exact a few steps longer in double), and one
  // computation serves all three rows.
  const auto depth24 = [](const OperatorSpec& spec, Index n, Index d, Index dv, Index chunk) {
    return depth_in<24>(Algorithm{}, spec, n, d, dv, chunk);
  };
  const auto in_double = [](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
    return run_in<double>(Algorithm{}, spec, s, chunk);
  };
  const auto in_float = [](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
    return run_in<float>(Algorithm{}, spec, s, chunk);
  };
  const auto gauge = [](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
    return gauge_of(Algorithm{}, spec, s, chunk);
  };
  const auto covers_backward = [impl](const OperatorSpec& spec) {
    return !fast::backward_unavailable(spec, impl, fast::default_form(spec, impl));
  };
  const auto backward_double = [](const OperatorSpec& spec, const Sequence<double>& s,
                                  const Matrix<double>& d_out, Index chunk) {
    return backward_in<double>(Algorithm{}, spec, s, d_out, chunk);
  };
  const auto backward_float = [](const OperatorSpec& spec, const Sequence<double>& s,
                                 const Matrix<double>& d_out, Index chunk) {
    return backward_in<float>(Algorithm{}, spec, s, d_out, chunk);
  };
  const auto backward_gauge = [](const OperatorSpec& spec, const Sequence<double>& s,
                                 const Terms<double>& adjoints, Index chunk) {
    return backward_gauge_of(Algorithm{}, spec, s, adjoints, chunk);
  };
  const auto backward_depth24 = [](const OperatorSpec& spec, Index n, Index d, Index dv, Index chunk) {
    return backward_depth_in<24>(Algorithm{}, spec, n, d, dv, chunk);
  };
  const auto row = [&](std::string precision, InputFormat format, int bits, const auto& forward,
                       const auto& backward) {
    Candidate c{name,   std::move(precision), format, bits, uses_chunk, !uses_chunk, covers, forward, gauge,
                depth24};
    c.covers_backward = covers_backward;
    c.backward = backward;
    c.backward_gauge = backward_gauge;
    c.backward_depth = backward_depth24;
    out.push_back(std::move(c));
  };
  row("float64", InputFormat::f64, 53, in_double, backward_double);
  row("float32", InputFormat::f32, 24, in_float, backward_float);
  // bf16 storage, float32 arithmetic: u = 2^-24 for the arithmetic measured here.
  row("bf16-in/f32", InputFormat::bf16, 24, in_float, backward_float);
}

}  // namespace

double gamma_bound(std::int64_t k, int bits) {
  const double ku = std::ldexp(static_cast<double>(k), -bits);
  if (ku >= 0.5) return INFINITY;        // the model gives nothing useful here
  return ku / (1 - ku) * (1 + 0x1p-50);  // room for the two roundings of this formula
}

Terms<double> gauge_upper_bound(const Terms<double>& computed, const Depths& depth) {
  const auto up = [](double value, std::int64_t k) {
    return value / (1 - gamma_bound(k, 53)) * (1 + 0x1p-50);
  };
  Terms<double> out{Matrix<double>(computed.num.rows(), computed.num.cols()),
                    Vector<double>(computed.den.size())};
  for (Index t = 0; t < computed.num.rows(); ++t) {
    for (Index c = 0; c < computed.num.cols(); ++c) out.num(t, c) = up(computed.num(t, c), depth.num(t, c));
    out.den(t) = up(computed.den(t), depth.den(t));
  }
  return out;
}

Terms<double> reference_error_bound(const OperatorSpec& spec, const Sequence<double>& inputs,
                                    const Depths& streaming_depth) {
  // The reference is streaming in MPFR: its depths are at most those for 24 bits (a constant exact
  // in 24 bits is exact in 261), and its gauge is streaming's.
  const Index n = inputs.length();
  Terms<double> out = gauge_upper_bound(gauge_of(Streaming{}, spec, inputs, 0), streaming_depth);
  for (Index t = 0; t < n; ++t) {
    for (Index c = 0; c < out.num.cols(); ++c) out.num(t, c) *= gamma_bound(streaming_depth.num(t, c), 261);
    out.den(t) *= gamma_bound(streaming_depth.den(t), 261);
  }
  return out;
}

Depths streaming_depth(const OperatorSpec& spec, Index n, Index d, Index dv) {
  return depth_in<24>(Streaming{}, spec, n, d, dv, 0);
}

Gradients<Mpfr> reference_gradients(const OperatorSpec& spec, const Sequence<double>& inputs,
                                    const Matrix<double>& d_out) {
  const Sequence<Mpfr> exact{cast_matrix<Mpfr>(inputs.q), cast_matrix<Mpfr>(inputs.k),
                             cast_matrix<Mpfr>(inputs.v)};
  return Streaming{}.gradients(spec, exact, Upstream<Mpfr>(cast_matrix<Mpfr>(d_out)), 0);
}

Gradients<double> streaming_backward_gauge(const OperatorSpec& spec, const Sequence<double>& inputs,
                                           const Terms<double>& adjoints) {
  return backward_gauge_of(Streaming{}, spec, inputs, adjoints, 0);
}

Gradients<std::int64_t> streaming_backward_depth(const OperatorSpec& spec, Index n, Index d, Index dv) {
  return backward_depth_in<24>(Streaming{}, spec, n, d, dv, 0);
}

std::vector<Candidate> cpu_candidates() {
  std::vector<Candidate> out;
  add_rows<Streaming>(out, Implementation::streaming, false);
  add_rows<Scan>(out, Implementation::scan, true);
  add_rows<Chunked>(out, Implementation::chunked, true);
  return out;
}

}  // namespace hla::reports
