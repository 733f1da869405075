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
constexpr int float_tiles = 1;  // scratch
constexpr int shared_bytes = half_tiles * width * ld_half * 2 + float_tiles * width * ld_float * 4;

using Accumulator = wmma::fragment<wmma::accumulator, tile, tile, tile, float>;
using RowOperand = wmma::fragment<wmma::matrix_a, tile, tile, tile, Bf, wmma::row_major>;

// The calling warp's row block of Q (rows tm, every k slice), loaded once per chunk and used by
// the four products that start with Q.
struct QueryRows {
  RowOperand slice[width / tile];
  __device__ void load(const Bf* q, int tm) {
#pragma unroll
    for (int kk = 0; kk < width / tile; ++kk) wmma::load_matrix_sync(slice[kk], q + tm * tile * ld_half + kk * tile, ld_half);
  }
};

// acc += Q B for the tile (tm, tn), Q from registers.
template <class LayoutB>
__device__ void query_times(Accumulator& acc, const QueryRows& q, const Bf* b, int tn) {
  constexpr bool b_rows = std::is_same_v<LayoutB, wmma::row_major>;
#pragma unroll
  for (int kk = 0; kk < width / tile; ++kk) {
    wmma::fragment<wmma::matrix_b, tile, tile, tile, Bf, LayoutB> fb;
    wmma::load_matrix_sync(fb, b_rows ? b + kk * tile * ld_half + tn * tile : b + tn * tile * ld_half + kk * tile,
                           ld_half);
    wmma::mma_sync(acc, q.slice[kk], fb, acc);
  }
}

// acc += other: two products summed from independent accumulators (shorter dependency chains).
__device__ void add(Accumulator& acc, const Accumulator& other) {
#pragma unroll
  for (int i = 0; i < acc.num_elements; ++i) acc.x[i] += other.x[i];
}

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

__device__ void store(float* to, const Accumulator& acc, int tm, int tn) {
  wmma::store_matrix_sync(to + tm * tile * ld_float + tn * tile, acc, ld_float, wmma::mem_row_major);
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
  float* scratch;  // float32; each warp uses its own output tile's part
  __device__ explicit Tiles(unsigned char* base) {
    Bf* half = reinterpret_cast<Bf*>(base);
    Bf** slots[] = {&q, &k, &v, &next_q, &next_k, &next_v, &state1, &state2, &a, &u, &w};
    for (int i = 0; i < half_tiles; ++i) *slots[i] = half + i * width * ld_half;
    scratch = reinterpret_cast<float*>(half + half_tiles * width * ld_half);
  }
};

// to's tile (tm, tn) = bf16(acc), zero above the diagonal when `causal`; the calling warp's own
// tile, so a warp barrier suffices between the store and the reads.
__device__ void round_tile(const Accumulator& acc, float* scratch, Bf* to, int tm, int tn, bool causal) {
  store(scratch, acc, tm, tn);
  __syncwarp();
  const int lane = threadIdx.x % 32;
#pragma unroll
  for (int e = lane; e < tile * tile; e += 32) {
    const int r = tm * tile + e / tile, c = tn * tile + e % tile;
    to[r * ld_half + c] = causal && c > r ? __float2bfloat16(0.0f) : __float2bfloat16_rn(scratch[r * ld_float + c]);
  }
  __syncwarp();
}

template <bool Ahla>
__global__ void __launch_bounds__(threads, 1)
    fast_kernel(const Bf* q, const Bf* k, const Bf* v, float* out, std::int64_t length) {
  extern __shared__ __align__(128) unsigned char shared[];
  Tiles s(shared);
  const std::int64_t head = blockIdx.x, chunks = length / width;
  const int tm = (threadIdx.x / 32) / 4, tn = (threadIdx.x / 32) % 4;  // this warp's output tile
  zero(s.state1);
  zero(s.state2);
  // hla2: S and F; ahla: P and E. This warp's tile of each, in float32, for the whole sequence.
  Accumulator sum1, sum2;
  wmma::fill_fragment(sum1, 0.0f);
  wmma::fill_fragment(sum2, 0.0f);
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
    __syncthreads();  // the chunk and the state copies of the last one are in place
    QueryRows rows;
    rows.load(s.q, tm);
    Accumulator acc, second;
    wmma::fill_fragment(acc, 0.0f);  // A = Q K^T
    query_times<wmma::col_major>(acc, rows, s.k, tn);
    round_tile(acc, s.scratch, s.a, tm, tn, true);
    __syncthreads();
    wmma::fill_fragment(acc, 0.0f);  // hla2: U = Q S + A K;  ahla: X = Q P + A V
    wmma::fill_fragment(second, 0.0f);
    query_times<wmma::row_major>(acc, rows, s.state1, tn);
    multiply_add<wmma::row_major, wmma::row_major>(second, s.a, Ahla ? s.v : s.k, tm, tn);
    add(acc, second);
    round_tile(acc, s.scratch, s.u, tm, tn, false);
    __syncthreads();
    if constexpr (!Ahla) {
      wmma::fill_fragment(acc, 0.0f);  // W = Q U^T
      query_times<wmma::col_major>(acc, rows, s.u, tn);
      round_tile(acc, s.scratch, s.w, tm, tn, true);
      __syncthreads();
    }
    wmma::fill_fragment(acc, 0.0f);  // hla2: O = Q F + W V;  ahla: O = Q E + A X
    wmma::fill_fragment(second, 0.0f);
    query_times<wmma::row_major>(acc, rows, s.state2, tn);
    multiply_add<wmma::row_major, wmma::row_major>(second, Ahla ? s.a : s.w, Ahla ? s.u : s.v, tm, tn);
    add(acc, second);
    wmma::store_matrix_sync(out + (row + tm * tile) * width + tn * tile, acc, width, wmma::mem_row_major);
    // hla2: S += K^T K, F += U^T V;  ahla: P += K^T V, E += K^T X
    multiply_add<wmma::col_major, wmma::row_major>(sum1, s.k, Ahla ? s.v : s.k, tm, tn);
    multiply_add<wmma::col_major, wmma::row_major>(sum2, Ahla ? s.k : s.u, Ahla ? s.u : s.v, tm, tn);
    __syncthreads();  // every read of the state copies is done
    round_tile(sum1, s.scratch, s.state1, tm, tn, false);
    round_tile(sum2, s.scratch, s.state2, tm, tn, false);
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
