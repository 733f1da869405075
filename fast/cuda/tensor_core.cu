// The fast path: masked hla2, ahla and hla3 on the matrix units, corrected forms (docs/findings.md F1
// for decayed hla2, F2 for hla3), normalized or not, decay gamma in (0, 1] per head; bf16 inputs,
// float32 accumulation and state, tiles of 64 columns (d and dv multiples of 8 up to 64: columns past
// d or dv load as zeros, and the outputs leave in rows of dv; up to 128: ahla's wider keys in one pass
// per value half, launch_value_halves; hla2's in two passes, launch_hla2_halves; values alone wider
// than 64 by the value halves' operators, launch_wide; up to 32, narrow kernels, whose products over
// the features are 32 wide, narrow_head), chunks of 64 tokens (the last one may be
// short: rows past n load as zeros and are not stored), outputs in float32 or bf16. One block per
// sequence-head walks its chunks in order, so the scan over chunk summaries is the running state
// itself and never touches device memory; every step of a chunk is a 64 x 64 x 64 product issued
// asynchronously on Hopper's warpgroup matrix units (wgmma.cuh), and the state sums stay in the
// accumulator registers for the whole sequence. The block's two warpgroups split each chunk's
// dependent chain in two: the key side (A, U or X, the key-side state) hands U (X; ahla's masked A too,
// hands_over_a) to the value side (W or A, the outputs, the value-side state) through shared memory
// and goes on to the next chunk, so that one side's products run while the other converts. The inputs
// arrive by the tensor memory accelerator (TMA), chunks ahead, and each chunk's outputs leave by one
// bulk copy, so the warpgroups' own instructions are the products and the conversions between them.
//
// With g the decay, tau = 1..64 a token's place in its chunk, D = diag(g^(64 - tau)) (each token's
// age at the chunk's end) and L_g the causal mask with entries g^(t - j) (Hla2MaskedChunks and
// AhlaChunks, fast/include/hla/fast/chunked/, are the CPU forms):
// hla2, with S the key moment and F = sum_j g^(2 (end - j)) u_j v_j^T before the chunk (with a
// ridge and gamma = 1, u_j + ridge q_j in place of u_j),
//   A = (Q K^T) . L_g,  U = diag(g^tau) Q S + A K  (rows u_j = S_j q_j),  W = (Q U^T) . L_g . L_g,
//   O = diag(g^(2 tau)) Q F + W V,  S = g^64 S + (D K)^T K,  F = g^128 F + (D^2 U)^T V;
// ahla, with P = sum g^(end - i) k v^T and E = sum_i g^(end - i) k_i (q_i^T P_i) before the chunk,
//   A = (Q K^T) . L_g,  X = diag(g^tau) Q P + A V  (rows q_i^T P_i),  O = diag(g^tau) Q E + A X,
//   P = g^64 P + (D K)^T V,  E = g^64 E + K^T (D X)  (wide heads: P_h = g^64 P_h + (K^h)^T (D V));
// hla3 (Hla3MaskedChunks), with S^K, P as ahla's and F = sum g^(3 (end - j)) z_j r_j^T: hla3_key_side
// and hla3_value_side below.
// Normalized, the denominators are the same sums with V replaced by a column of ones (hla2: f = F 1,
// den = diag(g^(2 tau)) Q f + W 1; ahla: m = P 1, x = X 1, n = E 1, den = diag(g^tau) Q n + A x),
// products with N = 8 whose B operand's first column is the vector and the rest zero.
// Operands are rounded to bf16 for the products (A, U or X, hla3's Z and R, W, the states, the decayed
// copies D K, D^2 U, D V, D X, D^3 Z); the sums stay in float32. docs/gpu.md gives the error bound.

#include <cuda_bf16.h>

#include <algorithm>
#include <string>
#include <type_traits>
#include <vector>
#if defined(HLA_FAST_PHASES)
#include <cstdio>
#endif

#include "decay.cuh"
#include "hla/fast/gpu_status.hpp"
#include "launch.hpp"
#include "phases.cuh"
#include "segments.cuh"
#include "tma.cuh"
#include "wgmma.cuh"

namespace hla::fast::gpu::detail {
namespace {

using Bf = __nv_bfloat16;
using decay::Decay;
using tma::Arrival, tma::shared_address, tma::start_loading, tma::start_storing, tma::wait_stores_done,
    tma::wait_stores_read;
using wgmma::Accumulator;
using wgmma::Column;
using wgmma::load_rows;
using wgmma::Major;
using wgmma::store_rows;

enum class Algebra { hla2, ahla, hla3 };

constexpr int width = wgmma::width;  // C, and the tiles' d and dv (narrower heads zero-padded)
constexpr int group_threads = 128;   // a warpgroup
constexpr int threads = 2 * group_threads;  // the key side and the value side
// hla2 and ahla: and a producer warpgroup, whose first warp issues the loads and second the stores
// (producer below; the other two have nothing to do); hla3's kernels (194-254 registers a thread at
// d = 64, more than the 232 a side keeps below beside a producer warpgroup) keep two warpgroups.
constexpr int threads_for(bool third) {
  return third ? threads : threads + group_threads;
}
// The registers of hla2's and ahla's three warpgroups: the launch gives each thread 168 (65,536 a
// multiprocessor over 384 threads, in steps of 8), and the producer warpgroup gives all but 40 to the
// two sides (setmaxnreg), which then have 232 each: the sides' accumulators, which at 168 spilled or
// held back the products of the normalized and decayed kernels (docs/perf.md, "the registers to the
// two sides").
constexpr int launch_registers = 65536 / threads_for(false) / 8 * 8;
constexpr int producer_registers = 40, side_registers = 232;
static_assert(2 * side_registers + producer_registers <= 3 * launch_registers);
// setmaxnreg, run by every warp of the calling warpgroup: down to (release) or up to (claim) `count`
// registers a thread.
template <int count>
__device__ void release_registers() {
  asm volatile("setmaxnreg.dec.sync.aligned.u32 %0;\n" ::"n"(count));
}
template <int count>
__device__ void claim_registers() {
  asm volatile("setmaxnreg.inc.sync.aligned.u32 %0;\n" ::"n"(count));
}
// Whether a 64-wide or narrow kernel's layout depends on its output type (bf16_out below: a kernel of
// each): ahla's normalized kernel at d = 64 without decay (a_tiles_for).
constexpr bool layout_by_output(Algebra algebra, bool normalized, bool decayed, int features) {
  return algebra == Algebra::ahla && normalized && !decayed && features == wgmma::width;
}
// The tiles from which the value side of a 64-wide or narrow kernel (features: 64 or 32 wide products)
// reads the key side's masked A instead of forming A itself (hands_over_a), none where it forms it:
// ahla's without decay and its narrow decayed ones, two (chunks c % 2); but the normalized kernel at
// d = 64 one with bf16 outputs (two would take it down to five stages) and none with float32 ones,
// where the hand-over made it slower (docs/perf.md, "ahla's value side takes the key side's masked A");
// the 64-wide decayed ones none (they would have four stages; "ahla's decayed kernels take the key
// side's masked A"). bf16_out: the kernel's output type where layout_by_output, else false.
constexpr int a_tiles_for(Algebra algebra, bool normalized, bool decayed, int features, bool bf16_out) {
  if (algebra != Algebra::ahla) return 0;
  if (decayed) return features < wgmma::width ? 2 : 0;
  if (layout_by_output(algebra, normalized, decayed, features)) return bf16_out ? 1 : 0;
  return 2;
}
// Chunks of input in shared memory: a chunk's buffers stay taken from the key side's start of it to
// the value side's end of it (the key side runs up to two chunks ahead), the others loading.
// The third order's three more tiles (its second key-side state and two of R) take one stage's room,
// and so do the decayed copies, and ahla's two A tiles where its vectors or the decayed copies are there
// too (one A tile leaves the sixth stage room).
constexpr int stages_for(Algebra algebra, bool normalized, bool decayed, int features, bool bf16_out) {
  const bool two_a_tiles = a_tiles_for(algebra, normalized, decayed, features, bf16_out) == 2;
  return algebra == Algebra::hla3 || (decayed && two_a_tiles) ? 4
         : decayed || (normalized && two_a_tiles)             ? 5
                                                              : 6;
}
constexpr int vector_tiles = 8;  // 8 rows of a tile each: ones, ages, and the normalized sums' vectors
constexpr int wide_vector_tiles = vector_tiles + 2;  // and a wide ahla head's second m and n
// hla2's values pass: ones, ages, two copies each of f_0, f_1.
constexpr int values_vector_tiles = 6;
constexpr int vector_tile_bytes = 8 * width * 2;
constexpr int matrix_floats = width * width;
constexpr int powers_count = decay::powers_count;
constexpr int output_bytes = matrix_floats * 4;  // one chunk's float32 outputs
// The outputs' staging room holds two chunks of float32 outputs, or (Tiles::out_buffers) four of bf16.
constexpr int max_out_buffers = 4;
constexpr int barrier_bytes(int stages) {  // the kernel's static barriers, 8 bytes each
  return (2 * stages + 4 + 2 * max_out_buffers) * 8;
}

// Shared memory, in the order of Tiles: what every kernel uses (the third order three tiles more,
// ahla one or two of A, a_tiles_for), then the vectors of the normalized ones, then the decayed copies
// and the powers of the decaying ones (which keep the vectors' place, used or not).
constexpr int shared_bytes(Algebra algebra, bool normalized, bool decayed, int features, bool bf16_out) {
  const int more =
      algebra == Algebra::hla3 ? 3 : a_tiles_for(algebra, normalized, decayed, features, bf16_out);
  return wgmma::tile_alignment +
         (3 * stages_for(algebra, normalized, decayed, features, bf16_out) + 4 + more) * wgmma::tile_bytes +
         2 * output_bytes + (normalized || decayed ? vector_tiles * vector_tile_bytes : 0) +
         (decayed ? 4 * wgmma::tile_bytes + powers_count * 4 : 0);
}
// With the kernel's static barriers (loaded, inputs_free, u_ready, u_free, out_staged, out_free: 8
// bytes each), within Hopper's 227 KB.
constexpr bool fits(Algebra algebra, bool normalized, bool decayed, int features, bool bf16_out) {
  return shared_bytes(algebra, normalized, decayed, features, bf16_out) +
             barrier_bytes(stages_for(algebra, normalized, decayed, features, bf16_out)) <=
         227 * 1024;
}
constexpr bool all_fit() {
  for (const Algebra algebra : {Algebra::hla2, Algebra::ahla, Algebra::hla3})
    for (const bool normalized : {false, true})
      for (const bool decayed : {false, true})
        for (const int features : {wgmma::width / 2, wgmma::width})
          for (const bool bf16_out : {false, true})
            if (!fits(algebra, normalized, decayed, features, bf16_out)) return false;
  return true;
}
static_assert(all_fit(), "the fast path's shared memory exceeds Hopper's 227 KB");

// What a block of a head with keys wider than 64 (up to 128) computes, the features in halves 0 and 1
// of 64 columns (the second one zero-padded when narrower):
//   ahla: value half z of an ahla head, both sides over both key halves (launch_value_halves);
//   hla2_keys: hla2's first pass, key half x of U (and with decay of D^2 U): ahla's key side with V :=
//     K^x, its rows stored to a bf16 scratch [heads, n, 128] (with decay 256: D^2 U at 128) by the
//     producer warp, which is the block's only other warp, two blocks a multiprocessor; hla3's first
//     pass too, whose Z is hla2's U (its copy D^3 Z: Arguments::weight_power);
//   hla3_r: hla3's second pass, value half z of R = diag(g^tau) (Q^0 P_0 + Q^1 P_1) + (A . L_g) V^z:
//     the wide ahla key side's X itself, stored to a scratch by a producer warp as hla2_keys' U is,
//     one block a multiprocessor (its five tiles a stage);
//   hla2_values: hla2's second pass, value half z of the outputs from that scratch: the first warpgroup
//     forms W = (Q^0 (U^0)^T + Q^1 (U^1)^T) . L_g^2 and the states F_h (weights_side), the value side
//     the outputs (outputs_side), as the wide ahla value side would with K := U, X := V^z and the
//     powers of g^2 (launch_hla2_halves); hla3's third pass with K := Z, V^z := R^z and the powers of g^3
//     (launch_hla3_halves).
enum class WideRole { none, ahla, hla2_keys, hla3_r, hla2_values };
// The roles whose block is the key side and a producer warp that stores its rows (U, Z or R).
__host__ __device__ constexpr bool keys_pass(WideRole role) {
  return role == WideRole::hla2_keys || role == WideRole::hla3_r;
}

// Whether a kernel stages its outputs as 128-byte-swizzled bf16 tiles (wgmma::round_to_tile: the lanes
// of a warp's store in distinct banks, where rows of 64 bf16 put eight rows' lanes in the same four),
// four chunks in the room of two float32 ones (Tiles::out_buffers), and stores them through the
// outputs' tile map (tma::tile_map: columns past dv and rows past n left out): hla2's and ahla's
// 64-wide and narrow kernels with bf16 outputs. The others stage rows (docs/perf.md, "four output
// buffers" and "the outputs staged as swizzled tiles").
__host__ __device__ constexpr bool outputs_in_tiles(bool third, WideRole wide, bool bf16_out) {
  return bf16_out && !third && wide == WideRole::none;
}

// Whether a kernel's value side reads the key side's masked A from tiles more instead of forming A
// itself: a wide head's (12-37% faster; the unnormalized decayed kernel 22%, once the two sides had the
// registers for it: docs/perf.md, "the value side takes the key side's masked A" and "ahla's decayed
// kernels take the key side's masked A"); hla2's second pass always (its first warpgroup has nothing else
// to do); the 64-wide and narrow kernels where a_tiles_for.
constexpr bool hands_over_a(Algebra algebra, WideRole role, bool normalized, bool decayed, int features,
                            bool bf16_out) {
  return role == WideRole::hla2_values || role == WideRole::ahla ||
         (role == WideRole::none && a_tiles_for(algebra, normalized, decayed, features, bf16_out) > 0);
}
// The A tiles in a kernel's layout (Tiles::a_buffers): a wide head's two where it hands A over, else
// a_tiles_for.
constexpr int a_buffers_for(Algebra algebra, WideRole role, bool normalized, bool decayed, int features,
                            bool bf16_out) {
  if (role != WideRole::none)
    return hands_over_a(algebra, role, normalized, decayed, features, bf16_out) ? 2 : 0;
  return a_tiles_for(algebra, normalized, decayed, features, bf16_out);
}
// A wide block's threads: the two sides and the producer warpgroup; keys_pass the key side and its
// producer warp.
constexpr int wide_threads(WideRole role) {
  return keys_pass(role) ? group_threads + 32 : threads_for(false);
}
// A wide block's input tiles a chunk: Q, K (hla2_values: U) of both key halves and V (the value half;
// hla2_keys: none, V := K^x being the K tile of its half; hla3_r: V^z, its value half); hla2_values with
// decay D^2 U of both halves too.
constexpr int wide_inputs(WideRole role, bool decayed) {
  return role == WideRole::hla2_keys ? 4 : role == WideRole::hla2_values && decayed ? 7 : 5;
}
// A wide block's shared memory, in the order of Tiles: `stages` stages of wide_inputs tiles; then
//   ahla: the first halves' states P, E, two of X, the second halves' P, E, two of the key side's
//     masked A (hands_over_a), the outputs' two staging buffers in the outputs' type, ten vector tiles
//     when normalized, and with decay D V, two of D X and the powers;
//   hla2_keys: S_0x, S_1x, one of U (the producer stores it before the next chunk's), and with decay
//     one of D^2 U, D K^x and the powers; hla3_r the same layout (P_0, P_1, R; D V; its D^2 U unused);
//   hla2_values: two copies each of the states F_0, F_1, two of W, the staging buffers, when normalized
//     six vector tiles (ones, ages, two copies each of f_0, f_1), and with decay the powers.
constexpr int wide_shared_bytes(WideRole role, int stages, bool normalized, bool decayed, bool bf16_out) {
  const int inputs = wide_inputs(role, decayed) * stages * wgmma::tile_bytes;
  const int staging = 2 * (bf16_out ? 2 : 4) * matrix_floats,
            vectors = normalized ? wide_vector_tiles * vector_tile_bytes : 0, powers = powers_count * 4;
  switch (role) {
    case WideRole::hla2_keys:
    case WideRole::hla3_r:
      return wgmma::tile_alignment + inputs + 3 * wgmma::tile_bytes +
             (decayed ? 2 * wgmma::tile_bytes + powers : 0);
    case WideRole::hla2_values:
      return wgmma::tile_alignment + inputs + 6 * wgmma::tile_bytes + staging +
             (normalized ? values_vector_tiles * vector_tile_bytes : 0) + (decayed ? powers : 0);
    default:
      return wgmma::tile_alignment + inputs +
             (6 + a_buffers_for(Algebra::ahla, role, normalized, decayed, width, false)) * wgmma::tile_bytes +
             staging + vectors + (decayed ? 3 * wgmma::tile_bytes + powers : 0);
  }
}
// hla2_keys in two stages, so that two blocks share a multiprocessor (its 228 KB less 1 KB a block).
constexpr int keys_stages = 2;
constexpr bool keys_fit_twice() {
  for (const bool decayed : {false, true})
    if (wide_shared_bytes(WideRole::hla2_keys, keys_stages, false, decayed, false) +
            barrier_bytes(stages_for(Algebra::ahla, false, decayed, width, false)) >
        113 * 1024)
      return false;
  return true;
}
static_assert(keys_fit_twice());
constexpr bool wide_fits(WideRole role, int stages, bool normalized, bool decayed, bool bf16_out) {
  return wide_shared_bytes(role, stages, normalized, decayed, bf16_out) +
             barrier_bytes(stages_for(Algebra::ahla, normalized, decayed, width, false)) <=
         227 * 1024;
}
// Three stages where they fit (a chunk's loads issued two ahead), else two: ahla's normalized forms but
// with bf16 outputs undecayed, its unnormalized decayed one with float32 outputs, and hla2's second pass
// with decay but with bf16 outputs unnormalized; hla2_keys keys_stages.
constexpr int wide_stages(WideRole role, bool normalized, bool decayed, bool bf16_out) {
  if (role == WideRole::hla2_keys) return keys_stages;
  return wide_fits(role, 3, normalized, decayed, bf16_out) ? 3 : 2;
}
constexpr bool wide_all_fit() {
  for (const WideRole role : {WideRole::ahla, WideRole::hla2_keys, WideRole::hla3_r, WideRole::hla2_values})
    for (const bool normalized : {false, true})
      for (const bool decayed : {false, true})
        if (!wide_fits(role, 2, normalized && !keys_pass(role), decayed, false)) return false;
  return true;
}
static_assert(wide_all_fit() && wide_stages(WideRole::ahla, false, false, false) == 3 &&
              wide_stages(WideRole::ahla, true, false, true) == 3 &&
              wide_stages(WideRole::ahla, false, true, true) == 3 &&
              wide_stages(WideRole::ahla, false, true, false) == 2 &&
              wide_stages(WideRole::hla2_values, true, false, false) == 3 &&
              wide_stages(WideRole::hla3_r, false, true, false) == 3 &&
              stages_for(Algebra::ahla, true, true, width, false) >= 3);

// One chunk's inputs in shared memory; q2 and k2 the fourth and fifth tiles of a wide block's stage
// (the second key half's Q and K, hla2_values' U; hla2_keys' stage is Q, K, Q2, K2, and its V one of
// the K tiles); ks and ks2 the left factors of hla2_values' state products (with decay D^2 U of both
// halves, the sixth and seventh tiles; else k, k2).
struct Chunk {
  Bf *q, *k, *v, *q2, *k2, *ks, *ks2;
};

// What a kernel keeps in shared memory (Tiles): its stages of inputs; hla3's tiles; a wide head's
// role, and hla2_keys' key half; whether it is normalized or decayed; whether its outputs are bf16;
// its A tiles (hands_over_a: two, or one, a_tiles_for; none where it forms A itself).
struct Layout {
  int stages;
  bool third = false;
  WideRole wide = WideRole::none;
  bool normalized = false, decayed = false, bf16_out = false;
  bool second_half = false;  // hla2_keys: the block's key half is the second
  int a_buffers = 0;
};

// The key side writes U (ahla X; hla3 Z and R) of chunk c, and its copies, into the buffers of c % 2,
// which the value side reads.
struct Tiles {
  int stages;
  WideRole wide;           // a wide head's block (wide_shared_bytes)
  bool decayed;            // a wide head's: whether its kernel decays (hla2_values: seven tiles a chunk)
  bool second_half;        // hla2_keys: the block's key half is the second (V := K2)
  int a_buffers;           // A's tiles where hands_over_a (two, or one: a_tiles_for), else 0
  bool out_tiles;          // outputs_in_tiles
  int out_buffers;         // chunks of outputs staged at once: two, four in tiles
  int staged_bytes;        // a chunk's staged outputs: float32 rows, a bf16 tile, a wide head's bf16 rows
  Bf* inputs;              // stages x (Q, K, V; a wide head's second Q, K, ...: wide_inputs)
  Bf *state1, *state2;     // hla2: S, F; ahla: P, E; hla3: S^K, F (the key side's and the value side's)
  Bf* u_tiles;             // two: hla2 U, ahla X, hla3 Z
  Bf *r_tiles, *state3;    // hla3: two of R, and P (the key side's second state)
  Bf *state1b, *state2b;   // a wide head's P and E of the second key half (in R's room; hla2_values:
                           // two copies each of F_0 in state2, F_1 in state2b)
  Bf* a_tiles;             // a_buffers of the key side's masked A where hands_over_a (64-wide and
                           // narrow kernels: in R's room)
  unsigned char* outputs;  // out_buffers chunks' outputs on their way to device memory
  // Normalized: row 0 of each: ones, ages (g^(64 - tau)); hla2: f (with F); ahla: n (with E), m
  // (with P), two of x, two of D x; a wide head's m and n of the second key half.
  Bf *ones, *ages, *vector2, *vector1, *x_rows, *decayed_x_rows, *vector1b, *vector2b;
  // Decayed: the key side's D K (ahla: D V), two of D^2 U (ahla: D X; hla3: D^3 Z), the value side's
  // D V (hla2's summaries; not in a wide head's room); the powers g^0 .. g^192, float32 roundings of
  // float64 powers (hla2_values: of g^2).
  Bf *decayed_in, *decayed_u_tiles, *decayed_extra;
  float* powers;
  __device__ Tiles(unsigned char* shared, const Layout& layout)
      : stages(layout.stages),
        wide(layout.wide),
        decayed(layout.decayed),
        second_half(layout.second_half),
        a_buffers(layout.a_buffers),
        out_tiles(outputs_in_tiles(layout.third, layout.wide, layout.bf16_out)),
        out_buffers(out_tiles ? max_out_buffers : 2),
        staged_bytes(keys_pass(wide)                             ? 0
                     : out_tiles                                 ? wgmma::tile_bytes
                     : wide != WideRole::none && layout.bf16_out ? matrix_floats * 2
                                                                 : output_bytes),
        inputs(reinterpret_cast<Bf*>(
            shared + (wgmma::tile_alignment - shared_address(shared) % wgmma::tile_alignment) %
                         wgmma::tile_alignment)) {
    constexpr int elements = wgmma::tile_bytes / 2, vector_elements = vector_tile_bytes / 2;
    const bool is_wide = wide != WideRole::none, values = wide == WideRole::hla2_values;
    const bool third = layout.third, normalized = layout.normalized;
    state1 = inputs + per_stage() * stages * elements;
    state2 = state1 + elements;
    u_tiles = state2 + elements;
    r_tiles = u_tiles + 2 * elements;
    state3 = r_tiles + 2 * elements;
    state1b = r_tiles;
    state2b = r_tiles + elements;
    a_tiles = is_wide ? r_tiles + 2 * elements : r_tiles;  // a 64-wide or narrow ahla kernel's: no R
    if (values) {  // two copies of F_0 and F_1, and W's two tiles
      state2 = state1;
      state2b = state2 + 2 * elements;
      a_tiles = state2b + 2 * elements;
      state1 = u_tiles = r_tiles = state3 = state1b = nullptr;
    }
    outputs = reinterpret_cast<unsigned char*>(third ? state3 + elements : a_tiles + a_buffers * elements);
    ones = reinterpret_cast<Bf*>(outputs + out_buffers * staged_bytes);
    ages = ones + vector_elements;
    vector2 = ages + vector_elements;
    vector1 = vector2 + vector_elements;
    x_rows = vector1 + vector_elements;
    decayed_x_rows = x_rows + 2 * vector_elements;
    vector1b = decayed_x_rows + 2 * vector_elements;
    vector2b = vector1b + vector_elements;
    if (values) {  // ones, ages, two copies of f_0 (vector2), two of f_1 (vector2b)
      vector2b = vector2 + 2 * vector_elements;
      vector1 = x_rows = decayed_x_rows = vector1b = nullptr;
    }
    // After the vectors, used or not (a wide head's: only when normalized).
    decayed_in = ones + (!is_wide ? vector_tiles : normalized ? wide_vector_tiles : 0) * vector_elements;
    decayed_u_tiles = decayed_in + elements;
    decayed_extra = decayed_u_tiles + 2 * elements;
    powers = reinterpret_cast<float*>(values ? ones + (normalized ? values_vector_tiles : 0) * vector_elements
                                      : is_wide ? decayed_extra
                                                : decayed_extra + elements);
    if (values) decayed_in = decayed_u_tiles = decayed_extra = nullptr;
    if (keys_pass(wide)) {  // S_0x, S_1x, U (hla3_r: P_0, P_1, R); with decay D^2 U, D K^x (D V), the powers
      state1b = state1 + elements;
      u_tiles = state1b + elements;
      decayed_u_tiles = u_tiles + elements;
      decayed_in = decayed_u_tiles + elements;
      powers = reinterpret_cast<float*>(decayed_in + elements);
      state2 = r_tiles = state3 = state2b = a_tiles = decayed_extra = nullptr;
      outputs = nullptr;
      ones = ages = vector2 = vector1 = x_rows = decayed_x_rows = vector1b = vector2b = nullptr;
    }
  }
  __device__ Chunk chunk(std::int64_t c) const {
    constexpr int elements = wgmma::tile_bytes / 2;
    Bf* first = inputs + per_stage() * (c % stages) * elements;
    const auto tile = [&](int i) { return i < per_stage() ? first + i * elements : nullptr; };
    if (wide == WideRole::hla2_keys) {
      Bf *k = first + elements, *k2 = first + 3 * elements;
      return {first, k, second_half ? k2 : k, first + 2 * elements, k2, k, k2};
    }
    const bool own_state_keys = per_stage() == 7;
    return {first,
            first + elements,
            first + 2 * elements,
            tile(3),
            tile(4),
            own_state_keys ? tile(5) : first + elements,
            own_state_keys ? tile(6) : tile(4)};
  }
  __device__ int per_stage() const { return wide != WideRole::none ? wide_inputs(wide, decayed) : 3; }
  // U's buffer of chunk c: one of two (keys_pass: its one).
  __device__ int buffer(std::int64_t c) const { return keys_pass(wide) ? 0 : c % 2; }
  __device__ Bf* u(std::int64_t c) const { return u_tiles + buffer(c) * (wgmma::tile_bytes / 2); }
  __device__ Bf* r(std::int64_t c) const { return r_tiles + (c % 2) * (wgmma::tile_bytes / 2); }
  __device__ Bf* a(std::int64_t c) const {  // the A tile of chunk c % 2, or the one
    return a_tiles + (a_buffers == 2 ? c % 2 : 0) * (wgmma::tile_bytes / 2);
  }
  __device__ Bf* decayed_u(std::int64_t c) const {
    return decayed_u_tiles + buffer(c) * (wgmma::tile_bytes / 2);
  }
  __device__ Bf* x(std::int64_t c) const { return x_rows + (c % 2) * (vector_tile_bytes / 2); }
  __device__ Bf* decayed_x(std::int64_t c) const {
    return decayed_x_rows + (c % 2) * (vector_tile_bytes / 2);
  }
  // Chunk c's staging buffer (out_buffers is 2 or 4), and the parity of its round through them.
  __device__ int out_slot(std::int64_t c) const { return static_cast<int>(c & (out_buffers - 1)); }
  __device__ int out_round(std::int64_t c) const {
    return static_cast<int>(c >> (out_buffers == 4 ? 2 : 1)) & 1;
  }
  __device__ unsigned char* output(std::int64_t c) const { return outputs + out_slot(c) * staged_bytes; }
  // hla2_values: F_h's copy and f_h's row that chunk c reads (the copies of c % 2).
  __device__ Bf* f_copy(std::int64_t c, int h) const {
    return (h == 0 ? state2 : state2b) + (c % 2) * (wgmma::tile_bytes / 2);
  }
  __device__ Bf* f_row(std::int64_t c, int h) const {
    return (h == 0 ? vector2 : vector2b) + (c % 2) * (vector_tile_bytes / 2);
  }
  // The vector tiles, zeroed at the start (their rows 1..7 stay zero).
  __device__ int vector_tile_count() const {
    return wide == WideRole::none          ? vector_tiles
           : wide == WideRole::hla2_values ? values_vector_tiles
                                           : wide_vector_tiles;
  }
  // hla3's summary pass, with decay: the value side's D Q (power 1) and D^2 Q (power 2) of a chunk,
  // in the outputs' room (that pass stores none).
  __device__ Bf* query_copy(int power) const {
    return reinterpret_cast<Bf*>(outputs) + (power - 1) * (wgmma::tile_bytes / 2);
  }
};

// With decay, a thread's factors of a masked operand, in registers: its accumulator entry i at
// (r, c) gets g^(power (r - c)) (A: power 1, hla2's W: 2, hla3's W: 3), zero above the diagonal.
// Mirrored (a product over later tokens, Arguments::reversed): g^(power (c - r)), zero below it.
struct MaskFactors {
  float f[32];
  MaskFactors() = default;
  __device__ MaskFactors(const float* powers, int power, bool mirrored = false) {
#pragma unroll
    for (int i = 0; i < 32; ++i) {
      const int r = Accumulator::row(i), c = Accumulator::column(i);
      f[i] = mirrored ? (c >= r ? powers[power * (c - r)] : 0.0f) : c <= r ? powers[power * (r - c)] : 0.0f;
    }
  }
  __device__ float operator()(int i, int, int) const {
    return f[i];
  }
};
// The same factors read from the powers in shared memory at each use, for a kernel short of registers:
// a wide ahla head's unnormalized decayed kernel, 8% faster so (its spills 524 -> 12 bytes); the normalized
// one ran 26% slower so and keeps the registers (docs/perf.md, "ahla's wide heads by value halves").
struct SharedMaskFactors {
  const float* powers = nullptr;
  int power = 0;
  SharedMaskFactors() = default;
  __device__ SharedMaskFactors(const float* powers_, int power_) : powers(powers_), power(power_) {}
  __device__ float operator()(int, int r, int c) const { return c <= r ? powers[power * (r - c)] : 0.0f; }
};
template <bool Shared>
using MaskFactorsOf = std::conditional_t<Shared, SharedMaskFactors, MaskFactors>;
// The mirrored mask without decay: the entries on and above the diagonal kept.
struct MirroredMask {
  __device__ float operator()(int, int r, int c) const { return c >= r ? 1.0f : 0.0f; }
};

// bf16(a . L), a's products done, as a register operand: the causal mask, with the decay's factors
// when Decayed.
template <bool Decayed, class Factors>
__device__ wgmma::RowOperand round_masked(Accumulator& a, const Factors& factors) {
  wgmma::fence_operand(a);
  if constexpr (Decayed) {
    return wgmma::round_to_masked_operand(a, factors);
  } else {
    return wgmma::round_to_masked_operand(a);
  }
}

// With decay, a sum's products from the state before the chunk, done, row-scaled into the accumulator
// the chunk's products then add to: to = diag(factor) carried, and with the vector to_vector =
// diag(factor) carried_vector (the denominators' column).
template <bool WithVector, class D>
__device__ void scale_carried(D& to, D& carried, Column& to_vector, Column& carried_vector,
                              const wgmma::RowPair& factor) {
  wgmma::fence_operand(carried);
  wgmma::scale_rows(to, carried, factor);
  if constexpr (WithVector) {
    wgmma::fence_operand(carried_vector);
    wgmma::scale_rows(to_vector, carried_vector, factor);
  }
}

// Every thread's shared-memory writes (its copies and stores) visible to every thread and to the
// matrix units and the bulk copy engine.
__device__ void publish_shared() {
  wgmma::fence_shared();
  __syncthreads();
}
// The same within the calling thread's warpgroup (named barrier 1 + its index; 0 is __syncthreads).
__device__ void sync_group() {
  asm volatile("bar.sync %0, %1;\n" ::"r"(1 + static_cast<int>(threadIdx.x) / group_threads),
               "n"(group_threads)
               : "memory");
}
__device__ void publish_group() {
  wgmma::fence_shared();
  sync_group();
}

// Columns 0 .. columns - 1 (an even number) of a 64 x 64 matrix, row-major with rows of `columns`
// (shared or device memory), from an accumulator (float32: wgmma::store_rows; the other way,
// wgmma::load_rows).
template <int N>
__device__ void store_rows(Bf* to, const wgmma::Accumulators<N>& o, int columns) {
#pragma unroll
  for (int i = 0; i < N / 2; i += 2)
    if (Accumulator::column(i) < columns)
      *reinterpret_cast<__nv_bfloat162*>(to + Accumulator::row(i) * columns + Accumulator::column(i)) =
          __floats2bfloat162_rn(o.x[i], o.x[i + 1]);
}
// Column 0 of a Column to or from 64 floats.
__device__ void store_vector(float* to, const Column& c) {
  if (!Column::holds_column0()) return;
  to[Column::row(0)] = c.x[0];
  to[Column::row(2)] = c.x[2];
}
__device__ void load_vector(Column& c, const float* from) {
  wgmma::zero(c);
  if (!Column::holds_column0()) return;
  c.x[0] = from[Column::row(0)];
  c.x[2] = from[Column::row(2)];
}

// What a launch of the kernel computes for its segment of a sequence (G segments of L chunks,
// the last one shorter; G = 1 when the sequence-heads fill the GPU):
//   outputs: the outputs, from the carry-in state (zero for the first segment);
//   summary: the segment's summary from a zero state, for all but the last segment:
//     hla2 (S, F, C; f, m) with C = sum g^(end - j) q_j v_j^T, m = C 1;
//     ahla (P, E, D; n, m) with D = sum k q^T;
//     hla3 (S^K, P, F, S^Q, X, Y; m, eta, x), Hla3Segments' fields (hla3_key_side below).
// The summaries combine in carry_kernel (hla3: hla3_carry_kernel).
enum class Pass { outputs, summary };
// Whether the key side of a pass hands its masked A to the value side (the outputs pass only; the
// summary pass's value side reads no A).
template <bool Ahla, Pass pass, bool Normalized, bool Decayed, WideRole Wide, int Features, bool Bf16Out>
constexpr bool side_hands_a = (pass == Pass::outputs) &&
                              hands_over_a(Ahla ? Algebra::ahla : Algebra::hla2, Wide, Normalized, Decayed,
                                           Features, Bf16Out);

// A summary's or a carry's layout in floats: hla2 and ahla three matrices (a carry: two) and two
// vectors; hla3 six matrices (S^K, P, F, S^Q, X, Y) and three vectors (m, eta, x), its carry three
// matrices (S^K, P, F) and two vectors (m, eta).
constexpr int summary_floats(bool third) {
  return static_cast<int>(fast_summary_floats(third));
}
static_assert(width == 64 && fast_summary_floats(true) == 6 * matrix_floats + 3 * width);
constexpr int carry_floats(bool third) {
  return third ? 3 * matrix_floats + 2 * width : 2 * matrix_floats + 2 * width;
}
// A causal product's summary or carry-in per segment and value half (Block::product_summary): F_0, F_1.
constexpr int causal_product_states = 2 * matrix_floats;

struct Arguments {
  std::int64_t length, segment_chunks;
  int segments;
  int value_dim;  // the outputs' columns (dv <= 64; the value tiles' columns past it are zeros)
  std::int64_t heads_per_batch;
  const double* head_decays;
  double decay;
  float ridge;  // hla2 without decay: U + ridge Q in place of U
  float eps;
  void* out;
  bool bf16_out;
  float* den;  // terms: out gets num and den the denominators
  const float* carries;
  float* summaries;
  // The outputs pass, when set: each chunk's state operands (hla2 S~, F~; ahla P~, E~) as the
  // products read them, two tile images per chunk in the 128-byte swizzle and, normalized, the rows
  // of their vectors (launch.hpp, checkpoint_bytes), for the backward (tensor_core_backward.cu).
  unsigned char* checkpoints;
  long long* phases;  // built with HLA_FAST_PHASES: each block's cycles per phase (phases.cuh)
  // A rank's slice (docs/ranks.md, launch_rank): its first segment starts from carries[head] too.
  bool carry_first = false;
  // A wide head (launch_value_halves, launch_hla2_halves): each sequence-head's value halves (hla2's
  // first pass: key halves) in blocks side by side, the outputs (U) leaving through the kernel's out_map,
  // in `stages` stages of wide_inputs tiles (wide_stages).
  int value_halves = 1;
  int stages = 0;
  // A two-pass wide head's power p of g in its weights (hla2 2, hla3 3): hla2_keys' copy D^p U for the
  // state F, and hla2_values' powers, those of g^p.
  int weight_power = 2;
  // hla2_values for hla3's normalized wide heads (launch_hla3_halves), when set: each row's denominator
  // at den_in[row * den_in_stride], by which the outputs are divided (divide_rows).
  const float* den_in = nullptr;
  int den_in_stride = 0;
  // hla2_values as a causal product of the wide backward (launch_causal_product): `reversed` walks the
  // chunks from the last one (Block::chunk_row) with the mask and the carried state's row factors mirrored
  // (LR: the sums over later tokens); `accumulate` adds the outputs to those in device memory (a
  // reduce-add bulk copy) rather than storing them.
  bool reversed = false, accumulate = false;
  // hla2_values as such a product (unnormalized): the state products' operands (D^p K)^T (without decay
  // K^T) formed on chip from the chunk's K tiles (wgmma::transposed_operand) rather than loaded (with
  // decay) or read from shared memory (without).
  bool keys_on_chip = false;
};

// hla2's ridge without decay: the weights of the masked form, (Q U^T) . L + ridge (Q Q^T) . L, and
// its state, F + ridge C with C = sum q v^T, are those of U + ridge Q in place of U (the rows
// u_j + ridge q_j of the streaming form, Alg. 1): wgmma::add_tile(u, q, ridge).

// The end of a chunk's output products, whose last group (the masked operand's products) was issued
// as: normalized, den's product committed first in a group of its own, then O's (and all it needs)
// in the last. Normalized without the terms' den, each row's 1 / (den + eps) (IEEE float32
// operations, so that the terms give the same outputs on the host) is computed once den's group is
// done, while O's product runs; it returns the thread's two rows' factors (ones otherwise), every
// product done.
template <bool Normalized>
__device__ wgmma::RowPair finish_products(const Arguments& args, Column& den) {
  wgmma::RowPair inverse{{1.0f, 1.0f}};
  if constexpr (Normalized) {
    wgmma::wait<1>();
    wgmma::fence_operand(den);
    if (!args.den) {
      const int quad = threadIdx.x % 32 & ~3;  // the lane holding the row's denominator
      inverse.f[0] = __frcp_rn(__fadd_rn(__shfl_sync(0xffffffffu, den.x[0], quad), args.eps));
      inverse.f[1] = __frcp_rn(__fadd_rn(__shfl_sync(0xffffffffu, den.x[2], quad), args.eps));
    }
  }
  wgmma::wait<0>();
  return inverse;
}

// The outputs of a chunk's accumulators: normalized, O times the rows' inverses of finish_products,
// then into the staging buffer as a bf16 tile (in_tiles: Tiles::out_tiles, which the wide heads' and
// hla3's callers pass as the constant false that it is for them), or float32 or bf16 rows of dv (a wide
// head's: of 64); the terms' den goes straight to device memory (rows up to n; of a wide head's value
// halves, the first's).
template <bool Normalized, class D>
__device__ void stage_outputs(const Arguments& args, D& o, const Column& den, const wgmma::RowPair& inverse,
                              unsigned char* staging, bool in_tiles, std::int64_t first_row, int rows,
                              bool writes_den) {
  if constexpr (Normalized) {
    if (args.den) {
      float* den_rows = args.den + first_row;
      if (writes_den && Column::holds_column0()) {
        if (Column::row(0) < rows) den_rows[Column::row(0)] = den.x[0];
        if (Column::row(2) < rows) den_rows[Column::row(2)] = den.x[2];
      }
    } else {
#pragma unroll
      for (int i = 0; i < D::columns / 2; ++i) o.x[i] = __fmul_rn(o.x[i], inverse[i]);
    }
  }
  if (in_tiles) {
    wgmma::round_to_tile(o, reinterpret_cast<Bf*>(staging));
  } else if (args.bf16_out) {
    store_rows(reinterpret_cast<Bf*>(staging), o, args.value_dim);
  } else {
    wgmma::store_rows(reinterpret_cast<float*>(staging), o, width, args.value_dim);
  }
}

// The outputs of rows first_row.. of a chunk (`rows` of them) divided by the denominators that
// Arguments::den_in holds, as finish_products and stage_outputs divide a normalized kernel's: O times
// fl(1 / fl(den + eps)) per row.
__device__ void divide_rows(const Arguments& args, Accumulator& o, std::int64_t first_row, int rows) {
  wgmma::RowPair inverse;
#pragma unroll
  for (int half = 0; half < 2; ++half) {
    const int r = Accumulator::row(2 * half);
    const float den = r < rows ? args.den_in[(first_row + r) * args.den_in_stride] : 0.0f;
    inverse.f[half] = __frcp_rn(__fadd_rn(den, args.eps));
  }
#pragma unroll
  for (int i = 0; i < Accumulator::columns / 2; ++i) o.x[i] = __fmul_rn(o.x[i], inverse[i]);
}

// A summary's 64 x 64 matrix, row-major, from an accumulator: a narrow one's columns 32-63 as zeros
// (the carry kernel's products read every column).
template <int N>
__device__ void store_matrix(float* to, const wgmma::Accumulators<N>& d) {
  if constexpr (N == width) {
    store_rows(to, d);
  } else {
#pragma unroll
    for (int i = 0; i < N / 2; i += 2) {
      float* at = to + Accumulator::row(i) * width + Accumulator::column(i);
      *reinterpret_cast<float2*>(at) = make_float2(d.x[i], d.x[i + 1]);
      *reinterpret_cast<float2*>(at + N) = make_float2(0.0f, 0.0f);
    }
  }
}

// What the warps of a block share: its sequence-head and segment, the inputs' tensor maps, the shared
// tiles and the barriers between them. The key side hands U (X) of chunk c over through u_ready[c % 2]
// and gets its buffers back through u_free[c % 2], which the value side arrives at when its products
// of chunk c are done: then chunk c's input buffers are free too, and the value side arrives at
// inputs_free[c % stages] as well. hla2 and ahla: the producer warps issue every copy (producer
// below), so that no side's warps stall on the copy engine's queue (docs/perf.md, "a producer warp");
// the value side hands chunk c's staged outputs over through out_staged[c % n] and gets the buffer
// back through out_free[c % n] once their store has read it (n = Tiles::out_buffers). hla3: the value
// side's leader loads chunk c + stages at the end of chunk c and stores the outputs (its key side has no
// time to spare).
struct Block {
  const Arguments& args;
  const CUtensorMap *q, *k, *v;
  const CUtensorMap* out_map;  // a wide head's outputs or U, outputs in tiles (else null: row copies)
  int value_column;            // a wide head's: the first column of the block's value half (key half)
  Tiles s;
  Arrival *loaded, *u_ready, *u_free, *inputs_free, *out_staged, *out_free;
  std::int64_t head, segment, first, chunks, total_chunks;
  int segments;
  bool third;        // hla3's layout of the summaries and carries
  bool states_only;  // a causal product's summary pass: it reads only K and V (keys on chip), not Q
  __device__ void wait_loaded(std::int64_t c) const { loaded[c % s.stages].wait(c / s.stages % 2); }
  // hla2's and ahla's value sides: chunk c's staging buffer, once the store of the chunk that it held
  // before (c - out_buffers) has read it; and the staged outputs handed to the producer.
  __device__ void wait_output_buffer(std::int64_t c) const {
    if (c >= s.out_buffers) out_free[s.out_slot(c)].wait(s.out_round(c) ^ 1);
  }
  __device__ void outputs_staged(std::int64_t c) const { out_staged[s.out_slot(c)].arrive(); }
  // The first row of chunk c in its sequence: the segment's chunks in order, or (Arguments::reversed)
  // the sequence's from the last one.
  __device__ std::int64_t chunk_row(std::int64_t c) const {
    return (args.reversed ? total_chunks - 1 - (first + c) : first + c) * width;
  }
  // Chunk c's inputs into its buffers.
  __device__ void start_chunk(std::int64_t c) const {
    if (c >= chunks) return;
    const Chunk to = s.chunk(c);
    Arrival& arrival = loaded[c % s.stages];
    // A short last chunk too: its missing rows arrive as zeros.
    const int tiles = states_only ? 3 : s.per_stage() == 7 && args.keys_on_chip ? 5 : s.per_stage();
    arrival.expect(tiles * wgmma::tile_bytes);
    if (!states_only) start_loading(*q, chunk_row(c), head, to.q, arrival);
    start_loading(*k, chunk_row(c), head, to.k, arrival);
    if (s.wide != WideRole::hla2_keys) start_loading(*v, chunk_row(c), head, to.v, arrival, value_column);
    if (s.wide != WideRole::none) {  // the second key half, at column 64 (hla2_values: of U)
      if (!states_only) start_loading(*q, chunk_row(c), head, to.q2, arrival, width);
      start_loading(*k, chunk_row(c), head, to.k2, arrival, width);
    }
    if (tiles == 7) {  // hla2_values with decay: D^2 U of both halves, after U in the scratch
      start_loading(*k, chunk_row(c), head, to.ks, arrival, 2 * width);
      start_loading(*k, chunk_row(c), head, to.ks2, arrival, 3 * width);
    }
  }
  // hla3's loads, issued by its value side's leader. Before its loop: the first stages' chunks.
  __device__ void load_first() const {
    if (threadIdx.x % group_threads == 0)
      for (int c = 0; c < s.stages; ++c) start_chunk(c);
  }
  // hla3's value side at the end of its chunk c, every warp's products of it done.
  __device__ void load_after_chunk(std::int64_t c) const {
    if (threadIdx.x % group_threads == 0) start_chunk(c + s.stages);
  }
  __device__ int element_bytes() const { return args.bf16_out ? 2 : 4; }
  __device__ unsigned char* output_rows(std::int64_t c) const {
    return static_cast<unsigned char*>(args.out) +
           (head * args.length + chunk_row(c)) * args.value_dim * element_bytes();
  }
  // The rows of chunk c that exist: those of a short last chunk only. Zero rows of q, k, v add
  // nothing to any sum or product, so the existing rows are those of the whole chunk.
  __device__ int rows_of(std::int64_t c) const {
    return static_cast<int>(std::min<std::int64_t>(width, args.length - chunk_row(c)));
  }
  // By the producer (hla3: the value side's leader): chunk c's staged outputs to device memory (a wide
  // head's: the 64 x 64 box at its value half, rows past n and columns past dv left out by the map;
  // hla2's first pass: U^x, and with decay D^2 U^x (D^3 Z^x for hla3), from their tiles, at the key
  // half's columns of the scratch; hla3_r: R^z at the value half's), one group of stores.
  __device__ void store_outputs(std::int64_t c) const {
    if (keys_pass(s.wide)) {
      tma::store_box(*out_map, value_column, chunk_row(c), head, s.u(c));
      if (s.decayed && s.wide == WideRole::hla2_keys)
        tma::store_box(*out_map, 2 * width + value_column, chunk_row(c), head, s.decayed_u(c));
      tma::commit_stores();
    } else if (out_map && args.accumulate) {
      tma::start_adding_box(*out_map, value_column, chunk_row(c), head, s.output(c));
    } else if (out_map) {
      tma::start_storing_box(*out_map, value_column, chunk_row(c), head, s.output(c));
    } else {
      start_storing(output_rows(c), s.output(c), rows_of(c) * args.value_dim * element_bytes());
    }
  }
  // Chunk c's checkpoint in device memory (the outputs pass, when asked for).
  template <bool Normalized>
  __device__ unsigned char* checkpoint(std::int64_t c) const {
    return args.checkpoints + (head * total_chunks + first + c) * checkpoint_bytes(Normalized);
  }
  // Whether the outputs pass starts this segment from a carry-in (else from zero).
  __device__ bool carried() const { return segment > 0 || args.carry_first; }
  // This segment's carry-in or summary.
  __device__ const float* carry() const {
    return args.carries + (head * segments + segment) * carry_floats(third);
  }
  __device__ float* summary() const {
    return args.summaries + (head * (segments - 1) + segment) * summary_floats(third);
  }
  // A causal product's (launch_causal_product) summary or carry-in of this segment and value half: its
  // states F_0, F_1, two row-major 64 x 64 matrices (causal_product_states).
  __device__ float* product_summary() const {
    return args.summaries + ((head * (segments - 1) + segment) * args.value_halves + value_column / width) *
                                causal_product_states;
  }
  __device__ const float* product_carry() const {
    return args.carries +
           ((head * segments + segment) * args.value_halves + value_column / width) * causal_product_states;
  }
};

// The key side (the first warpgroup) of chunk c, with S the state before it (ahla P; normalized
// ahla, m):
//   hla2: A = Q K^T, U = diag(g^tau) Q S + (A . L_g) K (+ ridge Q), S = g^64 S + (D K)^T K;
//   ahla: A, X = diag(g^tau) Q P + (A . L_g) V, P = g^64 P + (D K)^T V (x = diag(g^tau) Q m + A 1,
//   m = g^64 m + K^T (D 1)).
// It rounds U (X) and its decayed copy D^2 U (D X) into the buffers of c % 2 for the value side, and
// where hands_over_a (ahla's narrow kernels and its undecayed 64-wide ones, a_tiles_for) its
// bf16(A . L_g) too.
// Wide (ahla, keys wider than 64, one value half V^z): the features in halves 0 and 1 (Chunk's q, k
// and q2, k2), A = Q^0 (K^0)^T + Q^1 (K^1)^T, X = diag(g^tau) (Q^0 P_0 + Q^1 P_1) + (A . L_g) V^z,
// P_h = g^64 P_h + (K^h)^T (D V^z) (normalized: m_h alike); the outputs pass from zero only. It
// hands its bf16(A . L_g) over too (hands_over_a), in the buffer of c % 2, so that the value side need
// not form A. hla3_r: the same X, which is hla3's R^z, stored for its third pass (no A handed over, no
// copy of X). hla2_keys: the same with V := K^x, so X = U^x and P_h = S_hx = sum k^h (k^x)^T; its copy
// for the value side D^2 U^x, and hla2's ridge adds ridge Q^x.
// Narrow heads (Features = narrow_width, d and dv up to 32): U (X) and the state 32 columns wide, and
// the products over the features in two K slices.
template <bool Ahla, Pass pass, bool Normalized, bool Decayed, bool Ridge, WideRole Wide = WideRole::none,
          int Features = width, bool Bf16Out = false>
__device__ void key_side(const Block& b) {
  constexpr bool wide = Wide != WideRole::none, hla2_keys = Wide == WideRole::hla2_keys,
                 keys = keys_pass(Wide);
  static_assert(!wide ||
                (Ahla && pass == Pass::outputs && (!Ridge || hla2_keys) && Wide != WideRole::hla2_values));
  static_assert(!keys || !Normalized);
  static_assert(Features == width || !wide);
  using FeatureColumns = wgmma::Accumulators<Features>;
  constexpr int slices = Features / 16;  // K slices of the products over the features
  constexpr bool hands_a = side_hands_a<Ahla, pass, Normalized, Decayed, Wide, Features, Bf16Out>;
  constexpr bool one_a_tile = hands_a && a_buffers_for(Ahla ? Algebra::ahla : Algebra::hla2, Wide, Normalized,
                                                       Decayed, Features, Bf16Out) == 1;
  const Arguments& args = b.args;
  const Tiles& s = b.s;
  const bool leader = threadIdx.x == 0;  // issues the checkpoints' stores
  const bool checkpointing = pass == Pass::outputs && args.checkpoints;
  FeatureColumns sum1, sum1b;  // hla2 S, ahla P; Wide: P_1 (P_0 in sum1)
  Column vector1, vector1b;  // normalized ahla: m; Wide: m_1
  wgmma::zero(vector1);
  if (pass == Pass::outputs && b.carried()) {
    load_rows(sum1, b.carry());
    if constexpr (Ahla && Normalized) load_vector(vector1, b.carry() + 2 * matrix_floats + width);
  } else {
    wgmma::zero(sum1);
  }
  wgmma::round_to_tile(sum1, s.state1);
  if constexpr (Ahla && Normalized) wgmma::round_to_tile_row(vector1, s.vector1);
  if constexpr (wide) {
    wgmma::zero(sum1b);
    wgmma::round_to_tile(sum1b, s.state1b);
    if constexpr (Normalized) {
      wgmma::zero(vector1b);
      wgmma::round_to_tile_row(vector1b, s.vector1b);
    }
  }

  // With decay: the sums' decay over one chunk, applied once their bf16 copies are taken and before
  // the chunk's products add to them, so that no product is in flight (registers changed between
  // an accumulator's products stall the matrix units' pipeline).
  const Decay decay = Decayed ? Decay(s.powers) : Decay{};
  using Factors = MaskFactorsOf<wide && !Normalized>;
  Factors a_factors;
  if constexpr (Decayed) a_factors = Factors(s.powers, 1);
  const auto decay_sums = [&] {
    if constexpr (Decayed) {
      wgmma::scale(sum1, decay.rho);
      if constexpr (Ahla && Normalized) wgmma::scale(vector1, decay.rho);
      if constexpr (wide) {
        wgmma::scale(sum1b, decay.rho);
        if constexpr (Normalized) wgmma::scale(vector1b, decay.rho);
      }
    }
  };
  const auto age = [&](int r) { return s.powers[width - 1 - r]; };  // a tile's row r
  // With decay, the state's update S += (D K)^T K (ahla: P += (D K)^T V) takes (D K)^T as a register
  // operand, read from K's tile and scaled in registers while the chunk's first products run
  // (wgmma::transposed_operand). Wide kernels, short of registers for it, take K^T (D K) (K^T (D V))
  // with the copy D K (D V) made in shared memory at the end of the chunk before, once chunk c is in:
  // off the chain between a chunk's first products and its state's update. Its wait for chunk c counts
  // as inputs.
  constexpr bool decay_in_registers = Decayed && !wide;
  phases::Clock clock;
  const auto decay_inputs = [&](std::int64_t c) {
    if constexpr (Decayed && !decay_in_registers) {
      clock.mark(phases::state);
      b.wait_loaded(c);
      clock.mark(phases::inputs);
      const Chunk in = s.chunk(c);
      wgmma::scale_tile_rows(s.decayed_in, Ahla ? in.v : in.k, age);
    }
  };
  decay_sums();
  decay_inputs(0);
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.wait_loaded(c);
    clock.mark(phases::inputs);
    publish_group();  // S (m) and D K of this chunk
    clock.mark(phases::publish);
    if (checkpointing && leader) {
      unsigned char* to = b.checkpoint<Normalized>(c);
      start_storing(to, s.state1, wgmma::tile_bytes);
      if constexpr (Normalized)  // row 0 (hla2's m is zero outside the summaries)
        start_storing(to + 2 * wgmma::tile_bytes + checkpoint_vector_bytes / 2, s.vector1,
                      checkpoint_vector_bytes / 2);
    }
    const Chunk now = s.chunk(c);
    // With decay, Q S (Q P) and Q m go to `carried` first and are row-scaled into u and x between
    // the products: an accumulator changed between two of its own products would stall the
    // matrix units' pipeline.
    Accumulator a;
    FeatureColumns u, carried;
    Column x, x_carried;
    wgmma::fence_operand(sum1);
    if constexpr (Ahla && Normalized) wgmma::fence_operand(vector1);
    if constexpr (wide) {
      wgmma::fence_operand(sum1b);
      if constexpr (Normalized) wgmma::fence_operand(vector1b);
    }
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k, slices>(a, now.q, now.k, false);
    if constexpr (wide) wgmma::multiply<Major::k, Major::k>(a, now.q2, now.k2, true);
    wgmma::commit();
    // Q S (Q P, Q m; Wide: the sum over the halves) into `into`, `vector_into`.
    const auto carried_products = [&](FeatureColumns& into, Column& vector_into) {
      wgmma::multiply<Major::k, Major::mn, slices>(into, now.q, s.state1, false);
      if constexpr (wide) wgmma::multiply<Major::k, Major::mn>(into, now.q2, s.state1b, true);
      if constexpr (Ahla && Normalized) {
        wgmma::multiply<Major::k, Major::k, slices>(vector_into, now.q, s.vector1, false);
        if constexpr (wide) wgmma::multiply<Major::k, Major::k>(vector_into, now.q2, s.vector1b, true);
      }
    };
    // S += K^T (D K) (ahla: P += K^T (D V)), `right` the decayed copy or, without decay, the input.
    const auto state_products = [&](const Bf* right) {
      wgmma::multiply<Major::mn, Major::mn>(sum1, now.k, right, true);
      if constexpr (wide) wgmma::multiply<Major::mn, Major::mn>(sum1b, now.k2, right, true);
    };
    if constexpr (decay_in_registers) {
      carried_products(carried, x_carried);
      wgmma::commit();
      const wgmma::RowOperand decayed_k = wgmma::transposed_operand(now.k, age);  // (D K)^T
      wgmma::fence();
      wgmma::multiply<Major::mn>(sum1, decayed_k, Ahla ? now.v : now.k, true);
    } else if constexpr (Decayed) {
      carried_products(carried, x_carried);
      wgmma::commit();
      state_products(s.decayed_in);  // D K made the chunk before
    } else {
      carried_products(u, x);
      wgmma::commit();
      state_products(Ahla ? now.v : now.k);
    }
    if constexpr (Ahla && Normalized) {
      wgmma::multiply<Major::mn, Major::k>(vector1, now.k, s.ages, true);
      if constexpr (wide) wgmma::multiply<Major::mn, Major::k>(vector1b, now.k2, s.ages, true);
    }
    wgmma::commit();
    if constexpr (Decayed) {
      wgmma::wait<1>();
      scale_carried<Ahla && Normalized>(u, carried, x, x_carried, decay.offset);
    } else {
      wgmma::wait<2>();
    }
    clock.mark(phases::first);
    const wgmma::RowOperand masked = round_masked<Decayed>(a, a_factors);
    // The value side's products of chunk c - 2 have read the buffers of c % 2 (hands_a: A's buffer, which
    // takes the operand now, while the products below need its registers anyway; with one A tile, those
    // of chunk c - 1). keys_pass: its one U (R) tile, given back once the store of chunk c - 1 has read it.
    const auto wait_partner = [&] {
      if (keys || one_a_tile) {
        if (c >= 1) b.u_free[(c - 1) % 2].wait((c - 1) / 2 % 2);
      } else if (c >= 2) {
        b.u_free[c % 2].wait((c / 2 - 1) % 2);
      }
    };
    if constexpr (hands_a) {
      wait_partner();
      wgmma::store_operand(masked, s.a(c));
    }
    wgmma::fence();
    wgmma::multiply<Major::mn>(u, masked, Ahla ? now.v : now.k, true);  // hla2: U += A K;  ahla: X += A V
    if constexpr (Ahla && Normalized) wgmma::multiply<Major::k>(x, masked, s.ones, true);  // x += A 1
    wgmma::commit();
    wgmma::wait<0>();
    clock.mark(phases::masked);
    wgmma::fence_operand(u);
    wgmma::fence_operand(sum1);
    if constexpr (wide) wgmma::fence_operand(sum1b);
    if constexpr (Ridge)
      wgmma::add_tile(u, hla2_keys && b.value_column > 0 ? now.q2 : now.q, args.ridge);  // + ridge Q
    if constexpr (!hands_a) wait_partner();
    clock.mark(phases::partner);
    wgmma::round_to_tile(u, s.u(c));
    // hla2 (its 64-wide and narrow kernels and its keys pass): D^2 U (for F; hla3's Z: D^3 Z, weight_power
    // 3);  ahla: D X (for E);  hla3_r: none
    if constexpr (Decayed && Wide != WideRole::hla3_r) {
      wgmma::round_to_tile(u, s.decayed_u(c),
                           Ahla && !hla2_keys       ? decay.age
                           : args.weight_power == 3 ? decay.age3
                                                    : decay.age2);
    }
    if constexpr (Ahla && Normalized) {
      wgmma::fence_operand(x);
      wgmma::fence_operand(vector1);
      if constexpr (wide) wgmma::fence_operand(vector1b);
      wgmma::round_to_tile_row(x, s.x(c));
      if constexpr (Decayed) wgmma::round_to_tile_row(x, s.decayed_x(c), decay.age);
    }
    wgmma::fence_shared();
    b.u_ready[c % 2].arrive();  // this side is done with chunk c's inputs too
    clock.mark(phases::handover);
    // Every warp's product that read S is done (a warp's wait covers its own products only), and the
    // copy engine has read the chunk's checkpoint.
    if (checkpointing && leader) wait_stores_read();
    sync_group();
    wgmma::round_to_tile(sum1, s.state1);  // read again by the next chunk only
    if constexpr (Ahla && Normalized) wgmma::round_to_tile_row(vector1, s.vector1);
    if constexpr (wide) {
      wgmma::round_to_tile(sum1b, s.state1b);
      if constexpr (Normalized) wgmma::round_to_tile_row(vector1b, s.vector1b);
    }
    if (c + 1 < b.chunks) {
      decay_sums();
      decay_inputs(c + 1);
    }
    clock.mark(phases::state);
  }
  clock.store(args.phases);
  if constexpr (pass == Pass::summary) {
    store_matrix(b.summary(), sum1);
    if constexpr (Ahla && Normalized) store_vector(b.summary() + 3 * matrix_floats + width, vector1);
  }
  if (checkpointing && leader) wait_stores_done();
}

// The value side (the second warpgroup) of chunk c, from U (X) of the key side and F the state
// before the chunk (ahla E; normalized, hla2 f, ahla n):
//   hla2: W = (Q U^T) . L_g . L_g, O = diag(g^(2 tau)) Q F + W V, F = g^128 F + (D^2 U)^T V
//   (den = diag(g^(2 tau)) Q f + W 1, f = g^128 f + (D^2 U)^T 1);
//   ahla: A = Q K^T again (or, where hands_over_a, the key side's bf16(A . L_g) from its tile),
//   O = diag(g^tau) Q E + (A . L_g) X, E = g^64 E + K^T (D X)
//   (den = diag(g^tau) Q n + A x, n = g^64 n + K^T (D x));
// the summary pass: hla2 F, C += Q^T (D V) (f, m += Q^T (D 1)); ahla E, D += K^T Q (n).
// It stages the outputs for the producer, which stores them.
// Wide (ahla, keys wider than 64, one value half): A over both halves (hands_over_a: the key side's
// bf16(A . L_g)), O = diag(g^tau) (Q^0 E_0 + Q^1 E_1) + (A . L_g) X, E_h = g^64 E_h + (K^h)^T (D X)
// (normalized: n_h alike).
// Narrow heads (Features = narrow_width): the outputs and the states 32 columns wide, as key_side's.
template <bool Ahla, Pass pass, bool Normalized, bool Decayed, WideRole Wide = WideRole::none,
          int Features = width, bool Bf16Out = false>
__device__ void value_side(const Block& b) {
  constexpr bool wide = Wide != WideRole::none;
  static_assert(!wide || (Ahla && pass == Pass::outputs && Wide == WideRole::ahla));
  static_assert(Features == width || !wide);
  using FeatureColumns = wgmma::Accumulators<Features>;
  constexpr int slices = Features / 16;
  constexpr bool hands_a = side_hands_a<Ahla, pass, Normalized, Decayed, Wide, Features, Bf16Out>;
  const Arguments& args = b.args;
  const Tiles& s = b.s;
  const bool leader = threadIdx.x == group_threads;  // issues the checkpoints' stores
  const bool checkpointing = pass == Pass::outputs && args.checkpoints;
  const std::int64_t length = args.length;

  FeatureColumns sum2, sum3;  // hla2 F, C (summaries); ahla E, D (summaries); Wide: E_1 in sum3
  Column vector2, vector1;  // normalized: hla2 f, m (summaries); ahla n; Wide: n_1 in vector1
  wgmma::zero(sum3);
  wgmma::zero(vector1);
  wgmma::zero(vector2);
  if (pass == Pass::outputs && b.carried()) {
    load_rows(sum2, b.carry() + matrix_floats);
    if constexpr (Normalized) load_vector(vector2, b.carry() + 2 * matrix_floats);
  } else {
    wgmma::zero(sum2);
  }
  wgmma::round_to_tile(sum2, s.state2);
  if constexpr (Normalized) wgmma::round_to_tile_row(vector2, s.vector2);
  if constexpr (wide) {
    wgmma::round_to_tile(sum3, s.state2b);
    if constexpr (Normalized) wgmma::round_to_tile_row(vector1, s.vector2b);
  }

  // With decay, as the key side's: F, f by g^128 (ahla E, n by g^64); hla2's C, m by g^64.
  const Decay decay = Decayed ? Decay(s.powers) : Decay{};
  using Factors = MaskFactorsOf<wide && !Normalized>;
  Factors mask_factors;  // ahla's A, hla2's W (hands_a: A comes masked from the key side)
  if constexpr (Decayed && pass == Pass::outputs && !hands_a) mask_factors = Factors(s.powers, Ahla ? 1 : 2);
  const auto decay_sums = [&] {
    if constexpr (Decayed) {
      wgmma::scale(sum2, Ahla ? decay.rho : decay.rho2);
      if (wide || (!Ahla && pass == Pass::summary)) wgmma::scale(sum3, decay.rho);
      if constexpr (Normalized) {
        if (wide || (!Ahla && pass == Pass::summary)) wgmma::scale(vector1, decay.rho);
        wgmma::scale(vector2, Ahla ? decay.rho : decay.rho2);
      }
    }
  };
  const auto age = [&](int r) { return s.powers[width - 1 - r]; };
  const auto decay_inputs = [&](std::int64_t c) {  // hla2's summaries: D V
    if constexpr (Decayed && !Ahla && pass == Pass::summary) {
      b.wait_loaded(c);
      wgmma::scale_tile_rows(s.decayed_extra, s.chunk(c).v, age);
    }
  };
  decay_sums();
  decay_inputs(0);
  phases::Clock clock;
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.wait_loaded(c);
    clock.mark(phases::inputs);
    b.u_ready[c % 2].wait(c / 2 % 2);
    clock.mark(phases::partner);
    publish_group();  // F (f), D V
    if (leader && checkpointing) {
      unsigned char* to = b.checkpoint<Normalized>(c);
      start_storing(to + wgmma::tile_bytes, s.state2, wgmma::tile_bytes);
      if constexpr (Normalized)
        start_storing(to + 2 * wgmma::tile_bytes, s.vector2, checkpoint_vector_bytes / 2);
    }
    clock.mark(phases::publish);
    const Chunk now = s.chunk(c);
    const Bf* u_input = Decayed ? s.decayed_u(c) : s.u(c);
    const Bf* x_input = Decayed ? s.decayed_x(c) : s.x(c);
    if constexpr (pass == Pass::summary) {
      wgmma::fence_operand(sum2);
      wgmma::fence_operand(sum3);
      if constexpr (Normalized) {
        wgmma::fence_operand(vector1);
        wgmma::fence_operand(vector2);
      }
      wgmma::fence();
      if constexpr (Ahla) {
        wgmma::multiply<Major::mn, Major::mn>(sum2, now.k, u_input, true);
        wgmma::multiply<Major::mn, Major::mn>(sum3, now.k, now.q, true);
        if constexpr (Normalized) wgmma::multiply<Major::mn, Major::k>(vector2, now.k, x_input, true);
      } else {
        wgmma::multiply<Major::mn, Major::mn>(sum2, u_input, now.v, true);
        wgmma::multiply<Major::mn, Major::mn>(sum3, now.q, Decayed ? s.decayed_extra : now.v, true);
        if constexpr (Normalized) {
          wgmma::multiply<Major::mn, Major::k>(vector2, u_input, s.ones, true);
          wgmma::multiply<Major::mn, Major::k>(vector1, now.q, s.ages, true);
        }
      }
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operand(sum2);
      wgmma::fence_operand(sum3);
      if constexpr (Normalized) {
        wgmma::fence_operand(vector1);
        wgmma::fence_operand(vector2);
      }
      b.u_free[c % 2].arrive();
      b.inputs_free[c % s.stages].arrive();
      sync_group();  // every warp's products that read chunk c's inputs and D V are done
      if (c + 1 < b.chunks) {
        decay_sums();
        decay_inputs(c + 1);
      }
      continue;
    }
    FeatureColumns o, carried;
    Column den, x_carried;
    wgmma::RowPair inverse;
    wgmma::fence_operand(sum2);
    if constexpr (Normalized) wgmma::fence_operand(vector2);
    if constexpr (wide) {
      wgmma::fence_operand(sum3);
      if constexpr (Normalized) wgmma::fence_operand(vector1);
    }
    wgmma::fence();
    if constexpr (Ahla) {
      Accumulator a;
      if constexpr (!hands_a) {
        wgmma::multiply<Major::k, Major::k, slices>(a, now.q, now.k, false);
        if constexpr (wide) wgmma::multiply<Major::k, Major::k>(a, now.q2, now.k2, true);
      }
      // Q E into an accumulator, Q n into a column (Wide: the sums over the halves), from the state
      // tiles `first` and `second`; then E += K^T (D X) into `sum` and `sum_b` (columns: n += K^T (D x)),
      // `right` D X (D x) or, without decay, X (x). A column's B operand is a vector tile's row.
      const auto from_states = [&](auto& into, const Bf* first, const Bf* second) {
        constexpr Major major =
            std::is_same_v<std::remove_cvref_t<decltype(into)>, Column> ? Major::k : Major::mn;
        wgmma::multiply<Major::k, major, slices>(into, now.q, first, false);
        if constexpr (wide) wgmma::multiply<Major::k, major>(into, now.q2, second, true);
      };
      const auto add_states = [&](auto& sum, auto& sum_b, const Bf* right) {
        constexpr Major major =
            std::is_same_v<std::remove_cvref_t<decltype(sum)>, Column> ? Major::k : Major::mn;
        wgmma::multiply<Major::mn, major>(sum, now.k, right, true);
        if constexpr (wide) wgmma::multiply<Major::mn, major>(sum_b, now.k2, right, true);
      };
      if constexpr (Decayed) {
        from_states(carried, s.state2, s.state2b);
        if constexpr (Normalized) from_states(x_carried, s.vector2, s.vector2b);
        wgmma::commit();
        add_states(sum2, sum3, u_input);
        if constexpr (Normalized) add_states(vector2, vector1, x_input);
        wgmma::commit();
        wgmma::wait<1>();
        scale_carried<Normalized>(o, carried, den, x_carried, decay.offset);
      } else {
        wgmma::commit();
        from_states(o, s.state2, s.state2b);
        add_states(sum2, sum3, u_input);
        if constexpr (Normalized) {
          from_states(den, s.vector2, s.vector2b);
          add_states(vector2, vector1, x_input);
        }
        wgmma::commit();
        wgmma::wait<1>();
      }
      clock.mark(phases::first);
      if constexpr (hands_a) {
        wgmma::fence();  // o (den) rescaled since their last products
        if constexpr (Normalized) {
          wgmma::multiply<Major::k, Major::k>(den, s.a(c), s.x(c), true);
          wgmma::commit();
        }
        wgmma::multiply<Major::k, Major::mn>(o, s.a(c), s.u(c), true);
      } else {
        const wgmma::RowOperand masked = round_masked<Decayed>(a, mask_factors);
        wgmma::fence();
        if constexpr (Normalized) {
          wgmma::multiply<Major::k>(den, masked, s.x(c), true);
          wgmma::commit();
        }
        wgmma::multiply<Major::mn>(o, masked, s.u(c), true);
      }
      wgmma::commit();
      inverse = finish_products<Normalized>(args, den);
    } else {
      Accumulator w;
      wgmma::multiply<Major::k, Major::k, slices>(w, now.q, s.u(c), false);
      wgmma::commit();
      if constexpr (Decayed) {
        wgmma::multiply<Major::k, Major::mn, slices>(carried, now.q, s.state2, false);
        if constexpr (Normalized)
          wgmma::multiply<Major::k, Major::k, slices>(x_carried, now.q, s.vector2, false);
        wgmma::commit();
        wgmma::multiply<Major::mn, Major::mn>(sum2, u_input, now.v, true);
        if constexpr (Normalized) wgmma::multiply<Major::mn, Major::k>(vector2, u_input, s.ones, true);
        wgmma::commit();
        wgmma::wait<1>();
        scale_carried<Normalized>(o, carried, den, x_carried, decay.offset2);
      } else {
        wgmma::multiply<Major::k, Major::mn, slices>(o, now.q, s.state2, false);
        wgmma::multiply<Major::mn, Major::mn>(sum2, u_input, now.v, true);
        if constexpr (Normalized) {
          wgmma::multiply<Major::k, Major::k, slices>(den, now.q, s.vector2, false);
          wgmma::multiply<Major::mn, Major::k>(vector2, u_input, s.ones, true);
        }
        wgmma::commit();
        wgmma::wait<1>();
      }
      clock.mark(phases::first);
      const wgmma::RowOperand masked_w = round_masked<Decayed>(w, mask_factors);
      wgmma::fence();
      if constexpr (Normalized) {
        wgmma::multiply<Major::k>(den, masked_w, s.ones, true);
        wgmma::commit();
      }
      wgmma::multiply<Major::mn>(o, masked_w, now.v, true);
      wgmma::commit();
      inverse = finish_products<Normalized>(args, den);
    }
    clock.mark(phases::masked);
    wgmma::fence_operand(o);
    wgmma::fence_operand(sum2);
    if constexpr (Normalized) {
      wgmma::fence_operand(den);
      wgmma::fence_operand(vector2);
    }
    if constexpr (wide) {
      wgmma::fence_operand(sum3);
      if constexpr (Normalized) wgmma::fence_operand(vector1);
    }
    b.u_free[c % 2].arrive();  // this warp's products that read the buffers of c % 2 are done
    b.inputs_free[c % s.stages].arrive();
    b.wait_output_buffer(c);
    clock.mark(phases::buffer);
    stage_outputs<Normalized>(args, o, den, inverse, s.output(c), !wide && s.out_tiles,
                              b.head * length + b.chunk_row(c), b.rows_of(c), b.value_column == 0);
    clock.mark(phases::handover);
    wgmma::fence_shared();  // this thread's staged outputs, for the copy engine
    b.outputs_staged(c);
    clock.mark(phases::fence);
    if (checkpointing && leader) wait_stores_read();  // the copy engine has read F's checkpoint
    sync_group();  // every warp's products that read F (f) and chunk c's inputs are done
    wgmma::round_to_tile(sum2, s.state2);  // published at the top of the next chunk
    if constexpr (Normalized) wgmma::round_to_tile_row(vector2, s.vector2);
    if constexpr (wide) {
      wgmma::round_to_tile(sum3, s.state2b);
      if constexpr (Normalized) wgmma::round_to_tile_row(vector1, s.vector2b);
    }
    if (c + 1 < b.chunks) decay_sums();
    clock.mark(phases::state);
  }
  clock.store(args.phases);
  if constexpr (pass == Pass::summary) {
    float* to = b.summary();
    store_matrix(to + matrix_floats, sum2);
    store_matrix(to + 2 * matrix_floats, sum3);
    if constexpr (Normalized) {
      store_vector(to + 3 * matrix_floats, vector2);
      if constexpr (!Ahla) store_vector(to + 3 * matrix_floats + width, vector1);  // m
    }
  }
  if (checkpointing && leader) wait_stores_done();
}

// hla2's second pass (WideRole::hla2_values), the first warpgroup, with the powers of g^2 (so power 1
// and g^64 here are g^2 and g^128): chunk c's weights W = (Q^0 (U^0)^T + Q^1 (U^1)^T) . L_g^2, rounded to
// bf16 into the buffer of c % 2 (as the wide ahla key side hands its masked A over), and the states F_h
// = g^128 F_h + (D^2 U^h)^T V^z (normalized: f_h = g^128 f_h + (D^2 U^h)^T 1; Chunk's ks, ks2) in its
// accumulators, their bf16 copies for chunk c + 1 into the copies of (c + 1) % 2. Both wait for the
// value side's products of chunk c - 1, which read those copies (and, before them, chunk c - 2's W's
// buffer), so this side runs at most one chunk ahead. The same products and roundings as the wide ahla
// value side's.
// A causal product split into segments (launch_causal_product): a later segment's states start from its
// carry-in; the summary pass forms only the states, from zero, frees each chunk's inputs itself and
// stores F_0, F_1 at the segment's end (its value side has nothing to do).
template <Pass pass, bool Normalized, bool Decayed>
__device__ void weights_side(const Block& b) {
  constexpr bool summary = pass == Pass::summary;
  static_assert(!summary || !Normalized, "a causal product's summary: unnormalized");
  const Tiles& s = b.s;
  const bool mirrored = b.args.reversed;
  MaskFactors factors;
  if constexpr (Decayed) factors = MaskFactors(s.powers, 1, mirrored);
  const Decay decay = Decayed ? Decay(s.powers) : Decay{};
  Accumulator f0, f1;  // F_0, F_1
  Column m0, m1;       // normalized: f_0, f_1
  if (!summary && b.carried()) {
    load_rows(f0, b.product_carry());
    load_rows(f1, b.product_carry() + matrix_floats);
  } else {
    wgmma::zero(f0);
    wgmma::zero(f1);
  }
  wgmma::zero(m0);
  wgmma::zero(m1);
  const auto copy_states = [&](std::int64_t c) {  // F_h, f_h for chunk c
    wgmma::round_to_tile(f0, s.f_copy(c, 0));
    wgmma::round_to_tile(f1, s.f_copy(c, 1));
    if constexpr (Normalized) {
      wgmma::round_to_tile_row(m0, s.f_row(c, 0));
      wgmma::round_to_tile_row(m1, s.f_row(c, 1));
    }
  };
  const auto fence_states = [&] {
    wgmma::fence_operand(f0);
    wgmma::fence_operand(f1);
    if constexpr (Normalized) {
      wgmma::fence_operand(m0);
      wgmma::fence_operand(m1);
    }
  };
  const auto decay_states = [&] {
    if constexpr (Decayed) {
      wgmma::scale(f0, decay.rho);
      wgmma::scale(f1, decay.rho);
      if constexpr (Normalized) {
        wgmma::scale(m0, decay.rho);
        wgmma::scale(m1, decay.rho);
      }
    }
  };
  if constexpr (!summary) copy_states(0);
  decay_states();
  phases::Clock clock;
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.wait_loaded(c);
    clock.mark(phases::inputs);
    const Chunk now = s.chunk(c);
    Accumulator w;
    wgmma::RowOperand decayed_k0, decayed_k1;  // Arguments::keys_on_chip: (D^p K^h)^T (without decay K^T)
    if (b.args.keys_on_chip) {
      const auto age = [&](int k) { return Decayed ? s.powers[mirrored ? k : width - 1 - k] : 1.0f; };
      decayed_k0 = wgmma::transposed_operand(now.k, age);
      decayed_k1 = wgmma::transposed_operand(now.k2, age);
    }
    fence_states();
    wgmma::fence();
    if constexpr (!summary) {
      wgmma::multiply<Major::k, Major::k>(w, now.q, now.k, false);
      wgmma::multiply<Major::k, Major::k>(w, now.q2, now.k2, true);
      wgmma::commit();
    }
    if (b.args.keys_on_chip) {
      wgmma::multiply<Major::mn>(f0, decayed_k0, now.v, true);
      wgmma::multiply<Major::mn>(f1, decayed_k1, now.v, true);
    } else {
      wgmma::multiply<Major::mn, Major::mn>(f0, now.ks, now.v, true);
      wgmma::multiply<Major::mn, Major::mn>(f1, now.ks2, now.v, true);
    }
    if constexpr (Normalized) {
      wgmma::multiply<Major::mn, Major::k>(m0, now.ks, s.ones, true);
      wgmma::multiply<Major::mn, Major::k>(m1, now.ks2, s.ones, true);
    }
    wgmma::commit();
    if constexpr (summary) {
      wgmma::wait<0>();
      fence_states();
      b.inputs_free[c % s.stages].arrive();
      if (c + 1 < b.chunks) decay_states();
      continue;
    }
    wgmma::wait<1>();
    clock.mark(phases::first);
    const wgmma::RowOperand masked =
        Decayed || !mirrored ? round_masked<Decayed>(w, factors) : round_masked<true>(w, MirroredMask{});
    if (c >= 1) b.u_free[(c - 1) % 2].wait((c - 1) / 2 % 2);  // the value side is done with chunk c - 1
    clock.mark(phases::partner);
    wgmma::store_operand(masked, s.a(c));
    wgmma::wait<0>();
    fence_states();
    copy_states(c + 1);
    wgmma::fence_shared();
    b.u_ready[c % 2].arrive();  // W of chunk c, the states' copies for chunk c + 1
    clock.mark(phases::handover);
    if (c + 1 < b.chunks) decay_states();
    clock.mark(phases::state);
  }
  if constexpr (summary) {
    store_matrix(b.product_summary(), f0);
    store_matrix(b.product_summary() + matrix_floats, f1);
  }
  clock.store(b.args.phases);
}

// hla2's second pass, the value side (powers of g^2, as weights_side's): chunk c's outputs O^z =
// diag(g^(2 tau)) (Q^0 F_0 + Q^1 F_1) + W V^z (normalized: den = diag(g^(2 tau)) (Q^0 f_0 + Q^1 f_1) + W
// 1, and O^z divided as finish_products and stage_outputs do; hla3's normalized wide heads: divided by
// Arguments::den_in's rows) from the first warpgroup's W and the states' copies of c % 2, staged for the
// producer.
template <bool Normalized, bool Decayed>
__device__ void outputs_side(const Block& b) {
  const Arguments& args = b.args;
  const Tiles& s = b.s;
  const Decay decay = Decayed ? Decay(s.powers) : Decay{};
  // The carried state's row factors: g^(p tau), or mirrored (Arguments::reversed: the state of the
  // tokens from the next chunk's first on) g^(p (65 - tau)).
  wgmma::RowPair carried_factors = decay.offset;
  if (Decayed && args.reversed)
    for (int half = 0; half < 2; ++half)
      carried_factors.f[half] = s.powers[width - Accumulator::row(2 * half)];
  phases::Clock clock;
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.wait_loaded(c);
    clock.mark(phases::inputs);
    b.u_ready[c % 2].wait(c / 2 % 2);
    clock.mark(phases::partner);
    const Chunk now = s.chunk(c);
    Accumulator o;
    Column den;
    // Q^0 F_0 + Q^1 F_1 (Q^0 f_0 + Q^1 f_1) into `into` (`vector_into`).
    const auto from_states = [&](Accumulator& into, Column& vector_into) {
      wgmma::multiply<Major::k, Major::mn>(into, now.q, s.f_copy(c, 0), false);
      wgmma::multiply<Major::k, Major::mn>(into, now.q2, s.f_copy(c, 1), true);
      if constexpr (Normalized) {
        wgmma::multiply<Major::k, Major::k>(vector_into, now.q, s.f_row(c, 0), false);
        wgmma::multiply<Major::k, Major::k>(vector_into, now.q2, s.f_row(c, 1), true);
      }
    };
    wgmma::fence();
    if constexpr (Decayed) {
      Accumulator carried;
      Column x_carried;
      from_states(carried, x_carried);
      wgmma::commit();
      wgmma::wait<0>();
      scale_carried<Normalized>(o, carried, den, x_carried, carried_factors);
      wgmma::fence();  // o (den) rescaled since their last products
    } else {
      from_states(o, den);
    }
    clock.mark(phases::first);
    if constexpr (Normalized) {
      wgmma::multiply<Major::k, Major::k>(den, s.a(c), s.ones, true);
      wgmma::commit();
    }
    wgmma::multiply<Major::k, Major::mn>(o, s.a(c), now.v, true);
    wgmma::commit();
    const wgmma::RowPair inverse = finish_products<Normalized>(args, den);
    clock.mark(phases::masked);
    wgmma::fence_operand(o);
    if constexpr (Normalized) wgmma::fence_operand(den);
    b.u_free[c % 2].arrive();  // this warp's products that read W, the states' copies and the inputs are done
    b.inputs_free[c % s.stages].arrive();
    const std::int64_t first_row = b.head * args.length + b.chunk_row(c);
    if constexpr (!Normalized) {
      if (args.den_in) divide_rows(args, o, first_row, b.rows_of(c));
    }
    b.wait_output_buffer(c);
    stage_outputs<Normalized>(args, o, den, inverse, s.output(c), false, first_row, b.rows_of(c),
                              b.value_column == 0);
    wgmma::fence_shared();
    b.outputs_staged(c);
    clock.mark(phases::handover);
  }
  clock.store(args.phases);
}

// hla2's first pass (WideRole::hla2_keys; hla3's first two, hla3_r too), its producer warp (the first
// thread): the loads, chunk
// c + stages into chunk c's buffers once the key side has handed chunk c over (u_ready: it is done with
// the chunk's inputs then), and U^x (D^2 U^x) of chunk c to the scratch, the tiles given back to the key
// side (u_free) once that store has read them.
__device__ void keys_producer(const Block& b) {
  if (threadIdx.x % 32 != 0) return;
  const Tiles& s = b.s;
  for (int c = 0; c < s.stages; ++c) b.start_chunk(c);
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.u_ready[c % 2].wait(c / 2 % 2);
    b.start_chunk(c + s.stages);
    b.store_outputs(c);
    wait_stores_read();
    b.u_free[c % 2].arrive();
  }
  wait_stores_done();
}

// hla2's and ahla's producer warps (the first thread of each): the loads of the block from one, its
// stores from the other, in chunk order, so that neither waits behind the other.
// Loads: chunk c + stages goes into chunk c's input buffers once the value side's products of chunk c
// are done (inputs_free: each stage's barrier advances only after the load this thread issues next into
// that stage, so no phase passes unseen).
// Stores (the outputs pass): chunk c's outputs leave once the value side has staged them (out_staged),
// and their buffer goes back to the value side (out_free) once their store has read it, waited for after
// the stores of the chunks that take the other n - 1 buffers are issued (n = Tiles::out_buffers).
template <Pass pass>
__device__ void producer(const Block& b) {
  if (threadIdx.x % 32 != 0) return;
  const Tiles& s = b.s;
  phases::Clock clock;  // phases::producer_names
  if (threadIdx.x < threads + 32) {
    for (int c = 0; c < s.stages; ++c) b.start_chunk(c);
    for (std::int64_t c = 0; c < b.chunks; ++c) {
      b.inputs_free[c % s.stages].wait(c / s.stages % 2);
      clock.mark(phases::partner);
      b.start_chunk(c + s.stages);
      clock.mark(phases::inputs);
    }
  } else if constexpr (pass == Pass::outputs) {
    const int n = s.out_buffers;
    for (std::int64_t c = 0; c < b.chunks; ++c) {
      b.out_staged[s.out_slot(c)].wait(s.out_round(c));
      clock.mark(phases::publish);
      b.store_outputs(c);
      clock.mark(phases::state);
      // chunk c - (n - 1)'s store has read its buffer
      if (n == max_out_buffers) {
        wait_stores_read<max_out_buffers - 1>();
      } else {
        wait_stores_read<1>();
      }
      if (c >= n - 1) b.out_free[s.out_slot(c - (n - 1))].arrive();
      clock.mark(phases::handover);
    }
    wait_stores_done();
  }
  clock.store(b.args.phases);
}

// hla3, masked (docs/findings.md F2's corrected summary; Hla3MaskedChunks is the CPU form), with the
// key side's states S^K, P (normalized m) and the value side's F (eta) of the tokens before chunk c:
//   key side: A = Q K^T, Z = diag(g^tau) Q S^K + (A . L_g) K, R = diag(g^tau) Q P + (A . L_g) V
//     (x = diag(g^tau) Q m + (A . L_g) 1), S^K = g^64 S^K + K^T (D K), P = g^64 P + (D K)^T V
//     (m = g^64 m + K^T (D 1));
//   value side: W = (Q Z^T) . L_g^3, O = diag(g^(3 tau)) Q F + W R, F = g^192 F + (D^3 Z)^T R
//     (den = diag(g^(3 tau)) Q eta + W x, eta = g^192 eta + (D^3 Z)^T x).
// The key side rounds Z, R (x) and D^3 Z into the buffers of c % 2.
// The summary pass (a segment from zero, Hla3Segments' fields): the key side's S^K, P (m) at the
// segment's end; the value side's F (eta) and
//   S^Q = sum g^(end - j) q_j q_j^T:                      S^Q = g^64 S^Q + Q^T (D Q),
//   X = sum g^(2 (end - t)) q_t r_t^T (x alike with x_t): X = g^128 X + (D^2 Q)^T R,
//   Y = sum g^(2 (end - t)) z_t q_t^T:                    Y = g^128 Y + Z^T (D^2 Q).
template <Pass pass, bool Normalized, bool Decayed, int Features = width>
__device__ void hla3_key_side(const Block& b) {
  const Tiles& s = b.s;
  using FeatureColumns = wgmma::Accumulators<Features>;  // narrow heads: key_side's
  constexpr int slices = Features / 16;
  FeatureColumns key_moment, key_value;  // S^K, P
  Column key_mass;                    // normalized: m
  wgmma::zero(key_mass);
  if (pass == Pass::outputs && b.carried()) {
    load_rows(key_moment, b.carry());
    load_rows(key_value, b.carry() + matrix_floats);
    if constexpr (Normalized) load_vector(key_mass, b.carry() + 3 * matrix_floats);
  } else {
    wgmma::zero(key_moment);
    wgmma::zero(key_value);
  }
  wgmma::round_to_tile(key_moment, s.state1);
  wgmma::round_to_tile(key_value, s.state3);
  if constexpr (Normalized) wgmma::round_to_tile_row(key_mass, s.vector1);

  const Decay decay = Decayed ? Decay(s.powers) : Decay{};
  MaskFactors a_factors;
  if constexpr (Decayed) a_factors = MaskFactors(s.powers, 1);
  const auto decay_sums = [&] {
    if constexpr (Decayed) {
      wgmma::scale(key_moment, decay.rho);
      wgmma::scale(key_value, decay.rho);
      if constexpr (Normalized) wgmma::scale(key_mass, decay.rho);
    }
  };
  const auto age = [&](int r) { return s.powers[width - 1 - r]; };
  const auto decay_inputs = [&](std::int64_t c) {  // D K of chunk c, made the chunk before
    if constexpr (Decayed) {
      b.wait_loaded(c);
      wgmma::scale_tile_rows(s.decayed_in, s.chunk(c).k, age);
    }
  };
  decay_sums();
  decay_inputs(0);
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.wait_loaded(c);
    publish_group();  // S^K, P (m) and D K of this chunk
    const Chunk now = s.chunk(c);
    const Bf* decayed_k = Decayed ? s.decayed_in : now.k;
    Accumulator a;
    FeatureColumns z, r, z_carried, r_carried;
    Column x, x_carried;
    wgmma::fence_operand(key_moment);
    wgmma::fence_operand(key_value);
    if constexpr (Normalized) wgmma::fence_operand(key_mass);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k, slices>(a, now.q, now.k, false);
    wgmma::commit();
    // With decay, Q S^K, Q P (Q m) go to the `carried` accumulators and are row-scaled between the
    // products, as the other algebras' are.
    wgmma::multiply<Major::k, Major::mn, slices>(Decayed ? z_carried : z, now.q, s.state1, false);
    wgmma::multiply<Major::k, Major::mn, slices>(Decayed ? r_carried : r, now.q, s.state3, false);
    if constexpr (Normalized)
      wgmma::multiply<Major::k, Major::k, slices>(Decayed ? x_carried : x, now.q, s.vector1, false);
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(key_moment, now.k, decayed_k, true);
    wgmma::multiply<Major::mn, Major::mn>(key_value, decayed_k, now.v, true);
    if constexpr (Normalized) wgmma::multiply<Major::mn, Major::k>(key_mass, now.k, s.ages, true);
    wgmma::commit();
    if constexpr (Decayed) {
      wgmma::wait<1>();
      wgmma::fence_operand(z_carried);
      wgmma::fence_operand(r_carried);
      wgmma::scale_rows(z, z_carried, decay.offset);
      wgmma::scale_rows(r, r_carried, decay.offset);
      if constexpr (Normalized) {
        wgmma::fence_operand(x_carried);
        wgmma::scale_rows(x, x_carried, decay.offset);
      }
    } else {
      wgmma::wait<2>();
    }
    const wgmma::RowOperand masked = round_masked<Decayed>(a, a_factors);
    wgmma::fence();
    wgmma::multiply<Major::mn>(z, masked, now.k, true);                            // Z += A K
    wgmma::multiply<Major::mn>(r, masked, now.v, true);                            // R += A V
    if constexpr (Normalized) wgmma::multiply<Major::k>(x, masked, s.ones, true);  // x += A 1
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(z);
    wgmma::fence_operand(r);
    wgmma::fence_operand(key_moment);
    wgmma::fence_operand(key_value);
    if constexpr (Normalized) {
      wgmma::fence_operand(x);
      wgmma::fence_operand(key_mass);
    }
    // The value side's products of chunk c - 2 have read the buffers of c % 2.
    if (c >= 2) b.u_free[c % 2].wait((c / 2 - 1) % 2);
    wgmma::round_to_tile(z, s.u(c));
    wgmma::round_to_tile(r, s.r(c));
    if constexpr (Decayed) wgmma::round_to_tile(z, s.decayed_u(c), decay.age3);  // D^3 Z (for F)
    if constexpr (Normalized) wgmma::round_to_tile_row(x, s.x(c));
    wgmma::fence_shared();
    b.u_ready[c % 2].arrive();  // this side is done with chunk c's inputs too
    sync_group();               // every warp's products that read S^K, P (m) and D K are done
    wgmma::round_to_tile(key_moment, s.state1);  // read again by the next chunk only
    wgmma::round_to_tile(key_value, s.state3);
    if constexpr (Normalized) wgmma::round_to_tile_row(key_mass, s.vector1);
    if (c + 1 < b.chunks) {
      decay_sums();
      decay_inputs(c + 1);
    }
  }
  if constexpr (pass == Pass::summary) {
    store_matrix(b.summary(), key_moment);
    store_matrix(b.summary() + matrix_floats, key_value);
    if constexpr (Normalized) store_vector(b.summary() + 6 * matrix_floats, key_mass);
  }
}

template <Pass pass, bool Normalized, bool Decayed, int Features = width>
__device__ void hla3_value_side(const Block& b) {
  const Arguments& args = b.args;
  const Tiles& s = b.s;
  const bool leader = threadIdx.x == group_threads;  // issues the loads and the stores
  b.load_first();
  using FeatureColumns = wgmma::Accumulators<Features>;  // narrow heads: value_side's
  constexpr int slices = Features / 16;

  FeatureColumns corrected_value;  // F
  Column corrected_mass;        // normalized: eta
  // The summary pass's S^Q, X, Y (x).
  FeatureColumns query_moment, query_value, key_query;
  Column query_mass;
  wgmma::zero(corrected_mass);
  if (pass == Pass::outputs && b.carried()) {
    load_rows(corrected_value, b.carry() + 2 * matrix_floats);
    if constexpr (Normalized) load_vector(corrected_mass, b.carry() + 3 * matrix_floats + width);
  } else {
    wgmma::zero(corrected_value);
  }
  if constexpr (pass == Pass::summary) {
    wgmma::zero(query_moment);
    wgmma::zero(query_value);
    wgmma::zero(key_query);
    wgmma::zero(query_mass);
  } else {
    wgmma::round_to_tile(corrected_value, s.state2);
    if constexpr (Normalized) wgmma::round_to_tile_row(corrected_mass, s.vector2);
  }

  const Decay decay = Decayed ? Decay(s.powers) : Decay{};
  MaskFactors w_factors;
  if constexpr (Decayed && pass == Pass::outputs) w_factors = MaskFactors(s.powers, 3);
  const auto decay_sums = [&] {
    if constexpr (Decayed) {
      wgmma::scale(corrected_value, decay.rho3);
      if constexpr (Normalized) wgmma::scale(corrected_mass, decay.rho3);
      if constexpr (pass == Pass::summary) {
        wgmma::scale(query_moment, decay.rho);
        wgmma::scale(query_value, decay.rho2);
        wgmma::scale(key_query, decay.rho2);
        if constexpr (Normalized) wgmma::scale(query_mass, decay.rho2);
      }
    }
  };
  decay_sums();
  for (std::int64_t c = 0; c < b.chunks; ++c) {
    b.wait_loaded(c);
    const Chunk now = s.chunk(c);
    // The summary pass with decay: D Q and D^2 Q of this chunk (the products that read the last
    // chunk's copies are done: wgmma::wait<0> and sync_group below).
    if constexpr (pass == Pass::summary && Decayed) {
      wgmma::scale_tile_rows(s.query_copy(1), now.q, [&](int r) { return s.powers[width - 1 - r]; });
      wgmma::scale_tile_rows(s.query_copy(2), now.q, [&](int r) { return s.powers[2 * (width - 1 - r)]; });
    }
    b.u_ready[c % 2].wait(c / 2 % 2);
    if (pass == Pass::outputs && leader) wait_stores_read();  // chunk c - 2's outputs have left s.output(c)
    publish_group();  // F (eta), the outputs of the chunk before; the summary pass's D Q, D^2 Q
    if (pass == Pass::outputs && leader && c > 0) b.store_outputs(c - 1);
    const Bf* decayed_z = Decayed ? s.decayed_u(c) : s.u(c);
    if constexpr (pass == Pass::summary) {
      const Bf* decayed_q = Decayed ? s.query_copy(1) : now.q;
      const Bf* decayed2_q = Decayed ? s.query_copy(2) : now.q;
      const auto fence_summary = [&] {
        wgmma::fence_operand(corrected_value);
        wgmma::fence_operand(query_moment);
        wgmma::fence_operand(query_value);
        wgmma::fence_operand(key_query);
        if constexpr (Normalized) {
          wgmma::fence_operand(corrected_mass);
          wgmma::fence_operand(query_mass);
        }
      };
      fence_summary();
      wgmma::fence();
      wgmma::multiply<Major::mn, Major::mn>(corrected_value, decayed_z, s.r(c), true);  // F += (D^3 Z)^T R
      wgmma::multiply<Major::mn, Major::mn>(query_value, decayed2_q, s.r(c), true);     // X += (D^2 Q)^T R
      wgmma::multiply<Major::mn, Major::mn>(key_query, s.u(c), decayed2_q, true);       // Y += Z^T (D^2 Q)
      wgmma::multiply<Major::mn, Major::mn>(query_moment, now.q, decayed_q, true);      // S^Q += Q^T (D Q)
      if constexpr (Normalized) {
        wgmma::multiply<Major::mn, Major::k>(corrected_mass, decayed_z, s.x(c), true);
        wgmma::multiply<Major::mn, Major::k>(query_mass, decayed2_q, s.x(c), true);
      }
      wgmma::commit();
      wgmma::wait<0>();
      fence_summary();
      b.u_free[c % 2].arrive();
      sync_group();  // every warp's products that read chunk c's inputs and D Q, D^2 Q are done
      b.load_after_chunk(c);
      if (c + 1 < b.chunks) decay_sums();
      continue;
    }
    FeatureColumns o;  // (declared in this order, the 64-wide kernels' PTX is as before)
    Accumulator w;
    FeatureColumns carried;
    Column den, den_carried;
    wgmma::fence_operand(corrected_value);
    if constexpr (Normalized) wgmma::fence_operand(corrected_mass);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k, slices>(w, now.q, s.u(c), false);  // Q Z^T
    wgmma::commit();
    wgmma::multiply<Major::k, Major::mn, slices>(Decayed ? carried : o, now.q, s.state2, false);
    if constexpr (Normalized)
      wgmma::multiply<Major::k, Major::k, slices>(Decayed ? den_carried : den, now.q, s.vector2, false);
    if constexpr (Decayed) wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(corrected_value, decayed_z, s.r(c), true);
    if constexpr (Normalized) wgmma::multiply<Major::mn, Major::k>(corrected_mass, decayed_z, s.x(c), true);
    wgmma::commit();
    wgmma::wait<1>();
    if constexpr (Decayed) scale_carried<Normalized>(o, carried, den, den_carried, decay.offset3);
    const wgmma::RowOperand masked_w = round_masked<Decayed>(w, w_factors);
    wgmma::fence();
    if constexpr (Normalized) {
      wgmma::multiply<Major::k>(den, masked_w, s.x(c), true);
      wgmma::commit();
    }
    wgmma::multiply<Major::mn>(o, masked_w, s.r(c), true);  // O += W R
    wgmma::commit();
    const wgmma::RowPair inverse = finish_products<Normalized>(args, den);
    wgmma::fence_operand(o);
    wgmma::fence_operand(corrected_value);
    if constexpr (Normalized) {
      wgmma::fence_operand(den);
      wgmma::fence_operand(corrected_mass);
    }
    b.u_free[c % 2].arrive();  // this warp's products that read the buffers of c % 2 are done
    stage_outputs<Normalized>(args, o, den, inverse, s.output(c), false,
                              b.head * args.length + b.chunk_row(c), b.rows_of(c), true);
    sync_group();  // every warp's products that read F (eta) and chunk c's inputs are done
    wgmma::round_to_tile(corrected_value, s.state2);  // published at the top of the next chunk
    if constexpr (Normalized) wgmma::round_to_tile_row(corrected_mass, s.vector2);
    b.load_after_chunk(c);  // into chunk c's buffers, which the key side is done with
    if (c + 1 < b.chunks) decay_sums();
  }
  if constexpr (pass == Pass::summary) {
    float* to = b.summary();
    store_matrix(to + 2 * matrix_floats, corrected_value);
    store_matrix(to + 3 * matrix_floats, query_moment);
    store_matrix(to + 4 * matrix_floats, query_value);
    store_matrix(to + 5 * matrix_floats, key_query);
    if constexpr (Normalized) {
      store_vector(to + 6 * matrix_floats + width, corrected_mass);
      store_vector(to + 6 * matrix_floats + 2 * width, query_mass);
    }
  } else {
    publish_group();
    if (leader) {
      b.store_outputs(b.chunks - 1);
      wait_stores_done();
    }
  }
}

// q, k, v: tensor maps of the [heads, length, d or dv] inputs with 64 x 64 boxes (a short last chunk
// read with zeros past the end, a narrower head with zeros past its columns; a wide head's second key
// half at column 64; hla2's second pass: k the scratch of U and D^2 U, v hla2's first pass: K);
// out_map: a wide head's outputs (tma::output_map; hla2's first pass: the scratch's tile_map), the
// outputs' tile_map where the outputs pass stages them in tiles (outputs_in_tiles), else not read. Decayed:
// some head's gamma is not 1 (the kernel takes any gamma, 1 included; without Decayed it skips the decay's
// work). Ridge: hla2's ridge, gamma = 1. Wide: keys wider than 64 (WideRole), block h * value_halves + z
// computing value half (hla2's first pass: key half) z of sequence-head h. Features: narrow_width for a
// narrow head (hla2 and ahla, narrow_head). Bf16Out: that the layout is the one for bf16 outputs, where
// it depends on the output type (layout_by_output; either layout computes either type, at its speed).
template <Algebra algebra, Pass pass, bool Normalized, bool Decayed, bool Ridge,
          WideRole Wide = WideRole::none, int Features = width, bool Bf16Out = false>
__global__ void __launch_bounds__(Wide == WideRole::none ? threads_for(algebra == Algebra::hla3)
                                                         : wide_threads(Wide),
                                  Wide == WideRole::hla2_keys ? 2 : 1)
    fast_kernel(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                const __grid_constant__ CUtensorMap v, const __grid_constant__ CUtensorMap out_map,
                const __grid_constant__ Arguments args) {
  extern __shared__ __align__(128) unsigned char shared[];
  constexpr bool third = algebra == Algebra::hla3;
  constexpr int stages = stages_for(algebra, Normalized, Decayed, Features, Bf16Out);
  constexpr int a_buffers = a_buffers_for(algebra, Wide, Normalized, Decayed, Features, Bf16Out);
  constexpr bool wide = Wide != WideRole::none;
  static_assert(!wide || algebra == Algebra::ahla);
  static_assert(Features == width || !wide);
  __shared__ Arrival loaded[stages], inputs_free[stages], u_ready[2], u_free[2], out_staged[max_out_buffers],
      out_free[max_out_buffers];
  const int segments = args.segments;
  const int per_head = pass == Pass::outputs ? segments : segments - 1;
  const std::int64_t block = wide ? blockIdx.x / args.value_halves : blockIdx.x;
  const std::int64_t head = block / per_head, segment = block % per_head;
  const std::int64_t first = segment * args.segment_chunks;  // this segment's first chunk
  const std::int64_t total_chunks = (args.length + width - 1) / width;
  const Block b{.args = args,
                .q = &q,
                .k = &k,
                .v = &v,
                .out_map = wide || (pass == Pass::outputs && outputs_in_tiles(third, Wide, args.bf16_out))
                               ? &out_map
                               : nullptr,
                .value_column = wide ? static_cast<int>(blockIdx.x % args.value_halves) * width : 0,
                .s = Tiles(shared, {.stages = wide ? args.stages : stages,
                                    .third = third,
                                    .wide = Wide,
                                    .normalized = Normalized,
                                    .decayed = Decayed,
                                    .bf16_out = args.bf16_out,
                                    .second_half = wide && blockIdx.x % args.value_halves == 1,
                                    .a_buffers = a_buffers}),
                .loaded = loaded,
                .u_ready = u_ready,
                .u_free = u_free,
                .inputs_free = inputs_free,
                .out_staged = out_staged,
                .out_free = out_free,
                .head = head,
                .segment = segment,
                .first = first,
                .chunks = std::min(args.segment_chunks, total_chunks - first),
                .total_chunks = total_chunks,
                .segments = segments,
                .third = third,
                .states_only = Wide == WideRole::hla2_values && pass == Pass::summary};
  const Tiles& s = b.s;

  if constexpr (Features < width) {
    // A narrow head's tiles of U (X), its copies and the states get their first Features columns
    // from the accumulators (round_to_tile) and keep zeros in the others, which the products over
    // the features leave out and the state products' transposed operands read (rows of the states
    // past the features, zero) as do the checkpoints.
    auto* words = reinterpret_cast<std::uint32_t*>(shared);
    for (int i = threadIdx.x; i < shared_bytes(algebra, Normalized, Decayed, Features, Bf16Out) / 4;
         i += blockDim.x)
      words[i] = 0;
    __syncthreads();
  }
  if constexpr (Decayed) {  // the powers of gamma
    decay::fill_powers(s.powers, decay::gamma_of(args.head_decays, args.heads_per_batch, args.decay, head),
                       Wide == WideRole::hla2_values ? args.weight_power : 1);
    __syncthreads();
  }
  if constexpr (Normalized) {  // the ones and ages vectors; the vector tiles' rows 1..7 stay zero
    for (int i = threadIdx.x; i < s.vector_tile_count() * vector_tile_bytes / 2; i += blockDim.x)
      s.ones[i] = Bf(0.0f);
    __syncthreads();
    for (int i = threadIdx.x; i < width; i += blockDim.x) {
      s.ones[i] = Bf(1.0f);
      s.ages[i] = Decayed ? __float2bfloat16_rn(s.powers[width - 1 - i]) : Bf(1.0f);
    }
  }
  if (threadIdx.x == 0) {
    // hla2's and ahla's loads and stores need the producer warps
    if (blockDim.x != (wide ? wide_threads(Wide) : threads_for(third))) __trap();
    for (Arrival& arrival : loaded) arrival.init();
    for (Arrival& arrival : inputs_free) arrival.init(group_threads);
    for (int i = 0; i < 2; ++i) {
      u_ready[i].init(group_threads);
      u_free[i].init(keys_pass(Wide) ? 1 : group_threads);  // keys_pass: the producer's
    }
    for (int i = 0; i < max_out_buffers; ++i) {
      out_staged[i].init(group_threads);
      out_free[i].init();
    }
    Arrival::fence_init();
  }
  publish_shared();
  constexpr bool ahla = algebra == Algebra::ahla;
  // Each role's registers where it has a producer warpgroup, within its own branch (ptxas holds code
  // where the roles' paths join to the least of their counts).
  constexpr bool shares_registers = !third && !keys_pass(Wide);
  if (threadIdx.x < group_threads) {
    if constexpr (shares_registers) claim_registers<side_registers>();
    if constexpr (third) {
      hla3_key_side<pass, Normalized, Decayed, Features>(b);
    } else if constexpr (Wide == WideRole::hla2_values) {
      weights_side<pass, Normalized, Decayed>(b);
    } else {
      key_side<ahla, pass, Normalized, Decayed, Ridge, Wide, Features, Bf16Out>(b);
    }
  } else if constexpr (keys_pass(Wide)) {
    keys_producer(b);
  } else if (threadIdx.x < threads) {
    if constexpr (shares_registers) claim_registers<side_registers>();
    if constexpr (third) {
      hla3_value_side<pass, Normalized, Decayed, Features>(b);
    } else if constexpr (Wide == WideRole::hla2_values) {
      if constexpr (pass == Pass::outputs) outputs_side<Normalized, Decayed>(b);
    } else {
      value_side<ahla, pass, Normalized, Decayed, Wide, Features, Bf16Out>(b);
    }
  } else if constexpr (!third) {
    release_registers<producer_registers>();
    if (threadIdx.x < threads + 64) producer<pass>(b);  // its first two warps; the others are done
  }
}

// The carry kernels' 64 x 64 x 64 products on the ordinary cores: the left factor in rows of
// padded_row floats (a warp's rows fall in distinct banks), the right one in rows of width.
constexpr int padded_row = width + 1;
// Where entry i of a row-major 64 x 64 matrix lies in rows of padded_row floats.
__device__ constexpr int padded(int i) {
  return i / width * padded_row + i % width;
}
// acc += a b for thread t's 4 x 4 entries (rows 4 (t / 16) + i, columns 4 (t % 16) + j), a with rows of
// padded_row floats, b with rows of width: one fmaf per product, in the order of the inner index.
__device__ void accumulate_product(float (&acc)[4][4], const float* a, const float* b) {
  const int row = 4 * (threadIdx.x / 16), column = 4 * (threadIdx.x % 16);
  for (int j = 0; j < width; ++j) {
    const float4 right = *reinterpret_cast<const float4*>(b + j * width + column);
#pragma unroll
    for (int i = 0; i < 4; ++i) {
      const float left = a[(row + i) * padded_row + j];
      acc[i][0] = fmaf(left, right.x, acc[i][0]);
      acc[i][1] = fmaf(left, right.y, acc[i][1]);
      acc[i][2] = fmaf(left, right.z, acc[i][2]);
      acc[i][3] = fmaf(left, right.w, acc[i][3]);
    }
  }
}

// A thread's 4 x 4 block of a running sum (the entries accumulate_product gives it) replaced by
// next(entry, i, j, at), `at` its index in the row-major 64 x 64 matrix, and stored to `to` (rows of
// width) as four float4.
template <class Next>
__device__ void update_and_store(float (&block)[4][4], float* to, Next next) {
  const int row = 4 * (threadIdx.x / 16), column = 4 * (threadIdx.x % 16);
#pragma unroll
  for (int i = 0; i < 4; ++i) {
    float4 entries;
    float* const entry = &entries.x;
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      block[i][j] = next(block[i][j], i, j, (row + i) * width + column + j);
      entry[j] = block[i][j];
    }
    *reinterpret_cast<float4*>(to + (row + i) * width + column) = entries;
  }
}

// The carry-ins of every segment of one sequence-head (block): the running combination of the
// summaries before it, in float32 on the ordinary cores. Segment 0 starts from zero and needs none.
// Segment g's summary of head h is summaries[h * head_stride + g * segment_stride] (a split: head_stride
// segments - 1 and segment_stride 1; ranks' gathered summaries: 1 and the heads).
// With l = g^L for a segment of L tokens (every summarized segment has L = 64 segment_chunks):
//   hla2: F = l^2 F + F_g + l S C_g, f = l^2 f + f_g + l S m_g, then S = l S + S_g;
//   ahla: E = l E + E_g + l D_g P, n = l n + n_g + l D_g m, then P = l P + P_g, m = l m + m_g.
// The vectors only when Normalized (the summaries have them only then). The product's left factor
// is hla2's running S and ahla's D_g, its right one hla2's C_g and ahla's running P.
template <bool Ahla, bool Normalized>
__global__ void __launch_bounds__(256)
    carry_kernel(const float* summaries, std::int64_t head_stride, std::int64_t segment_stride,
                 float* carries, int segments, std::int64_t segment_tokens, std::int64_t heads_per_batch,
                 const double* head_decays, double decay) {
  __shared__ float left[width * padded_row], right[matrix_floats], vector1[width];
  float* const state1 = Ahla ? right : left;  // the running S (P)
  float* const third = Ahla ? left : right;   // the segment's C_g (D_g)
  const auto state1_at = [&](int i) { return Ahla ? i : padded(i); };  // entry i (row-major) of S (P)
  const auto third_at = [&](int i) { return Ahla ? padded(i) : i; };
  const std::int64_t head = blockIdx.x;
  const double gamma = decay::gamma_of(head_decays, heads_per_batch, decay, head);
  const float l = static_cast<float>(pow(gamma, static_cast<double>(segment_tokens)));
  const float l2 = static_cast<float>(pow(gamma, 2.0 * static_cast<double>(segment_tokens)));
  const float l_second = Ahla ? l : l2;  // the second state's decay over a segment
  float state2[4][4] = {};  // this thread's entries of the running F (E)
  float vector2 = 0;        // threads 0..63: entry of the running f (n)
  for (int i = threadIdx.x; i < matrix_floats; i += 256) state1[state1_at(i)] = 0;
  if (threadIdx.x < width) vector1[threadIdx.x] = 0;
  for (int g = 0; g + 1 < segments; ++g) {
    const float* summary = summaries + (head * head_stride + g * segment_stride) * summary_floats(false);
    const float* summary_vector2 = summary + 3 * matrix_floats;
    const float* summary_vector1 = summary_vector2 + width;
    __syncthreads();  // the last step's reads of state1, vector1 and third are done
    for (int i = threadIdx.x; i < matrix_floats; i += 256)
      third[third_at(i)] = summary[2 * matrix_floats + i];
    __syncthreads();
    float* carry = carries + (head * segments + g + 1) * carry_floats(false);
    float product[4][4] = {};  // hla2: S C_g;  ahla: D_g P
    accumulate_product(product, left, right);
    update_and_store(state2, carry + matrix_floats, [&](float entry, int i, int j, int at) {
      return l_second * entry + summary[matrix_floats + at] + l * product[i][j];
    });
    if (Normalized && threadIdx.x < width) {
      const int r = threadIdx.x;
      float product = 0;  // hla2: (S m_g)(r);  ahla: (D_g m)(r)
      for (int j = 0; j < width; ++j)
        product = fmaf(left[r * padded_row + j], Ahla ? vector1[j] : summary_vector1[j], product);
      vector2 = l_second * vector2 + summary_vector2[r] + l * product;
      carry[2 * matrix_floats + r] = vector2;
    }
    __syncthreads();  // every product has read state1 and vector1
    for (int i = threadIdx.x; i < matrix_floats; i += 256) {
      float& entry = state1[state1_at(i)];
      entry = l * entry + summary[i];
      carry[i] = entry;
    }
    if (Ahla && Normalized && threadIdx.x < width) {
      vector1[threadIdx.x] = l * vector1[threadIdx.x] + summary_vector1[threadIdx.x];
      carry[2 * matrix_floats + width + threadIdx.x] = vector1[threadIdx.x];
    }
  }
}

// hla3's carry-ins (Hla3Segments::combine, A the running carry, B segment g's summary, rho_B = l =
// g^L), in float32 fmaf steps on the ordinary cores, the sums of products in the order of j:
//   T = X_g + l (S^Q_g P),  t = x_g + l (S^Q_g m),
//   F = l (S T + Y_g P) + (l^3 F + F_g),  eta = l (S t + Y_g m) + (l^3 eta + eta_g),
//   then S = l S + S_g, P = l P + P_g, m = l m + m_g
// (l S_A X_B + l^2 S_A S^Q_B P_A + l Y_B P_A, Hla3Segments' cross terms). The vectors only when
// Normalized. The summaries' layout as carry_kernel's. Shared memory: the left factors S, S^Q_g, Y_g in rows
// of 65 floats (a warp's rows fall in distinct banks), the right ones P, T in rows of 64, then m and t.
constexpr int hla3_carry_shared_bytes = (3 * width * padded_row + 2 * matrix_floats + 2 * width) * 4;

template <bool Normalized>
__global__ void __launch_bounds__(256)
    hla3_carry_kernel(const float* summaries, std::int64_t head_stride, std::int64_t segment_stride,
                      float* carries, int segments, std::int64_t segment_tokens, std::int64_t heads_per_batch,
                      const double* head_decays, double decay) {
  extern __shared__ float carry_shared[];
  float* const key_moment = carry_shared;                       // S (padded rows)
  float* const query_moment = key_moment + width * padded_row;  // S^Q_g (padded rows)
  float* const key_query = query_moment + width * padded_row;   // Y_g (padded rows)
  float* const key_value = key_query + width * padded_row;      // P
  float* const routed = key_value + matrix_floats;              // T
  float* const key_mass = routed + matrix_floats;               // m
  float* const routed_mass = key_mass + width;                  // t
  const std::int64_t head = blockIdx.x;
  const double gamma = decay::gamma_of(head_decays, heads_per_batch, decay, head);
  const float l = static_cast<float>(pow(gamma, static_cast<double>(segment_tokens)));
  const float l3 = static_cast<float>(pow(gamma, 3.0 * static_cast<double>(segment_tokens)));
  const int row = 4 * (threadIdx.x / 16), column = 4 * (threadIdx.x % 16);
  float corrected[4][4] = {};  // this thread's entries of the running F
  float corrected_mass = 0;    // threads 0..63: entry of the running eta
  for (int i = threadIdx.x; i < width * padded_row; i += 256) key_moment[i] = 0;
  for (int i = threadIdx.x; i < matrix_floats; i += 256) key_value[i] = 0;
  if (threadIdx.x < width) key_mass[threadIdx.x] = 0;
  for (int g = 0; g + 1 < segments; ++g) {
    const float* summary = summaries + (head * head_stride + g * segment_stride) * summary_floats(true);
    const float *key_moment_g = summary, *key_value_g = summary + matrix_floats,
                *corrected_g = summary + 2 * matrix_floats, *query_value_g = summary + 4 * matrix_floats,
                *key_mass_g = summary + 6 * matrix_floats, *corrected_mass_g = key_mass_g + width,
                *query_mass_g = key_mass_g + 2 * width;
    float* carry = carries + (head * segments + g + 1) * carry_floats(true);
    for (int i = threadIdx.x; i < matrix_floats; i += 256) {
      query_moment[padded(i)] = summary[3 * matrix_floats + i];
      key_query[padded(i)] = summary[5 * matrix_floats + i];
    }
    __syncthreads();  // S^Q_g, Y_g in; the last step's S, P, m written
    {
      float product[4][4] = {};
      accumulate_product(product, query_moment, key_value);  // S^Q_g P
#pragma unroll
      for (int i = 0; i < 4; ++i)
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          const int at = (row + i) * width + column + j;
          routed[at] = fmaf(l, product[i][j], query_value_g[at]);
        }
    }
    if (Normalized && threadIdx.x < width) {
      const int r = threadIdx.x;
      float product = 0;  // S^Q_g m
      for (int j = 0; j < width; ++j) product = fmaf(query_moment[r * padded_row + j], key_mass[j], product);
      routed_mass[r] = fmaf(l, product, query_mass_g[r]);
    }
    __syncthreads();  // T (t) written
    {
      float product[4][4] = {};
      accumulate_product(product, key_moment, routed);    // S T
      accumulate_product(product, key_query, key_value);  // + Y_g P
      update_and_store(corrected, carry + 2 * matrix_floats, [&](float entry, int i, int j, int at) {
        return fmaf(l, product[i][j], fmaf(l3, entry, corrected_g[at]));
      });
    }
    if (Normalized && threadIdx.x < width) {
      const int r = threadIdx.x;
      float product = 0;  // S t + Y_g m
      for (int j = 0; j < width; ++j) product = fmaf(key_moment[r * padded_row + j], routed_mass[j], product);
      for (int j = 0; j < width; ++j) product = fmaf(key_query[r * padded_row + j], key_mass[j], product);
      corrected_mass = fmaf(l, product, fmaf(l3, corrected_mass, corrected_mass_g[r]));
      carry[3 * matrix_floats + width + r] = corrected_mass;
    }
    __syncthreads();  // every product has read S, P, m, S^Q_g and Y_g
    for (int i = threadIdx.x; i < matrix_floats; i += 256) {
      float& s = key_moment[padded(i)];
      s = fmaf(l, s, key_moment_g[i]);
      carry[i] = s;
      key_value[i] = fmaf(l, key_value[i], key_value_g[i]);
      carry[matrix_floats + i] = key_value[i];
    }
    if (Normalized && threadIdx.x < width) {
      key_mass[threadIdx.x] = fmaf(l, key_mass[threadIdx.x], key_mass_g[threadIdx.x]);
      carry[3 * matrix_floats + threadIdx.x] = key_mass[threadIdx.x];
    }
  }
}

#if defined(HLA_FAST_PHASES)
// The outputs pass's cycles per phase (phases.cuh), each side's mean over the blocks per chunk, to
// stderr.
class PhaseSums {
 public:
  PhaseSums(unsigned blocks, CUstream_st* stream) : blocks_(blocks) {
    const std::size_t bytes = blocks * phases::warps * phases::count * sizeof(long long);
    check(cudaMalloc(reinterpret_cast<void**>(&data_), bytes), "cudaMalloc");
    check(cudaMemsetAsync(data_, 0, bytes, stream), "cudaMemsetAsync");
  }
  ~PhaseSums() { cudaFree(data_); }
  PhaseSums(const PhaseSums&) = delete;
  PhaseSums& operator=(const PhaseSums&) = delete;
  long long* get() const { return data_; }
  void print(std::int64_t chunks, CUstream_st* stream) const {
    std::vector<long long> host(blocks_ * phases::warps * phases::count);
    check(
        cudaMemcpyAsync(host.data(), data_, host.size() * sizeof(long long), cudaMemcpyDeviceToHost, stream),
        "cudaMemcpyAsync");
    check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
    constexpr int per_side = phases::side_warps / 2;
    for (int warp = 0; warp < phases::warps; ++warp) {
      const int side = warp / per_side;
      const char* const* names = phases::names;
      if (warp >= phases::side_warps) {  // the producers': none where the kernel has no producer warps
        long long any = 0;
        for (unsigned b = 0; b < blocks_; ++b)
          for (int p = 0; p < phases::count; ++p) any |= host[(b * phases::warps + warp) * phases::count + p];
        if (any == 0) continue;
        names = phases::producer_names;
        std::fprintf(stderr, "fast phases, producer %d:", warp - phases::side_warps);
      } else if (warp % per_side == 0) {
        std::fprintf(stderr, "fast phases, %s side, cycles per chunk (%u blocks of %lld chunks):",
                     side ? "value" : "key", blocks_, static_cast<long long>(chunks));
      } else {
        std::fprintf(stderr, "fast phases, %s side's warp %d:", side ? "value" : "key", warp % per_side);
      }
      double total = 0;
      for (int p = 0; p < phases::count; ++p) {
        double sum = 0;
        for (unsigned b = 0; b < blocks_; ++b) sum += host[(b * phases::warps + warp) * phases::count + p];
        const double mean = sum / blocks_ / chunks;
        total += mean;
        if (names[p][0] != '-') std::fprintf(stderr, " %s %.0f", names[p], mean);
      }
      std::fprintf(stderr, "; total %.0f\n", total);
    }
  }

 private:
  unsigned blocks_;
  long long* data_ = nullptr;
};
#endif

// A launch's arguments for `how` over sequences of `length` tokens in `segments` segments of
// segment_chunks chunks (no carries or summaries yet).
inline Arguments arguments_of(const FastLaunch& how, std::int64_t length, std::int64_t segment_chunks,
                              int segments) {
  return {.length = length,
          .segment_chunks = segment_chunks,
          .segments = segments,
          .value_dim = how.value_dim,
          .heads_per_batch = how.heads_per_batch,
          .head_decays = how.head_decays,
          .decay = how.decay,
          .ridge = how.ridge,
          .eps = how.eps,
          .out = how.out,
          .bf16_out = how.bf16_out,
          .den = how.den,
          .carries = nullptr,
          .summaries = nullptr,
          .checkpoints = static_cast<unsigned char*>(how.checkpoints),
          .phases = nullptr};
}

// The kernel of `pass`, allowed its dynamic shared memory (Wide: the more of its two output types').
template <Algebra algebra, Pass pass, bool Normalized, bool Decayed, bool Ridge,
          WideRole Wide = WideRole::none, int Features = width, bool Bf16Out = false>
auto forward_kernel() {
  const auto kernel = fast_kernel<algebra, pass, Normalized, Decayed, Ridge, Wide, Features, Bf16Out>;
  const auto wide_bytes = [](bool bf16_out) {
    return wide_shared_bytes(Wide, wide_stages(Wide, Normalized, Decayed, bf16_out), Normalized, Decayed,
                             bf16_out);
  };
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize,
                             Wide != WideRole::none
                                 ? std::max(wide_bytes(false), wide_bytes(true))
                                 : shared_bytes(algebra, Normalized, Decayed, Features, Bf16Out)),
        "cudaFuncSetAttribute");
  // The most shared memory a multiprocessor has, for hla2_keys' two blocks (the others' one block asks
  // for most of it anyway).
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributePreferredSharedMemoryCarveout,
                             cudaSharedmemCarveoutMaxShared),
        "cudaFuncSetAttribute");
  return kernel;
}

// The carry-ins of `segments` segments of every sequence-head from the summaries of all but the last
// (carry_kernel's layout: head_stride, segment_stride), each summarized segment segment_tokens long.
template <Algebra algebra, bool Normalized>
void launch_carries(const FastLaunch& how, std::int64_t heads, const float* summaries,
                    std::int64_t head_stride, std::int64_t segment_stride, float* carries, int segments,
                    std::int64_t segment_tokens, CUstream_st* stream) {
  const unsigned blocks = static_cast<unsigned>(heads);
  if constexpr (algebra == Algebra::hla3) {
    const auto carry = hla3_carry_kernel<Normalized>;
    check(cudaFuncSetAttribute(carry, cudaFuncAttributeMaxDynamicSharedMemorySize, hla3_carry_shared_bytes),
          "cudaFuncSetAttribute");
    carry<<<blocks, 256, hla3_carry_shared_bytes, stream>>>(summaries, head_stride, segment_stride, carries,
                                                            segments, segment_tokens, how.heads_per_batch,
                                                            how.head_decays, how.decay);
  } else {
    carry_kernel<algebra == Algebra::ahla, Normalized>
        <<<blocks, 256, 0, stream>>>(summaries, head_stride, segment_stride, carries, segments,
                                     segment_tokens, how.heads_per_batch, how.head_decays, how.decay);
  }
  check_launch("fast kernel (carry-ins)");
}

// The outputs pass's out_map for a 64-wide or narrow head: the outputs' tile map where the kernel
// stages them in tiles, else `unread` (any map: the kernel does not read it).
inline CUtensorMap output_tiles_map(const FastLaunch& how, bool third, std::int64_t heads,
                                    std::int64_t length, const CUtensorMap& unread) {
  if (!outputs_in_tiles(third, WideRole::none, how.bf16_out)) return unread;
  return tma::tile_map(static_cast<const BFloat16*>(how.out), heads, length, how.value_dim);
}

template <Algebra algebra, bool Normalized, bool Decayed, bool Ridge, int Features, bool Bf16Out>
void launch(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
            const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  tma::require_hopper();
  constexpr bool third = algebra == Algebra::hla3;
  constexpr int shared = shared_bytes(algebra, Normalized, Decayed, Features, Bf16Out);
  const auto outputs =
      forward_kernel<algebra, Pass::outputs, Normalized, Decayed, Ridge, WideRole::none, Features, Bf16Out>();
  const std::int64_t chunks = (length + width - 1) / width;  // the last one may be short
  const Split split = split_sequences(heads, chunks);
  const CUtensorMap q_map = tma::tile_map(q, heads, length, how.key_dim),
                    k_map = tma::tile_map(k, heads, length, how.key_dim),
                    v_map = tma::tile_map(v, heads, length, how.value_dim);
  const Arguments args = arguments_of(how, length, split.segment_chunks, split.segments);
  const auto summary =
      forward_kernel<algebra, Pass::summary, Normalized, Decayed, Ridge, WideRole::none, Features, Bf16Out>();
  launch_split(
      heads, split, summary_floats(third), carry_floats(third), stream,
      [&](unsigned blocks, const float* carries) {
        Arguments with = args;
        with.carries = carries;
#if defined(HLA_FAST_PHASES)
        PhaseSums sums(blocks, stream);
        with.phases = sums.get();
#endif
        outputs<<<blocks, threads_for(third), shared, stream>>>(
            q_map, k_map, v_map, output_tiles_map(how, third, heads, length, q_map), with);
        check_launch("fast kernel");
#if defined(HLA_FAST_PHASES)
        sums.print(split.segment_chunks, stream);
#endif
      },
      [&](unsigned blocks, float* summaries) {
        Arguments with = args;
        with.summaries = summaries;
        summary<<<blocks, threads_for(third), shared, stream>>>(q_map, k_map, v_map, q_map, with);
        check_launch("fast kernel (segment summaries)");
      },
      [&](const float* summaries, float* carries) {
        launch_carries<algebra, Normalized>(how, heads, summaries, split.segments - 1, 1, carries,
                                            split.segments, split.segment_chunks * width, stream);
      });
}

// One rank's slice (docs/ranks.md): the summary pass over the whole slice (all ranks but the last;
// the last sends zeros, which no rank reads), the all-gather, the carry of the ranks before it (the
// carry kernel over the gathered summaries, every rank before it `slice_tokens` long), then the outputs
// pass from it, one block per sequence-head (no split within the slice), writing the checkpoints of the
// slice's chunks when asked (the backward across ranks reads them).
template <Algebra algebra, bool Normalized, bool Decayed, bool Ridge, int Features, bool Bf16Out>
void launch_rank(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                 const BFloat16* k, const BFloat16* v, const FastRank& rank, CUstream_st* stream) {
  tma::require_hopper();
  constexpr bool third = algebra == Algebra::hla3;
  constexpr int shared = shared_bytes(algebra, Normalized, Decayed, Features, Bf16Out);
  const std::int64_t chunks = (length + width - 1) / width;
  const auto with_maps = [&](const auto& run) {
    if (chunks == 0) return;
    const CUtensorMap q_map = tma::tile_map(q, heads, length, how.key_dim),
                      k_map = tma::tile_map(k, heads, length, how.key_dim),
                      v_map = tma::tile_map(v, heads, length, how.value_dim);
    run(q_map, k_map, v_map);
  };
  Arguments args = arguments_of(how, length, std::max<std::int64_t>(chunks, 1), 1);
  const auto summarize = [&](float* mine) {
    if (rank.rank + 1 == rank.ranks) return;  // the last rank's summary is read by none
    with_maps([&](const CUtensorMap& q_map, const CUtensorMap& k_map, const CUtensorMap& v_map) {
      Arguments with = args;
      with.segments = 2;  // the slice is segment 0 of 2, the one summarized
      with.summaries = mine;
      forward_kernel<algebra, Pass::summary, Normalized, Decayed, Ridge, WideRole::none, Features,
                     Bf16Out>()<<<static_cast<unsigned>(heads), threads_for(third), shared, stream>>>(
          q_map, k_map, v_map, q_map, with);
      check_launch("fast kernel (rank summary)");
    });
  };
  // The carries of "segments" 1 .. rank, of which the last is this rank's.
  const auto combine = [&](const float* gathered, float* all) {
    launch_carries<algebra, Normalized>(how, heads, gathered, 1, heads, all, rank.rank + 1, rank.slice_tokens,
                                        stream);
  };
  float* carry = rank_exchange(heads, summary_floats(third), carry_floats(third), rank, summarize,
                               rank.rank > 0 ? rank.rank + 1 : 0, rank.rank, combine, stream);
  args.carries = carry;
  args.carry_first = carry != nullptr;
  with_maps([&](const CUtensorMap& q_map, const CUtensorMap& k_map, const CUtensorMap& v_map) {
    forward_kernel<algebra, Pass::outputs, Normalized, Decayed, Ridge, WideRole::none, Features,
                   Bf16Out>()<<<static_cast<unsigned>(heads), threads_for(third), shared, stream>>>(
        q_map, k_map, v_map, output_tiles_map(how, third, heads, length, q_map), args);
    check_launch("fast kernel (rank outputs)");
  });
  if (carry) check(cudaFreeAsync(carry, stream), "cudaFreeAsync");
}

// Values wider than 64 with keys up to 64 (hla2 and ahla, dv up to 128): each value column of the
// outputs depends on the same column of V alone, so each value half z is the 64-wide operator on V^z,
// writing its numerators (and the denominators) in float32 to a scratch, one segment a sequence-head;
// then finish_wide_kernel writes the half's columns of the outputs, divided as the kernel divides. The
// bound is the 64-wide one (docs/gpu.md).
__global__ void __launch_bounds__(256)
    finish_wide_kernel(const float* nums, const float* dens, std::int64_t rows, int columns, int first_column,
                       int value_dim, bool divide, float eps, void* out, bool bf16_out, float* den_out) {
  const std::int64_t count = rows * columns;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < count;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t row = i / columns;
    const int c = static_cast<int>(i % columns);
    const float num = nums[i], den = dens ? dens[row] : 0.0f;
    const float value = divide ? __fmul_rn(num, __frcp_rn(__fadd_rn(den, eps))) : num;
    const std::int64_t at = row * value_dim + first_column + c;
    if (bf16_out) {
      static_cast<Bf*>(out)[at] = __float2bfloat16_rn(value);
    } else {
      static_cast<float*>(out)[at] = value;
    }
    if (den_out && c == 0 && first_column == 0) den_out[row] = den;
  }
}

template <Algebra algebra, bool Normalized, bool Decayed, bool Ridge>
void launch_wide(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                 const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  static_assert(algebra != Algebra::hla3, "hla3's fast path is 64 wide");
  tma::require_hopper();
  constexpr int shared = shared_bytes(algebra, Normalized, Decayed, width, false);  // float32 terms
  const auto kernel = forward_kernel<algebra, Pass::outputs, Normalized, Decayed, Ridge>();
  const std::int64_t chunks = (length + width - 1) / width, rows = heads * length;
  const StreamScratch nums(rows * width, stream), dens(Normalized ? rows : 1, stream);
  const CUtensorMap q_map = tma::tile_map(q, heads, length, how.key_dim),
                    k_map = tma::tile_map(k, heads, length, how.key_dim);
  for (int z = 0; z * width < how.value_dim; ++z) {
    const int columns = std::min(width, how.value_dim - z * width);
    const CUtensorMap v_map = tma::tile_map(v + z * width, heads, length, columns, how.value_dim);
    Arguments args = arguments_of(how, length, std::max<std::int64_t>(chunks, 1), 1);
    args.value_dim = columns;
    args.out = nums.get();
    args.bf16_out = false;
    args.den = Normalized ? dens.get() : nullptr;  // the terms, not their quotient
    args.checkpoints = nullptr;
    kernel<<<static_cast<unsigned>(heads), threads_for(false), shared, stream>>>(q_map, k_map, v_map, q_map,
                                                                                 args);
    check_launch("fast kernel (a wide head's value half)");
    finish_wide_kernel<<<1024, 256, 0, stream>>>(nums.get(), Normalized ? dens.get() : nullptr, rows, columns,
                                                 z * width, how.value_dim, Normalized && !how.den, how.eps,
                                                 how.out, how.bf16_out, how.den);
    check_launch("fast kernel (a wide head's value half, its outputs)");
  }
}

// What a pass of a wide head takes besides its role and options (launch_wide_pass): the weights' power
// (Arguments::weight_power); float32 outputs whatever the output type; the denominators to divide by
// (Arguments::den_in, rows of den_in_stride floats).
struct PassExtras {
  int weight_power = 2;
  bool float_out = false;
  const float* den_in = nullptr;
  int den_in_stride = 0;
  bool reversed = false, accumulate = false, keys_on_chip = false;  // a causal product's (Arguments')
  // A causal product's split (launch_causal_product): its segments, their summaries and carry-ins.
  Split split{1, 0};
  float* summaries = nullptr;
  const float* carries = nullptr;
};

// One pass of a head with keys wider than 64 in `Role`: `halves` blocks a sequence-head side by side
// (value halves; hla2's keys pass: key halves), one segment each (a causal product: extras.split's), the
// outputs (keys_pass: U, Z or R) leaving through `out` in boxes of 64 x 64.
template <WideRole Role, bool Normalized, bool Decayed, bool Ridge, Pass pass = Pass::outputs>
void launch_wide_pass(const FastLaunch& how, std::int64_t heads, std::int64_t length, int halves,
                      const CUtensorMap& q, const CUtensorMap& k, const CUtensorMap& v,
                      const CUtensorMap& out, const char* what, CUstream_st* stream,
                      const PassExtras& extras = {}) {
  static_assert(pass == Pass::outputs || Role == WideRole::hla2_values);
  // The summary pass loads no Q (Block::states_only): its state products take K from the chunk's tiles.
  if (pass == Pass::summary && !extras.keys_on_chip)
    throw Error("fast kernel: a causal product's summary pass forms its keys on chip");
  const auto kernel = forward_kernel<Algebra::ahla, pass, Normalized, Decayed, Ridge, Role>();
  const std::int64_t chunks = (length + width - 1) / width;
  const bool split = extras.split.segments > 1;
  Arguments args =
      arguments_of(how, length, split ? extras.split.segment_chunks : std::max<std::int64_t>(chunks, 1),
                   extras.split.segments);
  args.summaries = extras.summaries;
  args.carries = extras.carries;
  const int per_head = pass == Pass::outputs ? extras.split.segments : extras.split.segments - 1;
  args.value_dim = width;  // staged in rows of 64, the out map's boxes
  args.value_halves = halves;
  if (extras.float_out) args.bf16_out = false;
  args.stages = wide_stages(Role, Normalized, Decayed, args.bf16_out);
  args.checkpoints = nullptr;
  args.weight_power = extras.weight_power;
  args.den_in = extras.den_in;
  args.den_in_stride = extras.den_in_stride;
  args.reversed = extras.reversed;
  args.accumulate = extras.accumulate;
  args.keys_on_chip = extras.keys_on_chip;
  kernel<<<static_cast<unsigned>(heads * per_head * halves), wide_threads(Role),
           wide_shared_bytes(Role, args.stages, Normalized, Decayed, args.bf16_out), stream>>>(q, k, v, out,
                                                                                               args);
  check_launch(what);
}

// ahla with keys wider than 64 (up to 128; values up to 128): X is dv wide and each value column of
// the outputs depends on the same column of V alone, so each value half z of 64 columns is one run of
// the two sides with A over both key halves and two states a side (fast_kernel's WideRole::ahla), the
// halves' sums on chip: both halves' blocks of a sequence-head side by side, one segment each, the
// outputs leaving through a tensor map at their half's columns (docs/perf.md, "ahla's wide heads by
// value halves"; docs/gpu.md gives the bound).
template <bool Normalized, bool Decayed>
void launch_value_halves(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                         const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  tma::require_hopper();
  launch_wide_pass<WideRole::ahla, Normalized, Decayed, false>(
      how, heads, length, (how.value_dim + width - 1) / width, tma::tile_map(q, heads, length, how.key_dim),
      tma::tile_map(k, heads, length, how.key_dim), tma::tile_map(v, heads, length, how.value_dim),
      tma::output_map(how.out, how.bf16_out, heads, length, how.value_dim), "fast kernel (a wide ahla head)",
      stream);
}

// hla2 with keys wider than 64 (up to 128; values up to 128), in two passes (docs/perf.md, "hla2's wide
// heads in two passes"; docs/gpu.md gives the bound). U is d wide, but its key half x, U^x =
// diag(g^tau) (Q^0 S_0x + Q^1 S_1x) + (A . L_g) K^x with S_hx = sum k^h (k^x)^T, is the wide ahla key
// side's X with V := K^x: the first pass runs it per key half (WideRole::hla2_keys) and stores U^x, and
// with decay D^2 U^x, in bf16 to a scratch [heads, n, 128 or 256]. The second pass is, per value half
// z, the wide ahla value side at g^2 with K := U and X := V^z, its first warpgroup forming W
// (WideRole::hla2_values). Every operand is rounded as in the 64-wide kernel.
template <bool Normalized, bool Decayed, bool Ridge>
void launch_hla2_halves(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                        const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  tma::require_hopper();
  const int scratch_columns = (Decayed ? 4 : 2) * width;  // U^0, U^1 (D^2 U^0, D^2 U^1)
  const StreamScratch scratch(static_cast<std::size_t>(heads * length) * scratch_columns / 2, stream);
  const CUtensorMap q_map = tma::tile_map(q, heads, length, how.key_dim),
                    k_map = tma::tile_map(k, heads, length, how.key_dim),
                    u_map = tma::tile_map(reinterpret_cast<const BFloat16*>(scratch.get()), heads, length,
                                          scratch_columns);
  // The keys pass reads V := K^x from its K tiles; the v map is not read.
  launch_wide_pass<WideRole::hla2_keys, false, Decayed, Ridge>(
      how, heads, length, 2, q_map, k_map, k_map, u_map, "fast kernel (a wide hla2 head's keys)", stream);
  launch_wide_pass<WideRole::hla2_values, Normalized, Decayed, false>(
      how, heads, length, (how.value_dim + width - 1) / width, q_map, u_map,
      tma::tile_map(v, heads, length, how.value_dim),
      tma::output_map(how.out, how.bf16_out, heads, length, how.value_dim),
      "fast kernel (a wide hla2 head's outputs)", stream);
}

// to[row] = from[row * stride] for `rows` rows.
__global__ void __launch_bounds__(256)
    column_kernel(const float* from, int stride, std::int64_t rows, float* to) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    to[i] = from[i * stride];
}

// `rows` rows of `columns` bf16: 1 in column 0, zeros in the others.
__global__ void __launch_bounds__(256) ones_column_kernel(Bf* data, std::int64_t rows, int columns) {
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < rows * columns;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x)
    data[i] = Bf(i % columns == 0 ? 1.0f : 0.0f);
}

// hla3 with heads wider than 64 (d or dv up to 128), in three passes of the wide roles (docs/perf.md,
// "hla3's wide heads in three passes"; docs/gpu.md gives the bound). Z = diag(g^tau) Q S^K + (A . L_g) K
// is hla2's U, so the first pass is hla2's keys pass (WideRole::hla2_keys), storing Z^x and with decay
// D^3 Z^x to a scratch [heads, n, 128 or 256]. R = diag(g^tau) Q P + (A . L_g) V is ahla's X, so the
// second pass stores R^z per value half from the wide ahla key side (WideRole::hla3_r) to a scratch
// [heads, n, 64 per value half]. The third pass is hla2's second one with the powers of g^3, K := Z and
// V^z := R^z: W = (Q^0 (Z^0)^T + Q^1 (Z^1)^T) . L_g^3, O^z = diag(g^(3 tau)) (Q^0 F_0 + Q^1 F_1) + W R^z,
// F_h = g^192 F_h + (D^3 Z^h)^T R^z (WideRole::hla2_values). Normalized, the denominators are the same
// operator with V := a column of ones (x, eta as R, F): the second and third passes run on it first,
// into a float32 scratch, and the third pass on V divides its outputs by them as the kernel would
// (divide_rows; with den, the terms: num and den as they are).
// Every operand is rounded once, as in the 64-wide kernel; the kernels are the unnormalized ones.
template <bool Normalized, bool Decayed>
void launch_hla3_halves(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                        const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  tma::require_hopper();
  const std::size_t rows = static_cast<std::size_t>(heads * length);
  const int value_halves = (how.value_dim + width - 1) / width;
  const int z_columns = (Decayed ? 4 : 2) * width, r_columns = value_halves * width;
  const StreamScratch z_scratch(rows * z_columns / 2, stream), r_scratch(rows * r_columns / 2, stream);
  const auto bf16_of = [](const StreamScratch& scratch) {
    return reinterpret_cast<BFloat16*>(scratch.get());
  };
  const CUtensorMap q_map = tma::tile_map(q, heads, length, how.key_dim),
                    k_map = tma::tile_map(k, heads, length, how.key_dim),
                    z_map = tma::tile_map(bf16_of(z_scratch), heads, length, z_columns),
                    r_map = tma::tile_map(bf16_of(r_scratch), heads, length, r_columns);
  // Z by key halves (the v map is not read), then R by value halves.
  launch_wide_pass<WideRole::hla2_keys, false, Decayed, false>(how, heads, length, 2, q_map, k_map, k_map,
                                                               z_map, "fast kernel (a wide hla3 head's Z)",
                                                               stream, {.weight_power = 3});
  const auto r_pass = [&](int halves, const CUtensorMap& values, const CUtensorMap& r) {
    launch_wide_pass<WideRole::hla3_r, false, Decayed, false>(
        how, heads, length, halves, q_map, k_map, values, r, "fast kernel (a wide hla3 head's R)", stream);
  };
  const auto outputs = [&](int halves, const CUtensorMap& r, const CUtensorMap& out,
                           const PassExtras& extras) {
    launch_wide_pass<WideRole::hla2_values, false, Decayed, false>(
        how, heads, length, halves, q_map, z_map, r, out, "fast kernel (a wide hla3 head's outputs)", stream,
        extras);
  };
  r_pass(value_halves, tma::tile_map(v, heads, length, how.value_dim), r_map);
  if constexpr (!Normalized) {
    outputs(value_halves, r_map, tma::output_map(how.out, how.bf16_out, heads, length, how.value_dim),
            {.weight_power = 3});
  } else {
    // R and the outputs of V := a column of ones, in rows of 8 bf16 (the copy engine's 16 bytes; the
    // other columns zero), the outputs' column 0 the denominators (rows of 4 floats).
    constexpr int vector_row = 8, den_row = 4;
    const StreamScratch ones(rows * vector_row / 2, stream), ones_r(rows * vector_row / 2, stream),
        dens(rows * den_row, stream);
    ones_column_kernel<<<1024, 256, 0, stream>>>(reinterpret_cast<Bf*>(ones.get()),
                                                 static_cast<std::int64_t>(rows), vector_row);
    check_launch("fast kernel (a wide hla3 head's ones)");
    const CUtensorMap ones_r_map = tma::tile_map(bf16_of(ones_r), heads, length, vector_row);
    r_pass(1, tma::tile_map(bf16_of(ones), heads, length, vector_row), ones_r_map);
    outputs(1, ones_r_map, tma::output_map(dens.get(), false, heads, length, den_row),
            {.weight_power = 3, .float_out = true});
    if (how.den) {  // the terms: num in float32 (fast_launch's condition), den
      outputs(value_halves, r_map, tma::output_map(how.out, false, heads, length, how.value_dim),
              {.weight_power = 3, .float_out = true});
      column_kernel<<<1024, 256, 0, stream>>>(dens.get(), den_row, static_cast<std::int64_t>(rows), how.den);
      check_launch("fast kernel (a wide hla3 head's denominators)");
    } else {
      outputs(value_halves, r_map, tma::output_map(how.out, how.bf16_out, heads, length, how.value_dim),
              {.weight_power = 3, .den_in = dens.get(), .den_in_stride = den_row});
    }
  }
}

// A narrow head (d and dv up to 32): the kernels whose products over the features are 32 wide (N =
// 32, two K slices; docs/perf.md, "heads of 32 on narrow products"). The outputs are those of the
// 64-wide kernel on the zero-padded head, byte for byte: the products leave out only zero terms.
constexpr int narrow_width = 32;
bool narrow_head(const FastLaunch& how) {
  return how.key_dim <= narrow_width && how.value_dim <= narrow_width;
}

// f.template operator()<algebra, Normalized, Decayed, Ridge>() for the kernel that `how` takes.
template <class F>
void with_fast_kernel(const FastLaunch& how, const F& f) {
  // The catalogue refuses a ridge with decay, and ahla and hla3 have none (gpu::fast_forward also
  // refuses checkpoints for hla3, whose kernel writes none).
  if (how.ridge != 0 && (how.variant != Variant::hla2 || how.head_decays || how.decay != 1))
    throw Error("fast path: the ridge is hla2's, without decay");
  const auto run = [&]<Algebra algebra, bool Normalized>() {
    if (how.head_decays || how.decay != 1) {
      f.template operator()<algebra, Normalized, true, false>();
    } else if (algebra == Algebra::hla2 && how.ridge != 0) {
      f.template operator()<Algebra::hla2, Normalized, false, true>();
    } else {
      f.template operator()<algebra, Normalized, false, false>();
    }
  };
  const auto normalized = [&]<Algebra algebra>() {
    how.normalize ? run.template operator()<algebra, true>() : run.template operator()<algebra, false>();
  };
  switch (how.variant) {
    case Variant::hla2:
      return normalized.template operator()<Algebra::hla2>();
    case Variant::ahla:
      return normalized.template operator()<Algebra::ahla>();
    case Variant::hla3:
      return normalized.template operator()<Algebra::hla3>();
    default:
      throw Error("fast path: covers hla2, ahla and hla3");
  }
}

// f.template operator()<Features, Bf16Out>() for the 64-wide or narrow kernel that `how` takes: its
// products' width, and its output type where its layout depends on it (layout_by_output).
template <Algebra algebra, bool Normalized, bool Decayed, class F>
void with_layout(const FastLaunch& how, const F& f) {
  if (narrow_head(how)) return f.template operator()<narrow_width, false>();
  if constexpr (layout_by_output(algebra, Normalized, Decayed, width)) {
    if (how.bf16_out) return f.template operator()<width, true>();
  }
  f.template operator()<width, false>();
}

}  // namespace

void launch_fast(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                 const BFloat16* k, const BFloat16* v, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  const bool wide = how.key_dim > width || how.value_dim > width;
  if (wide && how.checkpoints) throw Error("fast path: heads wider than 64 write no checkpoints");
  // Few heads wider than 64 (hla2 and ahla with keys wider than 64, hla3 wider than 64): composed of
  // causal products where theirs split into segments (docs/perf.md, "the wide forward for few heads").
  // ahla's wide forward is one pass, composed of two products (four normalized): it composes from four
  // segments (132nd run: at two, 1.11-1.52x the pass's time; at four, 0.57-0.80x); hla2's two passes and
  // hla3's three from two.
  const bool composable = how.key_dim > width || (wide && how.variant == Variant::hla3);
  const std::int64_t chunks = (length + width - 1) / width;
  const int fewest_segments = how.variant == Variant::ahla ? 4 : 2;
  const bool composed =
      composable &&
      split_sequences(heads * ((how.value_dim + width - 1) / width), chunks).segments >= fewest_segments;
  with_fast_kernel(how, [&]<Algebra algebra, bool Normalized, bool Decayed, bool Ridge>() {
    if (composed) return launch_wide_forward(how, heads, length, q, k, v, stream);
    if constexpr (algebra == Algebra::hla3) {
      if (wide) return launch_hla3_halves<Normalized, Decayed>(how, heads, length, q, k, v, stream);
    }
    if constexpr (algebra == Algebra::ahla) {
      if (how.key_dim > width)
        return launch_value_halves<Normalized, Decayed>(how, heads, length, q, k, v, stream);
    }
    if constexpr (algebra == Algebra::hla2) {
      if (how.key_dim > width)
        return launch_hla2_halves<Normalized, Decayed, Ridge>(how, heads, length, q, k, v, stream);
    }
    if constexpr (algebra != Algebra::hla3) {
      if (wide) return launch_wide<algebra, Normalized, Decayed, Ridge>(how, heads, length, q, k, v, stream);
    }
    with_layout<algebra, Normalized, Decayed>(how, [&]<int Features, bool Bf16Out>() {
      launch<algebra, Normalized, Decayed, Ridge, Features, Bf16Out>(how, heads, length, q, k, v, stream);
    });
  });
}

// The carry-ins of a causal product's segments (launch_causal_product) from the summaries of all but the
// last: C_1 = S_0, C_(g+1) = l C_g + S_g with l = g^(64 p L) over a summarized segment of L chunks (the
// powers of g^p), one fmaf per entry and segment in float32; an entry per thread.
__global__ void causal_product_carry_kernel(const float* summaries, float* carries, std::int64_t blocks,
                                            int halves, int segments, std::int64_t segment_chunks, int power,
                                            std::int64_t heads_per_batch, const double* head_decays,
                                            double decay) {
  const std::int64_t entries = blocks * causal_product_states;
  for (std::int64_t i = blockIdx.x * static_cast<std::int64_t>(blockDim.x) + threadIdx.x; i < entries;
       i += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    const std::int64_t block = i / causal_product_states, head = block / halves, half = block % halves,
                       entry = i % causal_product_states;
    const double gamma = decay::gamma_of(head_decays, heads_per_batch, decay, head);
    const float l = static_cast<float>(pow(gamma, static_cast<double>(power) * width * segment_chunks));
    float carry = 0.0f;
    for (int g = 0; g + 1 < segments; ++g) {
      const float summary =
          summaries[((head * (segments - 1) + g) * halves + half) * causal_product_states + entry];
      carry = g == 0 ? summary : fmaf(l, carry, summary);
      carries[((head * segments + g + 1) * halves + half) * causal_product_states + entry] = carry;
    }
  }
}

// A causal product as one pass of WideRole::hla2_values, its sequences split into segments (split_sequences
// over heads x halves blocks) when they leave SMs idle: a summary pass, the carry-ins, the outputs pass.
template <bool Decayed>
void launch_split_product(const FastLaunch& how, std::int64_t heads, std::int64_t length, int halves,
                          const CUtensorMap& a, const CUtensorMap& b, const CUtensorMap& c,
                          const CUtensorMap& out, PassExtras extras, CUstream_st* stream) {
  const char* what = "fast kernel (a causal product of the wide backward)";
  const std::int64_t chunks = (length + width - 1) / width;
  extras.split = split_sequences(heads * halves, chunks);
  if (extras.split.segments == 1) {
    launch_wide_pass<WideRole::hla2_values, false, Decayed, false>(how, heads, length, halves, a, b, c, out,
                                                                   what, stream, extras);
    return;
  }
  const int segments = extras.split.segments;
  const StreamScratch summaries(
      static_cast<std::size_t>(heads * halves * (segments - 1)) * causal_product_states, stream),
      carries(static_cast<std::size_t>(heads * halves * segments) * causal_product_states, stream);
  extras.summaries = summaries.get();
  launch_wide_pass<WideRole::hla2_values, false, Decayed, false, Pass::summary>(
      how, heads, length, halves, a, b, c, out, "fast kernel (a causal product's summaries)", stream, extras);
  causal_product_carry_kernel<<<256, 256, 0, stream>>>(
      summaries.get(), carries.get(), heads * halves, halves, segments, extras.split.segment_chunks,
      extras.weight_power, how.heads_per_batch, how.head_decays, how.decay);
  check_launch("fast kernel (a causal product's carry-ins)");
  extras.summaries = nullptr;
  extras.carries = carries.get();
  launch_wide_pass<WideRole::hla2_values, false, Decayed, false>(how, heads, length, halves, a, b, c, out,
                                                                 what, stream, extras);
}

void launch_causal_product(const FastBackwardLaunch& decay, const CausalProduct& product, std::int64_t heads,
                           std::int64_t length, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  tma::require_hopper();
  if (product.a_dim > 2 * width || product.b_dim > 2 * width || product.c_dim > 2 * width)
    throw Error("fast backward: a causal product's operands are at most 128 columns wide");
  const bool bf16 = product.rounded != nullptr;
  if ((bf16 || product.den_in) && product.accumulate)
    throw Error("fast backward: a causal product adds only float32 outputs, undivided");
  FastLaunch how;
  how.key_dim = product.a_dim;
  how.value_dim = product.c_dim;
  how.decay = decay.decay;
  how.head_decays = decay.head_decays;
  how.heads_per_batch = decay.heads_per_batch;
  how.out = bf16 ? static_cast<void*>(product.rounded) : product.out;
  how.bf16_out = bf16;
  how.eps = product.eps;
  const CUtensorMap a = tma::tile_map(product.a, heads, length, product.a_dim),
                    b = tma::tile_map(product.b, heads, length, product.b_dim),
                    c = tma::tile_map(product.c, heads, length, product.c_dim),
                    out = tma::output_map(how.out, bf16, heads, length, product.c_dim);
  const int halves = (product.c_dim + width - 1) / width;
  const PassExtras extras{.weight_power = product.power,
                          .float_out = !bf16,
                          .den_in = product.den_in,
                          .den_in_stride = product.den_in_stride,
                          .reversed = product.reversed,
                          .accumulate = product.accumulate,
                          .keys_on_chip = true};
  if (decay.head_decays || decay.decay != 1) {
    launch_split_product<true>(how, heads, length, halves, a, b, c, out, extras, stream);
  } else {
    launch_split_product<false>(how, heads, length, halves, a, b, c, out, extras, stream);
  }
}

void launch_fast_rank(const FastLaunch& how, std::int64_t heads, std::int64_t length, const BFloat16* q,
                      const BFloat16* k, const BFloat16* v, const FastRank& rank, CUstream_st* stream) {
  if (heads == 0) return;
  if (how.key_dim > width || how.value_dim > width)
    throw Error("fast path across ranks: heads up to 64 wide (a wider head's terms do not split)");
  with_fast_kernel(how, [&]<Algebra algebra, bool Normalized, bool Decayed, bool Ridge>() {
    with_layout<algebra, Normalized, Decayed>(how, [&]<int Features, bool Bf16Out>() {
      launch_rank<algebra, Normalized, Decayed, Ridge, Features, Bf16Out>(how, heads, length, q, k, v, rank,
                                                                          stream);
    });
  });
}

}  // namespace hla::fast::gpu::detail
