#pragma once

// The GPU implementations (CUDA, sm_90): a streaming kernel, one thread block per sequence-head
// carrying the recurrence's state in shared memory (the decoding path), and a chunk-parallel
// scan: chunk summaries in parallel, an exclusive Blelloch scan of the summaries across the
// sequence, then each chunk's outputs from its carry-in. Every variant and option, in the
// corrected form and, where it differs, the published one (docs/gpu.md lists the exceptions).
//
// Layout (row-major, contiguous): q, k [batch, heads, length, key_dim]; v and num
// [batch, heads, length, value_dim]; den [batch, heads, length]. Each sequence-head is independent.
//
// Scalars: float, double, Z/p (ModP), and bf16 inputs (BFloat16) accumulated in float; and
// Gauge<double> on float64 inputs: the algorithm on |q|, |k|, |v| with subtraction as addition
// (the gauge of its rounding-error bound, hla/reference/gauge.hpp).
// This header needs no CUDA headers; the functions exist in builds with CUDA (HLA_HAVE_CUDA).

#include <cstdint>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <vector>

#include "hla/fast/catalogue.hpp"
#include "hla/fast/gpu_types.hpp"
#include "hla/fast/slices.hpp"
#include "hla/reference/gauge.hpp"
#include "hla/reference/gradient.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::fast::gpu {

BFloat16 to_bfloat16(float x);  // bfloat16_from_float_bits
float to_float(BFloat16 x);     // exact

// Why the kernels cannot run here ("no CUDA device: ..."), or nullopt when they can.
std::optional<std::string> unavailable_reason();

// num and den of every sequence-head, from device pointers, by `impl` (gpu_streaming or gpu_scan);
// `chunk` tokens per chunk (scan). Asynchronous on `stream` (scan workspace is allocated
// stream-ordered). Throws hla::Error for what the catalogue says is unavailable, shapes the
// kernels cannot hold in shared memory, or a CUDA failure.
// In: float (T float), BFloat16 (T float), double (T double or Gauge<double>), ModP (T ModP).
template <class In, class T>
void terms(const OperatorSpec& spec, Form form, Implementation impl, const Problem& problem,
           std::int64_t chunk, const In* q, const In* k, const In* v, T* num, T* den,
           CUstream_st* stream = nullptr);

// Sequence parallelism (docs/ranks.md): one sequence split across ranks, each rank a GPU (one process
// each, NCCL's all-gather) or simulated on one GPU (SimulatedRanks). The exchange is an all-gather of
// device buffers in stream order: receive[r * bytes, (r + 1) * bytes) gets rank r's send, for every
// rank r; work enqueued on `stream` afterwards sees them, and may reuse or free `send`.
class RankExchange {
 public:
  virtual ~RankExchange() = default;
  virtual int rank() const = 0;
  virtual int ranks() const = 0;
  virtual void all_gather(const void* send, void* receive, std::size_t bytes, CUstream_st* stream) = 0;
};

// `ranks` ranks on the current GPU, each driven by its own host thread with its own stream: the
// exchange is a device copy from every rank's buffer after an event. A rank that fails calls
// abandon(), after which every other rank's all_gather throws instead of waiting.
class SimulatedRanks {
 public:
  explicit SimulatedRanks(int ranks);
  ~SimulatedRanks();
  SimulatedRanks(const SimulatedRanks&) = delete;
  SimulatedRanks& operator=(const SimulatedRanks&) = delete;
  RankExchange& rank(int r);
  void abandon();

 private:
  struct State;
  std::unique_ptr<State> state_;
};

// Ranks in separate processes, one GPU each, exchanging through NCCL's all-gather. NCCL is loaded when
// the first NcclRanks is made (libnccl.so.2 from the library path: the CUDA toolkit's, or the one a
// Python wheel brings), so that nothing else needs it. The ranks meet through `id_file`: rank 0 creates
// it (refusing one that exists) with NCCL's unique id and removes it once every rank has joined; the
// others wait for it up to `timeout_s` seconds. scripts/ranks.sh starts the processes (docs/ranks.md).
class NcclRanks final : public RankExchange {
 public:
  NcclRanks(int rank, int ranks, const std::string& id_file, double timeout_s = 60);
  ~NcclRanks() override;
  NcclRanks(const NcclRanks&) = delete;
  NcclRanks& operator=(const NcclRanks&) = delete;
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  void all_gather(const void* send, void* receive, std::size_t bytes, CUstream_st* stream) override;

 private:
  int rank_, ranks_;
  void* comm_ = nullptr;  // ncclComm_t
};

// Why NcclRanks cannot be made here (NCCL not loadable, or a build without nccl.h), or nullopt.
std::optional<std::string> nccl_unavailable();

// One rank's forward by the generic GPU scan (gpu_scan, chunks of `chunk` tokens): q, k, v, num and den
// hold this rank's slice, `slice.length` tokens of every sequence-head, in the layout of terms(); the
// rank folds its slice into summaries, all-gathers them through `exchange`, and runs the scan from the
// carry of the ranks before it. Asynchronous on `stream`; every rank must call it (an empty slice
// too). Throws hla::Error where ranks_unavailable(spec, gpu_scan, form) says why. In/T as terms().
template <class In, class T>
void rank_terms(const OperatorSpec& spec, Form form, const Problem& slice, std::int64_t chunk, const In* q,
                const In* k, const In* v, T* num, T* den, RankExchange& exchange,
                CUstream_st* stream = nullptr);

// Host convenience: the terms of every head (all sharing n, d, dv) with the sequence split as `slices`
// (fast/slices.hpp), the ranks simulated on this GPU, each slice's inputs on its own device arrays.
std::vector<Terms<float>> ranks_terms(const OperatorSpec& spec, Form form,
                                      const std::vector<Sequence<float>>& heads, const Slices& slices,
                                      std::int64_t chunk);
std::vector<Terms<double>> ranks_terms(const OperatorSpec& spec, Form form,
                                       const std::vector<Sequence<double>>& heads, const Slices& slices,
                                       std::int64_t chunk);
std::vector<Terms<ModP>> ranks_terms(const OperatorSpec& spec, Form form,
                                     const std::vector<Sequence<ModP>>& heads, const Slices& slices,
                                     std::int64_t chunk);

// How the GPU backward runs. gpu_streaming: the CPU's streaming backward (fast/backward.hpp) as
// a kernel, one thread block per sequence-head, its formulas the CPU stream's
// (fast/cuda/algebra/common.cuh, "The backward"); a state kept every `checkpoint` tokens (0:
// ceil(sqrt(n))), (ceil(n / checkpoint) + checkpoint + 2) states per sequence-head in device
// memory. gpu_scan: the scan's backward (p. 7; fast/cuda/backward.cuh) over the forward scan's
// chunks of `chunk` tokens, one block per chunk, the same per-token formulas from each chunk's
// carry (checkpoint 0: ceil(sqrt(chunk))); device memory: the carries and chunk summaries (two
// summaries per chunk) and one state per chunk, with (ceil(chunk / checkpoint) + checkpoint + 2)
// states per chunk at work. Work in groups of at most 8 GiB.
struct BackwardOptions {
  Implementation impl = Implementation::gpu_streaming;
  std::int64_t checkpoint = 0;
  std::int64_t chunk = 64;
};

// The gradients of <dO, O> by the GPU backward. Device pointers: q, k, v as terms() reads them;
// d_num [.., value_dim] and d_den [..] the adjoints of the readouts (reference::finish_adjoint: dO
// and zero for an unnormalized operator); dq, dk [.., key_dim] and dv [.., value_dim] written.
// In/T: float/float, BFloat16/float, double/double, ModP/ModP. Asynchronous on `stream`; throws
// hla::Error for what the catalogue says is unavailable.
template <class In, class T>
void gradients(const OperatorSpec& spec, Form form, const Problem& problem, const BackwardOptions& options,
               const In* q, const In* k, const In* v, const T* d_num, const T* d_den, T* dq, T* dk, T* dv,
               CUstream_st* stream = nullptr);

// Host convenience: the gradients of <dO_h, O_h> of every sequence-head h (and O_h), from a GPU
// forward (terms) and the GPU backward; d_outs[h] has the shape of head h's output.
std::vector<Gradients<float>> gradients(const OperatorSpec& spec, Form form,
                                        const std::vector<Sequence<float>>& heads,
                                        const std::vector<Matrix<float>>& d_outs,
                                        const BackwardOptions& options = {});
std::vector<Gradients<double>> gradients(const OperatorSpec& spec, Form form,
                                         const std::vector<Sequence<double>>& heads,
                                         const std::vector<Matrix<double>>& d_outs,
                                         const BackwardOptions& options = {});
std::vector<Gradients<ModP>> gradients(const OperatorSpec& spec, Form form,
                                       const std::vector<Sequence<ModP>>& heads,
                                       const std::vector<Matrix<ModP>>& d_outs,
                                       const BackwardOptions& options = {});
// The same with bf16 inputs: q, k, v rounded to bf16 (to_bfloat16) on the way; dO stays float.
std::vector<Gradients<float>> gradients_bf16(const OperatorSpec& spec, Form form,
                                             const std::vector<Sequence<float>>& heads,
                                             const std::vector<Matrix<float>>& d_outs,
                                             const BackwardOptions& options = {});

// One rank's gradients by the generic GPU scan's backward (options.impl gpu_scan, its chunk and
// checkpoint), the sequence split as in rank_terms: q, k, v, d_num, d_den (the adjoints of this slice's
// readouts: reference::finish_adjoint of its rows of the forward) and dq, dk, dv hold this rank's slice
// in the layout of gradients(). The rank folds its slice into summaries and all-gathers them, runs
// pass 1 of the scan's backward from its carry, all-gathers the adjoints of the ranks' carries from
// their own readouts, runs the ranks' chain back to its slice (the adjoint of the state after it),
// then passes 2 and 3 from there (docs/ranks.md). Asynchronous on `stream`; every rank must call it
// (an empty slice too). Throws hla::Error where ranks_unavailable(spec, gpu_scan, form, true) says why.
template <class In, class T>
void rank_gradients(const OperatorSpec& spec, Form form, const Problem& slice, const BackwardOptions& options,
                    const In* q, const In* k, const In* v, const T* d_num, const T* d_den, T* dq, T* dk,
                    T* dv, RankExchange& exchange, CUstream_st* stream = nullptr);

// Host convenience: the gradients of <dO_h, O_h> of every head (and O_h) with the sequence split as
// `slices`, the ranks simulated on this GPU: the split forward (ranks_terms), the readouts' adjoints on
// the host, the split backward (rank_gradients); options.impl must be gpu_scan.
std::vector<Gradients<float>> ranks_gradients(const OperatorSpec& spec, Form form,
                                              const std::vector<Sequence<float>>& heads,
                                              const std::vector<Matrix<float>>& d_outs, const Slices& slices,
                                              const BackwardOptions& options);
std::vector<Gradients<double>> ranks_gradients(const OperatorSpec& spec, Form form,
                                               const std::vector<Sequence<double>>& heads,
                                               const std::vector<Matrix<double>>& d_outs,
                                               const Slices& slices, const BackwardOptions& options);
std::vector<Gradients<ModP>> ranks_gradients(const OperatorSpec& spec, Form form,
                                             const std::vector<Sequence<ModP>>& heads,
                                             const std::vector<Matrix<ModP>>& d_outs, const Slices& slices,
                                             const BackwardOptions& options);

// Why `impl` (gpu_streaming or gpu_scan) cannot run spec in `form` at d, dv in scalars of
// scalar_bytes bytes on this device: the block's state or summary does not fit in shared memory
// (or what unavailable() says); nullopt when it can. Needs a device (unavailable_reason()).
std::optional<std::string> shape_unavailable(const OperatorSpec& spec, Form form, Implementation impl, int d,
                                             int dv, int scalar_bytes);

// Several runs over the same heads with the inputs copied to the device once (hla check: the
// reference, its gauge and the toolkit's own runs, every head in one launch). q, k, v on the
// host in float32, head-major ([heads, n, d], [heads, n, d], [heads, n, dv]); on the device the
// queries are multiplied by query_scale in float64, and every input is kept in float64 and
// rounded to float32 (the scaled queries rounded once).
class Inputs {
 public:
  Inputs(std::int64_t heads, std::int64_t length, int d, int dv, const float* q, const float* k,
         const float* v, double query_scale = 1);
  ~Inputs();
  Inputs(const Inputs&) = delete;
  Inputs& operator=(const Inputs&) = delete;

  // num [heads, n, dv] and den [heads, n] of every head by impl (gpu_streaming or gpu_scan, chunk
  // tokens per chunk), into host arrays: in T = double from the float64 inputs, T = float from
  // the float32 ones.
  template <class T>
  void terms(const OperatorSpec& spec, Form form, Implementation impl, std::int64_t chunk, T* num,
             T* den) const;
  // The same run in Gauge<double> on the float64 inputs' magnitudes: its gauge, each value
  // rounded upwards to float32 (an upper bound of the one computed, within 2^-23 of it).
  void gauge(const OperatorSpec& spec, Form form, Implementation impl, std::int64_t chunk, float* num,
             float* den) const;

  // The gradients of <dO_h, O_h> of every head of an unnormalized operator (the readouts' adjoints
  // dO and zero) by the GPU backward, dO [heads, n, dv] on the host, into host arrays dq, dk
  // [heads, n, d] and dv [heads, n, dv], dq with respect to the scaled queries: in T = double from
  // the float64 inputs and dO, T = float from the float32 inputs and dO rounded to float32.
  template <class T>
  void gradients(const OperatorSpec& spec, Form form, const BackwardOptions& options, const double* d_out,
                 T* dq, T* dk, T* dv) const;
  // The same backward in Gauge<double> on the float64 inputs' magnitudes and |dO|: its gauge.
  void gradient_gauge(const OperatorSpec& spec, Form form, const BackwardOptions& options,
                      const double* d_out, double* dq, double* dk, double* dv) const;

 private:
  struct Arrays;
  Problem problem_;
  std::unique_ptr<Arrays> arrays_;
};

// out = num / (den + eps) when spec.normalize, else num; device pointers, out [.., value_dim].
// Throws hla::Error naming the first token whose divisor is zero in Z/p. Synchronizes `stream`.
template <class T>
void finish(const OperatorSpec& spec, const Problem& problem, const T* num, const T* den, T* out,
            CUstream_st* stream = nullptr);

// Where the fast path writes (device memory, [.., value_dim] row-major): `out` gets the operator's
// output, num or, normalized, num times 1 / (den + eps) row by row, in float32 or bf16 (rounded to
// nearest even).
// With `den` set (normalized operators only) it gets the terms instead: num in float32 to `out`
// and the denominators [..] to `den`; the output is then num * (1 / (den + float(eps))) in float32
// arithmetic, bit for bit what the kernel writes without `den`.
// With `checkpoints` set (the operators fast_backward covers), it also gets each chunk's state
// operands for the backward: fast_checkpoint_bytes(spec, problem) of device memory.
struct FastOutput {
  void* out = nullptr;
  bool bf16 = false;
  float* den = nullptr;
  void* checkpoints = nullptr;
};

// The fast path on the matrix units (Implementation::gpu_fast: the operators the catalogue says),
// bf16 inputs, float32 accumulation and state, d and dv as fast_covers_width says (hla2 and ahla
// without checkpoints: fast_covers_wide_width, ahla's wider keys in one pass per value half, hla2's in
// two passes, hla3's in three, or for few heads composed of causal products split into segments; values
// alone wider by their halves), any n (chunks of
// 64 tokens, the last one possibly short). head_decays: empty, or one gamma in (0, 1] per head
// (problem.heads values, shared by the batch), replacing spec.decay (not with hla2's ridge, which
// takes gamma = 1). Runs in `stream` without synchronizing it. Throws hla::Error for anything else.
void fast_forward(const OperatorSpec& spec, const Problem& problem, const BFloat16* q, const BFloat16* k,
                  const BFloat16* v, const FastOutput& out, CUstream_st* stream = nullptr,
                  std::span<const double> head_decays = {});
// One rank's fast forward with the sequence split as `slices` (docs/ranks.md; q, k, v and out hold this
// rank's slice of every sequence-head): fast_forward's operators, options and outputs (the checkpoints
// those of the slice's chunks, for rank_fast_backward). Every slice but the last must have the same
// length, a multiple of 64 tokens. The rank runs the
// summary pass over its slice, all-gathers the summaries through `exchange`, folds those of the ranks
// before it into its carry (the carry kernel) and runs the outputs pass from it, one block per
// sequence-head. Every rank must call it (an empty last slice too); a bad split throws hla::Error on
// every rank alike.
void rank_fast_forward(const OperatorSpec& spec, const Problem& slice, const Slices& slices,
                       const BFloat16* q, const BFloat16* k, const BFloat16* v, const FastOutput& out,
                       RankExchange& exchange, CUstream_st* stream = nullptr,
                       std::span<const double> head_decays = {});
// Bytes each rank sends in rank_fast_forward's all-gather (one summary per sequence-head of `slice`),
// and in rank_fast_backward's (hla2 and ahla: the same size).
std::int64_t fast_rank_exchange_bytes(const OperatorSpec& spec, const Problem& slice);
// Host convenience: fast_outputs with the sequence split as `slices`, the ranks simulated on this GPU.
std::vector<Matrix<float>> ranks_fast_outputs(const OperatorSpec& spec,
                                              const std::vector<Sequence<float>>& heads, const Slices& slices,
                                              bool bf16);
// The forward's checkpoints for the backward, heads up to 64 wide: the two bf16 state tiles (64 x 64)
// its products read at each chunk boundary (hla2 S, F; ahla P, E) and, normalized, their vectors
// (hla2 f; ahla n, m: 256 bytes), 16 KiB per chunk of 64 tokens and sequence-head (256 bytes per
// token and head: 2 GiB at batch 8, 16 heads, n = 65536; normalized 1.6% more). Wider heads take none
// (0 bytes): their backward recomputes the forward's products.
std::int64_t fast_checkpoint_bytes(const OperatorSpec& spec, const Problem& problem);

// The backward on the matrix units (masked hla2 and ahla, normalized or not, with a decay or hla2's
// ridge; the forward's d, dv and n): the gradients of <d_num, num> + <d_den, den> (the readouts'
// adjoints: reference::finish_adjoint; unnormalized, d_num = dO and no d_den) into dq, dk ([.., d])
// and dv ([.., dv]), float32, from the bf16 q, k, v, the bf16 d_num [.., dv], the float32 d_den [..]
// (normalized only, else null) and the checkpoints that a fast_forward of the same spec, inputs and
// head_decays wrote (fast_checkpoint_bytes(spec, problem) of them). It recomputes each chunk's
// products from its checkpoint, walking the chunks of a sequence-head from the last, one block per
// sequence-head or, when the sequence-heads leave SMs idle, per segment of one (stream-ordered
// scratch for the segments' summaries and carry-ins). Heads wider than 64 (d or dv up to 128; not
// across ranks) take no checkpoints (null): their backward is composed of first-order causal products
// on the matrix units, the forward's intermediate (hla2 U, ahla X) recomputed, 7 products (hla2
// normalized 9, ahla normalized 13), each split into segments as above when its sequence-heads leave
// SMs idle, and stream-ordered scratch of at most about 1 KB per token and head at d = dv = 128
// (docs/gpu.md). Device pointers; runs in `stream` without
// synchronizing it; throws hla::Error for anything else. Its error bound is fast_backward_roundings
// on the gradients' gauge (docs/gpu.md).
void fast_backward(const OperatorSpec& spec, const Problem& problem, const BFloat16* q, const BFloat16* k,
                   const BFloat16* v, const BFloat16* d_num, const float* d_den, const void* checkpoints,
                   float* dq, float* dk, float* dv, CUstream_st* stream = nullptr,
                   std::span<const double> head_decays = {});
// Host conveniences, each head's q, k, v rounded to bf16 (batch 1, one head per sequence), the forward
// with checkpoints and the backward; .output and .terms hold the forward's outputs and terms (num in
// float32). fast_gradients: the gradients of <dO, O>, the readouts' adjoints computed on the host in
// float32 (reference::finish_adjoint) from the forward's terms and dO as given, d_num then rounded to
// bf16 (unnormalized: d_num = dO rounded to bf16). fast_readout_gradients: those of <d_num, num> + <d_den,
// den> for given adjoints (d_num rounded to bf16, d_den as it is; unnormalized operators take d_den zero),
// the sequence-heads taken as `batch` x heads (head_decays: one per head, shared by the batch).
std::vector<Gradients<float>> fast_gradients(const OperatorSpec& spec,
                                             const std::vector<Sequence<float>>& heads,
                                             const std::vector<Matrix<float>>& d_outs,
                                             std::span<const double> head_decays = {});
std::vector<Gradients<float>> fast_readout_gradients(const OperatorSpec& spec,
                                                     const std::vector<Sequence<float>>& heads,
                                                     const std::vector<Terms<float>>& d_terms,
                                                     std::span<const double> head_decays = {},
                                                     std::int64_t batch = 1);
// One rank's fast backward with the sequence split as `slices` (docs/ranks.md), after its
// rank_fast_forward with checkpoints: fast_backward's operators, arguments and bounds over this rank's
// slice of every sequence-head (`checkpoints` that forward's), the same slices and exchange. Every rank
// but the first runs the backward's summary pass over its slice (it needs no checkpoint), the ranks
// all-gather those summaries, each folds those of the ranks after it into the adjoints after its slice
// and runs the gradient pass from them. Every rank must call it; a bad split throws on every rank alike.
void rank_fast_backward(const OperatorSpec& spec, const Problem& slice, const Slices& slices,
                        const BFloat16* q, const BFloat16* k, const BFloat16* v, const BFloat16* d_num,
                        const float* d_den, const void* checkpoints, float* dq, float* dk, float* dv,
                        RankExchange& exchange, CUstream_st* stream = nullptr,
                        std::span<const double> head_decays = {});
// Host convenience: fast_gradients with the sequence split as `slices`, the ranks simulated on this
// GPU (each rank's forward with checkpoints, its rows' readout adjoints on the host, its backward).
std::vector<Gradients<float>> ranks_fast_gradients(const OperatorSpec& spec,
                                                   const std::vector<Sequence<float>>& heads,
                                                   const std::vector<Matrix<float>>& d_outs,
                                                   const Slices& slices);

// The fast path's error bound (docs/gpu.md, "The fast path's bound"): each monomial of an output's
// numerator or denominator passes through at most `bf16` roundings to bf16 (u = 2^-8) and the
// float32 sums add at most `float32` roundings counted at u = 2^-22, so that componentwise
// |fast - exact| <= ((1 + gamma_8(bf16)) (1 + gamma_22(float32)) - 1) gauge, the gauge being the
// operator on |q|, |k|, |v|. `decayed`: some head's gamma is not 1. hla3's monomials are products of
// a row of Z and a row of R, whose chains both count. Heads wider than 64 run in passes or, for few
// heads, composed of causal products split into segments, and their counts cover both (c = ceil(n / 64)
// chunks): hla2's and ahla's with keys wider than 64 take c / 8 float32 roundings more without decay (and
// hla2's ridge 3), one bf16 rounding more with decay; hla3's (d or dv above 64) 108 + 3 c / 16 float32
// roundings more (3 x 36 for the products over the key halves in Z, R and O; the segments), one bf16 more
// with decay.
struct FastRoundings {
  int bf16;
  std::int64_t float32;
};
FastRoundings fast_roundings(Variant variant, bool decayed, std::int64_t n, std::ptrdiff_t key_dim,
                             std::ptrdiff_t value_dim);
// The same counts for the backward's gradients of spec (docs/gpu.md, "The fast backward and its
// bound"): the forward's without decay (plus one float32 rounding for hla2 normalized or with the
// ridge); with decay, spec's or one gamma per head (`head_decays`, whatever their values: the kernels'
// decaying path), six bf16 roundings (the scaled copies of K, V, dO and of the adjoints add theirs) and
// the forward's float32 count.
// Heads wider than 64 (d or dv up to 128; fast_backward composes them of causal products): the
// forward's decayed float32 count in every case, and three bf16 roundings, four normalized, six with
// decay.
FastRoundings fast_backward_roundings(const OperatorSpec& spec, std::int64_t n, std::ptrdiff_t key_dim,
                                      std::ptrdiff_t value_dim, bool head_decays = false);

// Host conveniences, each head's inputs rounded to bf16 (batch 1, one head per sequence):
// the terms of each head (den zero for an unnormalized operator), and the outputs as the kernel
// writes them (float32, or bf16 widened to float32).
std::vector<Terms<float>> fast_terms(const OperatorSpec& spec, const std::vector<Sequence<float>>& heads,
                                     std::span<const double> head_decays = {});
std::vector<Matrix<float>> fast_outputs(const OperatorSpec& spec, const std::vector<Sequence<float>>& heads,
                                        bool bf16, std::span<const double> head_decays = {});

// data[i] = scale * a standard normal sample, from a hash of (seed, i); for benchmarks (never
// time on zeros). In: float or BFloat16 (rounded to nearest even).
template <class In>
void fill_gaussian(In* data, std::int64_t count, std::uint64_t seed, float scale,
                   CUstream_st* stream = nullptr);

// Host convenience: copies the sequence-heads to the device (batch 1, heads = their number),
// runs `terms` and copies the results back. All heads must share n, d, dv.
std::vector<Terms<float>> terms(const OperatorSpec& spec, Form form, Implementation impl,
                                const std::vector<Sequence<float>>& heads, std::int64_t chunk);
std::vector<Terms<double>> terms(const OperatorSpec& spec, Form form, Implementation impl,
                                 const std::vector<Sequence<double>>& heads, std::int64_t chunk);
std::vector<Terms<ModP>> terms(const OperatorSpec& spec, Form form, Implementation impl,
                               const std::vector<Sequence<ModP>>& heads, std::int64_t chunk);

// The same with bf16 inputs: each entry of `heads` is rounded to bf16 (to_bfloat16) on the way.
std::vector<Terms<float>> terms_bf16(const OperatorSpec& spec, Form form, Implementation impl,
                                     const std::vector<Sequence<float>>& heads, std::int64_t chunk);

}  // namespace hla::fast::gpu
