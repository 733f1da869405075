#pragma once

// Block-cooperative linear algebra on small row-major arrays (shared or global memory). Every
// thread of the block calls each function; none synchronizes: the caller places sync() between a
// write and the reads of other threads. Sums run in index order, so every scalar type (float,
// double, Z/p) gets the same sequence of operations whatever the block size. Compiled for the
// host, a block is one thread: each() runs every index in order and sync() does nothing, which
// gives the block's result because no phase between two barriers reads what another thread of
// it writes (compute-sanitizer's racecheck checks that on the device).

#include "hla/reference/host_device.hpp"

namespace hla::fast::gpu::block {

template <class F>
HLA_HOST_DEVICE void each(int count, F&& f) {
#if defined(__CUDA_ARCH__)
  for (int i = threadIdx.x; i < count; i += blockDim.x) f(i);
#else
  for (int i = 0; i < count; ++i) f(i);
#endif
}

HLA_HOST_DEVICE void sync() {
#if defined(__CUDA_ARCH__)
  __syncthreads();
#endif
}

// Each thread computes the same value; inputs must be visible to all threads.
template <class T>
HLA_HOST_DEVICE T dot(const T* a, const T* b, int length) {
  T sum(0);
  for (int i = 0; i < length; ++i) sum += a[i] * b[i];
  return sum;
}

// y = x^T M for M [rows, cols]: y_j = sum_i x_i M_ij.
template <class T>
HLA_HOST_DEVICE void row_times(const T* x, const T* m, int rows, int cols, T* y) {
  each(cols, [&](int j) {
    T sum(0);
    for (int i = 0; i < rows; ++i) sum += x[i] * m[i * cols + j];
    y[j] = sum;
  });
}

// y = M x for M [rows, cols]: y_i = sum_j M_ij x_j.
template <class T>
HLA_HOST_DEVICE void times_column(const T* m, const T* x, int rows, int cols, T* y) {
  each(rows, [&](int i) {
    T sum(0);
    for (int j = 0; j < cols; ++j) sum += m[i * cols + j] * x[j];
    y[i] = sum;
  });
}

// (A B)_ij for A [rows, inner], B [inner, cols].
template <class T>
HLA_HOST_DEVICE T product_entry(const T* a, const T* b, int inner, int cols, int i, int j) {
  T sum(0);
  for (int l = 0; l < inner; ++l) sum += a[i * inner + l] * b[l * cols + j];
  return sum;
}

// (A^T B)_ij for A [inner, a_cols], B [inner, cols].
template <class T>
HLA_HOST_DEVICE T transposed_product_entry(const T* a, const T* b, int inner, int a_cols, int cols, int i,
                                           int j) {
  T sum(0);
  for (int l = 0; l < inner; ++l) sum += a[l * a_cols + i] * b[l * cols + j];
  return sum;
}

template <class T>
HLA_HOST_DEVICE void fill(T* x, int count, const T& value) {
  each(count, [&](int i) { x[i] = value; });
}

template <class T>
HLA_HOST_DEVICE void copy(const T* from, T* to, int count) {
  each(count, [&](int i) { to[i] = from[i]; });
}

}  // namespace hla::fast::gpu::block
