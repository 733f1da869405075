// The fast path: masked, unnormalized hla2 and ahla (gamma = 1) on the matrix units, bf16 inputs,
// float32 accumulation and state, d = dv = 64, chunks of 64 tokens. One block (one warpgroup)
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

#include <cuda.h>  // CUtensorMap (the driver's encoder is reached through the runtime)
#include <cuda_bf16.h>
#include <cudaTypedefs.h>

#include <string>

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
constexpr int stages = 4;            // chunks of input in shared memory: one computing, three loading
constexpr int input_tiles = 3 * stages;
constexpr int output_bytes = width * width * 4;  // one chunk's float32 outputs
constexpr int shared_bytes = wgmma::tile_alignment + (input_tiles + 3) * wgmma::tile_bytes + 2 * output_bytes;

__device__ std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// A shared-memory barrier that completes when the bytes announced to it have arrived.
struct Arrival {
  std::uint64_t word;
  __device__ void init() { asm volatile("mbarrier.init.shared::cta.b64 [%0], 1;\n" ::"r"(shared_address(&word)) : "memory"); }
  __device__ void expect(int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(&word)), "r"(bytes)
                 : "memory");
  }
  // Waits for the completion of the phase with this parity (0 for the first use, 1 for the next, ...).
  __device__ void wait(int parity) {
    asm volatile(
        "{\n.reg .pred done;\nwaiting:\n"
        "mbarrier.try_wait.parity.shared::cta.b64 done, [%0], %1;\n"
        "@!done bra waiting;\n}\n" ::"r"(shared_address(&word)),
        "r"(parity)
        : "memory");
  }
};

// Starts copying rows row .. row + 63 of a [rows, 64] bf16 tensor into a tile (128-byte swizzle),
// signalling `arrival` (tensor memory accelerator, one thread).
__device__ void start_loading(const CUtensorMap& map, std::int64_t row, Bf* to, Arrival& arrival) {
  asm volatile(
      "cp.async.bulk.tensor.2d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3}], [%4];\n" ::"r"(
          shared_address(to)),
      "l"(&map), "r"(0), "r"(static_cast<int>(row)), "r"(shared_address(&arrival.word))
      : "memory");
}

// One chunk's inputs in shared memory.
struct Chunk {
  const Bf *q, *k, *v;
};

struct Tiles {
  Bf* inputs;               // stages x (Q, K, V)
  Bf *state1, *state2, *u;  // hla2: S, F, U; ahla: P, E, X
  float* outputs;           // two chunks' outputs, row-major, on their way to device memory
  __device__ explicit Tiles(unsigned char* shared)
      : inputs(reinterpret_cast<Bf*>(shared + (wgmma::tile_alignment - shared_address(shared) % wgmma::tile_alignment) %
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
  __device__ float* output(std::int64_t c) const { return outputs + (c % 2) * width * width; }
};

// Every thread's shared-memory writes (its copies and stores) visible to every thread and to the
// matrix units and the bulk copy engine.
__device__ void publish_shared() {
  wgmma::fence_shared();
  __syncthreads();
}

__device__ void stage_rows(float* to, const Accumulator& o) {
#pragma unroll
  for (int i = 0; i < 32; i += 2)
    *reinterpret_cast<float2*>(to + Accumulator::row(i) * width + Accumulator::column(i)) = make_float2(o.x[i], o.x[i + 1]);
}

// Bulk copies from shared to device memory (sm_90), tracked in groups by the issuing thread.
__device__ void start_storing(float* to, const float* from, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(to),
               "r"(shared_address(from)), "r"(bytes)
               : "memory");
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ void wait_stores_read() { asm volatile("cp.async.bulk.wait_group.read 0;\n" ::: "memory"); }
__device__ void wait_stores_done() { asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory"); }

// q, k, v: tensor maps of the [heads * length, 64] inputs with 64 x 64 boxes.
template <bool Ahla>
__global__ void __launch_bounds__(threads, 1)
    fast_kernel(const __grid_constant__ CUtensorMap q, const __grid_constant__ CUtensorMap k,
                const __grid_constant__ CUtensorMap v, float* out, std::int64_t length) {
  extern __shared__ __align__(128) unsigned char shared[];
  __shared__ Arrival loaded[stages];
  const Tiles s(shared);
  const std::int64_t head = blockIdx.x, chunks = length / width;
  const auto start_chunk = [&](std::int64_t c) {  // by thread 0
    if (c >= chunks) return;
    const std::int64_t row = head * length + c * width;
    const Chunk to = s.chunk(c);
    Arrival& arrival = loaded[c % stages];
    arrival.expect(3 * wgmma::tile_bytes);
    start_loading(q, row, const_cast<Bf*>(to.q), arrival);
    start_loading(k, row, const_cast<Bf*>(to.k), arrival);
    start_loading(v, row, const_cast<Bf*>(to.v), arrival);
  };
  const auto output_rows = [&](std::int64_t c) { return out + (head * length + c * width) * width; };
  // hla2: S and F; ahla: P and E, in float32 for the whole sequence; their bf16 copies in
  // s.state1 and s.state2 (zero before the first chunk).
  Accumulator sum1, sum2;
  wgmma::zero(sum1);
  wgmma::zero(sum2);
  wgmma::round_to_tile(sum1, s.state1);
  wgmma::round_to_tile(sum2, s.state2);
  if (threadIdx.x == 0) {
    for (Arrival& arrival : loaded) arrival.init();
    asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory");
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
      if (c > 0) start_storing(output_rows(c - 1), s.output(c - 1), output_bytes);
    }
    const Chunk now = s.chunk(c);

    Accumulator a, u, o;
    wgmma::fence_operand(sum1);
    wgmma::fence();
    wgmma::multiply<Major::k, Major::k>(a, now.q, now.k, false);  // A = Q K^T
    wgmma::commit();
    wgmma::multiply<Major::k, Major::mn>(u, now.q, s.state1, false);  // hla2: U = Q S;  ahla: X = Q P
    wgmma::commit();
    wgmma::multiply<Major::mn, Major::mn>(sum1, now.k, Ahla ? now.v : now.k, true);  // hla2: S += K^T K;  ahla: P += K^T V
    wgmma::commit();
    wgmma::wait<2>();
    wgmma::fence_operand(a);
    const wgmma::RowOperand masked = wgmma::round_to_operand(a, true);
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
      const wgmma::RowOperand masked_w = wgmma::round_to_operand(w, true);
      wgmma::fence();
      wgmma::multiply<Major::mn>(o, masked_w, now.v, true);  // O += W V
      wgmma::commit();
    }
    wgmma::wait<0>();
    wgmma::fence_operand(o);
    wgmma::fence_operand(sum2);
    stage_rows(s.output(c), o);            // leaves at the top of the next chunk
    wgmma::round_to_tile(sum2, s.state2);  // published at the top of the next chunk
  }
  publish_shared();
  if (threadIdx.x == 0) {
    start_storing(output_rows(chunks - 1), s.output(chunks - 1), output_bytes);
    wait_stores_done();
  }
}

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

// The tensor map of a [rows, 64] bf16 tensor, read in 64 x 64 boxes into 128-byte swizzled tiles.
CUtensorMap tensor_map(const BFloat16* data, std::int64_t rows) {
  static const auto encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault, &found),
          "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess || function == nullptr) {
      throw Error("fast path: the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  CUtensorMap map;
  const cuuint64_t dims[] = {static_cast<cuuint64_t>(width), static_cast<cuuint64_t>(rows)};
  const cuuint64_t strides[] = {width * sizeof(BFloat16)};  // bytes between rows
  const cuuint32_t box[] = {width, width}, element_strides[] = {1, 1};
  const CUresult status = encode(&map, CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, const_cast<BFloat16*>(data), dims, strides,
                                 box, element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, CU_TENSOR_MAP_SWIZZLE_128B,
                                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS) throw Error("fast path: cuTensorMapEncodeTiled failed (" + std::to_string(status) + ")");
  return map;
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
  const std::int64_t rows = heads * length;
  kernel<<<static_cast<unsigned>(heads), threads, shared_bytes, stream>>>(
      tensor_map(q, rows), tensor_map(k, rows), tensor_map(v, rows), out, length);
  check(cudaGetLastError(), "fast kernel");
}

}  // namespace hla::fast::gpu::detail
