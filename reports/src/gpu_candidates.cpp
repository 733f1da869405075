// The GPU rows of the error report: the streaming kernel and the chunk-parallel scan
// (fast/cuda, docs/gpu.md) in float64, float32 and on bf16 inputs with float32 arithmetic, when
// the build has CUDA and a device is present. None of the GPU kernels uses TF32 (the generic
// kernels do scalar float32 arithmetic), so there is no TF32 row.

#include "hla/reports/candidates.hpp"

#if HLA_HAVE_CUDA
#include <bit>

#include "gauge_double.hpp"
#include "hla/fast/gpu.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#endif

namespace hla::reports {

#if HLA_HAVE_CUDA
namespace {

using fast::gpu::Method;

fast::Form form_of(const OperatorSpec& spec, Method method) {
  return fast::default_form(spec, method == Method::streaming ? fast::Impl::streaming : fast::Impl::scan);
}

// The a-priori depths of docs/gpu.md: streaming K_t = (r + 1)(6 (t + 1) + 3 d + 12); the scan
// K = (r + 1)(6 L + 4 d + 16) with L = 2 C + 2 ceil(log2 B) for B chunks of C tokens.
Depths gpu_depth(const OperatorSpec& spec, Method method, Index n, Index d, Index dv, Index chunk) {
  const std::int64_t r = order(spec.variant);
  Depths out{Matrix<std::int64_t>(n, dv), Vector<std::int64_t>(n)};
  const Index size = std::min<Index>(std::max<Index>(chunk, 1), std::max<Index>(n, 1));
  const Index chunks = (n + size - 1) / size;
  const std::int64_t levels = 2 * size + 2 * (chunks <= 1 ? 0 : 64 - std::countl_zero(std::uint64_t(chunks - 1)));
  for (Index t = 0; t < n; ++t) {
    const std::int64_t k =
        method == Method::streaming ? (r + 1) * (6 * (t + 1) + 3 * d + 12) : (r + 1) * (6 * levels + 4 * d + 16);
    out.num.row(t).setConstant(k);
    out.den(t) = k;
  }
  return out;
}

// The gauge of the GPU's algorithm: the CPU stream (the same recurrences) or the CPU twin of the
// GPU scan's bracketing (fast::chunk_fold_terms), on |q|, |k|, |v|.
Terms<double> gpu_gauge(const OperatorSpec& spec, Method method, const Sequence<double>& s, Index chunk) {
  using G = testing::Gauge<double>;
  const Sequence<G> magnitudes{s.q.cast<G>(), s.k.cast<G>(), s.v.cast<G>()};
  const fast::Form form = form_of(spec, method);
  const Terms<G> gauge = method == Method::streaming ? fast::streaming_terms(spec, form, magnitudes)
                                                     : fast::chunk_fold_terms(spec, form, magnitudes, chunk);
  return {gauge.num.unaryExpr([](const G& x) { return x.value(); }),
          gauge.den.unaryExpr([](const G& x) { return x.value(); })};
}

template <class T>
Terms<double> widen(const Terms<T>& t) {
  return {t.num.template cast<double>(), t.den.template cast<double>()};
}

void add_rows(std::vector<Candidate>& out, Method method) {
  const std::string name = method == Method::streaming ? "gpu-streaming" : "gpu-scan";
  const bool uses_chunk = method == Method::scan;
  const auto covers = [method](const OperatorSpec& spec) {
    try {
      fast::gpu::validate(spec, form_of(spec, method), method);
      return true;
    } catch (const Error&) {
      return false;
    }
  };
  const auto depth = [method](const OperatorSpec& spec, Index n, Index d, Index dv, Index chunk) {
    return gpu_depth(spec, method, n, d, dv, chunk);
  };
  const auto in_double = [method](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
    const Terms<double> terms = fast::gpu::terms(spec, form_of(spec, method), method, {s}, chunk).front();
    return CandidateRun{terms, reference::finish(spec, terms), gpu_gauge(spec, method, s, chunk)};
  };
  const auto in_float = [method](bool bf16) {
    return [method, bf16](const OperatorSpec& spec, const Sequence<double>& s, Index chunk) {
      const Sequence<float> inputs{s.q.cast<float>(), s.k.cast<float>(), s.v.cast<float>()};  // exact
      const fast::Form form = form_of(spec, method);
      const Terms<float> terms = bf16 ? fast::gpu::terms_bf16(spec, form, method, {inputs}, chunk).front()
                                      : fast::gpu::terms(spec, form, method, {inputs}, chunk).front();
      return CandidateRun{widen(terms), reference::finish(spec, terms).cast<double>(),
                          gpu_gauge(spec, method, s, chunk)};
    };
  };
  out.push_back({name, "float64", InputFormat::f64, 53, uses_chunk, !uses_chunk, covers, in_double, depth});
  out.push_back({name, "float32", InputFormat::f32, 24, uses_chunk, !uses_chunk, covers, in_float(false), depth});
  out.push_back({name, "bf16-in/f32", InputFormat::bf16, 24, uses_chunk, !uses_chunk, covers, in_float(true), depth});
}

}  // namespace
#endif

std::vector<Candidate> gpu_candidates() {
#if HLA_HAVE_CUDA
  if (fast::gpu::unavailable_reason()) return {};
  std::vector<Candidate> out;
  add_rows(out, Method::streaming);
  add_rows(out, Method::scan);
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
