#include "hla/fast/scan.hpp"

namespace hla::fast {

void validate(const ScanOptions& options) {
  if (options.chunk < 1) throw Error("--chunk: must be >= 1, got " + std::to_string(options.chunk));
  if (options.threads < 1) throw Error("--threads: must be >= 1, got " + std::to_string(options.threads));
}

}  // namespace hla::fast
