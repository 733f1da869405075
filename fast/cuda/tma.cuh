#pragma once

// Hopper's copy primitives (sm_90): shared-memory barriers that count arriving bytes (mbarrier),
// loads of 2-D boxes by the tensor memory accelerator (TMA, cp.async.bulk.tensor) into 128-byte
// swizzled tiles (wgmma.cuh's layout), and bulk stores from shared to device memory. PTX ISA,
// "Parallel Synchronization and Communication Instructions: mbarrier" and "Data Movement:
// cp.async.bulk".

#include <cuda.h>  // CUtensorMap (the driver's encoder is reached through the runtime)
#include <cudaTypedefs.h>

#include <cstdint>
#include <string>

#include "hla/fast/gpu_status.hpp"
#include "hla/fast/gpu_types.hpp"
#include "wgmma.cuh"

namespace hla::fast::gpu::detail::tma {

__device__ inline std::uint32_t shared_address(const void* p) {
  return static_cast<std::uint32_t>(__cvta_generic_to_shared(p));
}

// A shared-memory barrier that completes when the bytes announced to it have arrived (count 1: the
// thread that announces them) or when `count` threads have arrived (arrive()).
struct Arrival {
  std::uint64_t word;
  __device__ void init(int count = 1) {
    asm volatile("mbarrier.init.shared::cta.b64 [%0], %1;\n" ::"r"(shared_address(&word)), "r"(count)
                 : "memory");
  }
  // This thread's arrival, releasing its earlier writes to the threads that wait for the phase.
  __device__ void arrive() {
    asm volatile("mbarrier.arrive.shared::cta.b64 _, [%0];\n" ::"r"(shared_address(&word)) : "memory");
  }
  __device__ void expect(int bytes) {
    asm volatile("mbarrier.arrive.expect_tx.shared::cta.b64 _, [%0], %1;\n" ::"r"(shared_address(&word)),
                 "r"(bytes)
                 : "memory");
  }
  // After init() by one thread: the barriers' initialisation visible to the copy engine.
  __device__ static void fence_init() { asm volatile("fence.mbarrier_init.release.cluster;\n" ::: "memory"); }
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

// Starts copying the 64 x 64 box at `row` (and `column`) of sequence-head `head` of a tile_map (its
// rows row .. row + 63; rows past the head's length and columns past its width arrive as zeros) into
// a tile in the 128-byte swizzle, signalling `arrival` with the whole box's bytes (the tensor memory
// accelerator; one thread issues it).
__device__ inline void start_loading(const CUtensorMap& map, std::int64_t row, std::int64_t head, void* to,
                                     Arrival& arrival, int column = 0) {
  asm volatile(
      "cp.async.bulk.tensor.3d.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1, {%2, %3, %4}], "
      "[%5];\n" ::"r"(shared_address(to)),
      "l"(&map), "r"(column), "r"(static_cast<int>(row)), "r"(static_cast<int>(head)),
      "r"(shared_address(&arrival.word))
      : "memory");
}

// Starts copying `bytes` (a multiple of 16, 16-byte aligned both ends) from device to shared memory
// as they are, signalling `arrival` (one thread issues it; the caller's expect() counts them).
__device__ inline void start_loading_bytes(void* to, const void* from, int bytes, Arrival& arrival) {
  asm volatile(
      "cp.async.bulk.shared::cluster.global.mbarrier::complete_tx::bytes [%0], [%1], %2, [%3];\n" ::"r"(
          shared_address(to)),
      "l"(from), "r"(bytes), "r"(shared_address(&arrival.word))
      : "memory");
}

// Bulk copies from shared to device memory (sm_90), tracked in groups by the issuing thread:
// commit_stores closes the thread's group of the copies issued since the last one.
__device__ inline void commit_stores() {
  asm volatile("cp.async.bulk.commit_group;\n" ::: "memory");
}
__device__ inline void start_storing(void* to, const void* from, int bytes) {
  asm volatile("cp.async.bulk.global.shared::cta.bulk_group [%0], [%1], %2;\n" ::"l"(to),
               "r"(shared_address(from)), "r"(bytes)
               : "memory");
  commit_stores();
}
// Starts storing a box_map's 64 x 64 box at (column, row) of sequence-head `head` from shared memory
// (row-major as the map's element type, or a tile in the 128-byte swizzle through a tile_map); the map
// leaves out rows and columns past the tensor's. store_box joins the thread's next group of stores;
// start_storing_box is one box as one group, as start_storing's.
__device__ inline void store_box(const CUtensorMap& map, int column, std::int64_t row, std::int64_t head,
                                 const void* from) {
  asm volatile(
      "cp.async.bulk.tensor.3d.global.shared::cta.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::"l"(&map),
      "r"(column), "r"(static_cast<int>(row)), "r"(static_cast<int>(head)), "r"(shared_address(from))
      : "memory");
}
__device__ inline void start_storing_box(const CUtensorMap& map, int column, std::int64_t row,
                                         std::int64_t head, const void* from) {
  store_box(map, column, row, head, from);
  commit_stores();
}
// As start_storing_box, adding the box to what device memory holds there (float32: one
// round-to-nearest addition per entry) rather than replacing it.
__device__ inline void start_adding_box(const CUtensorMap& map, int column, std::int64_t row,
                                        std::int64_t head, const void* from) {
  asm volatile(
      "cp.reduce.async.bulk.tensor.3d.global.shared::cta.add.tile.bulk_group [%0, {%1, %2, %3}], [%4];\n" ::
          "l"(&map),
      "r"(column), "r"(static_cast<int>(row)), "r"(static_cast<int>(head)), "r"(shared_address(from))
      : "memory");
  commit_stores();
}
// Until at most `Pending` of the thread's latest groups still read their shared memory.
template <int Pending = 0>
__device__ inline void wait_stores_read() {
  asm volatile("cp.async.bulk.wait_group.read %0;\n" ::"n"(Pending) : "memory");
}
__device__ inline void wait_stores_done() {
  asm volatile("cp.async.bulk.wait_group 0;\n" ::: "memory");
}

// Throws unless the current device has compute capability 9.0 (Hopper's wgmma and copy engine).
inline void require_hopper() {
  int device = 0, major = 0, minor = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device), "cudaDeviceGetAttribute");
  check(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device), "cudaDeviceGetAttribute");
  if (major != 9 || minor != 0) {
    throw Error("fast path: needs a compute capability 9.0 GPU (Hopper's wgmma); this one is " +
                std::to_string(major) + "." + std::to_string(minor));
  }
}

// The driver's tensor-map encoder (reached through the runtime, once).
inline PFN_cuTensorMapEncodeTiled_v12000 tensor_map_encoder() {
  static const auto encode = [] {
    void* function = nullptr;
    cudaDriverEntryPointQueryResult found{};
    check(cudaGetDriverEntryPointByVersion("cuTensorMapEncodeTiled", &function, 12000, cudaEnableDefault,
                                           &found),
          "cudaGetDriverEntryPointByVersion");
    if (found != cudaDriverEntryPointSuccess || function == nullptr) {
      throw Error("fast path: the driver has no cuTensorMapEncodeTiled");
    }
    return reinterpret_cast<PFN_cuTensorMapEncodeTiled_v12000>(function);
  }();
  return encode;
}

// The map of a [heads, length, columns] tensor of `type` with rows `row_elements` apart, read or
// written in 64 x 64 boxes of one head.
inline CUtensorMap box_map(CUtensorMapDataType type, int element_bytes, const void* data, std::int64_t heads,
                           std::int64_t length, int columns, int row_elements, CUtensorMapSwizzle swizzle,
                           CUtensorMapL2promotion promotion) {
  CUtensorMap map;
  const cuuint64_t dims[] = {static_cast<cuuint64_t>(columns), static_cast<cuuint64_t>(length),
                             static_cast<cuuint64_t>(heads)};
  const cuuint64_t row_bytes = static_cast<cuuint64_t>(row_elements) * static_cast<cuuint64_t>(element_bytes);
  const cuuint64_t strides[] = {row_bytes,
                                row_bytes * static_cast<cuuint64_t>(length)};  // bytes between rows, heads
  const cuuint32_t box[] = {wgmma::width, wgmma::width, 1}, element_strides[] = {1, 1, 1};
  const CUresult status = tensor_map_encoder()(&map, type, 3, const_cast<void*>(data), dims, strides, box,
                                               element_strides, CU_TENSOR_MAP_INTERLEAVE_NONE, swizzle,
                                               promotion, CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE);
  if (status != CUDA_SUCCESS)
    throw Error("fast path: cuTensorMapEncodeTiled failed (" + std::to_string(status) + ")");
  return map;
}

// The tensor map of a [heads, length, columns] bf16 tensor (columns a multiple of 8: rows of whole
// 16-byte pieces), read in 64 x 64 boxes of one head into 128-byte swizzled tiles; a box reaching past
// a head's length or its columns is filled with zeros there, so a sequence's last chunk may be short
// and a narrower head arrives padded to 64 columns (CU_TENSOR_MAP_FLOAT_OOB_FILL_NONE fills zeros); a
// head wider than 64 is read box by box at a column (start_loading); written the same way from such
// tiles (store_box: rows and columns past the tensor's left out). `row_elements` (0: columns): the
// elements from one row to the next, so that the map may read `columns` columns of wider rows (a
// 64-column half of a wide head: `data` at its first column, 16-byte aligned).
inline CUtensorMap tile_map(const BFloat16* data, std::int64_t heads, std::int64_t length, int columns,
                            int row_elements = 0) {
  return box_map(CU_TENSOR_MAP_DATA_TYPE_BFLOAT16, 2, data, heads, length, columns,
                 row_elements > 0 ? row_elements : columns, CU_TENSOR_MAP_SWIZZLE_128B,
                 CU_TENSOR_MAP_L2_PROMOTION_L2_256B);
}

// The tensor map of [heads, length, columns] outputs (float32, or bf16 when `bf16`; columns a multiple
// of 8), written by start_storing_box from 64 x 64 boxes staged row-major (rows of 64 elements).
inline CUtensorMap output_map(void* data, bool bf16, std::int64_t heads, std::int64_t length, int columns) {
  return box_map(bf16 ? CU_TENSOR_MAP_DATA_TYPE_BFLOAT16 : CU_TENSOR_MAP_DATA_TYPE_FLOAT32, bf16 ? 2 : 4,
                 data, heads, length, columns, columns, CU_TENSOR_MAP_SWIZZLE_NONE,
                 CU_TENSOR_MAP_L2_PROMOTION_NONE);
}

}  // namespace hla::fast::gpu::detail::tma
