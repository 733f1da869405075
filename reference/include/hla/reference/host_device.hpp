#pragma once

// Code shared by host and device: __host__ __device__ under nvcc, plain inline elsewhere,
// so that g++ compiles the same headers and CPU-only builds stay possible.
#if defined(__CUDACC__)
#define HLA_HOST_DEVICE __host__ __device__ inline
#else
#define HLA_HOST_DEVICE inline
#endif
