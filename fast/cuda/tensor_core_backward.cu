// The fast path's backward: masked hla2 and ahla, unnormalized, decay gamma in (0, 1] per head, on
// the matrix units (bf16 operands, float32 sums), d = dv = 64, chunks of 64 tokens (the last one may
// be short). One block (one warpgroup) per sequence-head walks its chunks from the last to the
// first, carrying the adjoints of the two states in accumulator registers; each chunk's forward
// states come from the checkpoints the forward wrote at chunk boundaries (tensor_core.cu,
// Arguments::checkpoints: the bf16 tiles its products read), and the chunk's products are
// recomputed from them.
//
// With g the decay, tau = 1..64 a token's place in its chunk, D = diag(g^(64 - tau)), L_g the causal
// mask with entries g^(t - j) (tensor_core.cu's forms) and, given dO, the adjoints of the states
// after the chunk (zero after the last one; the adjoints before it are what the chunk leaves in the
// accumulators):
// hla2, forward A = (Q K^T) . L_g, U = diag(g^tau) Q S + A K, W = (Q U^T) . L_g . L_g,
// O = diag(g^(2 tau)) Q F + W V, S' = g^64 S + K^T (D K), F' = g^128 F + (D^2 U)^T V; backward
//   dW = (dO V^T) . L_g . L_g,  dU = dW^T Q + (D^2 V) dF'^T,  dA = (dU K^T) . L_g,
//   dV = W^T dO + (D^2 U) dF',
//   dQ = diag(g^(2 tau)) dO F^T + dW U + diag(g^tau) dU S^T + dA K,
//   dK = A^T dU + dA^T Q + D K (dS' + dS'^T),
//   dS = g^64 dS' + Q^T diag(g^tau) dU,  dF = g^128 dF' + Q^T diag(g^(2 tau)) dO
// (Hla2MaskedChunks::outputs_adjoint, fast/include/hla/fast/chunked/hla2.hpp, with the carry written
// as the running states);
// ahla, forward A = (Q K^T) . L_g, X = diag(g^tau) Q P + A V, O = diag(g^tau) Q E + A X,
// P' = g^64 P + K^T (D V), E' = g^64 E + K^T (D X); backward
//   dX = A^T dO + D K dE',  dA = (dO X^T + dX V^T) . L_g,  dV = D K dP' + A^T dX,
//   dQ = diag(g^tau) (dO E^T + dX P^T) + dA K,  dK = D X dE'^T + D V dP'^T + dA^T Q,
//   dP = g^64 dP' + Q^T diag(g^tau) dX,  dE = g^64 dE' + Q^T diag(g^tau) dO.
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
// Chunks of input in shared memory: one computing, the others loading; two with decay, whose
// scaled copies take the third's room.
constexpr int stages_for(bool decayed) {
  return decayed ? 2 : 3;
}
constexpr int shared_bytes(bool decayed) {
  return wgmma::tile_alignment +
         (stages_for(decayed) * input_tiles + working_tiles + (decayed ? decayed_tiles : 0)) *
             wgmma::tile_bytes +
         (decayed ? decay::powers_count * 4 : 0);
}
static_assert(shared_bytes(false) <= 227 * 1024 && shared_bytes(true) <= 227 * 1024,
              "the fast backward's shared memory exceeds Hopper's 227 KB");

struct Chunk {
  const Bf *q, *k, *v, *d_out, *state1, *state2;  // the states before the chunk: hla2 S~, F~; ahla P~, E~
};

template <bool Decayed>
struct Tiles {
  static constexpr int stages = stages_for(Decayed);
  Bf* inputs;  // stages x (Q, K, V, dO, and the states before the chunk)
  // A, dA (masked); hla2 U, W (masked), dW (masked), dU; ahla X, dX; the adjoints of the states after
  // the chunk (hla2 dS', dF'; ahla dP', dE').
  Bf *a, *u, *w, *dw, *du, *da, *d_state1, *d_state2;
  // Decayed: D K; hla2 D^2 V, diag(g^(2 tau)) dO, D^2 U, diag(g^tau) dU; ahla D V, diag(g^tau) dO, D X,
  // diag(g^tau) dX; the powers g^0 .. g^128. (hla2's summary pass keeps M's scaled V in decayed_k.)
  Bf *decayed_k, *decayed_v, *decayed_d_out, *decayed_u, *decayed_du;
  float* powers;
  __device__ explicit Tiles(unsigned char* shared)
      : inputs(reinterpret_cast<Bf*>(
            shared + (wgmma::tile_alignment - shared_address(shared) % wgmma::tile_alignment) %
                         wgmma::tile_alignment)) {
    a = inputs + stages * input_tiles * tile_elements;
    u = a + tile_elements;
    w = u + tile_elements;
    dw = w + tile_elements;
    du = dw + tile_elements;
    da = du + tile_elements;
    d_state1 = da + tile_elements;
    d_state2 = d_state1 + tile_elements;
    decayed_k = d_state2 + tile_elements;
    decayed_v = decayed_k + tile_elements;
    decayed_d_out = decayed_v + tile_elements;
    decayed_u = decayed_d_out + tile_elements;
    decayed_du = decayed_u + tile_elements;
    powers = reinterpret_cast<float*>(decayed_du + tile_elements);
  }
  __device__ Bf* stage(std::int64_t i) const { return inputs + (i % stages) * input_tiles * tile_elements; }
  __device__ Chunk chunk(std::int64_t i) const {
    const Bf* first = stage(i);
    return {first,
            first + tile_elements,
            first + 2 * tile_elements,
            first + 3 * tile_elements,
            first + 4 * tile_elements,
            first + 5 * tile_elements};
  }
};

__device__ void publish_shared() {
  wgmma::fence_shared();
  __syncthreads();
}

// Where a chunk's gradients go: rows first_row / 64 .. of dq, dk, dv, `rows` of them.
struct Gradient {
  float *dq, *dk, *dv;
  std::int64_t first_row;
  int rows;
};

// Sums: the float32 adjoints of the states, in: after the chunk, out: before it.
struct StateAdjoints {
  Accumulator state1, state2;
};

// A = (Q K^T) . L_g issued as the chunk's first group; round_masked_a() takes it, once done, as a
// register operand and into its tile.
__device__ void issue_a(Accumulator& a, const Chunk& now) {
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(a, now.q, now.k, false);
  wgmma::commit();
}
// bf16 of d masked by L_g^step (step 1: A, dA; step 2: W, dW).
template <bool Decayed>
__device__ RowOperand round_masked(const Accumulator& d, const Tiles<Decayed>& s, int step) {
  if constexpr (Decayed)
    return wgmma::round_to_masked_operand(
        d, [&](int, int r, int c) { return c <= r ? s.powers[step * (r - c)] : 0.0f; });
  return wgmma::round_to_masked_operand(d);
}

// tile = bf16(d) and, with decay, scaled = bf16(diag(factor) d); returns the tile that the products
// with the scaled rows read (scaled with decay, else tile).
template <bool Decayed>
__device__ const Bf* round_with_scaled_copy(const Accumulator& d, Bf* tile, Bf* scaled,
                                            const wgmma::RowPair& factor) {
  wgmma::round_to_tile(d, tile);
  if constexpr (!Decayed) return tile;
  wgmma::round_to_tile(d, scaled, factor);
  return scaled;
}
template <bool Decayed>
__device__ RowOperand round_masked_a(Accumulator& a, const Tiles<Decayed>& s) {
  wgmma::fence_operand(a);
  const RowOperand masked = round_masked(a, s, 1);
  wgmma::store_operand(masked, s.a);
  return masked;
}

// Decayed: copies of the chunk's inputs with their rows scaled, after its loads have landed and
// before the barrier that publishes them. Two rows' powers apart: offsets (g^tau: step 1, first 1;
// g^(2 tau): 2, 2) and ages (g^(64 - tau): -1, 63; g^(2 (64 - tau)): -2, 126).
template <bool Decayed>
__device__ void scale_rows(Bf* to, const Bf* from, const Tiles<Decayed>& s, int step, int first) {
  wgmma::scale_tile_rows(to, from, [&](int r) { return s.powers[first + step * r]; });
}

__device__ void scale_state(Accumulator& d, float factor, bool decayed) {
  if (decayed) wgmma::scale(d, factor);
}

template <bool Decayed>
__device__ void hla2_chunk(const Tiles<Decayed>& s, const Chunk& now, const Decay& decay, StateAdjoints& d,
                           const Gradient& g) {
  // The scaled copies D K, D^2 V, diag(g^(2 tau)) dO (read after the next barrier).
  const Bf* k_aged = now.k;
  const Bf* v_aged = now.v;
  const Bf* d_out_offset = now.d_out;
  if constexpr (Decayed) {
    scale_rows(s.decayed_k, now.k, s, -1, width - 1);
    scale_rows(s.decayed_v, now.v, s, -2, 2 * (width - 1));
    scale_rows(s.decayed_d_out, now.d_out, s, 2, 2);
    k_aged = s.decayed_k;
    v_aged = s.decayed_v;
    d_out_offset = s.decayed_d_out;
  }
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
  const Bf* u_aged = round_with_scaled_copy<Decayed>(u, s.u, s.decayed_u, decay.age2);
  wgmma::wait<0>();
  wgmma::fence_operand(d_w);
  wgmma::store_operand(round_masked(d_w, s, 2), s.dw);
  publish_shared();

  // W = (Q U^T) . L_g . L_g, dU = dW^T Q + (D^2 V) dF'^T, dF = g^128 dF' + Q^T diag(g^(2 tau)) dO.
  Accumulator w, d_u;
  wgmma::fence_operand(d.state2);
  scale_state(d.state2, decay.rho2, Decayed);
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(w, now.q, s.u, false);
  wgmma::commit();
  wgmma::multiply<Major::mn, Major::mn>(d_u, s.dw, now.q, false);
  wgmma::multiply<Major::k, Major::k>(d_u, v_aged, s.d_state2, true);
  wgmma::commit();
  wgmma::multiply<Major::mn, Major::mn>(d.state2, now.q, d_out_offset, true);
  wgmma::commit();
  wgmma::wait<2>();
  wgmma::fence_operand(w);
  wgmma::store_operand(round_masked(w, s, 2), s.w);
  wgmma::wait<1>();
  wgmma::fence_operand(d_u);
  const Bf* du_offset = round_with_scaled_copy<Decayed>(d_u, s.du, s.decayed_du, decay.offset);
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
    wgmma::store_rows(g.dv + g.first_row, d_v, g.rows);
    wgmma::wait<1>();
    wgmma::fence_operand(d_a);
    wgmma::store_operand(round_masked(d_a, s, 1), s.da);
  }
  publish_shared();

  // dQ = diag(g^(2 tau)) dO F^T + dW U + diag(g^tau) dU S^T + dA K,
  // dK = A^T dU + dA^T Q + D K dS' + D K dS'^T.
  Accumulator d_q, d_k;
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(d_q, d_out_offset, now.state2, false);
  wgmma::multiply<Major::k, Major::mn>(d_q, s.dw, s.u, true);
  wgmma::multiply<Major::k, Major::k>(d_q, du_offset, now.state1, true);
  wgmma::multiply<Major::k, Major::mn>(d_q, s.da, now.k, true);
  wgmma::commit();
  wgmma::multiply<Major::mn, Major::mn>(d_k, s.a, s.du, false);
  wgmma::multiply<Major::mn, Major::mn>(d_k, s.da, now.q, true);
  wgmma::multiply<Major::k, Major::mn>(d_k, k_aged, s.d_state1, true);
  wgmma::multiply<Major::k, Major::k>(d_k, k_aged, s.d_state1, true);
  wgmma::commit();
  wgmma::wait<1>();
  wgmma::fence_operand(d_q);
  wgmma::store_rows(g.dq + g.first_row, d_q, g.rows);
  wgmma::wait<0>();
  wgmma::fence_operand(d_k);
  wgmma::store_rows(g.dk + g.first_row, d_k, g.rows);
}

template <bool Decayed>
__device__ void ahla_chunk(const Tiles<Decayed>& s, const Chunk& now, const Decay& decay, StateAdjoints& d,
                           const Gradient& g) {
  // The scaled copies D K, D V, diag(g^tau) dO (read after the next barrier).
  const Bf* k_aged = now.k;
  const Bf* v_aged = now.v;
  const Bf* d_out_offset = now.d_out;
  if constexpr (Decayed) {
    scale_rows(s.decayed_k, now.k, s, -1, width - 1);
    scale_rows(s.decayed_v, now.v, s, -1, width - 1);
    scale_rows(s.decayed_d_out, now.d_out, s, 1, 1);
    k_aged = s.decayed_k;
    v_aged = s.decayed_v;
    d_out_offset = s.decayed_d_out;
  }
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
  const Bf* x_aged = round_with_scaled_copy<Decayed>(x, s.u, s.decayed_u, decay.age);
  publish_shared();  // A and X

  // dX = A^T dO + D K dE', dE = g^64 dE' + Q^T diag(g^tau) dO.
  const Bf* dx_offset;
  {
    Accumulator d_x;
    wgmma::fence_operand(d.state2);
    scale_state(d.state2, decay.rho, Decayed);
    wgmma::fence();
    wgmma::multiply<Major::mn, Major::mn>(d_x, s.a, now.d_out, false);
    wgmma::multiply<Major::k, Major::mn>(d_x, k_aged, s.d_state2, true);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(d.state2, now.q, d_out_offset, true);
    wgmma::commit();
    wgmma::wait<1>();
    wgmma::fence_operand(d_x);
    dx_offset = round_with_scaled_copy<Decayed>(d_x, s.du, s.decayed_du, decay.offset);
  }
  publish_shared();

  // dA = (dO X^T + dX V^T) . L_g, dV = D K dP' + A^T dX, dP = g^64 dP' + Q^T diag(g^tau) dX.
  {
    Accumulator d_a, d_v;
    wgmma::fence_operand(d.state1);
    scale_state(d.state1, decay.rho, Decayed);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(d_a, now.d_out, s.u, false);
    wgmma::multiply<Major::k, Major::k>(d_a, s.du, now.v, true);
    wgmma::commit();
    wgmma::multiply<Major::k, Major::mn>(d_v, k_aged, s.d_state1, false);
    wgmma::multiply<Major::mn, Major::mn>(d_v, s.a, s.du, true);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(d.state1, now.q, dx_offset, true);
    wgmma::commit();
    wgmma::wait<2>();
    wgmma::fence_operand(d_a);
    wgmma::store_operand(round_masked(d_a, s, 1), s.da);
    wgmma::wait<1>();
    wgmma::fence_operand(d_v);
    wgmma::store_rows(g.dv + g.first_row, d_v, g.rows);
  }
  publish_shared();

  // dQ = diag(g^tau) dO E^T + diag(g^tau) dX P^T + dA K, dK = D X dE'^T + D V dP'^T + dA^T Q.
  Accumulator d_q, d_k;
  wgmma::fence();
  wgmma::multiply<Major::k, Major::k>(d_q, d_out_offset, now.state2, false);
  wgmma::multiply<Major::k, Major::k>(d_q, dx_offset, now.state1, true);
  wgmma::multiply<Major::k, Major::mn>(d_q, s.da, now.k, true);
  wgmma::commit();
  wgmma::multiply<Major::k, Major::k>(d_k, x_aged, s.d_state2, false);
  wgmma::multiply<Major::k, Major::k>(d_k, v_aged, s.d_state1, true);
  wgmma::multiply<Major::mn, Major::mn>(d_k, s.da, now.q, true);
  wgmma::commit();
  wgmma::wait<1>();
  wgmma::fence_operand(d_q);
  wgmma::store_rows(g.dq + g.first_row, d_q, g.rows);
  wgmma::wait<0>();
  wgmma::fence_operand(d_k);
  wgmma::store_rows(g.dk + g.first_row, d_k, g.rows);
}

// Sequences split into segments (segments.cuh) when the sequence-heads alone leave SMs idle. The
// chunks of segment g run from the adjoints after it, which the segments after it determine: from
// zero adjoints after it, a segment (chunks b..e, L of them) leaves the state adjoints dS0, dF0 (ahla
// dP0, dE0) before it, and, the recurrences being linear, from the adjoints dS, dF after it
//   hla2: dF0 + rho2^L dF  and  dS0 + rho^L dS + M dF^T,
//         M = sum_c rho^(c - b) rho2^(e - c) Q_c^T diag(g^(128 - tau)) V_c (dF's share of dS through dU);
//   ahla: dE0 + rho^L dE  and  dP0 + rho^L (dP + M dE),  M = sum_c Q_c^T K_c (through dX: diag(g^tau) D =
//   g^64).
// The summary pass computes (dS0, dF0, M) for every segment but each sequence's first (it reads no
// checkpoint); backward_carry_kernel combines them from the last segment back; the gradient pass runs each
// segment from its carry-in.
enum class Pass { gradients, summary };
constexpr int matrix_floats = width * width;
constexpr int summary_floats = 3 * matrix_floats;
constexpr int carry_floats = 2 * matrix_floats;

// hla2's summary of a chunk: dW, dU, the adjoints' updates and M's, none of the gradients.
// `m_factor(r)`: rho2^(e - c) g^(128 - tau) for row r (tau = r + 1).
template <bool Decayed, class MFactor>
__device__ void hla2_summary_chunk(const Tiles<Decayed>& s, const Chunk& now, const Decay& decay,
                                   StateAdjoints& d, Accumulator& m, MFactor m_factor) {
  const Bf* v_aged = now.v;
  const Bf* d_out_offset = now.d_out;
  const Bf* v_for_m = now.v;
  if constexpr (Decayed) {
    scale_rows(s.decayed_v, now.v, s, -2, 2 * (width - 1));
    scale_rows(s.decayed_d_out, now.d_out, s, 2, 2);
    wgmma::scale_tile_rows(s.decayed_k, now.v, m_factor);
    v_aged = s.decayed_v;
    d_out_offset = s.decayed_d_out;
    v_for_m = s.decayed_k;
  }
  {
    Accumulator d_w;
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(d_w, now.d_out, now.v, false);
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(d_w);
    wgmma::store_operand(round_masked(d_w, s, 2), s.dw);
  }
  publish_shared();
  const Bf* du_offset;
  {
    Accumulator d_u;
    wgmma::fence_operand(d.state2);
    scale_state(d.state2, decay.rho2, Decayed);
    wgmma::fence();
    wgmma::multiply<Major::mn, Major::mn>(d_u, s.dw, now.q, false);
    wgmma::multiply<Major::k, Major::k>(d_u, v_aged, s.d_state2, true);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(d.state2, now.q, d_out_offset, true);
    wgmma::commit();
    wgmma::wait<1>();
    wgmma::fence_operand(d_u);
    du_offset = round_with_scaled_copy<Decayed>(d_u, s.du, s.decayed_du, decay.offset);
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
template <bool Decayed>
__device__ void ahla_summary_chunk(const Tiles<Decayed>& s, const Chunk& now, const Decay& decay,
                                   StateAdjoints& d, Accumulator& m) {
  const Bf* k_aged = now.k;
  const Bf* d_out_offset = now.d_out;
  if constexpr (Decayed) {
    scale_rows(s.decayed_k, now.k, s, -1, width - 1);
    scale_rows(s.decayed_d_out, now.d_out, s, 1, 1);
    k_aged = s.decayed_k;
    d_out_offset = s.decayed_d_out;
  }
  {
    Accumulator a;
    issue_a(a, now);
    wgmma::wait<0>();
    round_masked_a(a, s);
  }
  publish_shared();
  const Bf* dx_offset;
  {
    Accumulator d_x;
    wgmma::fence_operand(d.state2);
    scale_state(d.state2, decay.rho, Decayed);
    wgmma::fence();
    wgmma::multiply<Major::mn, Major::mn>(d_x, s.a, now.d_out, false);
    wgmma::multiply<Major::k, Major::mn>(d_x, k_aged, s.d_state2, true);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(d.state2, now.q, d_out_offset, true);
    wgmma::commit();
    wgmma::wait<1>();
    wgmma::fence_operand(d_x);
    dx_offset = round_with_scaled_copy<Decayed>(d_x, s.du, s.decayed_du, decay.offset);
  }
  publish_shared();
  wgmma::fence_operand(d.state1);
  wgmma::fence_operand(m);
  scale_state(d.state1, decay.rho, Decayed);
  wgmma::fence();
  wgmma::multiply<Major::mn, Major::mn>(d.state1, now.q, dx_offset, true);
  wgmma::multiply<Major::mn, Major::mn>(m, now.q, now.k, true);
  wgmma::commit();
  wgmma::wait<0>();
}

struct Arguments {
  std::int64_t length, segment_chunks;
  int segments;
  const Bf* checkpoints;
  float *dq, *dk, *dv;
  const double* head_decays;  // or null: `decay` for every head
  std::int64_t heads_per_batch;
  double decay;
  const float* carries;  // the gradient pass of a split sequence: the adjoints after each segment
  float* summaries;      // the summary pass: (dS0, dF0, M) of each segment but the first
};

// q, k, v, d_out: tensor maps of the [heads, length, 64] bf16 inputs with 64 x 64 boxes (a short last
// chunk read with zeros past the end); checkpoints: the forward's, [heads, chunks, 2, 64 x 64].
// Decayed: some head's gamma is not 1 (the kernel takes any gamma, 1 included). One block per
// segment (of each sequence-head); the summary pass has one for each segment but the first.
template <bool Ahla, bool Decayed, Pass pass>
__global__ void __launch_bounds__(threads, 1)
    fast_backward_kernel(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                         const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap d_out,
                         const Arguments args) {
  constexpr int stages = Tiles<Decayed>::stages;
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ Arrival loaded[stages];
  const Tiles<Decayed> s(shared);
  const int segments = args.segments;
  const int per_head = pass == Pass::gradients ? segments : segments - 1;
  const std::int64_t head = blockIdx.x / per_head;
  const std::int64_t segment = blockIdx.x % per_head + (pass == Pass::summary ? 1 : 0);
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
    arrival.expect((pass == Pass::summary ? input_tiles - 2 : input_tiles) * wgmma::tile_bytes);
    start_loading(q, row, head, to, arrival);
    start_loading(k, row, head, to + tile_elements, arrival);
    start_loading(v, row, head, to + 2 * tile_elements, arrival);
    start_loading(d_out, row, head, to + 3 * tile_elements, arrival);
    if (pass == Pass::gradients)
      start_loading_bytes(to + 4 * tile_elements, args.checkpoints + (head * chunks + c) * 2 * tile_elements,
                          2 * wgmma::tile_bytes, arrival);
  };

  const double gamma = decay::gamma_of(args.head_decays, args.heads_per_batch, args.decay, head);
  if constexpr (Decayed) decay::fill_powers(s.powers, gamma);
  StateAdjoints d;
  Accumulator m;  // the summary pass's M
  wgmma::zero(m);
  if (pass == Pass::gradients && segment + 1 < segments) {
    const float* carry = args.carries + (head * segments + segment) * carry_floats;
    wgmma::load_rows(d.state1, carry);
    wgmma::load_rows(d.state2, carry + matrix_floats);
  } else {
    wgmma::zero(d.state1);
    wgmma::zero(d.state2);
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
    publish_shared();  // the copies of the state adjoints; the last step's products are done
    if (threadIdx.x == 0) start_step(i + stages - 1);  // into the last step's buffers
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
      const Gradient g{args.dq, args.dk, args.dv, (head * length + c * width) * width,
                       static_cast<int>(std::min<std::int64_t>(width, length - c * width))};
      if constexpr (Ahla) {
        ahla_chunk(s, s.chunk(i), decay, d, g);
      } else {
        hla2_chunk(s, s.chunk(i), decay, d, g);
      }
    }
    wgmma::fence_operand(d.state1);
    wgmma::fence_operand(d.state2);
    __syncthreads();  // every warp's products that read the copies are done (a warp's wait covers its own)
    wgmma::round_to_tile(d.state1, s.d_state1);  // published at the top of the next step
    wgmma::round_to_tile(d.state2, s.d_state2);
  }
  if constexpr (pass == Pass::summary) {
    wgmma::fence_operand(m);
    float* to = args.summaries + (head * (segments - 1) + segment - 1) * summary_floats;
    wgmma::store_rows(to, d.state1);
    wgmma::store_rows(to + matrix_floats, d.state2);
    wgmma::store_rows(to + 2 * matrix_floats, m);
  }
}

// The adjoints after each segment of one sequence-head (block) but the last (which starts from
// zero): from the last segment back, in float32 on the ordinary cores, with L the segment's chunks,
// r = g^(64 L) and r2 = g^(128 L) (ahla: r):
//   hla2: dF = r2 dF + dF0,  dS = r dS + dS0 + M dF^T (the dF before this step);
//   ahla: dE = r dE + dE0,   dP = r (dP + M dE) + dP0.
template <bool Ahla>
__global__ void __launch_bounds__(256)
    backward_carry_kernel(const float* summaries, float* carries, int segments, std::int64_t segment_chunks,
                          std::int64_t chunks, const double* head_decays, std::int64_t heads_per_batch,
                          double decay) {
  __shared__ float state1[matrix_floats], state2[matrix_floats];
  constexpr int per_thread = matrix_floats / 256;
  const std::int64_t head = blockIdx.x;
  const double gamma = decay::gamma_of(head_decays, heads_per_batch, decay, head);
  for (int i = threadIdx.x; i < matrix_floats; i += 256) state1[i] = state2[i] = 0;
  for (int g = segments - 1; g >= 1; --g) {
    const std::int64_t length = std::min(segment_chunks, chunks - g * segment_chunks);
    const float r = static_cast<float>(pow(gamma, 64.0 * static_cast<double>(length)));
    const float r2 = Ahla ? r : static_cast<float>(pow(gamma, 128.0 * static_cast<double>(length)));
    const float* summary = summaries + (head * (segments - 1) + g - 1) * summary_floats;
    const float* m = summary + 2 * matrix_floats;
    float next1[per_thread], next2[per_thread];
    __syncthreads();  // the last step's writes of state1 and state2 are visible
#pragma unroll
    for (int e = 0; e < per_thread; ++e) {
      const int i = threadIdx.x + 256 * e, row = i / width, col = i % width;
      float product = 0;  // hla2: (M dF^T)(row, col);  ahla: (M dE)(row, col)
      for (int j = 0; j < width; ++j)
        product = fmaf(m[row * width + j], Ahla ? state2[j * width + col] : state2[col * width + j], product);
      next1[e] = Ahla ? fmaf(r, state1[i] + product, summary[i]) : fmaf(r, state1[i], summary[i]) + product;
      next2[e] = fmaf(r2, state2[i], summary[matrix_floats + i]);
    }
    __syncthreads();  // every product has read state1 and state2
    float* carry = carries + (head * segments + g - 1) * carry_floats;
#pragma unroll
    for (int e = 0; e < per_thread; ++e) {
      const int i = threadIdx.x + 256 * e;
      state1[i] = carry[i] = next1[e];
      state2[i] = carry[matrix_floats + i] = next2[e];
    }
  }
}

}  // namespace

void launch_fast_backward(const FastBackwardLaunch& how, std::int64_t heads, std::int64_t length,
                          const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_out,
                          CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  tma::require_hopper();
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const bool decayed = how.head_decays || how.decay != 1;
  const auto run = [&]<bool Ahla, bool Decayed>() {
    const auto gradients = fast_backward_kernel<Ahla, Decayed, Pass::gradients>;
    const auto summary = fast_backward_kernel<Ahla, Decayed, Pass::summary>;
    constexpr int shared = shared_bytes(Decayed);
    for (const auto kernel : {gradients, summary})
      check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared),
            "cudaFuncSetAttribute");
    const std::int64_t chunks = (length + width - 1) / width;
    const int segments = static_cast<int>(segments_for(heads, chunks, sms));
    const std::int64_t segment_chunks = (chunks + segments - 1) / segments;
    const CUtensorMap q_map = tma::tile_map(q, heads, length), k_map = tma::tile_map(k, heads, length),
                      v_map = tma::tile_map(v, heads, length),
                      d_out_map = tma::tile_map(d_out, heads, length);
    Arguments args{.length = length,
                   .segment_chunks = segment_chunks,
                   .segments = segments,
                   .checkpoints = static_cast<const Bf*>(how.checkpoints),
                   .dq = how.dq,
                   .dk = how.dk,
                   .dv = how.dv,
                   .head_decays = how.head_decays,
                   .heads_per_batch = how.heads_per_batch,
                   .decay = how.decay,
                   .carries = nullptr,
                   .summaries = nullptr};
    if (segments == 1) {
      gradients<<<static_cast<unsigned>(heads), threads, shared, stream>>>(q_map, k_map, v_map, d_out_map,
                                                                           args);
      check_launch("fast backward kernel");
      return;
    }
    const StreamScratch summaries(heads * (segments - 1) * summary_floats, stream);
    const StreamScratch carries(heads * segments * carry_floats, stream);
    args.summaries = summaries.get();
    summary<<<static_cast<unsigned>(heads * (segments - 1)), threads, shared, stream>>>(q_map, k_map, v_map,
                                                                                        d_out_map, args);
    check_launch("fast backward kernel (segment summaries)");
    backward_carry_kernel<Ahla><<<static_cast<unsigned>(heads), 256, 0, stream>>>(
        summaries.get(), carries.get(), segments, segment_chunks, chunks, how.head_decays,
        how.heads_per_batch, how.decay);
    check_launch("fast backward kernel (carry-ins)");
    args.summaries = nullptr;
    args.carries = carries.get();
    gradients<<<static_cast<unsigned>(heads * segments), threads, shared, stream>>>(q_map, k_map, v_map,
                                                                                    d_out_map, args);
    check_launch("fast backward kernel");
  };
  if (how.ahla) {
    decayed ? run.operator()<true, true>() : run.operator()<true, false>();
  } else {
    decayed ? run.operator()<false, true>() : run.operator()<false, false>();
  }
}

}  // namespace hla::fast::gpu::detail
