// The fast path: masked, unnormalized hla2 and ahla (gamma = 1) on the matrix units, bf16 inputs,
// float32 accumulation and state, d = dv = 64, chunks of 64 tokens (the last one may be short:
// rows past n load as zeros and are not stored). One block (one warpgroup)
// per sequence-head walks its chunks in order, so the scan over chunk summaries is the running
// state itself and never touches device memory; every step of a chunk is a 64 x 64 x 64 product
// issued asynchronously on Hopper's warpgroup matrix units (wgmma.cuh), and the state sums stay
// in the accumulator registers for the whole sequence. The inputs arrive by the tensor memory
// accelerator (TMA), three chunks ahead, and each chunk's outputs leave by one bulk copy, so the
// warpgroup's own instructions are the products and the conversions between them.
//
// hla2 (Hla2MaskedChunks with gamma = 1): with S the key moment and F = sum_j u_j v_j^T before the chunk,
//   A = (Q K^T) . L,  U = Q S + A K  (rows u_j = S_j q_j),  W = (Q U^T) . L,
//   O = Q F + W V,    S += K^T K,    F += U^T V.
// ahla: with P = sum k v^T and E = sum_i k_i (q_i^T P_i) before the chunk,
//   A = (Q K^T) . L,  X = Q P + A V  (rows q_i^T P_i),  O = Q E + A X,  E += K^T X,  P += K^T V.
// Operands are rounded to bf16 for the products (A, U or X, W, and the state S, F or P, E); the
// sums stay in float32. docs/gpu.md gives the error bound.

#include <cuda_bf16.h>

#include <string>

#include "hla/fast/gpu_status.hpp"
#include "launch.hpp"
#include "tma.cuh"
#include "wgmma.cuh"

namespace hla::fast::gpu::detail {
namespace {

using Bf = __nv_bfloat16;
using tma::Arrival, tma::shared_address, tma::start_loading, tma::start_storing, tma::wait_stores_done,
    tma::wait_stores_read;
using wgmma::Accumulator;
using wgmma::Major;

constexpr int width = wgmma::width;  // C = d = dv
constexpr int threads = 128;         // one warpgroup
constexpr int stages = 4;            // chunks of input in shared memory: one computing, three loading
constexpr int input_tiles = 3 * stages;
constexpr int matrix_floats = width * width;
constexpr int output_bytes = matrix_floats * 4;  // one chunk's float32 outputs
constexpr int shared_bytes = wgmma::tile_alignment + (input_tiles + 3) * wgmma::tile_bytes + 2 * output_bytes;

// One chunk's inputs in shared memory.
struct Chunk {
  Bf *q, *k, *v;
};

struct Tiles {
  Bf* inputs;               // stages x (Q, K, V)
  Bf *state1, *state2, *u;  // hla2: S, F, U; ahla: P, E, X
  float* outputs;           // two chunks' outputs, row-major, on their way to device memory
  __device__ explicit Tiles(unsigned char* shared)
      : inputs(reinterpret_cast<Bf*>(
            shared + (wgmma::tile_alignment - shared_address(shared) % wgmma::tile_alignment) %
                         wgmma::tile_alignment)) {
    constexpr int elements = wgmma::tile_bytes / 2;
    state1 = inputs + input_tiles * elements;
    state2 = state1 + elements;
    u = state2 + elements;
    outputs = reinterpret_cast<float*>(u + elements);
  }
  __device__ Chunk chunk(std::int64_t c) const {
    Bf* first = inputs + 3 * (c % stages) * (wgmma::tile_bytes / 2);
    return {first, first + wgmma::tile_bytes / 2, first + wgmma::tile_bytes};
  }
  __device__ float* output(std::int64_t c) const { return outputs + (c % 2) * matrix_floats; }
};

// Every thread's shared-memory writes (its copies and stores) visible to every thread and to the
// matrix units and the bulk copy engine.
__device__ void publish_shared() {
  wgmma::fence_shared();
  __syncthreads();
}

// A 64 x 64 float32 matrix, row-major (shared or device memory), to or from an accumulator.
__device__ void store_rows(float* to, const Accumulator& o) {
#pragma unroll
  for (int i = 0; i < 32; i += 2)
    *reinterpret_cast<float2*>(to + Accumulator::row(i) * width + Accumulator::column(i)) =
        make_float2(o.x[i], o.x[i + 1]);
}
__device__ void load_rows(Accumulator& o, const float* from) {
#pragma unroll
  for (int i = 0; i < 32; i += 2) {
    const float2 pair =
        *reinterpret_cast<const float2*>(from + Accumulator::row(i) * width + Accumulator::column(i));
    o.x[i] = pair.x;
    o.x[i + 1] = pair.y;
  }
}

// What a launch of the kernel computes for its segment of a sequence (G segments of L chunks,
// the last one shorter; G = 1 when the sequence-heads fill the GPU):
//   outputs: the outputs, from the carry-in state (zero for the first segment);
//   summary: the segment's summary from a zero state, for all but the last segment:
//     hla2 (S, F, C) with C = sum q v^T;  ahla (P, E, D) with D = sum k q^T.
// The summaries combine (carry_kernel) as F_AB = F_A + F_B + S_A C_B and E_AB = E_A + E_B + D_B P_A.
enum class Pass { outputs, summary };

// q, k, v: tensor maps of the [heads, length, 64] inputs with 64 x 64 boxes (a short last chunk
// read with zeros past the end). summaries: three
// matrices per (head, segment); carries: two per (head, segment), or none when segments = 1.
template <bool Ahla, Pass pass>
__global__ void __launch_bounds__(threads, 1)
    fast_kernel(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                const __grid_constant__ CUtensorMap v, float* out, std::int64_t length,
                std::int64_t segment_chunks, int segments, const float* carries, float* summaries) {
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ Arrival loaded[stages];
  const Tiles s(shared);
  const int per_head = pass == Pass::outputs ? segments : segments - 1;
  const std::int64_t head = blockIdx.x / per_head, segment = blockIdx.x % per_head;
  const std::int64_t first = segment * segment_chunks;  // this segment's first chunk
  const std::int64_t chunks = std::min(segment_chunks, (length + width - 1) / width - first);
  const auto start_chunk = [&](std::int64_t c) {  // by thread 0
    if (c >= chunks) return;
    const Chunk to = s.chunk(c);
    Arrival& arrival = loaded[c % stages];
    arrival.expect(3 * wgmma::tile_bytes);  // a short last chunk too: its missing rows arrive as zeros
    start_loading(q, (first + c) * width, head, to.q, arrival);
    start_loading(k, (first + c) * width, head, to.k, arrival);
    start_loading(v, (first + c) * width, head, to.v, arrival);
  };
  const auto output_rows = [&](std::int64_t c) {
    return out + (head * length + (first + c) * width) * width;
  };
  // The bytes of chunk c's outputs that exist: the rows of a short last chunk only. Zero rows of
  // q, k, v add nothing to any sum or product, so the existing rows are those of the whole chunk.
  const auto output_bytes_of = [&](std::int64_t c) {
    return static_cast<int>(std::min<std::int64_t>(width, length - (first + c) * width)) * width * 4;
  };
  // hla2: S and F; ahla: P and E, in float32 for the whole segment, from its carry-in; their bf16
  // copies in s.state1 and s.state2. sum3 (summary): hla2 C, ahla D.
  Accumulator sum1, sum2, sum3;
  wgmma::zero(sum3);
  if (pass == Pass::outputs && segment > 0) {
    load_rows(sum1, carries + (head * segments + segment) * 2 * matrix_floats);
    load_rows(sum2, carries + (head * segments + segment) * 2 * matrix_floats + matrix_floats);
  } else {
    wgmma::zero(sum1);
    wgmma::zero(sum2);
  }
  wgmma::round_to_tile(sum1, s.state1);
  wgmma::round_to_tile(sum2, s.state2);
  if (threadIdx.x == 0) {
    for (Arrival& arrival : loaded) arrival.init();
    Arrival::fence_init();
  }
  __syncthreads();
  if (threadIdx.x == 0)
    for (int c = 0; c < stages - 1; ++c) start_chunk(c);
  for (std::int64_t c = 0; c < chunks; ++c) {
    loaded[c % stages].wait(c / stages % 2);   // chunk c is in; c + 1 .. c + stages - 2 may still load
    if (threadIdx.x == 0) wait_stores_read();  // chunk c - 2's outputs have left s.output(c)
    publish_shared();  // the state copies, U of the last chunk, its outputs; its products are done
    if (threadIdx.x == 0) {
      start_chunk(c + stages - 1);  // into the last chunk's buffers
      if (pass == Pass::outputs && c > 0)
        start_storing(output_rows(c - 1), s.output(c - 1), output_bytes_of(c - 1));
    }
    const Chunk now = s.chunk(c);

    Accumulator a, u;
    wgmma::fence_operand(sum1);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(a, now.q, now.k, false);  // A = Q K^T
    wgmma::commit();
    wgmma::multiply<Major::k, Major::mn>(u, now.q, s.state1, false);  // hla2: U = Q S;  ahla: X = Q P
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(sum1, now.k, Ahla ? now.v : now.k,
                                          true);  // hla2: S += K^T K;  ahla: P += K^T V
    wgmma::commit();
    wgmma::wait<2>();
    wgmma::fence_operand(a);
    const wgmma::RowOperand masked = wgmma::round_to_masked_operand(a);
    wgmma::fence();
    wgmma::multiply<Major::mn>(u, masked, Ahla ? now.v : now.k, true);  // hla2: U += A K;  ahla: X += A V
    wgmma::commit();
    wgmma::wait<0>();
    wgmma::fence_operand(u);
    wgmma::fence_operand(sum1);
    wgmma::round_to_tile(u, s.u);
    wgmma::round_to_tile(sum1, s.state1);  // read again by the next chunk only
    publish_shared();

    wgmma::fence_operand(sum2);
    if constexpr (pass == Pass::summary) {
      wgmma::fence_operand(sum3);
      wgmma::fence();
      // hla2: F += U^T V, C += Q^T V;  ahla: E += K^T X, D += K^T Q
      wgmma::multiply<Major::mn, Major::mn>(sum2, Ahla ? now.k : s.u, Ahla ? s.u : now.v, true);
      wgmma::multiply<Major::mn, Major::mn>(sum3, Ahla ? now.k : now.q, Ahla ? now.q : now.v, true);
      wgmma::commit();
      wgmma::wait<0>();
      wgmma::fence_operand(sum2);
      wgmma::fence_operand(sum3);
      continue;
    }
    Accumulator o;
    wgmma::fence();
    if constexpr (Ahla) {
      wgmma::multiply<Major::k, Major::mn>(o, now.q, s.state2, false);  // O = Q E
      wgmma::multiply<Major::mn>(o, masked, s.u, true);                 // O += A X
      wgmma::multiply<Major::mn, Major::mn>(sum2, now.k, s.u, true);    // E += K^T X
      wgmma::commit();
    } else {
      Accumulator w;
      wgmma::multiply<Major::k, Major::k>(w, now.q, s.u, false);  // W = Q U^T
      wgmma::commit();
      wgmma::multiply<Major::k, Major::mn>(o, now.q, s.state2, false);  // O = Q F
      wgmma::multiply<Major::mn, Major::mn>(sum2, s.u, now.v, true);    // F += U^T V
      wgmma::commit();
      wgmma::wait<1>();
      wgmma::fence_operand(w);
      const wgmma::RowOperand masked_w = wgmma::round_to_masked_operand(w);
      wgmma::fence();
      wgmma::multiply<Major::mn>(o, masked_w, now.v, true);  // O += W V
      wgmma::commit();
    }
    wgmma::wait<0>();
    wgmma::fence_operand(o);
    wgmma::fence_operand(sum2);
    store_rows(s.output(c), o);            // leaves at the top of the next chunk
    wgmma::round_to_tile(sum2, s.state2);  // published at the top of the next chunk
  }
  if constexpr (pass == Pass::summary) {
    float* to = summaries + (head * (segments - 1) + segment) * 3 * matrix_floats;
    store_rows(to, sum1);
    store_rows(to + matrix_floats, sum2);
    store_rows(to + 2 * matrix_floats, sum3);
  } else {
    publish_shared();
    if (threadIdx.x == 0) {
      start_storing(output_rows(chunks - 1), s.output(chunks - 1), output_bytes_of(chunks - 1));
      wait_stores_done();
    }
  }
}

// The carry-ins of every segment of one sequence-head (block): the running combination of the
// summaries before it, in float32 on the ordinary cores. Segment 0 starts from zero and needs none.
//   hla2: S += S_g after F += F_g + S C_g;  ahla: P += P_g after E += E_g + D_g P.
template <bool Ahla>
__global__ void __launch_bounds__(256) carry_kernel(const float* summaries, float* carries, int segments) {
  __shared__ float state1[matrix_floats], third[matrix_floats];
  const std::int64_t head = blockIdx.x;
  float state2[matrix_floats / 256];  // this thread's entries of the running F (E)
  for (int i = threadIdx.x; i < matrix_floats; i += 256) state1[i] = 0;
#pragma unroll
  for (int e = 0; e < matrix_floats / 256; ++e) state2[e] = 0;
  for (int g = 0; g + 1 < segments; ++g) {
    const float* summary = summaries + (head * (segments - 1) + g) * 3 * matrix_floats;
    __syncthreads();  // the last step's reads of state1 and third are done
    for (int i = threadIdx.x; i < matrix_floats; i += 256) third[i] = summary[2 * matrix_floats + i];
    __syncthreads();
    float* carry = carries + (head * segments + g + 1) * 2 * matrix_floats;
#pragma unroll
    for (int e = 0; e < matrix_floats / 256; ++e) {
      const int i = threadIdx.x + 256 * e, r = i / width, c = i % width;
      float product = 0;  // hla2: (S C_g)(r, c);  ahla: (D_g P)(r, c)
      for (int j = 0; j < width; ++j)
        product = Ahla ? fmaf(third[r * width + j], state1[j * width + c], product)
                       : fmaf(state1[r * width + j], third[j * width + c], product);
      state2[e] += summary[matrix_floats + i] + product;
      carry[matrix_floats + i] = state2[e];
    }
    __syncthreads();  // every product has read state1
    for (int i = threadIdx.x; i < matrix_floats; i += 256) {
      state1[i] += summary[i];
      carry[i] = state1[i];
    }
  }
}

// Sequences split into segments when the sequence-heads alone leave SMs idle (about one block per
// SM), each segment at least 32 chunks long so that the summary pass and the two extra launches pay.
std::int64_t segments_for(std::int64_t heads, std::int64_t chunks, int sms) {
  constexpr std::int64_t shortest = 32;
  const std::int64_t wanted = std::min<std::int64_t>(sms / heads, chunks / shortest);
  if (wanted < 2) return 1;
  const std::int64_t segment_chunks = (chunks + wanted - 1) / wanted;
  return (chunks + segment_chunks - 1) / segment_chunks;
}

// Device scratch for the summaries and carry-ins, freed in stream order.
class StreamScratch {
 public:
  StreamScratch(std::size_t floats, CUstream_st* stream) : stream_(stream) {
    check(cudaMallocAsync(reinterpret_cast<void**>(&data_), floats * sizeof(float), stream),
          "cudaMallocAsync");
  }
  ~StreamScratch() { cudaFreeAsync(data_, stream_); }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  float* get() const { return data_; }

 private:
  float* data_ = nullptr;
  CUstream_st* stream_;
};

template <bool Ahla>
void launch(std::int64_t heads, std::int64_t length, const BFloat16* q, const BFloat16* k, const BFloat16* v,
            float* out, CUstream_st* stream) {
  int device = 0, major = 0, minor = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  if (major != 9 || minor != 0) {
    throw Error("fast path: needs a compute capability 9.0 GPU (Hopper's wgmma); this one is " +
                std::to_string(major) + "." + std::to_string(minor));
  }
  const auto outputs = fast_kernel<Ahla, Pass::outputs>;
  const auto summary = fast_kernel<Ahla, Pass::summary>;
  for (const auto kernel : {outputs, summary}) {
    check(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, shared_bytes),
          "cudaFuncSetAttribute");
  }
  const std::int64_t chunks = (length + width - 1) / width;  // the last one may be short
  const int segments = static_cast<int>(segments_for(heads, chunks, sms));
  const std::int64_t segment_chunks = (chunks + segments - 1) / segments;
  const CUtensorMap q_map = tma::tile_map(q, heads, length), k_map = tma::tile_map(k, heads, length),
                    v_map = tma::tile_map(v, heads, length);
  if (segments == 1) {
    outputs<<<static_cast<unsigned>(heads), threads, shared_bytes, stream>>>(
        q_map, k_map, v_map, out, length, segment_chunks, 1, nullptr, nullptr);
    check_launch("fast kernel");
    return;
  }
  const StreamScratch summaries(heads * (segments - 1) * 3 * matrix_floats, stream);
  const StreamScratch carries(heads * segments * 2 * matrix_floats, stream);
  summary<<<static_cast<unsigned>(heads * (segments - 1)), threads, shared_bytes, stream>>>(
      q_map, k_map, v_map, nullptr, length, segment_chunks, segments, nullptr, summaries.get());
  check_launch("fast kernel (segment summaries)");
  carry_kernel<Ahla>
      <<<static_cast<unsigned>(heads), 256, 0, stream>>>(summaries.get(), carries.get(), segments);
  check_launch("fast kernel (carry-ins)");
  outputs<<<static_cast<unsigned>(heads * segments), threads, shared_bytes, stream>>>(
      q_map, k_map, v_map, out, length, segment_chunks, segments, carries.get(), nullptr);
  check_launch("fast kernel");
}

}  // namespace

void launch_fast(bool ahla, std::int64_t heads, std::int64_t length, const BFloat16* q, const BFloat16* k,
                 const BFloat16* v, float* out, CUstream_st* stream) {
  if (heads == 0 || length == 0) return;
  if (ahla) {
    launch<true>(heads, length, q, k, v, out, stream);
  } else {
    launch<false>(heads, length, q, k, v, out, stream);
  }
}

}  // namespace hla::fast::gpu::detail
