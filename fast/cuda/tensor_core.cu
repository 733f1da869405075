// The fast path: masked, unnormalized hla2 and ahla (gamma = 1) on the matrix units, bf16 inputs,
// float32 accumulation and state, d = dv = 64, chunks of 64 tokens. One block per sequence-head
// walks its chunks in order, so the scan over chunk summaries is the running state itself and
// never touches device memory; every step of a chunk is a 64 x 64 x 64 product (wmma, bf16
// operands, float32 accumulators) on tiles in shared memory.
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
#include <mma.h>

#include <string>
#include <utility>

#include "hla/reference/error.hpp"
#include "launch.hpp"

namespace hla::fast::gpu::detail {
namespace {

using namespace nvcuda;
using Bf = __nv_bfloat16;

constexpr int tile = 16;
constexpr int width = 64;     // C = d = dv
constexpr int ld_half = 72;   // bf16 row stride in shared memory (padding against bank conflicts)
constexpr int ld_float = 68;  // float row stride
constexpr int warps = 16;  // one output tile of each 64 x 64 product per warp
constexpr int threads = warps * 32;
constexpr int half_tiles = 11;  // bf16 tiles: Q, K, V twice (the next chunk loads meanwhile), state copies, A, U/X, W
constexpr int float_tiles = 3;  // S/P, F/E, scratch
constexpr int shared_bytes = half_tiles * width * ld_half * 2 + float_tiles * width * ld_float * 4;

using Accumulator = wmma::fragment<wmma::accumulator, tile, tile, tile, float>;

// acc += A B over the full inner dimension of 64, for the output tile (tm, tn); A and B are bf16
// in shared memory, each row-major (element (r, c) at [r * ld_half + c]) or column-major.
template <class LayoutA, class LayoutB>
__device__ void multiply_add(Accumulator& acc, const Bf* a, const Bf* b, int tm, int tn) {
  constexpr bool a_rows = std::is_same_v<LayoutA, wmma::row_major>;
  constexpr bool b_rows = std::is_same_v<LayoutB, wmma::row_major>;
#pragma unroll
  for (int kk = 0; kk < width / tile; ++kk) {
    wmma::fragment<wmma::matrix_a, tile, tile, tile, Bf, LayoutA> fa;
    wmma::fragment<wmma::matrix_b, tile, tile, tile, Bf, LayoutB> fb;
    wmma::load_matrix_sync(fa, a_rows ? a + tm * tile * ld_half + kk * tile : a + kk * tile * ld_half + tm * tile,
                           ld_half);
    wmma::load_matrix_sync(fb, b_rows ? b + kk * tile * ld_half + tn * tile : b + tn * tile * ld_half + kk * tile,
                           ld_half);
    wmma::mma_sync(acc, fa, fb, acc);
  }
}

// The 16 output tiles of a 64 x 64 product, one per warp.
template <class F>
__device__ void for_my_tiles(F&& f) {
  const int t = threadIdx.x / 32;
  f(t / 4, t % 4);
}

__device__ void store(float* to, const Accumulator& acc, int tm, int tn) {
  wmma::store_matrix_sync(to + tm * tile * ld_float + tn * tile, acc, ld_float, wmma::mem_row_major);
}

// to = bf16(from), keeping (r, c) with c <= r only when `causal` (L, the causal mask).
__device__ void round_to_half(const float* from, Bf* to, bool causal) {
  for (int i = threadIdx.x; i < width * width; i += threads) {
    const int r = i / width, c = i % width;
    to[r * ld_half + c] = causal && c > r ? __float2bfloat16(0.0f) : __float2bfloat16_rn(from[r * ld_float + c]);
  }
}

__device__ void zero(float* x) {
  for (int i = threadIdx.x; i < width * ld_float; i += threads) x[i] = 0.0f;
}
__device__ void zero(Bf* x) {
  for (int i = threadIdx.x; i < width * ld_half; i += threads) x[i] = __float2bfloat16(0.0f);
}

// Starts copying one chunk's rows (64 of 64 bf16 = 128 bytes) into padded shared rows, 16 bytes a
// copy, asynchronously (cp.async); __pipeline_wait_prior waits for them.
__device__ void start_loading(const Bf* from, Bf* to) {
  for (int i = threadIdx.x; i < width * 8; i += threads) {
    const int r = i / 8, part = i % 8;
    __pipeline_memcpy_async(to + r * ld_half + part * 8, from + r * width + part * 8, 16);
  }
}

struct Tiles {
  Bf *q, *k, *v, *next_q, *next_k, *next_v, *state1, *state2, *a, *u, *w;  // bf16
  float *state1_sum, *state2_sum, *scratch;                                 // float32
  __device__ explicit Tiles(unsigned char* base) {
    Bf* half = reinterpret_cast<Bf*>(base);
    Bf** slots[] = {&q, &k, &v, &next_q, &next_k, &next_v, &state1, &state2, &a, &u, &w};
    for (int i = 0; i < half_tiles; ++i) *slots[i] = half + i * width * ld_half;
    float* single = reinterpret_cast<float*>(half + half_tiles * width * ld_half);
    state1_sum = single;
    state2_sum = single + width * ld_float;
    scratch = single + 2 * width * ld_float;
  }
};

template <bool Ahla>
__global__ void __launch_bounds__(threads, 1)
    fast_kernel(const Bf* q, const Bf* k, const Bf* v, float* out, std::int64_t length) {
  extern __shared__ __align__(128) unsigned char shared[];
  Tiles s(shared);
  const std::int64_t head = blockIdx.x, chunks = length / width;
  zero(s.state1_sum);
  zero(s.state2_sum);
  zero(s.state1);
  zero(s.state2);
  const auto start_chunk = [&](std::int64_t c, Bf* to_q, Bf* to_k, Bf* to_v) {
    const std::int64_t row = head * length + c * width;
    start_loading(q + row * width, to_q);
    start_loading(k + row * width, to_k);
    start_loading(v + row * width, to_v);
    __pipeline_commit();
  };
  start_chunk(0, s.q, s.k, s.v);
  for (std::int64_t c = 0; c < chunks; ++c) {
    const std::int64_t row = head * length + c * width;
    if (c + 1 < chunks) {  // chunk c + 1 loads while chunk c is computed
      start_chunk(c + 1, s.next_q, s.next_k, s.next_v);
      __pipeline_wait_prior(1);
    } else {
      __pipeline_wait_prior(0);
    }
    __syncthreads();
    for_my_tiles([&](int tm, int tn) {  // A = Q K^T
      Accumulator acc;
      wmma::fill_fragment(acc, 0.0f);
      multiply_add<wmma::row_major, wmma::col_major>(acc, s.q, s.k, tm, tn);
      store(s.scratch, acc, tm, tn);
    });
    __syncthreads();
    round_to_half(s.scratch, s.a, true);
    __syncthreads();
    for_my_tiles([&](int tm, int tn) {  // hla2: U = Q S + A K;  ahla: X = Q P + A V
      Accumulator acc;
      wmma::fill_fragment(acc, 0.0f);
      multiply_add<wmma::row_major, wmma::row_major>(acc, s.q, s.state1, tm, tn);
      multiply_add<wmma::row_major, wmma::row_major>(acc, s.a, Ahla ? s.v : s.k, tm, tn);
      store(s.scratch, acc, tm, tn);
    });
    __syncthreads();
    round_to_half(s.scratch, s.u, false);
    __syncthreads();
    if constexpr (!Ahla) {
      for_my_tiles([&](int tm, int tn) {  // W = Q U^T
        Accumulator acc;
        wmma::fill_fragment(acc, 0.0f);
        multiply_add<wmma::row_major, wmma::col_major>(acc, s.q, s.u, tm, tn);
        store(s.scratch, acc, tm, tn);
      });
      __syncthreads();
      round_to_half(s.scratch, s.w, true);
      __syncthreads();
    }
    for_my_tiles([&](int tm, int tn) {
      // hla2: O = Q F + W V;  ahla: O = Q E + A X
      Accumulator acc;
      wmma::fill_fragment(acc, 0.0f);
      multiply_add<wmma::row_major, wmma::row_major>(acc, s.q, s.state2, tm, tn);
      multiply_add<wmma::row_major, wmma::row_major>(acc, Ahla ? s.a : s.w, Ahla ? s.u : s.v, tm, tn);
      wmma::store_matrix_sync(out + (row + tm * tile) * width + tn * tile, acc, width, wmma::mem_row_major);
      // hla2: S += K^T K, F += U^T V;  ahla: P += K^T V, E += K^T X
      Accumulator sum;
      wmma::load_matrix_sync(sum, s.state1_sum + tm * tile * ld_float + tn * tile, ld_float, wmma::mem_row_major);
      multiply_add<wmma::col_major, wmma::row_major>(sum, s.k, Ahla ? s.v : s.k, tm, tn);
      store(s.state1_sum, sum, tm, tn);
      wmma::load_matrix_sync(sum, s.state2_sum + tm * tile * ld_float + tn * tile, ld_float, wmma::mem_row_major);
      multiply_add<wmma::col_major, wmma::row_major>(sum, Ahla ? s.k : s.u, Ahla ? s.u : s.v, tm, tn);
      store(s.state2_sum, sum, tm, tn);
    });
    __syncthreads();
    round_to_half(s.state1_sum, s.state1, false);
    round_to_half(s.state2_sum, s.state2, false);
    __syncthreads();
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
  auto kernel = ahla ? fast_kernel<true> : fast_kernel<false>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes),
        "cudaFuncSetAttribute");
  kernel<<<static_cast<unsigned>(heads), threads, shared_bytes, stream>>>(
      reinterpret_cast<const Bf*>(q), reinterpret_cast<const Bf*>(k), reinterpret_cast<const Bf*>(v), out, length);
  check(cudaGetLastError(), "fast kernel");
}

}  // namespace hla::fast::gpu::detail
