// The GPU drivers, generic over the variant's algebra (algebra/<variant>.cuh) and the scalar: the streaming
// kernel and the three stages of the chunk-parallel scan. One thread block per sequence-head
// (streaming) or per chunk of one (scan); states live in shared memory.

#include <cuda_runtime.h>

#include <algorithm>
#include <string>

#include "algebra/dispatch.cuh"
#include "backward.cuh"
#include "hla/fast/gpu_status.hpp"
#include "hla/reference/hash.hpp"
#include "launch.hpp"

namespace hla::fast::gpu::detail {
namespace {

constexpr int threads_per_block = 256;

template <class T, class In>
__device__ inline T load_scalar(const In& x) {
  return T(x);
}
template <>
__device__ inline float load_scalar<float, BFloat16>(const BFloat16& x) {
  return __uint_as_float(static_cast<unsigned>(x.bits) << 16);
}

// The block's shared memory: a state of `state` scalars, token t's q, k, v, then scratch.
template <class T>
struct Shared {
  T *state, *q, *k, *v, *scratch;
  __device__ Shared(T* base, int state_size, int d, int dv)
      : state(base), q(base + state_size), k(q + d), v(k + d), scratch(v + dv) {}
};

template <class T, class In>
__device__ void load_token(const Shared<T>& sh, const In* q, const In* k, const In* v, std::int64_t row,
                           int d, int dv) {
  block::each(d, [&](int i) {
    sh.q[i] = load_scalar<T>(q[row * d + i]);
    sh.k[i] = load_scalar<T>(k[row * d + i]);
  });
  block::each(dv, [&](int j) { sh.v[j] = load_scalar<T>(v[row * dv + j]); });
}

template <class T>
__device__ T* shared_scalars() {
  extern __shared__ __align__(16) unsigned char shared_bytes[];
  return reinterpret_cast<T*>(shared_bytes);
}

// The decoding loop: push token t into the state, read o_t; one block per sequence-head.
template <class Algebra, class In, class T>
__global__ void streaming_kernel(Algebra algebra, int state_size, std::int64_t length, const In* q,
                                 const In* k, const In* v, T* num, T* den) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const Shared<T> sh(shared_scalars<T>(), state_size, d, dv);
  block::fill(sh.state, state_size, T(0));
  const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * length;
  for (std::int64_t t = 0; t < length; ++t) {
    load_token(sh, q, k, v, first + t, d, dv);
    __syncthreads();
    algebra.push(sh.state, sh.scratch, sh.q, sh.k, sh.v);
    algebra.read(sh.state, sh.scratch, sh.q, num + (first + t) * dv, den + first + t);
    __syncthreads();
  }
}

// Stage 1: each chunk's summary, the left fold of its tokens from the identity. Blocks past the
// last chunk (padding to a power of two) leave the identity.
template <class Algebra, class In, class T>
__global__ void chunk_summary_kernel(Algebra algebra, std::int64_t length, std::int64_t chunk,
                                     std::int64_t padded, const In* q, const In* k, const In* v,
                                     T* summaries) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const int size = Algebra::summary_size(d, dv);
  const Shared<T> sh(shared_scalars<T>(), size, d, dv);
  const std::int64_t head = blockIdx.y, c = blockIdx.x;
  algebra.identity(sh.state);
  __syncthreads();
  const std::int64_t begin = c * chunk, end = std::min(length, begin + chunk);
  for (std::int64_t t = begin; t < end; ++t) {
    load_token(sh, q, k, v, head * length + t, d, dv);
    __syncthreads();
    algebra.absorb(sh.state, sh.scratch, sh.q, sh.k, sh.v);
  }
  block::copy(sh.state, summaries + (head * padded + c) * size, size);
}

// Stage 2: Blelloch's exclusive scan over the padded chunk summaries of each head, the same tree
// as fast::exclusive_scan. One block per combine; `work` gives each block a result and scratch.
// Up-sweep: the right node becomes left (+) right. Down-sweep: the left node inherits the right
// node's prefix, and the right node becomes that prefix (+) the left subtree.
template <bool Up, class Algebra, class T>
__global__ void sweep_kernel(Algebra algebra, std::int64_t padded, std::int64_t stride, T* summaries,
                             T* work) {
  const int size = Algebra::summary_size(algebra.p.d, algebra.p.dv);
  const int scratch = combine_scratch<Algebra>(algebra.p.d, algebra.p.dv);
  const std::int64_t head = blockIdx.y, pair = blockIdx.x;
  T* xs = summaries + head * padded * size;
  T* out = work + (head * gridDim.x + pair) * (size + scratch);
  const std::int64_t right = (pair + 1) * 2 * stride - 1;
  T* left_node = xs + (right - stride) * size;
  T* right_node = xs + right * size;
  if constexpr (Up) {
    algebra.combine(left_node, right_node, out, out + size);
  } else {
    algebra.combine(right_node, left_node, out, out + size);
  }
  __syncthreads();
  block::each(size, [&](int i) {
    if constexpr (!Up) left_node[i] = right_node[i];
    right_node[i] = out[i];
  });
}

template <class Algebra, class T>
__global__ void set_identity_kernel(Algebra algebra, std::int64_t padded, T* summaries) {
  const int size = Algebra::summary_size(algebra.p.d, algebra.p.dv);
  algebra.identity(summaries + (blockIdx.x * padded + padded - 1) * size);
}

// Stage 3: each chunk from its carry-in, token by token: I_t = ((carry (+) T_1) (+) ...) (+) T_t.
template <class Algebra, class In, class T>
__global__ void chunk_outputs_kernel(Algebra algebra, std::int64_t length, std::int64_t chunk,
                                     std::int64_t padded, const In* q, const In* k, const In* v,
                                     const T* carries, T* num, T* den) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const int size = Algebra::summary_size(d, dv);
  const Shared<T> sh(shared_scalars<T>(), size, d, dv);
  const std::int64_t head = blockIdx.y, c = blockIdx.x;
  block::copy(carries + (head * padded + c) * size, sh.state, size);
  const std::int64_t begin = c * chunk, end = std::min(length, begin + chunk);
  for (std::int64_t t = begin; t < end; ++t) {
    const std::int64_t row = head * length + t;
    load_token(sh, q, k, v, row, d, dv);
    __syncthreads();
    algebra.absorb(sh.state, sh.scratch, sh.q, sh.k, sh.v);
    algebra.read(sh.state, sh.scratch, sh.q, num + row * dv, den + row);
    __syncthreads();
  }
}

// Sequence parallelism (docs/ranks.md). Each head's fold of `count` summaries from the identity, item i
// of head h at items + i * item_stride + h * head_stride, into out [heads][size]: a slice's summary from
// its chunk summaries, or a rank's carry from the summaries of the ranks before it. One block per head,
// `work` 2 size + the combine's scratch scalars per head.
template <class Algebra, class T>
__global__ void fold_kernel(Algebra algebra, std::int64_t count, std::int64_t item_stride,
                            std::int64_t head_stride, const T* items, T* out, T* work) {
  const int size = Algebra::summary_size(algebra.p.d, algebra.p.dv);
  const int scratch = combine_scratch<Algebra>(algebra.p.d, algebra.p.dv);
  const std::int64_t head = blockIdx.x;
  T* folded = work + head * (2 * size + scratch);
  T* next = folded + size;
  algebra.identity(folded);
  __syncthreads();
  for (std::int64_t i = 0; i < count; ++i) {
    algebra.combine(folded, items + i * item_stride + head * head_stride, next, next + size);
    __syncthreads();
    block::copy(next, folded, size);
    __syncthreads();
  }
  block::copy(folded, out + head * size, size);
}

// A rank's carry before each chunk's: carries[h][c] = carry[h] (+) carries[h][c], one block per chunk
// of a head; `work` gives each block a result and scratch.
template <class Algebra, class T>
__global__ void precede_kernel(Algebra algebra, std::int64_t padded, const T* carry, T* carries, T* work) {
  const int size = Algebra::summary_size(algebra.p.d, algebra.p.dv);
  const int scratch = combine_scratch<Algebra>(algebra.p.d, algebra.p.dv);
  const std::int64_t head = blockIdx.y, c = blockIdx.x;
  T* out = work + (head * gridDim.x + c) * (size + scratch);
  T* node = carries + (head * padded + c) * size;
  algebra.combine(carry + head * size, node, out, out + size);
  __syncthreads();
  block::copy(out, node, size);
}

// What one launch of backward_kernel works on: each sequence-head's tokens in chunks of `chunk`
// (the streaming backward: one chunk, the whole sequence), block b on work item first_item + b,
// chunk item % chunks of head item / chunks. The scan's passes 1 and 3 (backward.cuh) also read
// `carries` ([head][padded] summaries of carry_stride scalars: the state before each chunk) and
// `adjoints` ([head][chunks] stream states): pass 1 (own) starts each chunk from a zero adjoint and
// writes the adjoint of its carry to adjoints[item]; pass 3 starts it from adjoints[item + 1] (the
// last chunk from `after`, or zero). Per block, in `workspace`: the adjoint where it does not fit in shared
// memory (adjoint_shared), the checkpoints and the segment's states.
template <class T>
struct BackwardWork {
  std::int64_t length = 0, chunk = 0, chunks = 1, checkpoint = 1, first_item = 0;
  const T* carries = nullptr;
  std::int64_t padded = 0, carry_stride = 0;
  T* adjoints = nullptr;
  const T* after = nullptr;  // [head] stream states: the adjoint after each head's last chunk (pass 3)
  bool own = false;
  T* workspace = nullptr;
  std::int64_t per_block = 0;
  bool adjoint_shared = false;
};

// The streaming backward (backward.cuh) of one chunk of one sequence-head per block: in shared
// memory one token's q, k, v, d_num, d_den and the scratch, then the adjoint where it fits.
template <class Algebra, class In, class T>
__global__ void backward_kernel(Algebra algebra, BackwardWork<T> work, const In* q, const In* k, const In* v,
                                const T* d_num, const T* d_den, T* dq, T* dk, T* dv) {
  const int d = algebra.p.d, value_dim = algebra.p.dv;
  const std::int64_t size = streaming_state_size(algebra);
  const Shared<T> sh(shared_scalars<T>(), 0, d, value_dim);
  T* own = work.workspace + static_cast<std::int64_t>(blockIdx.x) * work.per_block;
  BackwardArrays<T> w{};
  w.q = sh.q;
  w.k = sh.k;
  w.v = sh.v;
  w.d_num = sh.scratch;
  w.d_den = w.d_num + value_dim;
  w.scratch = w.d_den + 1;
  if (work.adjoint_shared) {
    w.adjoint = w.scratch + backward_scratch<Algebra>(d, value_dim);
  } else {
    w.adjoint = own;
    own += size;
  }
  const std::int64_t item = work.first_item + blockIdx.x, head = item / work.chunks, c = item % work.chunks;
  const std::int64_t begin = c * work.chunk, count = std::min(work.length, begin + work.chunk) - begin;
  w.checkpoints = own;
  w.states = own + (count + work.checkpoint - 1) / work.checkpoint * size;
  const std::int64_t first = head * work.length + begin;
  const auto load = [&](std::int64_t t, bool adjoints) {
    load_token(sh, q, k, v, first + t, d, value_dim);
    if (!adjoints) return;
    block::each(value_dim, [&](int j) { w.d_num[j] = d_num[(first + t) * value_dim + j]; });
    block::each(1, [&](int) { *w.d_den = d_den[first + t]; });
  };
  const T* initial = work.carries ? work.carries + (head * work.padded + c) * work.carry_stride : nullptr;
  const T* after = nullptr;
  if (work.adjoints && !work.own) {
    if (c + 1 < work.chunks) {
      after = work.adjoints + (item + 1) * size;
    } else if (work.after) {
      after = work.after + head * size;
    }
  }
  stream_backward(algebra, count, work.checkpoint, w, load, dq + first * d, dk + first * d,
                  dv + first * value_dim, initial, after);
  if (work.own) {
    block::sync();
    block::copy(w.adjoint, work.adjoints + item * size, size);
  }
}

// Pass 2 of the scan's backward (backward.cuh, carry_adjoints): one block per sequence-head, its
// chunks from the last back down to `stop`; carries and sums [head][padded], adjoints [head][chunks],
// after (the adjoint of the state after the last chunk; nullptr: zero) [head]; `first`, where given,
// [head] gets adjoints[head][0].
template <class Algebra, class T>
__global__ void carry_adjoints_kernel(Algebra algebra, std::int64_t chunks, std::int64_t padded,
                                      const T* carries, const T* sums, T* adjoints, const T* after,
                                      std::int64_t stop, T* work, T* first = nullptr) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = Algebra::summary_size(d, dv), state = streaming_state_size(algebra);
  const std::int64_t head = blockIdx.x;
  carry_adjoints(
      algebra, chunks, [&](std::int64_t c) { return carries + (head * padded + c) * size; },
      [&](std::int64_t c) { return sums + (head * padded + c) * size; },
      [&](std::int64_t c) { return adjoints + (head * chunks + c) * state; },
      work + head * carry_adjoint_work(algebra), after ? after + head * state : nullptr, stop);
  if (first && chunks > 0) {
    block::sync();
    block::copy(adjoints + head * chunks * state, first + head * state, state);
  }
}

// The ranks' chain backward (backward.cuh, rank_after_adjoint), one block per sequence-head: from the
// gathered slice summaries [ranks][heads][size] and carry adjoints [ranks][heads][state] (changed in
// place), the adjoint of the state after this rank's slice into after [heads][state].
template <class Algebra, class T>
__global__ void rank_after_kernel(Algebra algebra, int ranks, int rank, const T* summaries, T* own, T* after,
                                  T* work) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = Algebra::summary_size(d, dv), state = streaming_state_size(algebra);
  const std::int64_t head = blockIdx.x, heads = gridDim.x;
  T* carries = work + head * (ranks * size + rank_chain_work(algebra));
  rank_after_adjoint(
      algebra, ranks, rank, [&](std::int64_t c) { return summaries + (c * heads + head) * size; },
      [&](std::int64_t c) { return own + (c * heads + head) * state; }, carries, carries + ranks * size,
      after + head * state);
}

template <class T>
__global__ void finish_kernel(T eps, std::int64_t rows, int dv, const T* num, const T* den, T* out,
                              unsigned long long* first_zero) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= rows * dv) return;
  const std::int64_t row = i / dv;
  const T divisor = den[row] + eps;
  if constexpr (std::is_same_v<T, ModP>) {
    if (divisor == T(0)) {
      atomicMin(first_zero, static_cast<unsigned long long>(row));
      out[i] = T(0);
      return;
    }
  }
  out[i] = num[i] / divisor;
}

template <class In>
__device__ inline In from_float(float x) {
  return In(x);
}
template <>
__device__ inline BFloat16 from_float<BFloat16>(float x) {
  return bfloat16_from_float_bits(__float_as_uint(x));
}

// x_i = scale * N(0, 1) from a counter-based hash of (seed, i): the same values for the same
// seed on every launch configuration.
template <class In>
__global__ void fill_gaussian_kernel(In* data, std::int64_t count, std::uint64_t seed, float scale) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i >= count) return;
  const std::uint64_t h = splitmix64(seed ^ splitmix64(static_cast<std::uint64_t>(i)));
  const float u1 = (static_cast<float>(h >> 40) + 1.0f) * 0x1p-24f;  // (0, 1]
  const float u2 = static_cast<float>((h >> 16) & 0xffffff) * 0x1p-24f;
  data[i] = from_float<In>(scale * sqrtf(-2.0f * logf(u1)) * cospif(2.0f * u2));
}

// Scalars of shared memory per block: the state or chunk summary, one token's q, k, v, the scratch.
template <class Algebra>
std::int64_t streaming_scalars(const Algebra& algebra) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  return streaming_state_size(algebra) + 2 * d + dv + Algebra::scratch_size(d, dv);
}
template <class Algebra>
std::int64_t chunk_scalars(int d, int dv) {
  return Algebra::summary_size(d, dv) + 2 * d + dv + Algebra::scratch_size(d, dv);
}

__global__ void widen_kernel(const float* from, double* to, std::int64_t count, double scale) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) to[i] = __dmul_rn(static_cast<double>(from[i]), scale);
}

__global__ void round_up_to_float_kernel(const Gauge<double>* from, float* to, std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) to[i] = __double2float_ru(from[i].value());
}

__global__ void round_to_float_kernel(const double* from, float* to, std::int64_t count) {
  const std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (i < count) to[i] = __double2float_rn(from[i]);
}

std::int64_t shared_bytes_or_throw(std::int64_t scalars, std::int64_t scalar_bytes, const char* what, int d,
                                   int dv) {
  const std::int64_t bytes = scalars * scalar_bytes;
  const std::int64_t limit = shared_memory_limit();
  if (bytes > limit) {
    throw Error(std::string(what) + " with d = " + std::to_string(d) + ", dv = " + std::to_string(dv) +
                " needs " + std::to_string(bytes) + " bytes of shared memory per block; the device allows " +
                std::to_string(limit));
  }
  return bytes;
}

template <class Kernel>
void allow_shared(Kernel kernel, std::int64_t bytes) {
  check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)),
        "cudaFuncSetAttribute");
}

std::int64_t blocks_for(std::int64_t count, const char* what) {
  if (count > 2147483647LL) throw Error(std::string(what) + ": too many blocks for one launch");
  return count;
}

// Stages 1 and 2 of the scan: each chunk's summary, then the carries by Blelloch's exclusive scan,
// into `summaries` [heads][padded]; `sums`, where given, keeps the chunk summaries; `carry` [heads],
// where given, is the state before the sequence (a rank's carry: docs/ranks.md), combined before every
// chunk's carry. `bytes`: the chunk summary kernel's shared memory, checked by the caller
// (chunk_shared_bytes) before it allocated.
template <class Algebra, class In, class T>
void scan_carries(const Algebra& algebra, std::int64_t heads, std::int64_t length, std::int64_t chunk,
                  std::int64_t padded, std::int64_t bytes, const In* q, const In* k, const In* v,
                  T* summaries, T* sums, CUstream_st* stream, const T* carry = nullptr) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = Algebra::summary_size(d, dv);
  const std::int64_t scan_scratch = combine_scratch<Algebra>(d, dv);
  T* work = nullptr;
  const std::int64_t work_blocks = std::max<std::int64_t>(padded / 2, 1) * heads;
  check(cudaMallocAsync(reinterpret_cast<void**>(&work), work_blocks * (size + scan_scratch) * sizeof(T),
                        stream),
        "cudaMallocAsync (scan workspace)");
  auto summary = chunk_summary_kernel<Algebra, In, T>;
  allow_shared(summary, bytes);
  summary<<<dim3(blocks_for(padded, "chunks"), heads), threads_per_block, bytes, stream>>>(
      algebra, length, chunk, padded, q, k, v, summaries);
  check_launch("chunk summary kernel");
  if (sums) {
    check(
        cudaMemcpyAsync(sums, summaries, heads * padded * size * sizeof(T), cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync (chunk summaries)");
  }
  for (std::int64_t stride = 1; stride < padded; stride *= 2) {
    const dim3 grid(padded / (2 * stride), heads);
    sweep_kernel<true, Algebra, T>
        <<<grid, threads_per_block, 0, stream>>>(algebra, padded, stride, summaries, work);
    check_launch("up-sweep kernel");
  }
  set_identity_kernel<Algebra, T><<<heads, threads_per_block, 0, stream>>>(algebra, padded, summaries);
  check_launch("identity kernel");
  for (std::int64_t stride = padded / 2; stride >= 1; stride /= 2) {
    const dim3 grid(padded / (2 * stride), heads);
    sweep_kernel<false, Algebra, T>
        <<<grid, threads_per_block, 0, stream>>>(algebra, padded, stride, summaries, work);
    check_launch("down-sweep kernel");
  }
  if (carry) {  // work holds max(padded / 2, 1) >= ceil(chunks / 2) blocks: too few for one per chunk
    check(cudaFreeAsync(work, stream), "cudaFreeAsync");
    const std::int64_t chunks = (length + chunk - 1) / chunk;
    check(cudaMallocAsync(reinterpret_cast<void**>(&work), heads * chunks * (size + scan_scratch) * sizeof(T),
                          stream),
          "cudaMallocAsync (carry workspace)");
    precede_kernel<Algebra, T><<<dim3(blocks_for(chunks, "chunks"), heads), threads_per_block, 0, stream>>>(
        algebra, padded, carry, summaries, work);
    check_launch("precede kernel");
  }
  check(cudaFreeAsync(work, stream), "cudaFreeAsync");
}

std::int64_t padded_count(std::int64_t chunks) {
  std::int64_t padded = 1;
  while (padded < chunks) padded *= 2;
  return padded;
}

template <class T>
T* device_alloc(std::int64_t count, const char* what, CUstream_st* stream) {
  T* p = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&p), count * sizeof(T), stream),
        (std::string("cudaMallocAsync (") + what + ")").c_str());
  return p;
}

// The chunk kernels' shared memory (a summary, one token, the scratch); throws where it does not fit.
template <class Algebra, class T>
std::int64_t chunk_shared_bytes(int d, int dv) {
  return shared_bytes_or_throw(chunk_scalars<Algebra>(d, dv), sizeof(T), "the GPU scan's chunk summary", d,
                               dv);
}

// Each head's fold of `count` summaries (fold_kernel) into out [heads][size], stream-ordered.
template <class Algebra, class T>
void fold(const Algebra& algebra, std::int64_t heads, std::int64_t count, std::int64_t item_stride,
          std::int64_t head_stride, const T* items, T* out, CUstream_st* stream) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = Algebra::summary_size(d, dv), scratch = combine_scratch<Algebra>(d, dv);
  T* work = device_alloc<T>(heads * (2 * size + scratch), "fold workspace", stream);
  fold_kernel<Algebra, T><<<static_cast<unsigned>(heads), threads_per_block, 0, stream>>>(
      algebra, count, item_stride, head_stride, items, out, work);
  check_launch("fold kernel");
  check(cudaFreeAsync(work, stream), "cudaFreeAsync");
}

// The scan for one algebra: its carries, then stage 3. `carry` [heads][size], where given, is the
// state before the sequence (a rank's carry: docs/ranks.md), combined before every chunk's carry.
template <class Algebra, class In, class T>
void scan_with(const Algebra& algebra, std::int64_t heads, std::int64_t length, std::int64_t chunk,
               const In* q, const In* k, const In* v, T* num, T* den, CUstream_st* stream,
               const T* carry = nullptr) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = Algebra::summary_size(d, dv);
  const std::int64_t chunks = (length + chunk - 1) / chunk, padded = padded_count(chunks);
  // Before anything is allocated: a shape that does not fit leaks nothing.
  const std::int64_t bytes = chunk_shared_bytes<Algebra, T>(d, dv);
  T* summaries = device_alloc<T>(heads * padded * size, "chunk summaries", stream);
  scan_carries(algebra, heads, length, chunk, padded, bytes, q, k, v, summaries, static_cast<T*>(nullptr),
               stream, carry);
  auto outputs = chunk_outputs_kernel<Algebra, In, T>;
  allow_shared(outputs, bytes);
  outputs<<<dim3(blocks_for(chunks, "chunks"), heads), threads_per_block, bytes, stream>>>(
      algebra, length, chunk, padded, q, k, v, summaries, num, den);
  check_launch("chunk outputs kernel");
  check(cudaFreeAsync(summaries, stream), "cudaFreeAsync");
}

// backward_kernel over `items` work items (heads x chunks), in groups whose workspace stays within
// 8 GiB: per block ceil(chunk / checkpoint) checkpoints, checkpoint + 1 states and, where it does
// not fit in shared memory, the adjoint.
// Shared memory of one backward_kernel block: one token, the scratch and, where it fits, the
// adjoint (adjoint_shared); throws where even the token and scratch do not fit.
template <class T, class Algebra>
std::int64_t backward_shared_bytes(const Algebra& algebra, bool& adjoint_shared) {
  const int d = algebra.p.d, value_dim = algebra.p.dv;
  const std::int64_t size = streaming_state_size(algebra);
  const std::int64_t token = 2 * d + 2 * value_dim + 1 + backward_scratch<Algebra>(d, value_dim);
  adjoint_shared = (token + size) * static_cast<std::int64_t>(sizeof(T)) <= shared_memory_limit();
  return shared_bytes_or_throw(token + (adjoint_shared ? size : 0), sizeof(T),
                               "the GPU backward's token and scratch", d, value_dim);
}

template <class Algebra, class In, class T>
void run_backward(const Algebra& algebra, BackwardWork<T> work, std::int64_t items, const In* q, const In* k,
                  const In* v, const T* d_num, const T* d_den, T* dq, T* dk, T* dv, CUstream_st* stream) {
  const std::int64_t size = streaming_state_size(algebra);
  const std::int64_t bytes = backward_shared_bytes<T>(algebra, work.adjoint_shared);
  work.per_block = ((work.chunk + work.checkpoint - 1) / work.checkpoint + work.checkpoint + 1 +
                    (work.adjoint_shared ? 0 : 1)) *
                   size;
  const std::int64_t budget = std::int64_t{8} << 30;
  const std::int64_t group =
      std::clamp<std::int64_t>(budget / (work.per_block * static_cast<std::int64_t>(sizeof(T))), 1, items);
  work.workspace = device_alloc<T>(group * work.per_block, "backward checkpoints and states", stream);
  auto kernel = backward_kernel<Algebra, In, T>;
  allow_shared(kernel, bytes);
  for (std::int64_t first = 0; first < items; first += group) {
    work.first_item = first;
    kernel<<<blocks_for(std::min(group, items - first), "backward"), threads_per_block, bytes, stream>>>(
        algebra, work, q, k, v, d_num, d_den, dq, dk, dv);
    check_launch("backward kernel");
  }
  check(cudaFreeAsync(work.workspace, stream), "cudaFreeAsync");
}

// One rank's part in the scan's backward across ranks (docs/ranks.md): the ranks' summaries gathered
// [ranks][heads][size] and the all-gather of the adjoints of the ranks' carries.
template <class T>
struct RankPart {
  const T* gathered;
  int rank, ranks;
  const RankGather& gather;
};

// Between pass 1 and pass 2 of a rank's backward: carry_adjoints to chunk 0 on a copy of pass 1's
// adjoints gives the adjoint of the rank's carry from its own readouts; the ranks all-gather those;
// rank_after_kernel runs the ranks' chain. Returns the adjoint of the state after the slice [heads]
// (device memory the caller frees).
template <class Algebra, class T>
T* rank_after(const Algebra& algebra, std::int64_t heads, std::int64_t chunks, std::int64_t padded,
              const T* carries, const T* sums, const T* adjoints, const RankPart<T>& part,
              CUstream_st* stream) {
  const std::int64_t size = Algebra::summary_size(algebra.p.d, algebra.p.dv),
                     state = streaming_state_size(algebra);
  T* own = device_alloc<T>(heads * chunks * state, "own carry adjoints", stream);
  T* work = device_alloc<T>(heads * carry_adjoint_work(algebra), "carry adjoint work", stream);
  T* send = device_alloc<T>(heads * state, "rank carry adjoint", stream);
  T* gathered = device_alloc<T>(part.ranks * heads * state, "gathered carry adjoints", stream);
  check(cudaMemcpyAsync(own, adjoints, heads * chunks * state * sizeof(T), cudaMemcpyDeviceToDevice, stream),
        "cudaMemcpyAsync (own carry adjoints)");
  carry_adjoints_kernel<Algebra, T><<<blocks_for(heads, "carry adjoints"), threads_per_block, 0, stream>>>(
      algebra, chunks, padded, carries, sums, own, static_cast<const T*>(nullptr), 0, work, send);
  check_launch("carry adjoints kernel");
  part.gather(send, gathered, heads * state * sizeof(T));
  T* after = device_alloc<T>(heads * state, "adjoint after the slice", stream);
  T* chain =
      device_alloc<T>(heads * (part.ranks * size + rank_chain_work(algebra)), "rank chain work", stream);
  rank_after_kernel<Algebra, T><<<blocks_for(heads, "rank chain"), threads_per_block, 0, stream>>>(
      algebra, part.ranks, part.rank, part.gathered, gathered, after, chain);
  check_launch("rank chain kernel");
  for (T* p : {own, work, send, gathered, chain}) check(cudaFreeAsync(p, stream), "cudaFreeAsync");
  return after;
}

// The scan's backward for one algebra (backward.cuh): the forward's carries, pass 1, pass 2, pass 3;
// a rank's (`part`) from its carry, with rank_after between pass 1 and pass 2.
// Device memory besides run_backward's: the carries and the chunk summaries (2 heads padded
// summaries) and one stream state per chunk (a rank: twice that).
template <class Algebra, class In, class T>
void scan_backward_with(const Algebra& algebra, std::int64_t heads, std::int64_t length, std::int64_t chunk,
                        std::int64_t checkpoint, const In* q, const In* k, const In* v, const T* d_num,
                        const T* d_den, T* dq, T* dk, T* dv, CUstream_st* stream,
                        const RankPart<T>* part = nullptr) {
  const int d = algebra.p.d, value_dim = algebra.p.dv;
  const std::int64_t size = Algebra::summary_size(d, value_dim), state = streaming_state_size(algebra);
  const std::int64_t chunks = (length + chunk - 1) / chunk, padded = padded_count(chunks);
  // Both kernels' shared memory before anything is allocated: a shape that does not fit leaks nothing.
  const std::int64_t bytes = chunk_shared_bytes<Algebra, T>(d, value_dim);
  bool adjoint_shared = false;
  backward_shared_bytes<T>(algebra, adjoint_shared);
  T* carry = nullptr;
  if (part) {
    carry = device_alloc<T>(heads * size, "rank carry", stream);
    fold(algebra, heads, part->rank, heads * size, size, part->gathered, carry, stream);
  }
  T* carries = device_alloc<T>(heads * padded * size, "chunk carries", stream);
  T* sums = device_alloc<T>(heads * padded * size, "chunk summaries", stream);
  T* adjoints = device_alloc<T>(heads * chunks * state, "chunk adjoints", stream);
  T* work = device_alloc<T>(heads * carry_adjoint_work(algebra), "carry adjoint work", stream);
  scan_carries(algebra, heads, length, chunk, padded, bytes, q, k, v, carries, sums, stream,
               static_cast<const T*>(carry));
  BackwardWork<T> pass{};
  pass.length = length;
  pass.chunk = chunk;
  pass.chunks = chunks;
  pass.checkpoint = checkpoint;
  pass.carries = carries;
  pass.padded = padded;
  pass.carry_stride = size;
  pass.adjoints = adjoints;
  pass.own = true;
  run_backward(algebra, pass, heads * chunks, q, k, v, d_num, d_den, dq, dk, dv, stream);
  T* after =
      part ? rank_after(algebra, heads, chunks, padded, carries, sums, adjoints, *part, stream) : nullptr;
  carry_adjoints_kernel<Algebra, T><<<blocks_for(heads, "carry adjoints"), threads_per_block, 0, stream>>>(
      algebra, chunks, padded, carries, sums, adjoints, static_cast<const T*>(after), 1, work);
  check_launch("carry adjoints kernel");
  pass.own = false;
  pass.after = after;
  run_backward(algebra, pass, heads * chunks, q, k, v, d_num, d_den, dq, dk, dv, stream);
  for (T* p : {carries, sums, adjoints, work, carry, after}) {
    if (p) check(cudaFreeAsync(p, stream), "cudaFreeAsync");
  }
}

}  // namespace

std::int64_t shared_memory_limit() {
  int device = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  int bytes = 0;
  check(cudaDeviceGetAttribute(&bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device),
        "cudaDeviceGetAttribute");
  return bytes;
}

std::int64_t shared_scalars(const AlgebraParams<double>& params, bool streaming) {
  std::int64_t scalars = 0;
  with_device_algebra(params, [&]<class Algebra>(const Algebra& algebra) {
    if constexpr (Algebra::has_segments) {
      scalars = streaming ? streaming_scalars(algebra) : chunk_scalars<Algebra>(params.d, params.dv);
    } else {
      scalars = streaming_scalars(algebra);  // a stream only: no scan reaches here
    }
  });
  return scalars;
}

void launch_widen(const float* from, double* to, std::int64_t count, double scale, CUstream_st* stream) {
  if (count == 0) return;
  widen_kernel<<<blocks_for((count + threads_per_block - 1) / threads_per_block, "widen"), threads_per_block, 0,
                 stream>>>(from, to, count, scale);
  check_launch("widen kernel");
}

void launch_round_up_to_float(const Gauge<double>* from, float* to, std::int64_t count, CUstream_st* stream) {
  if (count == 0) return;
  round_up_to_float_kernel<<<blocks_for((count + threads_per_block - 1) / threads_per_block, "round up"),
                             threads_per_block, 0, stream>>>(from, to, count);
  check_launch("round-up-to-float kernel");
}

void launch_round_to_float(const double* from, float* to, std::int64_t count, CUstream_st* stream) {
  if (count == 0) return;
  round_to_float_kernel<<<blocks_for((count + threads_per_block - 1) / threads_per_block, "round"),
                          threads_per_block, 0, stream>>>(from, to, count);
  check_launch("round-to-float kernel");
}

template <class In, class T>
void launch_streaming(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length, const In* q,
                      const In* k, const In* v, T* num, T* den, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  with_device_algebra(params, [&]<class Algebra>(const Algebra& algebra) {
    const int d = params.d, dv = params.dv;
    const int state = streaming_state_size(algebra);
    const std::int64_t bytes =
        shared_bytes_or_throw(streaming_scalars(algebra), sizeof(T), "the GPU streaming state", d, dv);
    auto kernel = streaming_kernel<Algebra, In, T>;
    allow_shared(kernel, bytes);
    kernel<<<blocks_for(heads, "streaming"), threads_per_block, bytes, stream>>>(algebra, state, length, q, k,
                                                                                 v, num, den);
    check_launch("streaming kernel");
  });
}

// f(algebra) with the device algebra of params, which the scan needs to have segments, over at most
// 65535 sequence-heads (a grid's y).
template <class T, class F>
void with_scan_algebra(const AlgebraParams<T>& params, std::int64_t heads, F&& f) {
  if (heads > 65535) throw Error("GPU scan: at most 65535 sequence-heads per call");
  with_device_algebra(params, [&]<class Algebra>(const Algebra& algebra) {
    if constexpr (Algebra::has_segments) {
      f(algebra);
    } else {
      throw Error("GPU scan: this algebra is a stream only (the published third-order Alg. 3)");
    }
  });
}

template <class In, class T>
void launch_scan(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length, std::int64_t chunk,
                 const In* q, const In* k, const In* v, T* num, T* den, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  with_scan_algebra(params, heads, [&](const auto& algebra) {
    scan_with(algebra, heads, length, chunk, q, k, v, num, den, stream);
  });
}

template <class T>
std::int64_t summary_scalars(const AlgebraParams<T>& params) {
  std::int64_t size = 0;
  with_scan_algebra(
      params, 0, [&]<class Algebra>(const Algebra&) { size = Algebra::summary_size(params.d, params.dv); });
  return size;
}

template <class In, class T>
void launch_rank_summaries(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                           std::int64_t chunk, const In* q, const In* k, const In* v, T* summaries,
                           CUstream_st* stream) {
  if (heads == 0) return;
  with_scan_algebra(params, heads, [&]<class Algebra>(const Algebra& algebra) {
    const int d = algebra.p.d, dv = algebra.p.dv;
    const std::int64_t size = Algebra::summary_size(d, dv), chunks = (length + chunk - 1) / chunk;
    const std::int64_t bytes = chunk_shared_bytes<Algebra, T>(d, dv);
    T* sums = device_alloc<T>(std::max<std::int64_t>(heads * chunks * size, 1), "chunk summaries", stream);
    if (chunks > 0) {
      auto summary = chunk_summary_kernel<Algebra, In, T>;
      allow_shared(summary, bytes);
      summary<<<dim3(blocks_for(chunks, "chunks"), heads), threads_per_block, bytes, stream>>>(
          algebra, length, chunk, chunks, q, k, v, sums);
      check_launch("chunk summary kernel");
    }
    fold(algebra, heads, chunks, size, chunks * size, static_cast<const T*>(sums), summaries, stream);
    check(cudaFreeAsync(sums, stream), "cudaFreeAsync");
  });
}

template <class In, class T>
void launch_rank_scan(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                      std::int64_t chunk, const In* q, const In* k, const In* v, const T* gathered, int rank,
                      T* num, T* den, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  with_scan_algebra(params, heads, [&]<class Algebra>(const Algebra& algebra) {
    const std::int64_t size = Algebra::summary_size(algebra.p.d, algebra.p.dv);
    T* carry = device_alloc<T>(heads * size, "rank carry", stream);
    fold(algebra, heads, rank, heads * size, size, gathered, carry, stream);
    scan_with(algebra, heads, length, chunk, q, k, v, num, den, stream, static_cast<const T*>(carry));
    check(cudaFreeAsync(carry, stream), "cudaFreeAsync");
  });
}

template <class In, class T>
void launch_streaming_backward(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                               std::int64_t checkpoint, const In* q, const In* k, const In* v, const T* d_num,
                               const T* d_den, T* dq, T* dk, T* dv, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  with_device_algebra(params, [&]<class Algebra>(const Algebra& algebra) {
    BackwardWork<T> work{};
    work.length = work.chunk = length;
    work.checkpoint = checkpoint;
    run_backward(algebra, work, heads, q, k, v, d_num, d_den, dq, dk, dv, stream);
  });
}

template <class In, class T>
void launch_scan_backward(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                          std::int64_t chunk, std::int64_t checkpoint, const In* q, const In* k, const In* v,
                          const T* d_num, const T* d_den, T* dq, T* dk, T* dv, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  if (heads > 65535) throw Error("GPU scan: at most 65535 sequence-heads per call");
  with_device_algebra(params, [&]<class Algebra>(const Algebra& algebra) {
    if constexpr (Algebra::has_segments && requires { Algebra::carry_adjoint_scratch_size(0, 0); }) {
      scan_backward_with(algebra, heads, length, chunk, checkpoint, q, k, v, d_num, d_den, dq, dk, dv,
                         stream);
    } else {
      throw Error(
          "GPU scan backward: this algebra has no carry adjoint (the catalogue's backward_unavailable)");
    }
  });
}

template <class In, class T>
void launch_rank_scan_backward(const AlgebraParams<T>& params, std::int64_t heads, std::int64_t length,
                               std::int64_t chunk, std::int64_t checkpoint, const In* q, const In* k,
                               const In* v, const T* d_num, const T* d_den, T* dq, T* dk, T* dv,
                               const T* gathered, int rank, int ranks, const RankGather& gather,
                               CUstream_st* stream) {
  if (heads == 0) return;
  with_scan_algebra(params, heads, [&]<class Algebra>(const Algebra& algebra) {
    if constexpr (requires { Algebra::carry_adjoint_scratch_size(0, 0); }) {
      if (length == 0) {  // no tokens: the adjoint of its carry is zero, and the others still gather it
        const std::int64_t state = streaming_state_size(algebra);
        T* zero = device_alloc<T>(heads * state, "rank carry adjoint", stream);
        T* gathered_own = device_alloc<T>(ranks * heads * state, "gathered carry adjoints", stream);
        check(cudaMemsetAsync(zero, 0, heads * state * sizeof(T), stream), "cudaMemsetAsync");
        gather(zero, gathered_own, heads * state * sizeof(T));
        for (T* p : {zero, gathered_own}) check(cudaFreeAsync(p, stream), "cudaFreeAsync");
        return;
      }
      const RankPart<T> part{gathered, rank, ranks, gather};
      scan_backward_with(algebra, heads, length, chunk, checkpoint, q, k, v, d_num, d_den, dq, dk, dv, stream,
                         &part);
    } else {
      throw Error(
          "GPU scan backward: this algebra has no carry adjoint (the catalogue's backward_unavailable)");
    }
  });
}

template <class T>
std::int64_t launch_finish(const T& eps, std::int64_t rows, int dv, const T* num, const T* den, T* out,
                           CUstream_st* stream) {
  if (rows == 0) return -1;
  unsigned long long* first_zero = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&first_zero), sizeof(unsigned long long), stream),
        "cudaMallocAsync");
  check(cudaMemsetAsync(first_zero, 0xff, sizeof(unsigned long long), stream), "cudaMemsetAsync");
  const std::int64_t entries = rows * dv;
  finish_kernel<T><<<blocks_for((entries + threads_per_block - 1) / threads_per_block, "finish"),
                     threads_per_block, 0, stream>>>(eps, rows, dv, num, den, out, first_zero);
  check_launch("finish kernel");
  unsigned long long host = 0;
  check(cudaMemcpyAsync(&host, first_zero, sizeof host, cudaMemcpyDeviceToHost, stream), "cudaMemcpyAsync");
  check(cudaFreeAsync(first_zero, stream), "cudaFreeAsync");
  check(cudaStreamSynchronize(stream), "cudaStreamSynchronize");
  return host == ~0ULL ? -1 : static_cast<std::int64_t>(host);
}

template <class In>
void launch_fill_gaussian(In* data, std::int64_t count, std::uint64_t seed, float scale,
                          CUstream_st* stream) {
  if (count == 0) return;
  fill_gaussian_kernel<In><<<blocks_for((count + threads_per_block - 1) / threads_per_block, "fill"),
                             threads_per_block, 0, stream>>>(data, count, seed, scale);
  check_launch("fill kernel");
}
template void launch_fill_gaussian<float>(float*, std::int64_t, std::uint64_t, float, CUstream_st*);
template void launch_fill_gaussian<BFloat16>(BFloat16*, std::int64_t, std::uint64_t, float, CUstream_st*);

#define HLA_GPU_INSTANTIATE(In, T)                                                                      \
  template void launch_streaming<In, T>(const AlgebraParams<T>&, std::int64_t, std::int64_t, const In*, \
                                        const In*, const In*, T*, T*, CUstream_st*);                    \
  template void launch_scan<In, T>(const AlgebraParams<T>&, std::int64_t, std::int64_t, std::int64_t,   \
                                   const In*, const In*, const In*, T*, T*, CUstream_st*);
#define HLA_GPU_INSTANTIATE_RANKS(In, T)                                                                   \
  template void launch_rank_summaries<In, T>(const AlgebraParams<T>&, std::int64_t, std::int64_t,          \
                                             std::int64_t, const In*, const In*, const In*, T*,            \
                                             CUstream_st*);                                                \
  template void launch_rank_scan<In, T>(const AlgebraParams<T>&, std::int64_t, std::int64_t, std::int64_t, \
                                        const In*, const In*, const In*, const T*, int, T*, T*,            \
                                        CUstream_st*);
HLA_GPU_INSTANTIATE_RANKS(float, float)
HLA_GPU_INSTANTIATE_RANKS(BFloat16, float)
HLA_GPU_INSTANTIATE_RANKS(double, double)
HLA_GPU_INSTANTIATE_RANKS(ModP, ModP)
#undef HLA_GPU_INSTANTIATE_RANKS
template std::int64_t summary_scalars<float>(const AlgebraParams<float>&);
template std::int64_t summary_scalars<double>(const AlgebraParams<double>&);
template std::int64_t summary_scalars<ModP>(const AlgebraParams<ModP>&);
#define HLA_GPU_INSTANTIATE_BACKWARD(In, T)                                                               \
  template void launch_streaming_backward<In, T>(const AlgebraParams<T>&, std::int64_t, std::int64_t,     \
                                                 std::int64_t, const In*, const In*, const In*, const T*, \
                                                 const T*, T*, T*, T*, CUstream_st*);                     \
  template void launch_scan_backward<In, T>(const AlgebraParams<T>&, std::int64_t, std::int64_t,          \
                                            std::int64_t, std::int64_t, const In*, const In*, const In*,  \
                                            const T*, const T*, T*, T*, T*, CUstream_st*);
#define HLA_GPU_INSTANTIATE_RANK_BACKWARD(In, T)                                                             \
  template void launch_rank_scan_backward<In, T>(                                                            \
      const AlgebraParams<T>&, std::int64_t, std::int64_t, std::int64_t, std::int64_t, const In*, const In*, \
      const In*, const T*, const T*, T*, T*, T*, const T*, int, int, const RankGather&, CUstream_st*);
HLA_GPU_INSTANTIATE_RANK_BACKWARD(float, float)
HLA_GPU_INSTANTIATE_RANK_BACKWARD(BFloat16, float)
HLA_GPU_INSTANTIATE_RANK_BACKWARD(double, double)
HLA_GPU_INSTANTIATE_RANK_BACKWARD(ModP, ModP)
#undef HLA_GPU_INSTANTIATE_RANK_BACKWARD
HLA_GPU_INSTANTIATE_BACKWARD(float, float)
HLA_GPU_INSTANTIATE_BACKWARD(BFloat16, float)
HLA_GPU_INSTANTIATE_BACKWARD(double, double)
HLA_GPU_INSTANTIATE_BACKWARD(double, Gauge<double>)
HLA_GPU_INSTANTIATE_BACKWARD(ModP, ModP)
#undef HLA_GPU_INSTANTIATE_BACKWARD

HLA_GPU_INSTANTIATE(float, float)
HLA_GPU_INSTANTIATE(BFloat16, float)
HLA_GPU_INSTANTIATE(double, double)
HLA_GPU_INSTANTIATE(double, Gauge<double>)
HLA_GPU_INSTANTIATE(ModP, ModP)
#undef HLA_GPU_INSTANTIATE

template std::int64_t launch_finish<float>(const float&, std::int64_t, int, const float*, const float*,
                                           float*, CUstream_st*);
template std::int64_t launch_finish<double>(const double&, std::int64_t, int, const double*, const double*,
                                            double*, CUstream_st*);
template std::int64_t launch_finish<ModP>(const ModP&, std::int64_t, int, const ModP*, const ModP*, ModP*,
                                          CUstream_st*);

}  // namespace hla::fast::gpu::detail
