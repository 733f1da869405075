#pragma once

// Hopper's warpgroup matrix products (wgmma, sm_90a) on 64 x 64 bf16 tiles with float32
// accumulators: D (64 x 64) += A (64 x 16) B (16 x 64), issued by the four warps of a warpgroup
// and completed asynchronously. Four such steps make one 64 x 64 x 64 product (a narrow head's:
// D 64 x 32 from the tile's first 32 columns, or fewer K slices where the rest are zeros).
//
// Shared tiles use the 128-byte swizzle: a row holds 64 bf16 (128 bytes), the 16-byte piece j of
// row r is stored at piece j ^ (r % 8), and tiles start at multiples of 1024 bytes: the layout
// the tensor memory accelerator writes with CU_TENSOR_MAP_SWIZZLE_128B. A tile serves as an
// operand either way round: rows are the M (or N) index and columns K ("K-major"), or rows are K
// and columns M (or N) ("MN-major", the transposed operand), which bf16 allows.
// PTX ISA, "Asynchronous Warpgroup Level Matrix Shared Memory Layout" and "Matrix Descriptor".

#include <cuda_bf16.h>

#include <cstdint>

namespace hla::fast::gpu::detail::wgmma {

constexpr int width = 64;                      // tile rows and columns
constexpr int tile_bytes = width * width * 2;  // bf16
constexpr int tile_alignment = 1024;           // one period of the swizzle: 8 rows of 128 bytes

// Element index of (r, c) in a tile.
__device__ constexpr int offset(int r, int c) {
  return r * width + ((c / 8) ^ (r % 8)) * 8 + c % 8;
}

enum class Major { k, mn };

// The descriptor of the 64 x 16 (K-major) or 16 x 64 (MN-major) slice of `tile` at K = 16 kk: the
// slice starts 32 bytes (K-major) or 16 rows (MN-major) further on, and 8-row groups are 1024
// bytes apart (the stride byte offset); the leading byte offset is unused for 64-wide tiles.
template <Major major>
__device__ std::uint64_t descriptor(const __nv_bfloat16* tile, int kk) {
  const auto start = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
  const std::uint32_t address = start + kk * (major == Major::k ? 32 : 16 * width * 2);
  constexpr std::uint32_t leading = 16, stride = 8 * width * 2;
  constexpr std::uint64_t swizzle_128 = 1;
  return std::uint64_t((address >> 4) & 0x3FFF) | std::uint64_t(leading >> 4) << 16 |
         std::uint64_t(stride >> 4) << 32 | swizzle_128 << 62;
}

// A warpgroup's 64 x N float32 accumulator (N = 64, or 32 for a narrow head's products over its
// features): thread t holds rows 16 (t / 32) + (t % 32) / 4 (+ 8) and columns 8 j + 2 (t % 4) (+ 1),
// j = 0 .. N / 8 - 1, as element [4 j + 2 (second row) + (second column)].
template <int N>
struct Accumulators {
  static_assert(N == 64 || N == 32);
  static constexpr int columns = N;
  float x[N / 2];
  __device__ static int row(int i) {
    return 16 * (threadIdx.x % 128 / 32) + threadIdx.x % 32 / 4 + 8 * (i / 2 % 2);
  }
  __device__ static int column(int i) { return 8 * (i / 4) + 2 * (threadIdx.x % 4) + i % 2; }
};
using Accumulator = Accumulators<64>;
using NarrowAccumulator = Accumulators<32>;

// A warpgroup's 64 x 8 float32 accumulator (wgmma's N = 8): thread t holds rows as Accumulator's
// and columns 2 (t % 4) (+ 1), element [2 (second row) + (second column)]. The fast path uses its
// column 0 only (a matrix-vector product: B's other columns are zero), held by the threads with
// t % 4 == 0 in x[0] (row(0)) and x[2] (row(2)).
struct Column {
  float x[4];
  __device__ static int row(int i) { return Accumulator::row(i); }
  __device__ static int column(int i) { return Accumulator::column(i); }
  __device__ static bool holds_column0() { return threadIdx.x % 4 == 0; }
};

// A 64 x 64 bf16 operand A held in registers, four K slices of 16 (the layout of an accumulator's
// columns 16 kk .. 16 kk + 15, so an accumulator converts in place).
struct RowOperand {
  std::uint32_t x[4][4];
};

// Keeps the compiler from moving reads or writes of the accumulator across the asynchronous
// products (which it cannot see): call after wait() and before the registers are used.
template <int N>
__device__ void fence_operand(Accumulators<N>& d) {
#pragma unroll
  for (int i = 0; i < N / 2; ++i) asm volatile("" : "+f"(d.x[i])::"memory");
}
__device__ inline void fence_operand(Column& d) {
#pragma unroll
  for (int i = 0; i < 4; ++i) asm volatile("" : "+f"(d.x[i])::"memory");
}

// The same for a register operand: after the wait that completes its products (the matrix units read
// its registers asynchronously, so they must keep their values until then).
__device__ inline void fence_operand(RowOperand& a) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int p = 0; p < 4; ++p) asm volatile("" : "+r"(a.x[kk][p])::"memory");
}

__device__ inline void fence() {
  asm volatile("wgmma.fence.sync.aligned;\n" ::: "memory");
}
__device__ inline void commit() {
  asm volatile("wgmma.commit_group.sync.aligned;\n" ::: "memory");
}
template <int pending>
__device__ void wait() {
  asm volatile("wgmma.wait_group.sync.aligned %0;\n" ::"n"(pending) : "memory");
}
// Ordinary shared-memory stores made visible to the tensor cores (before the barrier).
__device__ inline void fence_shared() {
  asm volatile("fence.proxy.async.shared::cta;\n" ::: "memory");
}

#define HLA_WGMMA_D                                                                                       \
  "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15, %16, %17, %18, %19, %20, %21, " \
  "%22, "                                                                                                 \
  "%23, %24, %25, %26, %27, %28, %29, %30, %31}"
#define HLA_WGMMA_D_OPERANDS(d)                                                                             \
  "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]), "+f"(d.x[4]), "+f"(d.x[5]), "+f"(d.x[6]),         \
      "+f"(d.x[7]), "+f"(d.x[8]), "+f"(d.x[9]), "+f"(d.x[10]), "+f"(d.x[11]), "+f"(d.x[12]), "+f"(d.x[13]), \
      "+f"(d.x[14]), "+f"(d.x[15]), "+f"(d.x[16]), "+f"(d.x[17]), "+f"(d.x[18]), "+f"(d.x[19]),             \
      "+f"(d.x[20]), "+f"(d.x[21]), "+f"(d.x[22]), "+f"(d.x[23]), "+f"(d.x[24]), "+f"(d.x[25]),             \
      "+f"(d.x[26]), "+f"(d.x[27]), "+f"(d.x[28]), "+f"(d.x[29]), "+f"(d.x[30]), "+f"(d.x[31])

// d (+)= A B over K = 16 with A and B in shared memory; `accumulate` false overwrites d.
template <Major major_a, Major major_b>
__device__ void step(Accumulator& d, std::uint64_t a, std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %34, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " HLA_WGMMA_D
      ", %32, %33, p, 1, 1, %35, %36;\n}\n"
      : HLA_WGMMA_D_OPERANDS(d)
      : "l"(a), "l"(b), "r"(int(accumulate)), "n"(int(major_a == Major::mn)), "n"(int(major_b == Major::mn)));
}

// d (+)= A B over K = 16 with A's slice in registers and B in shared memory.
template <Major major_b>
__device__ void step(Accumulator& d, const std::uint32_t (&a)[4], std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %37, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n64k16.f32.bf16.bf16 " HLA_WGMMA_D
      ", {%32, %33, %34, %35}, %36, p, 1, 1, %38;\n}\n"
      : HLA_WGMMA_D_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)),
        "n"(int(major_b == Major::mn)));
}

#define HLA_WGMMA_D32 "{%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, %13, %14, %15}"
#define HLA_WGMMA_D32_OPERANDS(d)                                                                           \
  "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3]), "+f"(d.x[4]), "+f"(d.x[5]), "+f"(d.x[6]),         \
      "+f"(d.x[7]), "+f"(d.x[8]), "+f"(d.x[9]), "+f"(d.x[10]), "+f"(d.x[11]), "+f"(d.x[12]), "+f"(d.x[13]), \
      "+f"(d.x[14]), "+f"(d.x[15])

// The same with N = 32 (a NarrowAccumulator): B's 16 x 32 slice is columns 0-31 of the 64-wide tile
// (MN-major: the whole tile's descriptor, which the matrix units read 32 columns of) or its first 32
// rows (K-major), exact on the H200 in a one-block probe of both readings (docs/gpu.md, 66th run).
template <Major major_a, Major major_b>
__device__ void step(NarrowAccumulator& d, std::uint64_t a, std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %18, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " HLA_WGMMA_D32
      ", %16, %17, p, 1, 1, %19, %20;\n}\n"
      : HLA_WGMMA_D32_OPERANDS(d)
      : "l"(a), "l"(b), "r"(int(accumulate)), "n"(int(major_a == Major::mn)), "n"(int(major_b == Major::mn)));
}
template <Major major_b>
__device__ void step(NarrowAccumulator& d, const std::uint32_t (&a)[4], std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %21, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.bf16.bf16 " HLA_WGMMA_D32
      ", {%16, %17, %18, %19}, %20, p, 1, 1, %22;\n}\n"
      : HLA_WGMMA_D32_OPERANDS(d)
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)),
        "n"(int(major_b == Major::mn)));
}

// The same with N = 8 (a Column): B is 16 x 8, its K-major tile the first 8 rows of a 64-wide
// swizzled tile (one 1024-byte period, so the descriptor is the 64 x 64 tile's).
template <Major major_a, Major major_b>
__device__ void step(Column& d, std::uint64_t a, std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %6, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, %4, %5, p, 1, 1, %7, %8;\n}\n"
      : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
      : "l"(a), "l"(b), "r"(int(accumulate)), "n"(int(major_a == Major::mn)), "n"(int(major_b == Major::mn)));
}
template <Major major_b>
__device__ void step(Column& d, const std::uint32_t (&a)[4], std::uint64_t b, bool accumulate) {
  asm volatile(
      "{\n.reg .pred p;\nsetp.ne.b32 p, %9, 0;\n"
      "wgmma.mma_async.sync.aligned.m64n8k16.f32.bf16.bf16 {%0, %1, %2, %3}, {%4, %5, %6, %7}, %8, p, 1, 1, "
      "%10;\n}\n"
      : "+f"(d.x[0]), "+f"(d.x[1]), "+f"(d.x[2]), "+f"(d.x[3])
      : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(b), "r"(int(accumulate)),
        "n"(int(major_b == Major::mn)));
}

#undef HLA_WGMMA_D
#undef HLA_WGMMA_D_OPERANDS
#undef HLA_WGMMA_D32
#undef HLA_WGMMA_D32_OPERANDS

// d (+)= A B, the whole 64 x N x 64 product (N = 64, 32, or 8 for a Column), A and B shared tiles;
// over the first `slices` K slices of 16 only (a narrow head's products over its features, whose
// slices past them hold zeros).
template <Major major_a, Major major_b, int slices = 4, class D>
__device__ void multiply(D& d, const __nv_bfloat16* a, const __nv_bfloat16* b, bool accumulate) {
  static_assert(slices >= 1 && slices <= 4);
#pragma unroll
  for (int kk = 0; kk < slices; ++kk)
    step<major_a, major_b>(d, descriptor<major_a>(a, kk), descriptor<major_b>(b, kk), accumulate || kk > 0);
}

// d (+)= A B with A in registers.
template <Major major_b, class D>
__device__ void multiply(D& d, const RowOperand& a, const __nv_bfloat16* b, bool accumulate) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) step<major_b>(d, a.x[kk], descriptor<major_b>(b, kk), accumulate || kk > 0);
}

__device__ inline std::uint32_t pack(float low, float high) {
  const __nv_bfloat162 pair = __floats2bfloat162_rn(low, high);
  return *reinterpret_cast<const std::uint32_t*>(&pair);
}

// bf16(d) masked causally (entries above the diagonal zero), as a register operand.
__device__ inline RowOperand round_to_masked_operand(const Accumulator& d) {
  RowOperand a;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      // register p of slice kk: rows + 8 (p % 2), columns 16 kk + 8 (p / 2) + 2 (t % 4) (+ 1)
      const int i = 8 * kk + 2 * p;
      const bool keep = Accumulator::column(i) <= Accumulator::row(i);
      const bool keep_next = Accumulator::column(i + 1) <= Accumulator::row(i + 1);
      a.x[kk][p] = pack(keep ? d.x[i] : 0.0f, keep_next ? d.x[i + 1] : 0.0f);
    }
  return a;
}

// The tile image of a register operand: tile = a (the entries it holds, in their places).
__device__ inline void store_operand(const RowOperand& a, __nv_bfloat16* tile) {
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int i = 8 * kk + 2 * p;
      *reinterpret_cast<std::uint32_t*>(tile + offset(Accumulator::row(i), Accumulator::column(i))) =
          a.x[kk][p];
    }
}

// A factor for each of the thread's two rows of an accumulator (or Column): f[0] for row(0) (its
// elements i with i / 2 even), f[1] for row(2) (i / 2 odd).
struct RowPair {
  float f[2];
  __device__ float operator[](int i) const { return f[i / 2 % 2]; }
};

// bf16(d . M) as a register operand, M(r, c) = factor(i, r, c) for the thread's element i at (r, c)
// (the causal mask with the decay, zero above the diagonal): one multiplication and one rounding
// per entry.
template <class Factor>
__device__ RowOperand round_to_masked_operand(const Accumulator& d, Factor factor) {
  RowOperand a;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk)
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int i = 8 * kk + 2 * p;
      const int r = Accumulator::row(i), c = Accumulator::column(i);
      a.x[kk][p] = pack(d.x[i] * factor(i, r, c), d.x[i + 1] * factor(i + 1, r, c + 1));
    }
  return a;
}

// bf16(tile^T diag(factor)) as a register operand: the transposed tile (A = tile^T, 64 x 64, its K
// index the tile's rows) with column k (the tile's row k) multiplied by factor(k) in float32 before
// the rounding, as scale_tile_rows rounds. Register p of slice kk holds A's rows 16 w + l / 4 + 8 (p % 2)
// and columns 16 kk + 8 (p / 2) + 2 (l % 4) (+ 1) (warp w, lane l: RowOperand's layout), which is the
// transpose of the tile's 8 x 8 block at rows 16 kk + 8 (p / 2), columns 16 w + 8 (p % 2): one
// ldmatrix.trans of four such blocks a slice, lane l giving the address of row l % 8 of block l / 8.
template <class Factor>
__device__ RowOperand transposed_operand(const __nv_bfloat16* tile, Factor factor) {
  const int warp = threadIdx.x % 128 / 32, lane = threadIdx.x % 32, block = lane / 8;
  const auto base = static_cast<std::uint32_t>(__cvta_generic_to_shared(tile));
  RowOperand a;
#pragma unroll
  for (int kk = 0; kk < 4; ++kk) {
    const int row = 16 * kk + 8 * (block / 2) + lane % 8, column = 16 * warp + 8 * (block % 2);
    const std::uint32_t address = base + 2 * offset(row, column);
    asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];\n"
                 : "=r"(a.x[kk][0]), "=r"(a.x[kk][1]), "=r"(a.x[kk][2]), "=r"(a.x[kk][3])
                 : "r"(address)
                 : "memory");
#pragma unroll
    for (int p = 0; p < 4; ++p) {
      const int k = 16 * kk + 8 * (p / 2) + 2 * (lane % 4);  // and k + 1
      const float2 x = __bfloat1622float2(*reinterpret_cast<const __nv_bfloat162*>(&a.x[kk][p]));
      a.x[kk][p] = pack(x.x * factor(k), x.y * factor(k + 1));
    }
  }
  return a;
}

// tile = bf16(d) (a NarrowAccumulator: the tile's columns 0-31; the others keep what they hold).
template <int N>
__device__ void round_to_tile(const Accumulators<N>& d, __nv_bfloat16* tile) {
#pragma unroll
  for (int i = 0; i < N / 2; i += 2)
    *reinterpret_cast<std::uint32_t*>(tile + offset(Accumulator::row(i), Accumulator::column(i))) =
        pack(d.x[i], d.x[i + 1]);
}

// tile = bf16(diag(factor) d): each row multiplied by its factor in float32 first.
template <int N>
__device__ void round_to_tile(const Accumulators<N>& d, __nv_bfloat16* tile, const RowPair& factor) {
#pragma unroll
  for (int i = 0; i < N / 2; i += 2)
    *reinterpret_cast<std::uint32_t*>(tile + offset(Accumulator::row(i), Accumulator::column(i))) =
        pack(d.x[i] * factor[i], d.x[i + 1] * factor[i]);
}

// Row 0 of a K-major tile (a B operand of N = 8) = bf16(factor(r) d(r, 0)), r = 0..63: column 0 of
// d as a row (row 0 of a swizzled tile is stored in order). The unit factor is exact.
__device__ inline void round_to_tile_row(const Column& d, __nv_bfloat16* tile,
                                         const RowPair& factor = {{1, 1}}) {
  if (!Column::holds_column0()) return;
  tile[Column::row(0)] = __float2bfloat16_rn(d.x[0] * factor[0]);
  tile[Column::row(2)] = __float2bfloat16_rn(d.x[2] * factor[2]);
}

// Rows 0 .. rows - 1 and columns 0 .. columns - 1 (an even number; those past N are not stored) of a
// 64 x N float32 matrix, row-major with rows of `columns` floats (shared or device memory), from an
// accumulator; by default the 64 x 64 layout that load_rows reads.
template <int N>
__device__ void store_rows(float* to, const Accumulators<N>& d, int rows = width, int columns = width) {
#pragma unroll
  for (int i = 0; i < N / 2; i += 2)
    if (Accumulator::row(i) < rows && Accumulator::column(i) < columns)
      *reinterpret_cast<float2*>(to + Accumulator::row(i) * columns + Accumulator::column(i)) =
          make_float2(d.x[i], d.x[i + 1]);
}

// An accumulator from a 64 x 64 float32 matrix, row-major (a NarrowAccumulator: its columns 0-31).
template <int N>
__device__ void load_rows(Accumulators<N>& d, const float* from) {
#pragma unroll
  for (int i = 0; i < N / 2; i += 2) {
    const float2 pair =
        *reinterpret_cast<const float2*>(from + Accumulator::row(i) * width + Accumulator::column(i));
    d.x[i] = pair.x;
    d.x[i + 1] = pair.y;
  }
}

// d += factor tile, tile a swizzled bf16 tile (each product in float32, one fmaf per entry; a
// NarrowAccumulator: the tile's columns 0-31).
template <int N>
__device__ void add_tile(Accumulators<N>& d, const __nv_bfloat16* tile, float factor) {
#pragma unroll
  for (int i = 0; i < N / 2; i += 2) {
    const float2 pair = __bfloat1622float2(
        *reinterpret_cast<const __nv_bfloat162*>(tile + offset(Accumulator::row(i), Accumulator::column(i))));
    d.x[i] = fmaf(factor, pair.x, d.x[i]);
    d.x[i + 1] = fmaf(factor, pair.y, d.x[i + 1]);
  }
}

// to = diag(factor) from.
template <class D>
__device__ void scale_rows(D& to, const D& from, const RowPair& factor) {
#pragma unroll
  for (int i = 0; i < int(sizeof(to.x) / sizeof(float)); ++i) to.x[i] = from.x[i] * factor[i];
}
template <class D>
__device__ void scale(D& d, float factor) {
#pragma unroll
  for (int i = 0; i < int(sizeof(d.x) / sizeof(float)); ++i) d.x[i] *= factor;
}

template <class D>
__device__ void zero(D& d) {
#pragma unroll
  for (int i = 0; i < int(sizeof(d.x) / sizeof(float)); ++i) d.x[i] = 0.0f;
}

// to = bf16(diag(factor) from) for 64 x 64 tiles (distinct): the 128 threads of a warpgroup, row r of
// both (its 128 bytes, whatever the swizzle) multiplied by factor(r) in float32 before the rounding.
// Each thread's four 16-byte pieces are all read before any is written, so that their reads overlap
// (a loop over the pieces, its trip count unknown to the compiler, waited for each read in turn: about
// 700 cycles a tile, docs/perf.md).
template <class Factor>
__device__ void scale_tile_rows(__nv_bfloat16* __restrict__ to, const __nv_bfloat16* __restrict__ from,
                                Factor factor) {
  constexpr int threads = 128, pieces = width * width / 8 / threads;  // 8 pieces of 16 bytes per row
  const int first = threadIdx.x % threads;
  uint4 bits[pieces];
  float f[pieces];
#pragma unroll
  for (int i = 0; i < pieces; ++i) {
    bits[i] = reinterpret_cast<const uint4*>(from)[first + i * threads];
    f[i] = factor((first + i * threads) / 8);
  }
#pragma unroll
  for (int i = 0; i < pieces; ++i) {
    __nv_bfloat162* pairs = reinterpret_cast<__nv_bfloat162*>(&bits[i]);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      const float2 x = __bfloat1622float2(pairs[j]);
      pairs[j] = __floats2bfloat162_rn(x.x * f[i], x.y * f[i]);
    }
    reinterpret_cast<uint4*>(to)[first + i * threads] = bits[i];
  }
}

}  // namespace hla::fast::gpu::detail::wgmma
