// build/hla_bench_wgmma: cycles per 64 x 64 x 16 warpgroup product step (wgmma.m64n64k16, bf16,
// float32 accumulators) on one warpgroup per SM, for the operand forms the fast path uses
// (fast/cuda/wgmma.cuh): both operands from shared memory (K-major or MN-major), A from registers;
// issued back to back (throughput) or one 64 x 64 x 64 product at a time, waited for (latency).
// Prints CSV: form, mode, cycles per step, TFLOP/s over the whole GPU.

#include <cuda_runtime.h>

#include <cstdio>
#include <cstdlib>

#include "../../fast/cuda/wgmma.cuh"

namespace {

using namespace hla::fast::gpu::detail;
using wgmma::Accumulator;
using wgmma::Major;

enum class Form { ss_k_k, ss_k_mn, ss_mn_mn, rs_mn };
constexpr int products = 512;  // 64 x 64 x 64 products per block (4 steps each)

template <Form form, bool wait_each>
__global__ void __launch_bounds__(128, 1) rates(float* sink, long long* cycles) {
  __shared__ __align__(1024) __nv_bfloat16 a[64 * 64], b[64 * 64];
  for (int i = threadIdx.x; i < 64 * 64; i += 128) {
    a[i] = __float2bfloat16(float((i * 7) % 5 - 2) / 8);
    b[i] = __float2bfloat16(float((i * 3) % 7 - 3) / 8);
  }
  wgmma::fence_shared();
  __syncthreads();
  Accumulator d0, d1;
  wgmma::zero(d0);
  wgmma::zero(d1);
  wgmma::RowOperand r;
  for (int kk = 0; kk < 4; ++kk)
    for (int p = 0; p < 4; ++p) r.x[kk][p] = wgmma::pack(float(threadIdx.x % 5) / 4, float(p) / 4);
  const long long start = clock64();
  for (int i = 0; i < products; i += 2) {
    wgmma::fence();
    if constexpr (form == Form::ss_k_k) {
      wgmma::multiply<Major::k, Major::k>(d0, a, b, true);
      wgmma::multiply<Major::k, Major::k>(d1, a, b, true);
    } else if constexpr (form == Form::ss_k_mn) {
      wgmma::multiply<Major::k, Major::mn>(d0, a, b, true);
      wgmma::multiply<Major::k, Major::mn>(d1, a, b, true);
    } else if constexpr (form == Form::ss_mn_mn) {
      wgmma::multiply<Major::mn, Major::mn>(d0, a, b, true);
      wgmma::multiply<Major::mn, Major::mn>(d1, a, b, true);
    } else {
      wgmma::multiply<Major::mn>(d0, r, b, true);
      wgmma::multiply<Major::mn>(d1, r, b, true);
    }
    wgmma::commit();
    if constexpr (wait_each) wgmma::wait<0>();
  }
  wgmma::wait<0>();
  wgmma::fence_operand(d0);
  wgmma::fence_operand(d1);
  const long long stop = clock64();
  float total = 0;
  for (int i = 0; i < 32; ++i) total += d0.x[i] + d1.x[i];
  sink[blockIdx.x * 128 + threadIdx.x] = total;
  if (threadIdx.x == 0) cycles[blockIdx.x] = stop - start;
}

void check(cudaError_t status) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "hla_bench_wgmma: %s\n", cudaGetErrorString(status));
    std::exit(1);
  }
}

template <Form form, bool wait_each>
void measure(const char* name, int sms, float* sink, long long* cycles) {
  rates<form, wait_each><<<sms, 128>>>(sink, cycles);  // warm-up
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start));
  check(cudaEventCreate(&stop));
  check(cudaEventRecord(start));
  rates<form, wait_each><<<sms, 128>>>(sink, cycles);
  check(cudaEventRecord(stop));
  check(cudaEventSynchronize(stop));
  float ms = 0;
  check(cudaEventElapsedTime(&ms, start, stop));
  long long first = 0;
  check(cudaMemcpy(&first, cycles, sizeof first, cudaMemcpyDeviceToHost));
  const double steps = 4.0 * products, flop = 2.0 * 64 * 64 * 16 * steps * sms;
  std::printf("%s,%s,%.1f,%.0f\n", name, wait_each ? "one product at a time" : "back to back",
              double(first) / steps, flop / (ms * 1e-3) / 1e12);
}

}  // namespace

int main() {
  int device = 0, major = 0, sms = 0;
  check(cudaGetDevice(&device));
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device));
  if (major != 9) {
    std::fprintf(stderr, "hla_bench_wgmma: needs a compute capability 9.0 GPU\n");
    return 1;
  }
  float* sink = nullptr;
  long long* cycles = nullptr;
  check(cudaMalloc(&sink, sms * 128 * sizeof(float)));
  check(cudaMalloc(&cycles, sms * sizeof(long long)));
  std::printf("form,mode,cycles per step,TFLOP/s\n");
  measure<Form::ss_k_k, false>("A K-major B K-major (shared)", sms, sink, cycles);
  measure<Form::ss_k_mn, false>("A K-major B MN-major (shared)", sms, sink, cycles);
  measure<Form::ss_mn_mn, false>("A MN-major B MN-major (shared)", sms, sink, cycles);
  measure<Form::rs_mn, false>("A registers B MN-major", sms, sink, cycles);
  measure<Form::ss_k_k, true>("A K-major B K-major (shared)", sms, sink, cycles);
  measure<Form::rs_mn, true>("A registers B MN-major", sms, sink, cycles);
  return 0;
}
