#pragma once

// The decay on the matrix units (tensor_core.cu, tensor_core_backward.cu): with g the head's gamma
// and tau = 1..64 a token's place in its chunk, the powers g^0 .. g^128 in shared memory (float32
// roundings of float64 powers) and, per thread, the factors of its two accumulator rows.

#include <cstdint>

#include "wgmma.cuh"

namespace hla::fast::gpu::detail::decay {

constexpr int powers_count = 3 * wgmma::width + 1;  // g^0 .. g^192

// The head's gamma: one per head of a batch, or one for all.
__device__ inline double gamma_of(const double* head_decays, std::int64_t heads_per_batch, double decay,
                                  std::int64_t head) {
  return head_decays ? head_decays[head % heads_per_batch] : decay;
}

// powers[i] = g^(step i), i = 0..192, by the block's threads (the caller synchronizes before reading):
// step 2 gives the powers of g^2 as the same roundings of g's even powers.
__device__ inline void fill_powers(float* powers, double gamma, int step = 1) {
  for (int i = threadIdx.x; i < powers_count; i += blockDim.x)
    powers[i] = static_cast<float>(pow(gamma, static_cast<double>(step * i)));
}

// A thread's factors for its two accumulator rows (RowPair) and per chunk.
struct Decay {
  // g^tau, g^(2 tau), g^(3 tau), g^(64 - tau), g^(2 (64 - tau)), g^(3 (64 - tau))
  wgmma::RowPair offset{}, offset2{}, offset3{}, age{}, age2{}, age3{};
  float rho = 1, rho2 = 1, rho3 = 1;                  // g^64, g^128, g^192
  Decay() = default;                                  // without decay: unused
  __device__ explicit Decay(const float* powers) {
    constexpr int width = wgmma::width;
    for (int half = 0; half < 2; ++half) {
      const int r = wgmma::Accumulator::row(2 * half);
      offset.f[half] = powers[r + 1];
      offset2.f[half] = powers[2 * r + 2];
      offset3.f[half] = powers[3 * r + 3];
      age.f[half] = powers[width - 1 - r];
      age2.f[half] = powers[2 * (width - 1 - r)];
      age3.f[half] = powers[3 * (width - 1 - r)];
    }
    rho = powers[width];
    rho2 = powers[2 * width];
    rho3 = powers[3 * width];
  }
};

}  // namespace hla::fast::gpu::detail::decay
