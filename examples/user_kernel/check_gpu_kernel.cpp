// The chunked CUDA kernel of my_hla2_chunked.hpp checked two ways, with its broken twin (a missing
// carry) failing both:
//   (a) in Z/p, bit for bit: at full length against the toolkit's GPU scan (proven equal to the
//       definition by the toolkit's own tests), and on a prefix against the n x n definition itself;
//   (b) in float32 on bf16 inputs, through hla check's C++ API (hla/reports/check.hpp): PASS.
//
// usage: check_gpu_kernel [n] [d] [chunk] [seed]   (default 65536 64 64 1); exit 0 when the kernel
// passes both checks and its twin fails both, 1 otherwise, 77 (skipped) where no GPU is usable.

#include <hla/fast/gpu.hpp>
#include <hla/reference/definition.hpp>
#include <hla/reference/random.hpp>

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <string>
#include <vector>

#include "float_check.hpp"
#include "my_hla2_chunked.hpp"

namespace {

void require(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw std::runtime_error(std::string(what) + ": " + cudaGetErrorString(status));
}

// A device copy of a host array, copied back by host().
template <class T>
struct DeviceArray {
  T* data = nullptr;
  std::size_t size;
  explicit DeviceArray(std::size_t count) : size(count) { require(cudaMalloc(&data, size * sizeof(T)), "cudaMalloc"); }
  explicit DeviceArray(const std::vector<T>& host) : DeviceArray(host.size()) {
    require(cudaMemcpy(data, host.data(), size * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  }
  ~DeviceArray() { cudaFree(data); }
  DeviceArray(const DeviceArray&) = delete;
  DeviceArray& operator=(const DeviceArray&) = delete;
  std::vector<T> host() const {
    std::vector<T> out(size);
    require(cudaMemcpy(out.data(), data, size * sizeof(T), cudaMemcpyDeviceToHost), "cudaMemcpy");
    return out;
  }
};

// The first index where a and b differ, or -1.
template <class A, class B>
long first_difference(const A& a, const B& b, long count) {
  for (long i = 0; i < count; ++i)
    if (a[i] != b[i]) return i;
  return -1;
}

std::string where(long at, int dv) {
  return at < 0 ? "equal" : "differs first at token " + std::to_string(at / dv) + ", column " + std::to_string(at % dv);
}

// (a) Z/p. Returns whether the kernel equals both and its twin does not.
bool check_exact(int n, int d, int dv, int chunk, unsigned long seed) {
  hla::Rng rng(seed);
  const auto draw = [&](long count) {  // integers in [-1000, 1000], mapped to Z/p
    std::vector<hla::ModP> x(count);
    for (hla::ModP& e : x) e = hla::ModP(rng.uniform(-1000, 1000));
    return x;
  };
  const std::vector<hla::ModP> q = draw(long(n) * d), k = draw(long(n) * d), v = draw(long(n) * dv);
  const DeviceArray<hla::ModP> dq(q), dk(k), dvv(v);

  hla::OperatorSpec spec;  // masked hla2, no decay, unnormalized
  spec.variant = hla::Variant::hla2;
  const hla::fast::gpu::Problem problem{1, 1, n, d, dv};
  DeviceArray<hla::ModP> num(long(n) * dv), den(n);
  hla::fast::gpu::terms(spec, hla::fast::Form::corrected, hla::fast::Implementation::gpu_scan, problem, chunk, dq.data,
                        dk.data, dvv.data, num.data, den.data);
  require(cudaDeviceSynchronize(), "the toolkit's gpu-scan");
  const std::vector<hla::ModP> toolkit = num.host();

  // The definition on the first tokens (it is cubic in n): a causal operator's prefix outputs.
  const int prefix = std::min(n, 256);
  const auto rows = [&](const std::vector<hla::ModP>& x, int cols) {
    return hla::Matrix<hla::ModP>(Eigen::Map<const hla::Matrix<hla::ModP>>(x.data(), prefix, cols));
  };
  const hla::Matrix<hla::ModP> exact = hla::reference::output(spec, hla::Sequence<hla::ModP>{rows(q, d), rows(k, d), rows(v, dv)});

  bool ok = true;
  for (const bool broken : {false, true}) {
    DeviceArray<hla::ModP> o(long(n) * dv);
    my_hla2_chunked(dq.data, dk.data, dvv.data, o.data, n, d, dv, chunk, broken);
    const std::vector<hla::ModP> mine = o.host();
    const long at_toolkit = first_difference(mine, toolkit, long(n) * dv);
    const long at_definition = first_difference(mine, exact.data(), long(prefix) * dv);
    std::cout << (broken ? "broken kernel" : "kernel") << " in Z/p (n = " << n << ", d = dv = " << d
              << ", chunk " << chunk << ", seed " << seed << "): against the toolkit's gpu-scan "
              << where(at_toolkit, dv) << "; against the definition on the first " << prefix << " tokens "
              << where(at_definition, dv) << "\n";
    ok = ok && (broken ? at_toolkit >= 0 : at_toolkit < 0 && at_definition < 0);
  }
  return ok;
}

// (b) float32 on bf16 inputs through hla check's C++ API. Returns whether the kernel passes and
// its twin fails.
bool check_float(int n, int d, int dv, int chunk, unsigned long seed) {
  const hla::reports::CheckOptions options = float32_on_bf16_options();
  const hla::Sequence<double> tokens = bf16_gaussian_tokens(n, d, dv, seed);
  const DeviceArray<float> dq(as_float(tokens.q)), dk(as_float(tokens.k)), dvv(as_float(tokens.v));

  bool ok = true;
  for (const bool broken : {false, true}) {
    DeviceArray<float> o(long(n) * dv);
    my_hla2_chunked(dq.data, dk.data, dvv.data, o.data, n, d, dv, chunk, broken);
    const std::vector<float> mine = o.host();
    hla::reports::HeadInput head{0, 0, tokens, hla::Matrix<double>(n, dv)};
    std::copy(mine.begin(), mine.end(), head.output.data());
    const hla::reports::CheckResult result = hla::reports::check(options, std::vector{head});
    std::cout << (broken ? "== broken kernel in float32\n" : "== kernel in float32\n")
              << hla::reports::check_summary(result, options);
    ok = ok && result.passed != broken;
  }
  return ok;
}

}  // namespace

int main(int argc, char* argv[]) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 65536, d = argc > 2 ? std::atoi(argv[2]) : 64, dv = d;
  const int chunk = argc > 3 ? std::atoi(argv[3]) : 64;
  const unsigned long seed = argc > 4 ? std::strtoul(argv[4], nullptr, 10) : 1;
  if (n < 1 || d < 1 || chunk < 1) {
    std::cerr << "usage: check_gpu_kernel [n >= 1] [d >= 1] [chunk >= 1] [seed]\n";
    return 2;
  }
  if (const auto reason = hla::fast::gpu::unavailable_reason()) {
    std::cout << "skipped: " << *reason << "\n";
    return 77;
  }
  try {
    const bool exact = check_exact(n, d, dv, chunk, seed);
    const bool floating = check_float(n, d, dv, chunk, seed);
    return exact && floating ? 0 : 1;
  } catch (const std::exception& e) {
    std::cerr << "check_gpu_kernel: " << e.what() << "\n";
    return 2;
  }
}
