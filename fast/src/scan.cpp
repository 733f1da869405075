#include "hla/fast/scan.hpp"

namespace hla::fast {

void validate(const ScanOptions& options) {
  if (options.chunk < 1) throw Error("--chunk: must be >= 1, got " + std::to_string(options.chunk));
  if (options.threads < 1 || options.threads > max_threads) {
    throw Error("--threads: must be from 1 to " + std::to_string(max_threads) + ", got " +
                std::to_string(options.threads));
  }
}

}  // namespace hla::fast
