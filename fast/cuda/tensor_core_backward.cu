// The fast path's backward: masked hla2 and ahla, normalized or not, decay gamma in (0, 1] per head
// or hla2's ridge (gamma = 1), on the matrix units (bf16 operands, float32 sums), tiles of 64 columns (d
// and dv multiples of 8 up to 64, read zero-padded as the forward's), chunks of 64 tokens (the last one
// may be short). One block (one warpgroup) per sequence-head walks its chunks from the
// last to the first, carrying the adjoints of the two states in accumulator registers; each chunk's forward
// states come from the checkpoints the forward wrote at chunk boundaries (tensor_core.cu,
// Arguments::checkpoints: the bf16 tiles its products read), and the chunk's products are
// recomputed from them.
//
// With g the decay, tau = 1..64 a token's place in its chunk, D = diag(g^(64 - tau)), L_g the causal
// mask with entries g^(t - j) (tensor_core.cu's forms) and, given dO (the adjoint of num), the
// adjoints of the states after the chunk (zero after the last one; the adjoints before it are what
// the chunk leaves in the accumulators):
// hla2, forward A = (Q K^T) . L_g, U = diag(g^tau) Q S + A K, W = (Q U^T) . L_g . L_g,
// O = diag(g^(2 tau)) Q F + W V, S' = g^64 S + K^T (D K), F' = g^128 F + (D^2 U)^T V; backward
//   dW = (dO V^T) . L_g . L_g,  dU = dW^T Q + (D^2 V) dF'^T,  dA = (dU K^T) . L_g,
//   dV = W^T dO + (D^2 U) dF',
//   dQ = diag(g^(2 tau)) dO F^T + dW U + diag(g^tau) dU S^T + dA K,
//   dK = A^T dU + dA^T Q + D K (dS' + dS'^T),
//   dS = g^64 dS' + Q^T diag(g^tau) dU,  dF = g^128 dF' + Q^T diag(g^(2 tau)) dO
// (Hla2MaskedChunks::outputs_adjoint, fast/include/hla/fast/chunked/hla2.hpp, with the carry written
// as the running states); with the ridge (g = 1), U + ridge Q in place of U, as in the forward, and
// dQ += ridge dU;
// ahla, forward A = (Q K^T) . L_g, X = diag(g^tau) Q P + A V, O = diag(g^tau) Q E + A X,
// P' = g^64 P + K^T (D V), E' = g^64 E + K^T (D X); backward
//   dX = A^T dO + D K dE',  dA = (dO X^T + dX V^T) . L_g,  dV = D K dP' + A^T dX,
//   dQ = diag(g^tau) (dO E^T + dX P^T) + dA K,  dK = D X dE'^T + D V dP'^T + dA^T Q,
//   dP = g^64 dP' + Q^T diag(g^tau) dX,  dE = g^64 dE' + Q^T diag(g^tau) dO.
// Normalized, the backward of <dO, num> + <dd, den> (the readouts' adjoints, reference::finish_adjoint),
// den being the same sums with V replaced by a column of ones: each sum over V's columns gains that
// column's term. hla2, with f = F 1 before the chunk and df' the adjoint of f after it:
//   dW += (dd 1^T) . L_g . L_g,  dU += (D^2 1) df'^T,  dQ += diag(g^(2 tau)) dd f^T,
//   df = g^128 df' + Q^T diag(g^(2 tau)) dd;
// ahla, with m = P 1, n = E 1 before the chunk, x = X 1 = diag(g^tau) Q m + A 1 and dm', dn' after it:
//   dx = A^T dd + D K dn',  dA += (dd x^T + dx 1^T) . L_g,  dQ += diag(g^tau) (dd n^T + dx m^T),
//   dK += D x dn'^T + D 1 dm'^T,  dm = g^64 dm' + Q^T diag(g^tau) dx,  dn = g^64 dn' + Q^T diag(g^tau) dd.
// The vectors' products are 64-term dot products on the ordinary cores in float32, their rank-one
// terms added to the accumulators before those are rounded.
// Operands are rounded to bf16 for the products (A, U or X, W, dW, dU or dX, dA, the copies of the
// state adjoints and, with decay, the scaled copies of K, V, dO, U or X and dU or dX); all but A are
// read from shared tiles, so that the registers hold the two state adjoints and at most three
// accumulators besides; the sums stay in float32. docs/gpu.md gives the error bound.

#include <cuda_bf16.h>

#include <string>

#include "decay.cuh"
#include "hla/fast/gpu_status.hpp"
#include "launch.hpp"
#include "segments.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace hla::fast::gpu::detail {
namespace {

using Bf = __nv_bfloat16;
using decay::Decay;
using tma::Arrival, tma::shared_address, tma::start_loading, tma::start_loading_bytes;
using wgmma::Accumulator;
using wgmma::Major;
using wgmma::RowOperand;

constexpr int width = wgmma::width;
constexpr int threads = 128;      // one warpgroup
constexpr int input_tiles = 6;    // Q, K, V, dO, and the checkpoint's two states
constexpr int working_tiles = 8;  // Tiles::a .. Tiles::d_state2
constexpr int decayed_tiles = 5;  // Tiles::decayed_k .. Tiles::decayed_du
constexpr int tile_elements = wgmma::tile_bytes / 2;
// Normalized: per stage the checkpoint's two vectors (bf16), and the floats dd, the vector adjoints'
// two rows, x and dx.
constexpr int vector_floats = 5 * width;
// Chunks of input in shared memory: one computing, the others loading; two with decay, whose
// scaled copies take the third's room.
constexpr int stages_for(bool decayed) {
  return decayed ? 2 : 3;
}
constexpr int shared_bytes(bool decayed, bool normalized) {
  return wgmma::tile_alignment +
         (stages_for(decayed) * input_tiles + working_tiles + (decayed ? decayed_tiles : 0)) *
             wgmma::tile_bytes +
         (normalized ? stages_for(decayed) * static_cast<int>(checkpoint_vector_bytes) + vector_floats * 4
                     : 0) +
         (decayed ? decay::powers_count * 4 : 0);
}
static_assert(shared_bytes(false, true) <= 227 * 1024 && shared_bytes(true, true) <= 227 * 1024,
              "the fast backward's shared memory exceeds Hopper's 227 KB");

struct Chunk {
  const Bf *q, *k, *v, *d_out, *state1, *state2;  // the states before the chunk: hla2 S~, F~; ahla P~, E~
  const Bf *vector2, *vector1;                    // normalized: hla2 f~ (and zeros); ahla n~, m~
};

template <bool Decayed, bool Normalized>
struct Tiles {
  static constexpr bool decayed = Decayed;
  static constexpr int stages = stages_for(Decayed);
  Bf* inputs;  // stages x (Q, K, V, dO, and the states before the chunk)
  // A, dA (masked); hla2 U, W (masked), dW (masked), dU; ahla X, dX; the adjoints of the states after
  // the chunk (hla2 dS', dF'; ahla dP', dE').
  Bf *a, *u, *w, *dw, *du, *da, *d_state1, *d_state2;
  // Decayed: D K; hla2 D^2 V, diag(g^(2 tau)) dO, D^2 U, diag(g^tau) dU; ahla D V, diag(g^tau) dO, D X,
  // diag(g^tau) dX. (hla2's summary pass keeps M's scaled V in decayed_k.)
  Bf *decayed_k = nullptr, *decayed_v = nullptr, *decayed_d_out = nullptr, *decayed_u = nullptr,
     *decayed_du = nullptr;
  // Normalized: stages x the checkpoint's vectors; the chunk's dd; the vector adjoints after the chunk
  // (hla2 df' in d_vector2; ahla dm', dn'); ahla's x and dx.
  Bf* vectors = nullptr;
  float *dd = nullptr, *d_vector1 = nullptr, *d_vector2 = nullptr, *x = nullptr, *dx = nullptr;
  float* powers = nullptr;  // decayed: g^0 .. g^192
  __device__ explicit Tiles(unsigned char* shared)
      : inputs(reinterpret_cast<Bf*>(
            shared + (wgmma::tile_alignment - shared_address(shared) % wgmma::tile_alignment) %
                         wgmma::tile_alignment)) {
    Bf* next = inputs + stages * input_tiles * tile_elements;
    const auto take = [&] {
      Bf* tile = next;
      next += tile_elements;
      return tile;
    };
    a = take(), u = take(), w = take(), dw = take(), du = take(), da = take();
    d_state1 = take(), d_state2 = take();
    if constexpr (Decayed) {
      decayed_k = take(), decayed_v = take(), decayed_d_out = take(), decayed_u = take();
      decayed_du = take();
    }
    float* floats = reinterpret_cast<float*>(next);
    if constexpr (Normalized) {
      vectors = next;
      floats += stages * checkpoint_vector_bytes / 4;
      dd = floats, d_vector1 = dd + width, d_vector2 = d_vector1 + width, x = d_vector2 + width;
      dx = x + width;
      floats += vector_floats;
    }
    if constexpr (Decayed) powers = floats;
  }
  __device__ Bf* stage(std::int64_t i) const { return inputs + (i % stages) * input_tiles * tile_elements; }
  __device__ Bf* stage_vectors(std::int64_t i) const {
    return vectors + (i % stages) * (checkpoint_vector_bytes / 2);
  }
  __device__ Chunk chunk(std::int64_t i) const {
    const Bf* first = stage(i);
    const Bf* vector = Normalized ? stage_vectors(i) : nullptr;
    return {first,
            first + tile_elements,
            first + 2 * tile_elements,
            first + 3 * tile_elements,
            first + 4 * tile_elements,
            first + 5 * tile_elements,
            vector,
            Normalized ? vector + width : nullptr};
  }
  // g^i, or 1 without decay.
  __device__ float power(int i) const { return Decayed ? powers[i] : 1.0f; }
};

__device__ void publish_shared() {
  wgmma::fence_shared();
  __syncthreads();
}

// Where a chunk's gradients go: `rows` rows from token first_token (of all sequence-heads) of dq, dk
// (rows of key_dim) and dv (rows of value_dim); the tiles' columns past those are zeros' gradients.
struct Gradient {
  float *dq, *dk, *dv;
  std::int64_t first_token;
  int rows, key_dim, value_dim;
  __device__ void store_dq(const Accumulator& g) const { store(dq, key_dim, g); }
  __device__ void store_dk(const Accumulator& g) const { store(dk, key_dim, g); }
  __device__ void store_dv(const Accumulator& g) const { store(dv, value_dim, g); }
  __device__ void store(float* to, int columns, const Accumulator& g) const {
    wgmma::store_rows(to + first_token * columns, g, rows, columns);
  }
};

// Sums: the float32 adjoints of the states, in: after the chunk, out: before it. Normalized, each
// chunk also computes the vector adjoints before it, one entry per thread (`next`: thread j < 64
// entry j of hla2's df, ahla's dn; thread 64 + j entry j of ahla's dm), which replace the shared
// ones (Tiles::d_vector1, d_vector2) once the chunk has read them; hla2's summary pass keeps mu
// (M's vector, below) in threads 64 ..
struct StateAdjoints {
  Accumulator state1, state2;
  float next = 0, mu = 0;
};

// Dot products of a swizzled bf16 tile with a vector, in float32 on the ordinary cores, four partial
// sums of 16 terms each: sum_t tile(t, j) w(t) (column j: a warp's threads read neighbouring entries
// of one row) and sum_c tile(r, c) w(c) (row r: its eight 16-byte pieces, which the swizzle puts in
// eight different bank groups for eight consecutive rows, so a warp's rows load without conflict).
template <class Weight>
__device__ float dot_column(const Bf* tile, int j, Weight w) {
  float sum[4] = {};
#pragma unroll 8
  for (int t = 0; t < width; ++t)
    sum[t % 4] = fmaf(__bfloat162float(tile[wgmma::offset(t, j)]), w(t), sum[t % 4]);
  return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}
// Row r's weights, eight at a time (columns 8 piece .. 8 piece + 7): a float32 vector, a bf16 row, or ones.
struct FloatWeights {
  const float* w;
  __device__ void operator()(int piece, float (&out)[8]) const {
    const float4 low = reinterpret_cast<const float4*>(w)[2 * piece],
                 high = reinterpret_cast<const float4*>(w)[2 * piece + 1];
    out[0] = low.x, out[1] = low.y, out[2] = low.z, out[3] = low.w;
    out[4] = high.x, out[5] = high.y, out[6] = high.z, out[7] = high.w;
  }
};
struct Bf16Weights {
  const Bf* w;
  __device__ void operator()(int piece, float (&out)[8]) const {
    const uint4 bits = reinterpret_cast<const uint4*>(w)[piece];
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&bits);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 x = __bfloat1622float2(pairs[p]);
      out[2 * p] = x.x, out[2 * p + 1] = x.y;
    }
  }
};
struct Ones {
  __device__ void operator()(int, float (&out)[8]) const {
#pragma unroll
    for (float& x : out) x = 1.0f;
  }
};
template <class Weights>
__device__ float dot_row(const Bf* tile, int r, Weights weights) {
  float sum[4] = {};
  const uint4* row = reinterpret_cast<const uint4*>(tile + r * width);
#pragma unroll
  for (int piece = 0; piece < 8; ++piece) {
    const uint4 bits = row[piece ^ (r % 8)];  // columns 8 piece .. 8 piece + 7
    const auto* pairs = reinterpret_cast<const __nv_bfloat162*>(&bits);
    float w[8];
    weights(piece, w);
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const float2 x = __bfloat1622float2(pairs[p]);
      sum[p] = fmaf(x.y, w[2 * p + 1], fmaf(x.x, w[2 * p], sum[p]));
    }
  }
  return (sum[0] + sum[1]) + (sum[2] + sum[3]);
}

// d(r, c) += a(r) b(c) on the thread's entries of d.
template <class A, class B>
__device__ void add_outer(Accumulator& d, A a, B b) {
  const float rows[2] = {a(Accumulator::row(0)), a(Accumulator::row(2))};
#pragma unroll
  for (int i = 0; i < 32; ++i) d.x[i] = fmaf(rows[i / 2 % 2], b(Accumulator::column(i)), d.x[i]);
}

// A = (Q K^T) . L_g issued as the chunk's first group; round_masked_a() takes it, once done, as a
// register operand and into its tile.
__device__ void issue_a(Accumulator& a, const Chunk& now) {
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(a, now.q, now.k, false);
  wgmma::commit();
}
// bf16 of d masked by L_g^step (step 1: A, dA; step 2: W, dW).
template <class Tiles>
__device__ RowOperand round_masked(const Accumulator& d, const Tiles& s, int step) {
  if constexpr (Tiles::decayed)
    return wgmma::round_to_masked_operand(
        d, [&](int, int r, int c) { return c <= r ? s.powers[step * (r - c)] : 0.0f; });
  return wgmma::round_to_masked_operand(d);
}

// tile = bf16(d) and, with decay, scaled = bf16(diag(factor) d); returns the tile that the products
// with the scaled rows read (scaled with decay, else tile).
template <class Tiles>
__device__ const Bf* round_with_scaled_copy(const Tiles&, const Accumulator& d, Bf* tile, Bf* scaled,
                                            const wgmma::RowPair& factor) {
  wgmma::round_to_tile(d, tile);
  if constexpr (!Tiles::decayed) return tile;
  wgmma::round_to_tile(d, scaled, factor);
  return scaled;
}
template <class Tiles>
__device__ RowOperand round_masked_a(Accumulator& a, const Tiles& s) {
  wgmma::fence_operand(a);
  const RowOperand masked = round_masked(a, s, 1);
  wgmma::store_operand(masked, s.a);
  return masked;
}

__device__ void scale_state(Accumulator& d, float factor, bool decayed) {
  if (decayed) wgmma::scale(d, factor);
}

// The chunk's inputs as the products read them: with decay, copies with scaled rows (read after the
// next barrier): D K, V scaled by D^order (hla2 2, ahla 1) and dO by diag(g^(order tau)), those
// asked for; without, the inputs.
struct Scaled {
  const Bf *k, *v, *d_out;
};
template <class Tiles>
__device__ Scaled scaled_inputs(const Tiles& s, const Chunk& now, int order, bool k, bool v) {
  Scaled in{now.k, now.v, now.d_out};
  if constexpr (!Tiles::decayed) return in;
  const auto scale_rows = [&](Bf* to, const Bf* from, int step, int first) {
    wgmma::scale_tile_rows(to, from, [&](int r) { return s.powers[first + step * r]; });
    return to;
  };
  if (k) in.k = scale_rows(s.decayed_k, now.k, -1, width - 1);
  if (v) in.v = scale_rows(s.decayed_v, now.v, -order, order * (width - 1));
  in.d_out = scale_rows(s.decayed_d_out, now.d_out, order, order);
  return in;
}

// hla2's dW = (dO V^T) . L_g . L_g into its tile (normalized, dd 1^T added first), once its group is done.
template <bool Normalized, class Tiles>
__device__ void finish_hla2_dw(Accumulator& d_w, const Tiles& s) {
  wgmma::fence_operand(d_w);
  if constexpr (Normalized)
    add_outer(
        d_w, [&](int r) { return s.dd[r]; }, [](int) { return 1.0f; });
  wgmma::store_operand(round_masked(d_w, s, 2), s.dw);
}

// hla2's dU = dW^T Q + (D^2 V) dF'^T and dF = g^128 dF' + Q^T diag(g^(2 tau)) dO, two groups issued
// after any the caller has, dF' read from its copy before the chunk's decay; normalized, the new df's
// entry of threads 0..63 too (read by the ordinary cores while the products run).
template <bool Normalized, class Tiles>
__device__ void issue_hla2_du(const Tiles& s, const Chunk& now, const Scaled& in, const Decay& decay,
                              StateAdjoints& d, Accumulator& d_u) {
  wgmma::multiply<Major::mn, Major::mn>(d_u, s.dw, now.q, false);
  wgmma::multiply<Major::k, Major::k>(d_u, in.v, s.d_state2, true);
  wgmma::commit();
  wgmma::multiply<Major::mn, Major::mn>(d.state2, now.q, in.d_out, true);
  wgmma::commit();
  if constexpr (Normalized) {
    if (threadIdx.x < width) {
      const int j = threadIdx.x;
      d.next = fmaf(decay.rho2, s.d_vector2[j],
                    dot_column(now.q, j, [&](int t) { return s.power(2 * t + 2) * s.dd[t]; }));
    }
  }
}
// dU, once its group is done (normalized, (D^2 1) df'^T added first), into its tile and, with decay,
// diag(g^tau) dU into its copy; returns the tile the products with diag(g^tau) dU read.
template <bool Normalized, class Tiles>
__device__ const Bf* finish_hla2_du(Accumulator& d_u, const Tiles& s, const Decay& decay) {
  wgmma::fence_operand(d_u);
  if constexpr (Normalized)
    add_outer(
        d_u, [&](int r) { return s.power(2 * (width - 1 - r)); }, [&](int c) { return s.d_vector2[c]; });
  return round_with_scaled_copy(s, d_u, s.du, s.decayed_du, decay.offset);
}

template <bool Decayed, bool Normalized>
__device__ void hla2_chunk(const Tiles<Decayed, Normalized>& s, const Chunk& now, const Decay& decay,
                           StateAdjoints& d, const Gradient& g, float ridge) {
  const Scaled in = scaled_inputs(s, now, 2, true, true);  // D K, D^2 V, diag(g^(2 tau)) dO
  // A, U = diag(g^tau) Q S + A K (the forward's operations), dW = (dO V^T) . L_g . L_g.
  Accumulator a, u, d_w;
  issue_a(a, now);
  wgmma::multiply<Major::k, Major::mn>(u, now.q, now.state1, false);
  wgmma::commit();
  wgmma::wait<Decayed ? 0 : 1>();
  RowOperand masked_a = round_masked_a(a, s);
  if constexpr (Decayed) {  // the row scaling between U's two products
    wgmma::fence_operand(u);
    wgmma::scale_rows(u, u, decay.offset);
  }
  wgmma::fence();
  wgmma::multiply<Major::mn>(u, masked_a, now.k, true);
  wgmma::commit();
  wgmma::multiply<Major::k, Major::k>(d_w, now.d_out, now.v, false);
  wgmma::commit();
  wgmma::wait<1>();
  wgmma::fence_operand(masked_a);
  wgmma::fence_operand(u);
  if (!Decayed && ridge != 0) wgmma::add_tile(u, now.q, ridge);  // U + ridge Q
  const Bf* u_aged = round_with_scaled_copy(s, u, s.u, s.decayed_u, decay.age2);
  wgmma::wait<0>();
  finish_hla2_dw<Normalized>(d_w, s);
  publish_shared();

  // W = (Q U^T) . L_g . L_g, dU, dF (and df).
  Accumulator w, d_u;
  wgmma::fence_operand(d.state2);
  scale_state(d.state2, decay.rho2, Decayed);
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(w, now.q, s.u, false);
  wgmma::commit();
  issue_hla2_du<Normalized>(s, now, in, decay, d, d_u);
  wgmma::wait<2>();
  wgmma::fence_operand(w);
  wgmma::store_operand(round_masked(w, s, 2), s.w);
  wgmma::wait<1>();
  const Bf* du_offset = finish_hla2_du<Normalized>(d_u, s, decay);
  publish_shared();

  // dV = W^T dO + (D^2 U) dF', dA = (dU K^T) . L_g, dS = g^64 dS' + Q^T diag(g^tau) dU.
  {
    Accumulator d_v, d_a;
    wgmma::fence_operand(d.state1);
    scale_state(d.state1, decay.rho, Decayed);
    wgmma::fence();
    wgmma::multiply<Major::mn, Major::mn>(d_v, s.w, now.d_out, false);
    wgmma::multiply<Major::k, Major::mn>(d_v, u_aged, s.d_state2, true);
    wgmma::commit();
    wgmma::multiply<Major::k, Major::k>(d_a, s.du, now.k, false);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(d.state1, now.q, du_offset, true);
    wgmma::commit();
    wgmma::wait<2>();
    wgmma::fence_operand(d_v);
    g.store_dv(d_v);
    wgmma::wait<1>();
    wgmma::fence_operand(d_a);
    wgmma::store_operand(round_masked(d_a, s, 1), s.da);
  }
  publish_shared();

  // dQ = diag(g^(2 tau)) dO F^T + dW U + diag(g^tau) dU S^T + dA K (normalized, + diag(g^(2 tau)) dd f^T;
  // with the ridge, + ridge dU), dK = A^T dU + dA^T Q + D K dS' + D K dS'^T.
  Accumulator d_q, d_k;
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(d_q, in.d_out, now.state2, false);
  wgmma::multiply<Major::k, Major::mn>(d_q, s.dw, s.u, true);
  wgmma::multiply<Major::k, Major::k>(d_q, du_offset, now.state1, true);
  wgmma::multiply<Major::k, Major::mn>(d_q, s.da, now.k, true);
  wgmma::commit();
  wgmma::multiply<Major::mn, Major::mn>(d_k, s.a, s.du, false);
  wgmma::multiply<Major::mn, Major::mn>(d_k, s.da, now.q, true);
  wgmma::multiply<Major::k, Major::mn>(d_k, in.k, s.d_state1, true);
  wgmma::multiply<Major::k, Major::k>(d_k, in.k, s.d_state1, true);
  wgmma::commit();
  wgmma::wait<1>();
  wgmma::fence_operand(d_q);
  if constexpr (Normalized)
    add_outer(
        d_q, [&](int r) { return s.power(2 * r + 2) * s.dd[r]; },
        [&](int c) { return __bfloat162float(now.vector2[c]); });
  if (!Decayed && ridge != 0) wgmma::add_tile(d_q, s.du, ridge);
  g.store_dq(d_q);
  wgmma::wait<0>();
  wgmma::fence_operand(d_k);
  g.store_dk(d_k);
}

// ahla's dX = A^T dO + D K dE' and dE = g^64 dE' + Q^T diag(g^tau) dO, after A's tile is published;
// normalized, while they run, dx = A^T dd + D K dn' (threads 64 ..) and, with `x`, x = diag(g^tau) Q m
// + A 1 (threads 0 .. 63) into their rows. Returns the tile the products with diag(g^tau) dX read.
template <bool Normalized, class Tiles>
__device__ const Bf* ahla_dx_round(const Tiles& s, const Chunk& now, const Scaled& in, const Decay& decay,
                                   StateAdjoints& d, bool x) {
  Accumulator d_x;
  wgmma::fence_operand(d.state2);
  scale_state(d.state2, decay.rho, Tiles::decayed);
  wgmma::fence();
  wgmma::multiply<Major::mn, Major::mn>(d_x, s.a, now.d_out, false);
  wgmma::multiply<Major::k, Major::mn>(d_x, in.k, s.d_state2, true);
  wgmma::commit();
  wgmma::multiply<Major::mn, Major::mn>(d.state2, now.q, in.d_out, true);
  wgmma::commit();
  if constexpr (Normalized) {
    if (threadIdx.x >= width) {
      const int j = threadIdx.x - width;
      s.dx[j] = fmaf(s.power(width - 1 - j), dot_row(now.k, j, FloatWeights{s.d_vector2}),
                     dot_column(s.a, j, [&](int t) { return s.dd[t]; }));
    } else if (x) {
      const int t = threadIdx.x;
      s.x[t] = fmaf(s.power(t + 1), dot_row(now.q, t, Bf16Weights{now.vector1}), dot_row(s.a, t, Ones{}));
    }
  }
  wgmma::wait<1>();
  wgmma::fence_operand(d_x);
  return round_with_scaled_copy(s, d_x, s.du, s.decayed_du, decay.offset);
}

// ahla's vector adjoints before the chunk, once dx is published: dn (threads 0 .. 63), dm (64 ..).
template <class Tiles>
__device__ void ahla_vector_adjoints(const Tiles& s, const Chunk& now, const Decay& decay, StateAdjoints& d) {
  const int j = threadIdx.x % width;
  const float* from = threadIdx.x < width ? s.dd : s.dx;
  const float* after = threadIdx.x < width ? s.d_vector2 : s.d_vector1;
  d.next = fmaf(decay.rho, after[j], dot_column(now.q, j, [&](int t) { return s.power(t + 1) * from[t]; }));
}

template <bool Decayed, bool Normalized>
__device__ void ahla_chunk(const Tiles<Decayed, Normalized>& s, const Chunk& now, const Decay& decay,
                           StateAdjoints& d, const Gradient& g) {
  const Scaled in = scaled_inputs(s, now, 1, true, true);  // D K, D V, diag(g^tau) dO
  // A, X = diag(g^tau) Q P + A V (the forward's operations).
  Accumulator a, x;
  issue_a(a, now);
  wgmma::multiply<Major::k, Major::mn>(x, now.q, now.state1, false);
  wgmma::commit();
  wgmma::wait<Decayed ? 0 : 1>();
  RowOperand masked_a = round_masked_a(a, s);
  if constexpr (Decayed) {  // the row scaling between X's two products
    wgmma::fence_operand(x);
    wgmma::scale_rows(x, x, decay.offset);
  }
  wgmma::fence();
  wgmma::multiply<Major::mn>(x, masked_a, now.v, true);
  wgmma::commit();
  wgmma::wait<0>();
  wgmma::fence_operand(masked_a);
  wgmma::fence_operand(x);
  const Bf* x_aged = round_with_scaled_copy(s, x, s.u, s.decayed_u, decay.age);
  publish_shared();  // A and X

  const Bf* dx_offset = ahla_dx_round<Normalized>(s, now, in, decay, d, true);
  publish_shared();

  // dA = (dO X^T + dX V^T) . L_g (normalized, + dd x^T + dx 1^T), dV = D K dP' + A^T dX,
  // dP = g^64 dP' + Q^T diag(g^tau) dX.
  {
    Accumulator d_a, d_v;
    wgmma::fence_operand(d.state1);
    scale_state(d.state1, decay.rho, Decayed);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(d_a, now.d_out, s.u, false);
    wgmma::multiply<Major::k, Major::k>(d_a, s.du, now.v, true);
    wgmma::commit();
    wgmma::multiply<Major::k, Major::mn>(d_v, in.k, s.d_state1, false);
    wgmma::multiply<Major::mn, Major::mn>(d_v, s.a, s.du, true);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(d.state1, now.q, dx_offset, true);
    wgmma::commit();
    if constexpr (Normalized) ahla_vector_adjoints(s, now, decay, d);
    wgmma::wait<2>();
    wgmma::fence_operand(d_a);
    if constexpr (Normalized) {
      add_outer(
          d_a, [&](int r) { return s.dd[r]; }, [&](int c) { return s.x[c]; });
      add_outer(
          d_a, [&](int r) { return s.dx[r]; }, [](int) { return 1.0f; });
    }
    wgmma::store_operand(round_masked(d_a, s, 1), s.da);
    wgmma::wait<1>();
    wgmma::fence_operand(d_v);
    g.store_dv(d_v);
  }
  publish_shared();

  // dQ = diag(g^tau) dO E^T + diag(g^tau) dX P^T + dA K (normalized, + diag(g^tau) (dd n^T + dx m^T)),
  // dK = D X dE'^T + D V dP'^T + dA^T Q (normalized, + D x dn'^T + D 1 dm'^T).
  Accumulator d_q, d_k;
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(d_q, in.d_out, now.state2, false);
  wgmma::multiply<Major::k, Major::k>(d_q, dx_offset, now.state1, true);
  wgmma::multiply<Major::k, Major::mn>(d_q, s.da, now.k, true);
  wgmma::commit();
  wgmma::multiply<Major::k, Major::k>(d_k, x_aged, s.d_state2, false);
  wgmma::multiply<Major::k, Major::k>(d_k, in.v, s.d_state1, true);
  wgmma::multiply<Major::mn, Major::mn>(d_k, s.da, now.q, true);
  wgmma::commit();
  wgmma::wait<1>();
  wgmma::fence_operand(d_q);
  if constexpr (Normalized) {
    const auto offset_times = [&](const float* v) {
      return [&s, v](int r) { return s.power(r + 1) * v[r]; };
    };
    add_outer(d_q, offset_times(s.dd), [&](int c) { return __bfloat162float(now.vector2[c]); });
    add_outer(d_q, offset_times(s.dx), [&](int c) { return __bfloat162float(now.vector1[c]); });
  }
  g.store_dq(d_q);
  wgmma::wait<0>();
  wgmma::fence_operand(d_k);
  if constexpr (Normalized) {
    const auto age_times = [&](const float* v) {
      return [&s, v](int r) { return s.power(width - 1 - r) * v[r]; };
    };
    add_outer(d_k, age_times(s.x), [&](int c) { return s.d_vector2[c]; });
    add_outer(
        d_k, [&](int r) { return s.power(width - 1 - r); }, [&](int c) { return s.d_vector1[c]; });
  }
  g.store_dk(d_k);
}

// Sequences split into segments (segments.cuh) when the sequence-heads alone leave SMs idle. The
// chunks of segment g run from the adjoints after it, which the segments after it determine: from
// zero adjoints after it, a segment (chunks b..e, L of them) leaves the state adjoints dS0, dF0 (ahla
// dP0, dE0) before it, and, the recurrences being linear, from the adjoints dS, dF after it
//   hla2: dF0 + rho2^L dF  and  dS0 + rho^L dS + M dF^T,
//         M = sum_c rho^(c - b) rho2^(e - c) Q_c^T diag(g^(128 - tau)) V_c (dF's share of dS through dU);
//   ahla: dE0 + rho^L dE  and  dP0 + rho^L (dP + M dE),  M = sum_c Q_c^T K_c (through dX: diag(g^tau) D =
//   g^64).
// Normalized, the vectors likewise with V a column of ones: hla2 df0 + rho2^L df, and dS gains mu df^T
// with mu M's vector (V_c replaced by ones); ahla dn0 + rho^L dn and dm0 + rho^L (dm + M dn).
// The summary pass computes (dS0, dF0, M; hla2 mu, df0; ahla dm0, dn0) for every segment but each
// sequence's first (it reads no checkpoint); backward_carry_kernel combines them from the last segment
// back; the gradient pass runs each segment from its carry-in.
enum class Pass { gradients, summary };
constexpr int matrix_floats = width * width;
constexpr int summary_floats = 3 * matrix_floats + 2 * width;
constexpr int carry_floats =
    2 * matrix_floats + 2 * width;  // and the vectors (hla2: unused, df; ahla: dm, dn)
static_assert(summary_floats == fast_summary_floats(false), "a rank's exchange is the forward's size");

// hla2's summary of a chunk: dW, dU, the adjoints' updates and M's (mu's), none of the gradients.
// `m_factor(r)`: rho2^(e - c) g^(128 - tau) for row r (tau = r + 1); normalized, kept in Tiles::x
// (which hla2 does not use otherwise) for mu.
template <bool Decayed, bool Normalized, class MFactor>
__device__ void hla2_summary_chunk(const Tiles<Decayed, Normalized>& s, const Chunk& now, const Decay& decay,
                                   StateAdjoints& d, Accumulator& m, MFactor m_factor) {
  const Scaled in = scaled_inputs(s, now, 2, false, true);  // D^2 V, diag(g^(2 tau)) dO
  if constexpr (Normalized) {
    if (threadIdx.x >= width) s.x[threadIdx.x - width] = m_factor(threadIdx.x - width);
  }
  const Bf* v_for_m = now.v;
  if constexpr (Decayed) {
    wgmma::scale_tile_rows(s.decayed_k, now.v, m_factor);
    v_for_m = s.decayed_k;
  }
  {
    Accumulator d_w;
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(d_w, now.d_out, now.v, false);
    wgmma::commit();
    wgmma::wait<0>();
    finish_hla2_dw<Normalized>(d_w, s);
  }
  publish_shared();
  const Bf* du_offset;
  {
    Accumulator d_u;
    wgmma::fence_operand(d.state2);
    scale_state(d.state2, decay.rho2, Decayed);
    wgmma::fence();
    issue_hla2_du<Normalized>(s, now, in, decay, d, d_u);
    if constexpr (Normalized) {
      if (threadIdx.x >= width) {
        const int j = threadIdx.x - width;
        d.mu = fmaf(decay.rho, d.mu, dot_column(now.q, j, [&](int t) { return s.x[t]; }));
      }
    }
    wgmma::wait<1>();
    du_offset = finish_hla2_du<Normalized>(d_u, s, decay);
  }
  publish_shared();
  wgmma::fence_operand(d.state1);
  wgmma::fence_operand(m);
  scale_state(d.state1, decay.rho, Decayed);
  scale_state(m, decay.rho, Decayed);
  wgmma::fence();
  wgmma::multiply<Major::mn, Major::mn>(d.state1, now.q, du_offset, true);
  wgmma::multiply<Major::mn, Major::mn>(m, now.q, v_for_m, true);
  wgmma::commit();
  wgmma::wait<0>();
}

// ahla's summary of a chunk: A, dX, the adjoints' updates and M's, none of the gradients.
template <bool Decayed, bool Normalized>
__device__ void ahla_summary_chunk(const Tiles<Decayed, Normalized>& s, const Chunk& now, const Decay& decay,
                                   StateAdjoints& d, Accumulator& m) {
  const Scaled in = scaled_inputs(s, now, 1, true, false);  // D K, diag(g^tau) dO
  {
    Accumulator a;
    issue_a(a, now);
    wgmma::wait<0>();
    round_masked_a(a, s);
  }
  publish_shared();
  const Bf* dx_offset = ahla_dx_round<Normalized>(s, now, in, decay, d, false);
  publish_shared();
  wgmma::fence_operand(d.state1);
  wgmma::fence_operand(m);
  scale_state(d.state1, decay.rho, Decayed);
  wgmma::fence();
  wgmma::multiply<Major::mn, Major::mn>(d.state1, now.q, dx_offset, true);
  wgmma::multiply<Major::mn, Major::mn>(m, now.q, now.k, true);
  wgmma::commit();
  if constexpr (Normalized) ahla_vector_adjoints(s, now, decay, d);
  wgmma::wait<0>();
}

struct Arguments {
  std::int64_t length, segment_chunks;
  int segments;
  int key_dim, value_dim;  // dq, dk's and dv's columns (<= 64; the tiles' columns past them are zeros)
  const unsigned char* checkpoints;
  const float* d_den;  // normalized: dd [heads, length]
  float *dq, *dk, *dv;
  const double* head_decays;  // or null: `decay` for every head
  std::int64_t heads_per_batch;
  double decay;
  float ridge;           // hla2 without decay
  const float* carries;  // the gradient pass of a split sequence: the adjoints after each segment
  float* summaries;      // the summary pass: (dS0, dF0, M and the vectors) of each segment but the first
  // A rank's slice (docs/ranks.md, launch_rank): one segment, which the summary pass summarizes whole
  // (summaries[head]) and the gradient pass runs from carries[head] when carries are given.
  bool rank_slice = false;
};

// q, k, v, d_num: tensor maps of the [heads, length, d or dv] bf16 inputs with 64 x 64 boxes (a short
// last chunk read with zeros past the end, a narrower head with zeros past its columns); checkpoints: the
// forward's, [heads, chunks] of checkpoint_bytes(Normalized). Decayed: some head's gamma is not 1 (the kernel
// takes any gamma, 1 included). One block per segment (of each sequence-head); the summary pass has one for
// each segment but the first (a rank's slice: one block per sequence-head in both).
template <bool Ahla, bool Decayed, bool Normalized, Pass pass>
__global__ void __launch_bounds__(threads, 1)
    fast_backward_kernel(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                         const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap d_num,
                         const Arguments args) {
  using Shared = Tiles<Decayed, Normalized>;
  constexpr int stages = Shared::stages;
  constexpr std::int64_t record = checkpoint_bytes(Normalized);  // one chunk's checkpoint
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ Arrival loaded[stages];
  const Shared s(shared);
  const int segments = args.segments;
  const bool rank_slice = args.rank_slice;
  const int per_head = rank_slice ? 1 : pass == Pass::gradients ? segments : segments - 1;
  const std::int64_t head = blockIdx.x / per_head;
  const std::int64_t segment = rank_slice ? 0 : blockIdx.x % per_head + (pass == Pass::summary ? 1 : 0);
  const std::int64_t length = args.length, chunks = (length + width - 1) / width;
  const std::int64_t first = segment * args.segment_chunks;
  const std::int64_t count = std::min(args.segment_chunks, chunks - first);  // this segment's chunks
  // Step i works on chunk first + count - 1 - i.
  const auto start_step = [&](std::int64_t i) {  // by thread 0
    if (i >= count) return;
    const std::int64_t c = first + count - 1 - i, row = c * width;
    Bf* to = s.stage(i);
    Arrival& arrival = loaded[i % stages];
    // A short chunk's missing rows arrive as zeros; the summary pass needs no forward state.
    constexpr bool states = pass == Pass::gradients;
    arrival.expect((states ? input_tiles : input_tiles - 2) * wgmma::tile_bytes +
                   (states && Normalized ? checkpoint_vector_bytes : 0));
    start_loading(q, row, head, to, arrival);
    start_loading(k, row, head, to + tile_elements, arrival);
    start_loading(v, row, head, to + 2 * tile_elements, arrival);
    start_loading(d_num, row, head, to + 3 * tile_elements, arrival);
    if constexpr (states) {
      const unsigned char* from = args.checkpoints + (head * chunks + c) * record;
      start_loading_bytes(to + 4 * tile_elements, from, 2 * wgmma::tile_bytes, arrival);
      if constexpr (Normalized)
        start_loading_bytes(s.stage_vectors(i), from + 2 * wgmma::tile_bytes, checkpoint_vector_bytes,
                            arrival);
    }
  };
  // Normalized: thread t < 64 fetches dd of row t of step i's chunk (zero past n), one step ahead.
  const auto fetch_dd = [&](std::int64_t i) {
    if (!Normalized || i >= count || threadIdx.x >= width) return 0.0f;
    const std::int64_t row = (first + count - 1 - i) * width + threadIdx.x;
    return row < length ? args.d_den[head * length + row] : 0.0f;
  };

  const double gamma = decay::gamma_of(args.head_decays, args.heads_per_batch, args.decay, head);
  if constexpr (Decayed) decay::fill_powers(s.powers, gamma);
  StateAdjoints d;
  Accumulator m;  // the summary pass's M
  wgmma::zero(m);
  const bool carried_in =
      pass == Pass::gradients && (rank_slice ? args.carries != nullptr : segment + 1 < segments);
  const float* carry = carried_in ? args.carries + (head * segments + segment) * carry_floats : nullptr;
  if (carried_in) {
    wgmma::load_rows(d.state1, carry);
    wgmma::load_rows(d.state2, carry + matrix_floats);
  } else {
    wgmma::zero(d.state1);
    wgmma::zero(d.state2);
  }
  if constexpr (Normalized) {
    if (threadIdx.x < width) {
      const int j = threadIdx.x;
      s.d_vector1[j] = carried_in && Ahla ? carry[2 * matrix_floats + j] : 0.0f;  // hla2's slot is unused
      s.d_vector2[j] = carried_in ? carry[2 * matrix_floats + width + j] : 0.0f;
      s.dd[j] = fetch_dd(0);
    }
  }
  wgmma::round_to_tile(d.state1, s.d_state1);
  wgmma::round_to_tile(d.state2, s.d_state2);
  if (threadIdx.x == 0) {
    for (Arrival& arrival : loaded) arrival.init();
    Arrival::fence_init();
  }
  publish_shared();
  if (threadIdx.x == 0)
    for (int i = 0; i < stages - 1; ++i) start_step(i);
  const Decay decay = Decayed ? Decay(s.powers) : Decay{};

  for (std::int64_t i = 0; i < count; ++i) {
    const std::int64_t c = first + count - 1 - i;
    loaded[i % stages].wait(i / stages % 2);
    publish_shared();  // the copies of the state adjoints (and dd, the vector adjoints); the last step's
                       // products are done
    if (threadIdx.x == 0) start_step(i + stages - 1);  // into the last step's buffers
    const float next_dd = fetch_dd(i + 1);
    if constexpr (pass == Pass::summary) {
      if constexpr (Ahla) {
        ahla_summary_chunk(s, s.chunk(i), decay, d, m);
      } else {
        // rho2^(e - c) g^(128 - tau) = g^(128 i + 127 - r), a float32 rounding of the float64 power.
        hla2_summary_chunk(s, s.chunk(i), decay, d, m, [&](int r) {
          return static_cast<float>(pow(gamma, static_cast<double>(128 * i + 127 - r)));
        });
      }
    } else {
      const Gradient g{args.dq,
                       args.dk,
                       args.dv,
                       head * length + c * width,
                       static_cast<int>(std::min<std::int64_t>(width, length - c * width)),
                       args.key_dim,
                       args.value_dim};
      if constexpr (Ahla) {
        ahla_chunk(s, s.chunk(i), decay, d, g);
      } else {
        hla2_chunk(s, s.chunk(i), decay, d, g, args.ridge);
      }
    }
    wgmma::fence_operand(d.state1);
    wgmma::fence_operand(d.state2);
    __syncthreads();  // every warp's products (and reads) of the copies are done (a warp's wait covers its
                      // own)
    wgmma::round_to_tile(d.state1, s.d_state1);  // published at the top of the next step
    wgmma::round_to_tile(d.state2, s.d_state2);
    if constexpr (Normalized) {
      if (threadIdx.x < width) {
        s.d_vector2[threadIdx.x] = d.next;
        s.dd[threadIdx.x] = next_dd;
      } else if (Ahla) {
        s.d_vector1[threadIdx.x - width] = d.next;
      }
    }
  }
  if constexpr (pass == Pass::summary) {
    wgmma::fence_operand(m);
    float* to = args.summaries + (rank_slice ? head : head * (segments - 1) + segment - 1) * summary_floats;
    wgmma::store_rows(to, d.state1);
    wgmma::store_rows(to + matrix_floats, d.state2);
    wgmma::store_rows(to + 2 * matrix_floats, m);
    if constexpr (Normalized) {  // hla2 (mu, df0), ahla (dm0, dn0)
      float* vectors = to + 3 * matrix_floats;
      if (threadIdx.x < width) {
        vectors[width + threadIdx.x] = d.next;
      } else {
        vectors[threadIdx.x - width] = Ahla ? d.next : d.mu;
      }
    }
  }
}

// The adjoints after segments stop - 1 .. segments - 2 of one sequence-head (block), from the last
// segment (which starts from zero) back, in float32 on the ordinary cores; segment g's summary at
// summaries[head * head_stride + (g - 1) * segment_stride] (g >= 1), the adjoints after segment g - 1 to
// carries[head * segments + g - 1]. With L the segment's chunks, r = g^(64 L) and r2 = g^(128 L) (ahla: r):
//   hla2: dF = r2 dF + dF0,  dS = r dS + dS0 + M dF^T (the dF before this step);
//   ahla: dE = r dE + dE0,   dP = r (dP + M dE) + dP0;
// normalized also hla2 df = r2 df + df0 and dS gains mu df^T; ahla dn = r dn + dn0, dm = r (dm + M dn) + dm0.
template <bool Ahla, bool Normalized>
__global__ void __launch_bounds__(256)
    backward_carry_kernel(const float* summaries, std::int64_t head_stride, std::int64_t segment_stride,
                          float* carries, int segments, int stop, std::int64_t segment_chunks,
                          std::int64_t chunks, const double* head_decays, std::int64_t heads_per_batch,
                          double decay) {
  __shared__ float state1[matrix_floats], state2[matrix_floats], vector1[width], vector2[width];
  constexpr int per_thread = matrix_floats / 256;
  const std::int64_t head = blockIdx.x;
  const double gamma = decay::gamma_of(head_decays, heads_per_batch, decay, head);
  for (int i = threadIdx.x; i < matrix_floats; i += 256) state1[i] = state2[i] = 0;
  if (threadIdx.x < width) vector1[threadIdx.x] = vector2[threadIdx.x] = 0;
  for (int g = segments - 1; g >= stop; --g) {
    const std::int64_t length = std::min(segment_chunks, chunks - g * segment_chunks);
    const float r = static_cast<float>(pow(gamma, 64.0 * static_cast<double>(length)));
    const float r2 = Ahla ? r : static_cast<float>(pow(gamma, 128.0 * static_cast<double>(length)));
    const float* summary = summaries + (head * head_stride + (g - 1) * segment_stride) * summary_floats;
    const float* m = summary + 2 * matrix_floats;
    const float* summary_vectors = summary + 3 * matrix_floats;  // hla2 (mu, df0), ahla (dm0, dn0)
    float next1[per_thread], next2[per_thread], next_vector = 0;
    __syncthreads();  // the last step's writes of the states and vectors are visible
#pragma unroll
    for (int e = 0; e < per_thread; ++e) {
      const int i = threadIdx.x + 256 * e, row = i / width, col = i % width;
      float product = 0;  // hla2: (M dF^T)(row, col);  ahla: (M dE)(row, col)
      for (int j = 0; j < width; ++j)
        product = fmaf(m[row * width + j], Ahla ? state2[j * width + col] : state2[col * width + j], product);
      if (!Ahla && Normalized) product = fmaf(summary_vectors[row], vector2[col], product);  // (mu df^T)
      next1[e] = Ahla ? fmaf(r, state1[i] + product, summary[i]) : fmaf(r, state1[i], summary[i]) + product;
      next2[e] = fmaf(r2, state2[i], summary[matrix_floats + i]);
    }
    if (Normalized && threadIdx.x < 2 * width) {  // thread j < 64: df (dn) entry j; 64 + j: ahla's dm
      const int j = threadIdx.x % width;
      if (threadIdx.x < width) {
        next_vector = fmaf(r2, vector2[j], summary_vectors[width + j]);
      } else if (Ahla) {
        float product = 0;  // (M dn)(j)
        for (int c = 0; c < width; ++c) product = fmaf(m[j * width + c], vector2[c], product);
        next_vector = fmaf(r, vector1[j] + product, summary_vectors[j]);
      }
    }
    __syncthreads();  // every product has read the states and vectors
    float* carry = carries + (head * segments + g - 1) * carry_floats;
#pragma unroll
    for (int e = 0; e < per_thread; ++e) {
      const int i = threadIdx.x + 256 * e;
      state1[i] = carry[i] = next1[e];
      state2[i] = carry[matrix_floats + i] = next2[e];
    }
    if (Normalized && threadIdx.x < 2 * width) {
      const int j = threadIdx.x % width;
      if (threadIdx.x < width) {
        vector2[j] = carry[2 * matrix_floats + width + j] = next_vector;
      } else if (Ahla) {
        vector1[j] = carry[2 * matrix_floats + j] = next_vector;
      }
    }
  }
}

// A launch's arguments for `how` over sequences of `length` tokens in `segments` segments of
// segment_chunks chunks (no carries or summaries yet).
inline Arguments arguments_of(const FastBackwardLaunch& how, std::int64_t length, std::int64_t segment_chunks,
                              int segments) {
  return {.length = length,
          .segment_chunks = segment_chunks,
          .segments = segments,
          .key_dim = how.key_dim,
          .value_dim = how.value_dim,
          .checkpoints = static_cast<const unsigned char*>(how.checkpoints),
          .d_den = how.d_den,
          .dq = how.dq,
          .dk = how.dk,
          .dv = how.dv,
          .head_decays = how.head_decays,
          .heads_per_batch = how.heads_per_batch,
          .decay = how.decay,
          .ridge = how.ridge,
          .carries = nullptr,
          .summaries = nullptr};
}

// The tensor maps of the kernel's four bf16 inputs, 64 x 64 boxes.
struct Maps {
  CUtensorMap q, k, v, d_num;
  Maps(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q_,
       const BFloat16* k_, const BFloat16* v_, const BFloat16* d_num_)
      : q(tma::tile_map(q_, heads, length, how.key_dim)),
        k(tma::tile_map(k_, heads, length, how.key_dim)),
        v(tma::tile_map(v_, heads, length, how.value_dim)),
        d_num(tma::tile_map(d_num_, heads, length, how.value_dim)) {}
};

// The kernel of `pass`, allowed its dynamic shared memory.
template <bool Ahla, bool Decayed, bool Normalized, Pass pass>
auto backward_kernel() {
  const auto kernel = fast_backward_kernel<Ahla, Decayed, Normalized, pass>;
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             shared_bytes(Decayed, Normalized)),
        "cudaFuncSetAttribute");
  return kernel;
}

template <bool Ahla, bool Decayed, bool Normalized>
void launch(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
            const BFloat16* k, const BFloat16* v, const BFloat16* d_num, CUstream_st* stream) {
  const auto gradients = backward_kernel<Ahla, Decayed, Normalized, Pass::gradients>();
  const auto summary = backward_kernel<Ahla, Decayed, Normalized, Pass::summary>();
  constexpr int shared = shared_bytes(Decayed, Normalized);
  const std::int64_t chunks = (length + width - 1) / width;
  const Split split = split_sequences(heads, chunks);
  const Maps maps(how, heads, length, q, k, v, d_num);
  const Arguments args = arguments_of(how, length, split.segment_chunks, split.segments);
  launch_split(
      heads, split, summary_floats, carry_floats, stream,
      [&](unsigned blocks, const float* carries) {
        Arguments with = args;
        with.carries = carries;
        gradients<<<blocks, threads, shared, stream>>>(maps.q, maps.k, maps.v, maps.d_num, with);
        check_launch("fast backward kernel");
      },
      [&](unsigned blocks, float* summaries) {
        Arguments with = args;
        with.summaries = summaries;
        summary<<<blocks, threads, shared, stream>>>(maps.q, maps.k, maps.v, maps.d_num, with);
        check_launch("fast backward kernel (segment summaries)");
      },
      [&](const float* summaries, float* carries) {
        backward_carry_kernel<Ahla, Normalized><<<static_cast<unsigned>(heads), 256, 0, stream>>>(
            summaries, split.segments - 1, 1, carries, split.segments, 1, split.segment_chunks, chunks,
            how.head_decays, how.heads_per_batch, how.decay);
        check_launch("fast backward kernel (carry-ins)");
      });
}

// One rank's slice of the backward (docs/ranks.md), the forward's mirror: the summary pass over the
// whole slice (every rank but the first; the first sends zeros, which no rank reads), the all-gather,
// the adjoints after the slice from the ranks after it (the carry kernel over the gathered summaries
// from the last rank down to this one's successor; every rank before the last `slice_tokens` long, and
// the last one's length never enters: its step starts from zero adjoints), then the gradient pass from
// them, one block per sequence-head. `how.checkpoints`: the rank forward's, of its own chunks.
template <bool Ahla, bool Decayed, bool Normalized>
void launch_rank(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                 const BFloat16* k, const BFloat16* v, const BFloat16* d_num, const FastRank& rank,
                 CUstream_st* stream) {
  constexpr int shared = shared_bytes(Decayed, Normalized);
  const std::int64_t chunks = (length + width - 1) / width;
  Arguments args = arguments_of(how, length, std::max<std::int64_t>(chunks, 1), 1);
  args.rank_slice = true;
  const auto summarize = [&](float* mine) {
    if (rank.rank == 0 || chunks == 0) return;  // the first rank's summary is read by none
    const Maps maps(how, heads, length, q, k, v, d_num);
    Arguments with = args;
    with.summaries = mine;
    backward_kernel<Ahla, Decayed, Normalized,
                    Pass::summary>()<<<static_cast<unsigned>(heads), threads, shared, stream>>>(
        maps.q, maps.k, maps.v, maps.d_num, with);
    check_launch("fast backward kernel (rank summary)");
  };
  // The adjoints after "segments" 0 .. ranks - 2, of which this rank's is one.
  const auto combine = [&](const float* gathered, float* all) {
    const std::int64_t slice_chunks = rank.slice_tokens / width;
    backward_carry_kernel<Ahla, Normalized><<<static_cast<unsigned>(heads), 256, 0, stream>>>(
        gathered + heads * summary_floats, 1, heads, all, rank.ranks, rank.rank + 1, slice_chunks,
        rank.ranks * slice_chunks, how.head_decays, how.heads_per_batch, how.decay);
    check_launch("fast backward kernel (rank carry)");
  };
  float* carry = rank_exchange(heads, summary_floats, carry_floats, rank, summarize,
                               rank.rank + 1 < rank.ranks ? rank.ranks : 0, rank.rank, combine, stream);
  args.carries = carry;
  if (chunks > 0) {
    const Maps maps(how, heads, length, q, k, v, d_num);
    backward_kernel<Ahla, Decayed, Normalized,
                    Pass::gradients>()<<<static_cast<unsigned>(heads), threads, shared, stream>>>(
        maps.q, maps.k, maps.v, maps.d_num, args);
    check_launch("fast backward kernel (rank gradients)");
  }
  if (carry) check(cudaFreeAsync(carry, stream), "cudaFreeAsync");
}

// f.template operator()<Ahla, Decayed, Normalized>() for the kernel that `how` takes.
template <class F>
void with_backward_kernel(const FastBackwardLaunch& how, const F& f) {
  // The catalogue refuses a ridge with decay, and ahla has none (as launch_fast).
  if (how.ridge != 0 && (how.ahla || how.head_decays || how.decay != 1))
    throw Error("fast backward: the ridge is hla2's, without decay");
  tma::require_hopper();
  const bool decayed = how.head_decays || how.decay != 1;
  const auto run = [&]<bool Ahla, bool Normalized>() {
    if (decayed) {
      f.template operator()<Ahla, true, Normalized>();
    } else {
      f.template operator()<Ahla, false, Normalized>();
    }
  };
  if (how.ahla) {
    how.normalize ? run.template operator()<true, true>() : run.template operator()<true, false>();
  } else {
    how.normalize ? run.template operator()<false, true>() : run.template operator()<false, false>();
  }
}

}  // namespace

void launch_fast_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                          const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                          CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  if (how.key_dim > width || how.value_dim > width)
    return launch_wide_backward(how, heads, length, q, k, v, d_num, stream);
  with_backward_kernel(how, [&]<bool Ahla, bool Decayed, bool Normalized>() {
    launch<Ahla, Decayed, Normalized>(how, heads, length, q, k, v, d_num, stream);
  });
}

void launch_fast_rank_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                               const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                               const FastRank& rank, CUstream_st* stream) {
  if (heads == 0) return;
  if (how.key_dim > width || how.value_dim > width)
    throw Error("fast backward across ranks: heads up to 64 wide");
  with_backward_kernel(how, [&]<bool Ahla, bool Decayed, bool Normalized>() {
    launch_rank<Ahla, Decayed, Normalized>(how, heads, length, q, k, v, d_num, rank, stream);
  });
}

}  // namespace hla::fast::gpu::detail
