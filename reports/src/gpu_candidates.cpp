// The GPU rows of the error report: the streaming kernel and the chunk-parallel scan
// (fast/cuda, docs/gpu.md) in float64, float32 and on bf16 inputs with float32 arithmetic, and the
// fast path on the matrix units (bf16 operands, float32 sums), when the build has CUDA and a
// device is present. No GPU kernel uses TF32, so there is no TF32 row.

#include "hla/reports/candidates.hpp"

#if HLA_HAVE_CUDA
#include <bit>

#include "cuda/host.hpp"
#include "hla/checking/instances.hpp"
#include "hla/fast/gpu.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reports/backward_bound.hpp"
#endif

namespace hla::reports {

#if HLA_HAVE_CUDA
namespace {

using fast::Implementation;

// The a-priori depths of docs/gpu.md: streaming K_t = (r + 1)(6 (t + 1) + 3 d + 12); the scan
// K = (r + 1)(6 L + 4 d + 16) with L = 2 C + 2 ceil(log2 B) for B chunks of C tokens.
Depths gpu_depth(const OperatorSpec& spec, Implementation impl, Index n, Index d, Index dv, Index chunk) {
  const std::int64_t r = order(spec.variant);
  Depths out{Matrix<std::int64_t>(n, dv), Vector<std::int64_t>(n)};
  const Index size = std::min<Index>(std::max<Index>(chunk, 1), std::max<Index>(n, 1));
  const Index chunks = (n + size - 1) / size;
  const std::int64_t levels =
      2 * size + 2 * (chunks <= 1 ? 0 : 64 - std::countl_zero(std::uint64_t(chunks - 1)));
  for (Index t = 0; t < n; ++t) {
    const std::int64_t k = impl == Implementation::gpu_streaming ? (r + 1) * (6 * (t + 1) + 3 * d + 12)
                                                                 : (r + 1) * (6 * levels + 4 * d + 16);
    out.num.row(t).setConstant(k);
    out.den(t) = k;
  }
  return out;
}

// The gauge of the GPU's algorithm: the CPU stream (the same recurrences) or the CPU twin of the
// GPU scan's bracketing (fast::chunk_fold_terms), on |q|, |k|, |v|.
Terms<double> gpu_gauge(const OperatorSpec& spec, Implementation impl, const Sequence<double>& s,
                        Index chunk) {
  using G = Gauge<double>;
  const Sequence<G> magnitudes{s.q.cast<G>(), s.k.cast<G>(), s.v.cast<G>()};
  const fast::Form form = fast::default_form(spec, impl);
  const Terms<G> gauge = impl == Implementation::gpu_streaming
                             ? fast::streaming_terms(spec, form, magnitudes)
                             : fast::chunk_fold_terms(spec, form, magnitudes, chunk);
  return {gauge.num.unaryExpr([](const G& x) { return x.value(); }),
          gauge.den.unaryExpr([](const G& x) { return x.value(); })};
}

template <class T>
Terms<double> widen(const Terms<T>& t) {
  return {t.num.template cast<double>(), t.den.template cast<double>()};
}

// A GPU backward in one precision (float64; float32, on float or bf16 inputs): its gradients, its
// forward readouts and their adjoints as it formed them.
template <class F>
BackwardRun gpu_backward(Implementation impl, const OperatorSpec& spec, const Sequence<double>& s,
                         const Matrix<double>& d_out, bool bf16, Index chunk) {
  const fast::Form form = fast::default_form(spec, impl);
  const Sequence<F> inputs{s.q.cast<F>(), s.k.cast<F>(), s.v.cast<F>()};  // exact
  const Matrix<F> d_out_f = d_out.cast<F>();
  const fast::gpu::BackwardOptions options{impl, 0, chunk};
  Gradients<F> g;
  if constexpr (std::is_same_v<F, float>) {
    g = bf16 ? fast::gpu::gradients_bf16(spec, form, {inputs}, {d_out_f}, options).front()
             : fast::gpu::gradients(spec, form, {inputs}, {d_out_f}, options).front();
  } else {
    g = fast::gpu::gradients(spec, form, {inputs}, {d_out_f}, options).front();
  }
  const Terms<F> adjoints = reference::finish_adjoint(spec, g.terms, d_out_f);
  return {{g.dq.template cast<double>(), g.dk.template cast<double>(), g.dv.template cast<double>(),
           g.output.template cast<double>(), widen(g.terms)},
          widen(adjoints)};
}

// The GPU scan's backward on the host in T (Gauge<double>, checking::Depth): the kernels' bodies
// (fast/cuda/host.hpp), so exactly their operations, from the readouts' adjoints `upstream` gives.
template <class T>
Gradients<T> host_scan_backward(const OperatorSpec& spec, const Sequence<T>& s, const Upstream<T>& upstream,
                                Index chunk) {
  const Implementation impl = Implementation::gpu_scan;
  const Index n = s.length(), dv = s.value_dim();
  const Index size = std::min<Index>(std::max<Index>(chunk, 1), std::max<Index>(n, 1));  // as gpu::gradients
  // A readouts' upstream returns its adjoints whatever the readouts; these give only the shapes.
  const Terms<T> adjoints = upstream.adjoint(spec, Terms<T>{Matrix<T>::Zero(n, dv), Vector<T>::Zero(n)});
  Gradients<T> g;
  fast::gpu::with_device_algebra(
      fast::algebra_params<T>(spec, impl, fast::default_form(spec, impl), s.key_dim(), dv),
      [&]<class Algebra>(const Algebra& algebra) {
        if constexpr (Algebra::has_segments && requires { Algebra::carry_adjoint_scratch_size(0, 0); })
          g = fast::gpu::host::device_scan_backward(algebra, s, adjoints, size,
                                                    fast::default_checkpoint(size));
        else
          throw Error("the GPU scan backward of " + describe(spec) + " has no carry adjoint");
      });
  return g;
}

// The GPU backward's rows. The GPU streaming backward computes every entry with the CPU streaming
// backward's operations in its grouping, sums aside (fast/cuda/algebra/common.cuh), so the CPU's
// depths and gauge bound it; the GPU scan's come from its kernels' bodies on the host. Their
// forward readouts (for a normalized operator's adjoints) come from the GPU forward, whose depths
// are the closed forms above (gpu_depth) and gauges its CPU twins' (gpu_gauge).
void add_backward(std::vector<Candidate>& out, Implementation impl) {
  const auto covers_backward = [impl](const OperatorSpec& spec) {
    return !fast::backward_unavailable(spec, impl, fast::default_form(spec, impl));
  };
  const auto gauge = [impl](const OperatorSpec& spec, const Sequence<double>& s,
                            const Terms<double>& adjoints, Index chunk) {
    Gradients<double> g = impl == Implementation::gpu_streaming
                              ? streaming_backward_gauge(spec, s, adjoints)
                              : backward_gauge(s, adjoints, [&](const auto& seq, const auto& upstream) {
                                  return host_scan_backward(spec, seq, upstream, chunk);
                                });
    g.terms = gpu_gauge(spec, impl, s, chunk);
    return g;
  };
  const auto depth = [impl](const OperatorSpec& spec, Index n, Index d, Index dv, Index chunk) {
    Gradients<std::int64_t> k =
        impl == Implementation::gpu_streaming
            ? streaming_backward_depth(spec, n, d, dv)
            : backward_depths<24>(spec, n, d, dv, [&](const auto& seq, const auto& upstream) {
                return host_scan_backward(spec, seq, upstream, chunk);
              });
    k.terms = gpu_depth(spec, impl, n, d, dv, chunk);
    return k;
  };
  for (Candidate& c : out) {
    if (c.implementation != fast::implementation_name(impl)) continue;
    const bool bf16 = c.inputs == InputFormat::bf16;
    c.covers_backward = covers_backward;
    if (c.inputs == InputFormat::f64) {
      c.backward = [impl](const OperatorSpec& spec, const Sequence<double>& s, const Matrix<double>& d_out,
                          Index chunk) { return gpu_backward<double>(impl, spec, s, d_out, false, chunk); };
    } else {
      c.backward = [impl, bf16](const OperatorSpec& spec, const Sequence<double>& s,
                                const Matrix<double>& d_out, Index chunk) {
        return gpu_backward<float>(impl, spec, s, d_out, bf16, chunk);
      };
    }
    c.backward_gauge = gauge;
    c.backward_depth = depth;
  }
}

void add_rows(std::vector<Candidate>& out, Implementation impl) {
  const std::string name(fast::implementation_name(impl));
  const bool uses_chunk = impl == Implementation::gpu_scan;
  const auto covers = [impl](const OperatorSpec& spec) {
    return !fast::unavailable(spec, impl, fast::default_form(spec, impl));
  };
  const auto depth = [impl](const OperatorSpec& spec, Index n, Index d, Index dv, Index chunk) {
    return gpu_depth(spec, impl, n, d, dv, chunk);
  };
  const auto in_double = [impl](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
    const Terms<double> terms =
        fast::gpu::terms(spec, fast::default_form(spec, impl), impl, {s}, chunk).front();
    return CandidateRun{terms, reference::finish(spec, terms)};
  };
  const auto in_float = [impl](bool bf16) {
    return [impl, bf16](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
      const Sequence<float> inputs{s.q.cast<float>(), s.k.cast<float>(), s.v.cast<float>()};  // exact
      const fast::Form form = fast::default_form(spec, impl);
      const Terms<float> terms = bf16 ? fast::gpu::terms_bf16(spec, form, impl, {inputs}, chunk).front()
                                      : fast::gpu::terms(spec, form, impl, {inputs}, chunk).front();
      return CandidateRun{widen(terms), reference::finish(spec, terms).cast<double>()};
    };
  };
  const auto gauge = [impl](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
    return gpu_gauge(spec, impl, s, chunk);
  };
  out.push_back(
      {name, "float64", InputFormat::f64, 53, uses_chunk, !uses_chunk, covers, in_double, gauge, depth});
  out.push_back({name, "float32", InputFormat::f32, 24, uses_chunk, !uses_chunk, covers, in_float(false),
                 gauge, depth});
  out.push_back({name, "bf16-in/f32", InputFormat::bf16, 24, uses_chunk, !uses_chunk, covers, in_float(true),
                 gauge, depth});
  add_backward(out, impl);
}

// The fast path (matrix units, gpu::fast_terms): masked hla2, ahla and hla3, normalized or not, decayed
// or not, on bf16 inputs, for head sizes as fast_covers_width says (the forward: fast_covers_wide_width)
// and any n (a short last chunk reads
// zeros past n). A head whose d or dv is not a multiple of fast_width_step runs padded with zero
// columns to the next one: zeros add nothing to any sum or product, so the outputs are those of the
// unpadded input (the kernel then pads to its tiles' width the same way).

bool fast_covers(const OperatorSpec& spec) {
  return !fast::unavailable(spec, Implementation::gpu_fast, fast::Form::published);
}

// gpu::fast_roundings: b roundings to bf16 (u = 2^-8) and K float32 roundings counted at
// u = 2^-22; since 2^-22 = 2^-14 u and (1 + gamma(a))(1 + gamma(b)) - 1 <= gamma(a + b), a depth of
// b + ceil(K / 2^14) at u = 2^-8 bounds both, for numerators and denominators alike.
std::int64_t one_depth(const fast::gpu::FastRoundings& roundings) {
  return roundings.bf16 + (roundings.float32 + (1 << 14) - 1) / (1 << 14);
}

Depths fast_depth(const OperatorSpec& spec, Index n, Index d, Index dv) {
  const std::int64_t k = one_depth(fast::gpu::fast_roundings(spec.variant, spec.decayed(), n, d, dv));
  return {Matrix<std::int64_t>::Constant(n, dv, k),
          spec.normalize ? Vector<std::int64_t>::Constant(n, k) : Vector<std::int64_t>::Zero(n)};
}

// Zero columns up to the next multiple of fast_width_step: exact, the inputs being bf16 values.
Matrix<float> pad_to_fast_width(const Matrix<double>& m) {
  const Index step = fast::fast_width_step;
  Matrix<float> out = Matrix<float>::Zero(m.rows(), (m.cols() + step - 1) / step * step);
  out.leftCols(m.cols()) = m.cast<float>();
  return out;
}

CandidateRun fast_run(const OperatorSpec& spec, const Sequence<double>& s) {
  const Index n = s.length(), dv = s.value_dim();
  const std::vector<Sequence<float>> heads{
      {pad_to_fast_width(s.q), pad_to_fast_width(s.k), pad_to_fast_width(s.v)}};
  const Terms<float> got = fast::gpu::fast_terms(spec, heads).front();
  Terms<double> terms{got.num.topLeftCorner(n, dv).cast<double>(), got.den.cast<double>()};
  // The outputs as the kernel writes them (normalized: num times a reciprocal per row).
  Matrix<double> output =
      fast::gpu::fast_outputs(spec, heads, false).front().topLeftCorner(n, dv).cast<double>();
  return {std::move(terms), std::move(output), {}, spec.normalize};  // unnormalized: no denominator
}

// The fast backward (gpu::fast_readout_gradients) from the readouts' adjoints it forms from the fast
// path's own terms (finish_adjoint in float32, d_num rounded to bf16 as the kernel reads it: the run's
// c_hat), padded as the forward: zero columns of q, k, dO add nothing, and the gradients' columns past
// d, dv are dropped.
BackwardRun fast_backward_run(const OperatorSpec& spec, const Sequence<double>& s,
                              const Matrix<double>& d_out) {
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
  const std::vector<Sequence<float>> heads{
      {pad_to_fast_width(s.q), pad_to_fast_width(s.k), pad_to_fast_width(s.v)}};
  const Terms<float> terms = fast::gpu::fast_terms(spec, heads).front();
  Terms<float> adjoints = reference::finish_adjoint(spec, terms, pad_to_fast_width(d_out));
  adjoints.num =
      adjoints.num.unaryExpr([](float x) { return fast::gpu::to_float(fast::gpu::to_bfloat16(x)); });
  const Gradients<float> g = fast::gpu::fast_readout_gradients(spec, heads, {adjoints}).front();
  return {{g.dq.topLeftCorner(n, d).cast<double>(),
           g.dk.topLeftCorner(n, d).cast<double>(),
           g.dv.topLeftCorner(n, dv).cast<double>(),
           g.output.topLeftCorner(n, dv).cast<double>(),
           {terms.num.topLeftCorner(n, dv).cast<double>(), terms.den.cast<double>()}},
          {adjoints.num.topLeftCorner(n, dv).cast<double>(), adjoints.den.cast<double>()}};
}

// gpu::fast_backward_roundings as one depth at u = 2^-8, as fast_depth does for the forward.
Gradients<std::int64_t> fast_backward_depth(const OperatorSpec& spec, Index n, Index d, Index dv) {
  const std::int64_t k = one_depth(fast::gpu::fast_backward_roundings(spec, n, d, dv));
  return {Matrix<std::int64_t>::Constant(n, d, k),
          Matrix<std::int64_t>::Constant(n, d, k),
          Matrix<std::int64_t>::Constant(n, dv, k),
          {},
          fast_depth(spec, n, d, dv)};
}

void add_fast_row(std::vector<Candidate>& out) {
  Candidate c{
      "gpu-fast", "bf16-in/bf16-mma", InputFormat::bf16, 8, false, true, fast_covers,
      [](const OperatorSpec& spec, const Sequence<double>& s, Index) { return fast_run(spec, s); },
      // Every monomial of these operators has coefficient +1, so any algorithm's gauge
      // is the operator on |q|, |k|, |v|; the CPU stream's computes it.
      [](const OperatorSpec& spec, const Sequence<double>& s, Index) {
        return gpu_gauge(spec, Implementation::gpu_streaming, s, 0);
      },
      [](const OperatorSpec& spec, Index n, Index d, Index dv, Index) { return fast_depth(spec, n, d, dv); },
      // The forward up to 128 (ahla's keys by value halves, hla2's in two passes, hla3's in three, for
      // few heads composed of causal products), the backward too (wider than 64 composed of them).
      [](const OperatorSpec&, bool) -> Index { return fast::fast_wide_width; }};
  // The backward where the catalogue has it: the gradients of <c_num, num> + <c_den, den> of the masked
  // operators are sums of monomials with positive coefficients too, so the CPU streaming backward's
  // gauge is theirs.
  c.covers_backward = [](const OperatorSpec& spec) {
    return !fast::backward_unavailable(spec, Implementation::gpu_fast, fast::Form::published);
  };
  c.backward = [](const OperatorSpec& spec, const Sequence<double>& s, const Matrix<double>& d_out, Index) {
    return fast_backward_run(spec, s, d_out);
  };
  c.backward_gauge = [](const OperatorSpec& spec, const Sequence<double>& s, const Terms<double>& adjoints,
                        Index) {
    Gradients<double> g = streaming_backward_gauge(spec, s, adjoints);
    g.terms = gpu_gauge(spec, Implementation::gpu_streaming, s, 0);
    return g;
  };
  c.backward_depth = [](const OperatorSpec& spec, Index n, Index d, Index dv, Index) {
    return fast_backward_depth(spec, n, d, dv);
  };
  out.push_back(std::move(c));
}

}  // namespace
#endif

std::vector<Candidate> gpu_candidates() {
#if HLA_HAVE_CUDA
  if (fast::gpu::unavailable_reason()) return {};
  std::vector<Candidate> out;
  add_rows(out, Implementation::gpu_streaming);
  add_rows(out, Implementation::gpu_scan);
  add_fast_row(out);
  return out;
#else
  return {};
#endif
}

std::string gpu_candidates_absent_reason() {
#if HLA_HAVE_CUDA
  if (const auto reason = fast::gpu::unavailable_reason()) return "this machine has " + *reason;
  return "";
#else
  return "this build has no CUDA (CPU-only build), so no GPU rows";
#endif
}

}  // namespace hla::reports
