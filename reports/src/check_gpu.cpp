// The runs on the GPU are built with CUDA only (HLA_HAVE_CUDA); without it, every check says why
// it cannot run there.

#include "check_gpu.hpp"

#if HLA_HAVE_CUDA
#include <algorithm>
#include <thread>
#include <type_traits>

#include "hla/fast/catalogue.hpp"
#include "hla/fast/gpu.hpp"

namespace hla::reports::detail {

using fast::Implementation;

std::vector<Implementation> gpu_own_implementations(const CheckOptions& options) {
  if (!options.algorithm) return {Implementation::gpu_streaming, Implementation::gpu_scan};
  if (*options.algorithm == Implementation::streaming) return {Implementation::gpu_streaming};
  return {Implementation::gpu_scan};
}

namespace {

// buffer<T>(count) with its pages first touched on every core: a copy from the device into fresh
// pages would otherwise take each page fault in turn (docs/perf.md).
template <class T>
Buffer<T> touched_buffer(std::size_t count) {
  Buffer<T> out = buffer<T>(count);
  const std::size_t workers = std::max(1u, std::thread::hardware_concurrency());
  const std::size_t slice = (count + workers - 1) / workers;
  std::vector<std::thread> pool;
  for (std::size_t w = 0; w < workers && w * slice < count; ++w)
    pool.emplace_back([&out, w, slice, count] {
      std::fill(out.get() + w * slice, out.get() + std::min(count, (w + 1) * slice), T(0));
    });
  for (std::thread& t : pool) t.join();
  return out;
}

// q, k, v (head-major, as the candidate read them) copied to the device, and released here.
std::unique_ptr<const fast::gpu::Inputs> inputs_on_device(const CheckOptions& options, std::int64_t heads,
                                                          Index n, Index d, Index dv, Buffer<float> q,
                                                          Buffer<float> k, Buffer<float> v, Phases& phases) {
  auto inputs = std::make_unique<const fast::gpu::Inputs>(heads, n, int(d), int(dv), q.get(), k.get(),
                                                          v.get(), options.scale);
  phases.done("inputs to the GPU");
  return inputs;
}

// gpu-streaming (the reference and its gauge), then each own implementation not yet listed.
std::vector<Implementation> all_implementations(const CheckOptions& options) {
  std::vector<Implementation> out{Implementation::gpu_streaming};
  for (const Implementation impl : gpu_own_implementations(options))
    if (std::find(out.begin(), out.end(), impl) == out.end()) out.push_back(impl);
  return out;
}

}  // namespace

std::optional<std::string> gpu_check_unavailable(const CheckOptions& options, Index d, Index dv) {
  if (options.precision == Format::f64)
    return "a float64 candidate is checked against the MPFR reference, which runs on the CPU";
  // docs/gpu.md's depths count no rounding of the operator's constants: they hold where gamma and
  // lambda are exact in float32 and the decay factors stay exact (gamma = 1).
  if (options.spec.decay != 1)
    return "the GPU kernels' bounds (docs/gpu.md) are proven for gamma = 1; --decay runs on the CPU";
  const double ridge = to_double(options.spec.ridge);
  if (Rational(ridge) != options.spec.ridge || double(float(ridge)) != ridge)
    return "the GPU kernels' bounds (docs/gpu.md) need a ridge exact in float32";
  if (const auto reason = fast::gpu::unavailable_reason()) return "this machine has " + *reason;
  for (const Implementation impl : all_implementations(options)) {
    // float64 (the reference, every gauge) is the widest scalar the runs use.
    const auto why = fast::gpu::shape_unavailable(options.spec, fast::default_form(options.spec, impl), impl,
                                                  int(d), int(dv), sizeof(double));
    if (why) return why;
  }
  return std::nullopt;
}

GpuCheckRuns gpu_check_runs(const CheckOptions& options, std::int64_t heads, Index n, Index d, Index dv,
                            Buffer<float> q, Buffer<float> k, Buffer<float> v, Phases& phases) {
  const OperatorSpec& spec = options.spec;
  const std::unique_ptr<const fast::gpu::Inputs> on_device =
      inputs_on_device(options, heads, n, d, dv, std::move(q), std::move(k), std::move(v), phases);
  const fast::gpu::Inputs& inputs = *on_device;
  const std::size_t values = std::size_t(heads * n * dv), rows = std::size_t(heads * n);
  const auto run = [&]<class T>(Implementation impl, bool gauge, FlatTerms<T>& out) {
    out.num = touched_buffer<T>(values);
    out.den = touched_buffer<T>(rows);
    const fast::Form form = fast::default_form(spec, impl);
    if constexpr (std::is_same_v<T, float>) {
      if (gauge) {
        inputs.gauge(spec, form, impl, options.chunk, out.num.get(), out.den.get());
        phases.done("the gauge of " + std::string(fast::implementation_name(impl)));
        return;
      }
    }
    inputs.terms<T>(spec, form, impl, options.chunk, out.num.get(), out.den.get());
    phases.done(std::string(fast::implementation_name(impl)) + (sizeof(T) == 8 ? " in float64" : " in float32"));
  };
  GpuCheckRuns out;
  run(Implementation::gpu_streaming, false, out.reference);
  out.implementations = all_implementations(options);
  out.gauges.resize(out.implementations.size());
  for (std::size_t i = 0; i < out.implementations.size(); ++i) run(out.implementations[i], true, out.gauges[i]);
  const std::vector<Implementation> own = gpu_own_implementations(options);
  out.own.resize(own.size());
  for (std::size_t i = 0; i < own.size(); ++i) run(own[i], false, out.own[i]);
  return out;
}

std::optional<std::string> gpu_gradient_check_unavailable(const CheckOptions& options, Index d, Index dv) {
  if (options.precision == Format::f64)
    return "a float64 candidate is checked against the MPFR reference, which runs on the CPU";
  if (options.spec.normalize)
    return "a normalized operator's gradient bound needs the forward readouts' own bound, which the gradient "
           "check has on the CPU";
  if (options.algorithm && *options.algorithm != Implementation::streaming)
    return "the GPU holds the streaming backward's bound; the " +
           std::string(fast::implementation_name(*options.algorithm)) + " backward's is computed on the CPU";
  if (const auto reason = fast::gpu::unavailable_reason()) return "this machine has " + *reason;
  const Implementation impl = Implementation::gpu_streaming;
  return fast::gpu::shape_unavailable(options.spec, fast::default_form(options.spec, impl), impl, int(d),
                                      int(dv), sizeof(double));
}

GpuGradientRuns gpu_gradient_runs(const CheckOptions& options, std::int64_t heads, Index n, Index d, Index dv,
                                  Buffer<float> q, Buffer<float> k, Buffer<float> v, const double* d_out,
                                  Phases& phases) {
  const OperatorSpec& spec = options.spec;
  const std::unique_ptr<const fast::gpu::Inputs> on_device =
      inputs_on_device(options, heads, n, d, dv, std::move(q), std::move(k), std::move(v), phases);
  const fast::gpu::Inputs& inputs = *on_device;
  const std::size_t keys = std::size_t(heads * n * d), values = std::size_t(heads * n * dv);
  const auto flat = [&]<class T>(FlatGradients<T>& g) {
    g.dq = touched_buffer<T>(keys);
    g.dk = touched_buffer<T>(keys);
    g.dv = touched_buffer<T>(values);
  };
  const Implementation impl = Implementation::gpu_streaming;
  const fast::Form form = fast::default_form(spec, impl);
  const fast::gpu::BackwardOptions backward{impl};
  GpuGradientRuns out;
  flat(out.reference);
  inputs.gradients<double>(spec, form, backward, d_out, out.reference.dq.get(), out.reference.dk.get(),
                           out.reference.dv.get());
  phases.done("gpu-streaming backward in float64");
  flat(out.own);
  inputs.gradients<float>(spec, form, backward, d_out, out.own.dq.get(), out.own.dk.get(), out.own.dv.get());
  phases.done("gpu-streaming backward in float32");
  flat(out.gauge);
  inputs.gradient_gauge(spec, form, backward, d_out, out.gauge.dq.get(), out.gauge.dk.get(),
                        out.gauge.dv.get());
  phases.done("the gauge of the gpu-streaming backward");
  return out;
}

}  // namespace hla::reports::detail
#else
namespace hla::reports::detail {

std::optional<std::string> gpu_check_unavailable(const CheckOptions&, Index, Index) {
  return "this build has no CUDA";
}
std::optional<std::string> gpu_gradient_check_unavailable(const CheckOptions&, Index, Index) {
  return "this build has no CUDA";
}

}  // namespace hla::reports::detail
#endif

namespace hla::reports::detail {

bool runs_on_gpu(const CheckOptions& options,
                 const std::function<std::optional<std::string>()>& unavailable) {
  if (options.device == Device::cpu) return false;
  const std::optional<std::string> why = unavailable();
  if (why && options.device == Device::gpu) throw Error("--device gpu: " + *why);
  return !why;
}

}  // namespace hla::reports::detail
