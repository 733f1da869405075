#pragma once

// The options of the chunked implementations (scan.hpp, chunked.hpp), apart from them so that the
// command line's parser includes no driver.

#include <algorithm>

#include "hla/reference/linalg.hpp"

namespace hla::fast {

// More threads than this are refused: the chunked forms have no use for them, and OpenMP
// runtimes fail on tens of thousands.
inline constexpr int max_threads = 256;

struct ScanOptions {
  Index chunk = 64;  // tokens per chunk, >= 1; larger than n means one chunk
  int threads = 1;   // 1 .. max_threads; no more are started than there are chunks
};

// Throws hla::Error naming --chunk or --threads.
void validate(const ScanOptions& options);

// The threads worth starting for `work` independent pieces: at most one each.
inline int threads_for(const ScanOptions& options, Index work) {
  return static_cast<int>(std::max<Index>(1, std::min<Index>(options.threads, work)));
}

}  // namespace hla::fast
