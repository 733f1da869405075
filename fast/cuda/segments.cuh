#pragma once

// Splitting sequences into segments on the matrix units (tensor_core.cu, tensor_core_backward.cu):
// how many, and the device scratch of their summaries and carry-ins. Host code.

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdint>

#include "hla/fast/gpu_status.hpp"
#include "launch.hpp"

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

// How a launch splits its sequences: `segments` per sequence-head, each `segment_chunks` chunks long
// (the last one shorter), from the current device's SM count.
struct Split {
  int segments;
  std::int64_t segment_chunks;
};
inline Split split_sequences(std::int64_t heads, std::int64_t chunks) {
  int device = 0, sms = 0;
  check(cudaGetDevice(&device), "cudaGetDevice");
  check(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device), "cudaDeviceGetAttribute");
  const int segments = static_cast<int>(segments_for(heads, chunks, sms));
  return {segments, (chunks + segments - 1) / segments};
}

// Device scratch for the summaries and carry-ins, freed in stream order.
class StreamScratch {
 public:
  StreamScratch(std::size_t floats, CUstream_st* stream) : stream_(stream) {
    check(cudaMallocAsync(reinterpret_cast<void**>(&data_), floats * sizeof(float), stream),
          "cudaMallocAsync");
  }
  StreamScratch(StreamScratch&& from) noexcept : data_(from.data_), stream_(from.stream_) {
    from.data_ = nullptr;
  }
  ~StreamScratch() {
    if (data_) cudaFreeAsync(data_, stream_);
  }
  StreamScratch(const StreamScratch&) = delete;
  StreamScratch& operator=(const StreamScratch&) = delete;
  float* get() const { return data_; }

 private:
  float* data_ = nullptr;
  CUstream_st* stream_;
};

// The launches of a split computation, in stream order. One segment: `results(blocks, nullptr)`
// with one block per sequence-head. Several: `summaries(blocks, summaries)` for every segment but
// the last of each sequence-head (summary_floats each, from a zero state), `carries(summaries,
// carries)` combining them into every segment's carry-in (carry_floats each), then
// `results(blocks, carries)` with one block per segment. Each callable launches its kernel and
// checks the launch.
template <class Results, class Summaries, class Carries>
void launch_split(std::int64_t heads, const Split& split, std::size_t summary_floats,
                  std::size_t carry_floats, CUstream_st* stream, const Results& results,
                  const Summaries& summaries, const Carries& carries) {
  const auto blocks = [](std::int64_t count) { return static_cast<unsigned>(count); };
  if (split.segments == 1) {
    results(blocks(heads), nullptr);
    return;
  }
  const StreamScratch summary_scratch(heads * (split.segments - 1) * summary_floats, stream);
  const StreamScratch carry_scratch(heads * split.segments * carry_floats, stream);
  summaries(blocks(heads * (split.segments - 1)), summary_scratch.get());
  carries(static_cast<const float*>(summary_scratch.get()), carry_scratch.get());
  results(blocks(heads * split.segments), static_cast<const float*>(carry_scratch.get()));
}

// One rank's exchange of a sequence split across ranks (docs/ranks.md; the forward's and the backward's
// launch_rank), in stream order: its summaries (summary_floats a sequence-head, zeros unless
// summarize(mine) writes them, which it does when this rank has any to send), the all-gather of every
// rank's ([ranks][heads]), then, when count > 0, combine(gathered, all) writes `count` carries a head
// ([heads][count] of carry_floats) of which the one at `pick` is copied into a carry of its own. Returns
// that carry, [heads] of carry_floats (null when count is 0), for the caller to free in stream order
// after its last launch. The summaries are not freed when something throws after the gather starts:
// another rank may still be copying them.
template <class Summarize, class Combine>
float* rank_exchange(std::int64_t heads, std::size_t summary_floats, std::size_t carry_floats,
                     const FastRank& rank, const Summarize& summarize, int count, int pick,
                     const Combine& combine, CUstream_st* stream) {
  const std::size_t summary_bytes = heads * summary_floats * sizeof(float);
  float *mine = nullptr, *gathered = nullptr;
  check(cudaMallocAsync(reinterpret_cast<void**>(&mine), summary_bytes, stream), "cudaMallocAsync");
  check(cudaMallocAsync(reinterpret_cast<void**>(&gathered), rank.ranks * summary_bytes, stream),
        "cudaMallocAsync");
  check(cudaMemsetAsync(mine, 0, summary_bytes, stream), "cudaMemsetAsync");
  summarize(mine);
  rank.gather(mine, gathered, summary_bytes);
  check(cudaFreeAsync(mine, stream), "cudaFreeAsync");
  float* carry = nullptr;
  if (count > 0) {
    const std::size_t carry_bytes = carry_floats * sizeof(float);
    const StreamScratch all(heads * count * carry_floats, stream);
    check(cudaMallocAsync(reinterpret_cast<void**>(&carry), heads * carry_bytes, stream), "cudaMallocAsync");
    combine(static_cast<const float*>(gathered), all.get());
    check(cudaMemcpy2DAsync(carry, carry_bytes, all.get() + pick * carry_floats, count * carry_bytes,
                            carry_bytes, heads, cudaMemcpyDeviceToDevice, stream),
          "cudaMemcpy2DAsync (rank carry)");
  }
  check(cudaFreeAsync(gathered, stream), "cudaFreeAsync");
  return carry;
}

}  // namespace hla::fast::gpu::detail
