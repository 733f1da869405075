#pragma once

// The one CUDA status check of the host code (fast/src, fast/cuda, bench/gpu): a failed call
// becomes hla::Error naming it. Needs the CUDA runtime's headers, which hla_gpu's users have.

#include <cuda_runtime_api.h>

#include <string>

#include "hla/reference/error.hpp"

namespace hla::fast::gpu {

inline void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) throw Error(std::string("CUDA: ") + what + ": " + cudaGetErrorString(status));
}

// After a kernel launch: the launch's own error, if any.
inline void check_launch(const char* what) {
  check(cudaGetLastError(), what);
}

}  // namespace hla::fast::gpu
