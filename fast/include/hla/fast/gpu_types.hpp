#pragma once

// The plain types of the GPU interface, shared by host code and kernels (no Eigen, no CUDA).

#include <cstdint>

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace hla::fast::gpu {

// A bfloat16 value by its bits: the upper half of a float32.
struct BFloat16 {
  std::uint16_t bits;
};

enum class Method { streaming, scan };

struct Problem {
  std::int64_t batch = 1, heads = 1, length = 0;
  int key_dim = 0, value_dim = 0;
};

}  // namespace hla::fast::gpu
