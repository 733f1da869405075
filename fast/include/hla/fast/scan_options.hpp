#pragma once

// The options of the chunked implementations (scan.hpp, chunked.hpp), apart from them so that the
// command line's parser includes no driver.

#include "hla/reference/linalg.hpp"

namespace hla::fast {

struct ScanOptions {
  Index chunk = 64;  // tokens per chunk, >= 1; larger than n means one chunk
  int threads = 1;   // >= 1
};

// Throws hla::Error naming --chunk or --threads.
void validate(const ScanOptions& options);

}  // namespace hla::fast
