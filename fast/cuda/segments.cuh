#pragma once

// Splitting sequences into segments on the matrix units (tensor_core.cu, tensor_core_backward.cu):
// how many, and the device scratch of their summaries and carry-ins. Host code.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "hla/fast/gpu_status.hpp"

namespace hla::fast::gpu::detail {

// Sequences split into segments when the sequence-heads alone leave SMs idle (about one block per
// SM), each segment at least 32 chunks long so that the summary pass and the two extra launches pay.
inline std::int64_t segments_for(std::int64_t heads, std::int64_t chunks, int sms) {
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

}  // namespace hla::fast::gpu::detail
