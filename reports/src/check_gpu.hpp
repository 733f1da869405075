#pragma once

// hla check's runs on the GPU (check_gpu.cpp; the runs are built with CUDA only, the reasons why
// not in every build): every head at once, the reference (float64 streaming), the gauge of each
// implementation (the same kernels in Gauge<double>) and the toolkit's own float32 runs, the
// inputs copied to the device once; for --grad, the streaming backward's.

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "hla/fast/implementation.hpp"
#include "hla/reports/check_options.hpp"

namespace hla::reports::detail {

// Whether a check's runs take place on the GPU (options.device; docs/check.md "Where it runs"):
// `unavailable` says why the GPU cannot hold them; with --device gpu a reason throws in one line.
bool runs_on_gpu(const CheckOptions& options, const std::function<std::optional<std::string>()>& unavailable);

// The GPU kernels standing in for the CPU's implementations: the reference (float64) and
// streaming run gpu-streaming, scan and chunked gpu-scan.
std::vector<fast::Implementation> gpu_own_implementations(const CheckOptions& options);

// Why the check cannot run on this machine's GPU at d, dv, or nullopt.
std::optional<std::string> gpu_check_unavailable(const CheckOptions& options, Index d, Index dv);

// A large host array left uninitialized, so that its pages are first touched where it is filled.
template <class T>
using Buffer = std::unique_ptr<T[]>;
template <class T>
Buffer<T> buffer(std::size_t count) {
  return Buffer<T>(new T[count]);
}

template <class T>
struct FlatTerms {
  Buffer<T> num, den;  // [heads, n, dv] and [heads, n]
};

struct GpuCheckRuns {
  FlatTerms<double> reference;  // gpu-streaming in float64
  std::vector<fast::Implementation> implementations;  // gpu-streaming, then the own ones
  std::vector<FlatTerms<float>> gauges;               // of each implementation, rounded upwards
  std::vector<FlatTerms<float>> own;                  // of gpu_own_implementations, in float32
};

// @pre gpu_check_unavailable(options, d, dv) is nullopt; q, k, v head-major as the candidate read
// them (before --scale), released once on the device.
GpuCheckRuns gpu_check_runs(const CheckOptions& options, std::int64_t heads, Index n, Index d, Index dv,
                            Buffer<float> q, Buffer<float> k, Buffer<float> v, Phases& phases);

// hla check --grad on the GPU: why it cannot run there at d, dv, or nullopt. It holds the
// streaming backward's bound (the GPU streaming backward computes every entry with the CPU's
// operations in the CPU's grouping, so the CPU's depths bound it: fast/cuda/algebra/common.cuh)
// for an unnormalized operator and a float32, bf16 or f16 candidate.
std::optional<std::string> gpu_gradient_check_unavailable(const CheckOptions& options, Index d, Index dv);

template <class T>
struct FlatGradients {
  Buffer<T> dq, dk,
      dv;  // [heads, n, d], [heads, n, d], [heads, n, dv]; dq with respect to the scaled queries
};

struct GpuGradientRuns {
  FlatGradients<double> reference;  // gpu-streaming backward in float64
  FlatGradients<float> own;         // the same in float32
  FlatGradients<double> gauge;      // the same in Gauge<double> on |q|, |k|, |v| and |dO|
};

// @pre gpu_gradient_check_unavailable(options, d, dv) is nullopt; q, k, v as gpu_check_runs takes
// them, one per value head; d_out [heads, n, dv].
GpuGradientRuns gpu_gradient_runs(const CheckOptions& options, std::int64_t heads, Index n, Index d, Index dv,
                                  Buffer<float> q, Buffer<float> k, Buffer<float> v, const double* d_out,
                                  Phases& phases);

}  // namespace hla::reports::detail
