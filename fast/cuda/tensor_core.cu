// The fast path: masked, unnormalized hla2 and ahla (gamma = 1) on the matrix units, bf16 inputs,
// float32 accumulation and state, d = dv = 64, chunks of 64 tokens. One block (one warpgroup)
// per sequence-head walks its chunks in order, so the scan over chunk summaries is the running
// state itself and never touches device memory; every step of a chunk is a 64 x 64 x 64 product
// issued asynchronously on Hopper's warpgroup matrix units (wgmma.cuh), the state sums stay in
// the accumulator registers for the whole sequence, and the next chunk loads meanwhile.
//
// hla2 (Hla2MaskedChunks with gamma = 1): with S the key moment and F = sum_j u_j v_j^T before the chunk,
//   A = (Q K^T) . L,  U = Q S + A K  (rows u_j = S_j q_j),  W = (Q U^T) . L,
//   O = Q F + W V,    S += K^T K,    F += U^T V.
// ahla: with P = sum k v^T and E = sum_i k_i (q_i^T P_i) before the chunk,
//   A = (Q K^T) . L,  X = Q P + A V  (rows q_i^T P_i),  O = Q E + A X,  E += K^T X,  P += K^T V.
// Operands are rounded to bf16 for the products (A, U or X, W, and the state S, F or P, E); the
// sums stay in float32. docs/gpu.md gives the error bound.

#include <cuda_bf16.h>
#include <cuda_pipeline.h>

#include <string>
#include <utility>

#include "hla/reference/error.hpp"
#include "launch.hpp"
#include "wgmma.cuh"

namespace hla::fast::gpu::detail {
namespace {

using Bf = __nv_bfloat16;
using wgmma::Accumulator;
using wgmma::Major;

constexpr int width = wgmma::width;  // C = d = dv
constexpr int threads = 128;         // one warpgroup
constexpr int tiles = 9;             // Q, K, V twice (the next chunk loads meanwhile), the two state copies, U or X
constexpr int shared_bytes = tiles * wgmma::tile_bytes;

// Starts copying one chunk's rows (64 of 64 bf16) into a tile, 16 bytes (8 columns) a copy,
// asynchronously; consecutive threads take consecutive rows (distinct banks).
__device__ void start_loading(const Bf* from, Bf* to) {
  for (int i = threadIdx.x; i < width * 8; i += threads) {
    const int r = i % 8 + 8 * (i / 64), c = 8 * (i / 8 % 8);
    __pipeline_memcpy_async(to + wgmma::offset(r, c), from + r * width + c, 16);
  }
}

struct Tiles {
  Bf *q, *k, *v, *next_q, *next_k, *next_v, *state1, *state2, *u;
  __device__ explicit Tiles(unsigned char* base) {
    Bf** slots[] = {&q, &k, &v, &next_q, &next_k, &next_v, &state1, &state2, &u};
    for (int i = 0; i < tiles; ++i) *slots[i] = reinterpret_cast<Bf*>(base + i * wgmma::tile_bytes);
  }
};

// Every thread's shared-memory writes (its copies and stores) visible to every thread and to the
// matrix units.
__device__ void publish_shared() {
  wgmma::fence_shared();
  __syncthreads();
}

__device__ void store_rows(float* out, const Accumulator& o) {
#pragma unroll
  for (int i = 0; i < 32; i += 2)
    *reinterpret_cast<float2*>(out + Accumulator::row(i) * width + Accumulator::column(i)) = make_float2(o.x[i], o.x[i + 1]);
}

template <bool Ahla>
__global__ void __launch_bounds__(threads, 1)
    fast_kernel(const Bf* q, const Bf* k, const Bf* v, float* out, std::int64_t length) {
  extern __shared__ __align__(128) unsigned char shared[];
  Tiles s(shared);
  const std::int64_t head = blockIdx.x, chunks = length / width;
  // hla2: S and F; ahla: P and E, in float32 for the whole sequence; their bf16 copies in
  // s.state1 and s.state2 (zero before the first chunk).
  Accumulator sum1, sum2;
  wgmma::zero(sum1);
  wgmma::zero(sum2);
  wgmma::round_to_tile(sum1, s.state1);
  wgmma::round_to_tile(sum2, s.state2);
  const auto start_chunk = [&](std::int64_t c, Bf* to_q, Bf* to_k, Bf* to_v) {
    const std::int64_t row = head * length + c * width;
    start_loading(q + row * width, to_q);
    start_loading(k + row * width, to_k);
    start_loading(v + row * width, to_v);
    __pipeline_commit();
  };
  start_chunk(0, s.q, s.k, s.v);
  for (std::int64_t c = 0; c < chunks; ++c) {
    __pipeline_wait_prior(0);
    publish_shared();  // the chunk, the state copies and U of the last chunk; its products are done
    if (c + 1 < chunks) start_chunk(c + 1, s.next_q, s.next_k, s.next_v);  // loads while chunk c computes

    Accumulator a, u, o;
    wgmma::fence_operand(sum1);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(a, s.q, s.k, false);  // A = Q K^T
    wgmma::commit();
    wgmma::multiply<Major::k, Major::mn>(u, s.q, s.state1, false);  // hla2: U = Q S;  ahla: X = Q P
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(sum1, s.k, Ahla ? s.v : s.k, true);  // hla2: S += K^T K;  ahla: P += K^T V
    wgmma::commit();
    wgmma::wait<2>();
    wgmma::fence_operand(a);
    const wgmma::RowOperand masked = wgmma::round_to_operand(a, true);
    wgmma::fence();
    wgmma::multiply<Major::mn>(u, masked, Ahla ? s.v : s.k, true);  // hla2: U += A K;  ahla: X += A V
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(u);
    wgmma::fence_operand(sum1);
    wgmma::round_to_tile(u, s.u);
    wgmma::round_to_tile(sum1, s.state1);  // read again by the next chunk only
    publish_shared();

    wgmma::fence_operand(sum2);
    wgmma::fence();
    if constexpr (Ahla) {
      wgmma::multiply<Major::k, Major::mn>(o, s.q, s.state2, false);  // O = Q E
      wgmma::multiply<Major::mn>(o, masked, s.u, true);               // O += A X
      wgmma::multiply<Major::mn, Major::mn>(sum2, s.k, s.u, true);    // E += K^T X
      wgmma::commit();
    } else {
      Accumulator w;
      wgmma::multiply<Major::k, Major::k>(w, s.q, s.u, false);  // W = Q U^T
      wgmma::commit();
      wgmma::multiply<Major::k, Major::mn>(o, s.q, s.state2, false);  // O = Q F
      wgmma::multiply<Major::mn, Major::mn>(sum2, s.u, s.v, true);    // F += U^T V
      wgmma::commit();
      wgmma::wait<1>();
      wgmma::fence_operand(w);
      const wgmma::RowOperand masked_w = wgmma::round_to_operand(w, true);
      wgmma::fence();
      wgmma::multiply<Major::mn>(o, masked_w, s.v, true);  // O += W V
      wgmma::commit();
    }
    wgmma::wait<0>();
    wgmma::fence_operand(o);
    wgmma::fence_operand(sum2);
    store_rows(out + (head * length + c * width) * width, o);
    wgmma::round_to_tile(sum2, s.state2);  // published at the top of the next chunk
    std::swap(s.q, s.next_q);
    std::swap(s.k, s.next_k);
    std::swap(s.v, s.next_v);
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

}  // namespace

void launch_fast(bool ahla, std::int64_t heads, std::int64_t length, const BFloat16* q, const BFloat16* k,
                 const BFloat16* v, float* out, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  int device = 0, major = 0, minor = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  if (major != 9 || minor != 0) {
    throw Error("fast path: needs a compute capability 9.0 GPU (Hopper's wgmma); this one is " +
                std::to_string(major) + "." + std::to_string(minor));
  }
  auto kernel = ahla ? fast_kernel<true> : fast_kernel<false>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes),
        "cudaFuncSetAttribute");
  kernel<<<static_cast<unsigned>(heads), threads, shared_bytes, stream>>>(
      reinterpret_cast<const Bf*>(q), reinterpret_cast<const Bf*>(k), reinterpret_cast<const Bf*>(v), out, length);
  check(cudaGetLastError(), "fast kernel");
}

}  // namespace hla::fast::gpu::detail
