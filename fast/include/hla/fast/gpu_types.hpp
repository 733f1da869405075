#pragma once

// The plain types of the GPU interface, shared by host code and kernels (no Eigen, no CUDA).

#include <cstdint>

#include "hla/reference/host_device.hpp"

struct CUstream_st;  // cudaStream_t is CUstream_st*

namespace hla::fast::gpu {

// A bfloat16 value by its bits: the upper half of a float32.
struct BFloat16 {
  std::uint16_t bits;
};

// The bf16 nearest to the float32 with these bits, ties to even; a NaN stays a NaN (quieted,
// sign and leading payload kept) instead of rounding into an infinity.
HLA_HOST_DEVICE BFloat16 bfloat16_from_float_bits(std::uint32_t bits) {
  if ((bits & 0x7fffffffu) > 0x7f800000u) return {static_cast<std::uint16_t>((bits >> 16) | 0x40u)};
  return {static_cast<std::uint16_t>((bits + 0x7fffu + ((bits >> 16) & 1u)) >> 16)};
}

struct Problem {
  std::int64_t batch = 1, heads = 1, length = 0;
  int key_dim = 0, value_dim = 0;
};

}  // namespace hla::fast::gpu
