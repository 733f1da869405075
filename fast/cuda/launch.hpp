#pragma once

// The boundary between the host API (fast/src/gpu.cpp, compiled by the C++ compiler) and the
// kernels (fast/cuda/kernels.cu, compiled by nvcc): plain types only, so that neither side sees
// the other's headers (Boost and Eigen stay out of nvcc, CUDA's headers out of the C++ side).

#include <cstddef>
#include <cstdint>
#include <functional>

#include "hla/fast/algebra/select.hpp"
#include "hla/fast/gpu_types.hpp"
#include "hla/reference/gauge.hpp"
#include "hla/reference/mod_prime.hpp"
#include "hla/reference/variant.hpp"

namespace hla::fast::gpu::detail {

// heads = batch * heads; every array is contiguous in the documented layout (gpu.hpp).
template <class In, class T>
void launch_streaming(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length, const In* q,
                      const In* k, const In* v, T* num, T* den, CUstream_st* stream);

template <class In, class T>
void launch_scan(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length, std::int64_t chunk,
                 const In* q, const In* k, const In* v, T* num, T* den, CUstream_st* stream);

// Sequence parallelism on the generic scan (docs/ranks.md), one rank's slice of `length` tokens of each
// of `heads` sequence-heads: summary_scalars(params) scalars a summary; launch_rank_summaries writes each
// head's slice summary to summaries [heads][size]; launch_rank_scan, given the ranks' summaries gathered
// [ranks][heads][size], folds those of the ranks before `rank` into its carry and runs the scan from it.
template <class T>
std::int64_t summary_scalars(const AlgebraParams<T>& params);
template <class In, class T>
void launch_rank_summaries(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                           std::int64_t chunk, const In* q, const In* k, const In* v, T* summaries,
                           CUstream_st* stream);
template <class In, class T>
void launch_rank_scan(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                      std::int64_t chunk, const In* q, const In* k, const In* v, const T* gathered, int rank,
                      T* num, T* den, CUstream_st* stream);
// One rank's backward on the generic scan (docs/ranks.md), after launch_rank_summaries and the gather of
// the summaries (`gathered`, as launch_rank_scan reads them): the rank's carry folded from the ranks
// before it, the chunk carries from it, pass 1, the adjoint of the carry from the rank's own readouts
// ([heads] stream states), all-gathered across the ranks by `gather(send, receive, bytes)` (receive:
// ranks times bytes in rank order; every rank calls it exactly once, an empty slice too), the ranks'
// chain down to this rank (the adjoint of the state after its slice), then passes 2 and 3 from it.
// dq, dk, dv and the adjoints as launch_scan_backward's.
using RankGather = std::function<void(const void* send, void* receive, std::size_t bytes)>;
template <class In, class T>
void launch_rank_scan_backward(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                               std::int64_t chunk, std::int64_t checkpoint, const In* q, const In* k,
                               const In* v, const T* d_num, const T* d_den, T* dq, T* dk, T* dv,
                               const T* gathered, int rank, int ranks, const RankGather& gather,
                               CUstream_st* stream);
// dq, dk [heads, n, d] and dv [heads, n, dv]: the streaming backward (backward.cuh) from the
// adjoints d_num, d_den of the readouts, a state kept every `checkpoint` tokens.
template <class In, class T>
void launch_streaming_backward(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                               std::int64_t checkpoint, const In* q, const In* k, const In* v, const T* d_num,
                               const T* d_den, T* dq, T* dk, T* dv, CUstream_st* stream);

// The same by the scan's backward (backward.cuh): the forward's chunks of `chunk` tokens, each
// chunk's backward in two passes from its carry, between them the carries' adjoints, chunk after
// chunk from the last; a state kept every `checkpoint` tokens within a chunk.
template <class In, class T>
void launch_scan_backward(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                          std::int64_t chunk, std::int64_t checkpoint, const In* q, const In* k, const In* v,
                          const T* d_num, const T* d_den, T* dq, T* dk, T* dv, CUstream_st* stream);

// out = num / (den + eps) row by row; returns the first row (over all heads) whose divisor is
// zero in exact arithmetic (Z/p), or -1. Synchronizes the stream.
template <class T>
std::int64_t launch_finish(const T& eps, std::int64_t rows, int dv, const T* num, const T* den, T* out,
                           CUstream_st* stream);

// Scalars of shared memory one block of `impl` (gpu_streaming or gpu_scan) holds for the algebra
// of params: its state or summary, one token and the scratch.
std::int64_t shared_scalars(const AlgebraParams<double>& params, bool streaming);

// to[i] = from[i] * scale in float64 (one rounding; exact for scale 1).
void launch_widen(const float* from, double* to, std::int64_t count, double scale, CUstream_st* stream);
// to[i] = the gauge from[i] rounded upwards to float32.
void launch_round_up_to_float(const Gauge<double>* from, float* to, std::int64_t count, CUstream_st* stream);
// to[i] = from[i] rounded to float32 (to nearest, ties to even).
void launch_round_to_float(const double* from, float* to, std::int64_t count, CUstream_st* stream);

template <class In>
void launch_fill_gaussian(In* data, std::int64_t count, std::uint64_t seed, float scale, CUstream_st* stream);

// The tensor-core path (tensor_core.cu): masked hla2, ahla or hla3, d and dv multiples of 8 up to 64
// (the tiles are 64 wide: narrower heads load zero-padded, and heads up to 32 take kernels whose
// products over the features are 32 wide; hla2 and ahla without checkpoints up to 128,
// ahla's wider keys in one pass per value half, hla2's in two passes, values alone wider by their
// halves), any n, over `heads` sequence-heads of `length` tokens (the batch's heads one after another).
struct FastLaunch {
  Variant variant = Variant::hla2;
  int key_dim = 64, value_dim = 64;
  bool normalize = false;
  double decay = 1;                     // every head's gamma, unless head_decays
  float ridge = 0;                      // hla2 without decay
  const double* head_decays = nullptr;  // device: gamma of each head of a batch (heads_per_batch)
  std::int64_t heads_per_batch = 1;
  float eps = 0;        // normalized: out = num / (den + eps)
  void* out = nullptr;  // [heads, length, value_dim], float32 or bf16
  bool bf16_out = false;
  float* den = nullptr;  // normalized only: out gets num (float32) and den [heads, length] the denominators
  void* checkpoints = nullptr;  // [heads, chunks] of checkpoint_bytes(normalize): each chunk's state operands
};

// One chunk's checkpoint (tensor_core.cu writes them, tensor_core_backward.cu reads them): the two
// bf16 state tiles the forward's products read at the chunk's start (hla2 S~, F~; ahla P~, E~), 64 x 64
// in the 128-byte swizzle, then, normalized, their vectors as two bf16 rows of 64 (hla2 f~ and a row
// of zeros; ahla n~, m~).
constexpr std::int64_t checkpoint_tile_bytes = 64 * 64 * 2;
constexpr std::int64_t checkpoint_vector_bytes = 2 * 64 * 2;
constexpr std::int64_t checkpoint_bytes(bool normalized) {
  return 2 * checkpoint_tile_bytes + (normalized ? checkpoint_vector_bytes : 0);
}
void launch_fast(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                 const BFloat16* k, const BFloat16* v, CUstream_st* stream);

// Floats of one summary of the fast path (a segment's, or a rank's, which the ranks exchange): hla2 and
// ahla three 64 x 64 matrices and two vectors of 64, hla3 six and three (tensor_core.cu).
constexpr std::int64_t fast_summary_floats(bool third) {
  return third ? 6 * 64 * 64 + 3 * 64 : 3 * 64 * 64 + 2 * 64;
}

// One rank of a sequence split across ranks on the fast path (docs/ranks.md): its slice of `length`
// tokens of each sequence-head, `how` as launch_fast's (the checkpoints those of the slice's chunks).
// Every rank before the last holds slice_tokens tokens, a multiple of 64; `gather` all-gathers the
// slices' summaries (every rank calls it once, an empty slice too).
struct FastRank {
  int rank = 0, ranks = 1;
  std::int64_t slice_tokens = 0;
  RankGather gather;
};
void launch_fast_rank(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                      const BFloat16* k, const BFloat16* v, const FastRank& rank, CUstream_st* stream);

// The fast path's backward (masked hla2 or ahla, normalized or not, any decay or hla2's ridge): dq, dk
// [heads, length, key_dim] and dv [heads, length, value_dim] in float32 from q, k, v, the adjoint of num
// d_num [heads, length, value_dim] in bf16 (dO, unnormalized), normalized the adjoint of den d_den
// [heads, length] in float32, and the forward's checkpoints (64-wide tiles, d and dv up to 64; wider
// heads: none, launch_wide_backward).
struct FastBackwardLaunch {
  bool ahla = false;
  int key_dim = 64, value_dim = 64;
  bool normalize = false;
  const float* d_den = nullptr;         // normalized only
  double decay = 1;                     // every head's gamma, unless head_decays
  float ridge = 0;                      // hla2 without decay
  const double* head_decays = nullptr;  // device: gamma of each head of a batch (heads_per_batch)
  std::int64_t heads_per_batch = 1;
  const void* checkpoints = nullptr;
  float *dq = nullptr, *dk = nullptr, *dv = nullptr;
};
void launch_fast_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                          const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                          CUstream_st* stream);
// The same for heads wider than 64 (d or dv up to 128; wide_backward.cu): no checkpoints, the backward
// composed of causal products (launch_causal_product), the forward's intermediate recomputed.
void launch_wide_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                          const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                          CUstream_st* stream);
// One decayed first-order causal product on the wide heads' matrix units (tensor_core.cu, the second
// pass of hla2's wide heads, WideRole::hla2_values), over `heads` sequence-heads of `length` tokens, a
// sum over the past (LA) or, `reversed`, over the future (LR):
//   out_t = sum_{j <= t} g^(p (t - j)) (a_t . b_j) c_j,
//   out_j = sum_{t >= j} g^(p (t - j)) (a_j . b_t) c_t,
// with g the head's gamma (FastLaunch's decay or head_decays; decayed where some gamma is not 1) and p
// = power, stored into out, or added to it (`accumulate`: a float32 round-to-nearest addition per
// entry). a, b [heads, length, a_dim or b_dim] and c [heads, length, c_dim] bf16, out [heads, length,
// c_dim] float32 (the dims multiples of 8 up to 128; a and b over their common columns). Decayed, the
// state's keys are D^p b, each row of a chunk times g^(p (63 - s % 64)) (reversed: g^(p (s % 64))), s
// its place in the sequence, in float32, rounded to bf16 on chip.
struct CausalProduct {
  int power = 1;
  const BFloat16* a = nullptr;
  int a_dim = 0;
  const BFloat16* b = nullptr;
  int b_dim = 0;
  const BFloat16* c = nullptr;
  int c_dim = 0;
  float* out = nullptr;
  BFloat16* rounded = nullptr;  // instead of out: the sums rounded to bf16 (not with accumulate)
  bool reversed = false, accumulate = false;
  // Where not null (not with accumulate): each row of the sums divided by den_in[row * den_in_stride]
  // (rows over all heads) as a normalized forward divides, times fl(1 / fl(den + eps)), before its store.
  const float* den_in = nullptr;
  int den_in_stride = 0;
  float eps = 0;
};
void launch_causal_product(const FastBackwardLaunch& decay, const CausalProduct& product, std::int64_t heads,
                           std::int64_t length, CUstream_st* stream);
// The forward of heads wider than 64 for few heads (wide_backward.cu; launch_fast takes it where a head's
// products split into segments): wide_composition.hpp's wide_forward, hla2, ahla or hla3 composed of
// causal products, each split as launch_causal_product splits; `how` as launch_fast's, no checkpoints.
void launch_wide_forward(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                         const BFloat16* k, const BFloat16* v, CUstream_st* stream);
// One rank's slice of the fast backward across ranks, after its launch_fast_rank with checkpoints (`how`
// as launch_fast_backward's, over the slice; `rank` as that forward's): one more all-gather, of the
// slices' adjoint summaries.
void launch_fast_rank_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                               const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                               const FastRank& rank, CUstream_st* stream);

// Shared memory one block may use (opt-in limit), and the device's description; throws hla::Error
// when no device is usable.
std::int64_t shared_memory_limit();

}  // namespace hla::fast::gpu::detail
