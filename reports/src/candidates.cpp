#include "hla/reports/candidates.hpp"

#include <bit>
#include <cmath>
#include <limits>

#include "hla/checking/instances.hpp"
#include "hla/fast/gpu_types.hpp"

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

struct Streaming {
  template <class T>
  Terms<T> operator()(const OperatorSpec& spec, const Sequence<T>& s, Index) const {
    return fast::streaming_terms(spec, fast::default_form(spec, Implementation::streaming), s);
  }
};
struct Scan {
  template <class T>
  Terms<T> operator()(const OperatorSpec& spec, const Sequence<T>& s, Index chunk) const {
    return fast::scan_terms(spec, fast::default_form(spec, Implementation::scan), s,
                            fast::ScanOptions{chunk, 1});
  }
};
struct Chunked {
  template <class T>
  Terms<T> operator()(const OperatorSpec& spec, const Sequence<T>& s, Index chunk) const {
    return fast::chunked_terms(spec, fast::default_form(spec, Implementation::chunked), s,
                               fast::ScanOptions{chunk, 1});
  }
};

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
  out.push_back(
      {name, "float64", InputFormat::f64, 53, uses_chunk, !uses_chunk, covers, in_double, gauge, depth24});
  out.push_back(
      {name, "float32", InputFormat::f32, 24, uses_chunk, !uses_chunk, covers, in_float, gauge, depth24});
  // bf16 storage, float32 arithmetic: u = 2^-24 for the arithmetic measured here.
  out.push_back({name, "bf16-in/f32", InputFormat::bf16, 24, uses_chunk, !uses_chunk, covers, in_float, gauge,
                 depth24});
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

std::vector<Candidate> cpu_candidates() {
  std::vector<Candidate> out;
  add_rows<Streaming>(out, Implementation::streaming, false);
  add_rows<Scan>(out, Implementation::scan, true);
  add_rows<Chunked>(out, Implementation::chunked, true);
  return out;
}

}  // namespace hla::reports
