#include "hla/fast/scan.hpp"

namespace hla::fast {

void validate(const ScanOptions& options) {
  if (options.chunk < 1) throw Error("--chunk: must be >= 1, got " + std::to_string(options.chunk));
  if (options.threads < 1) throw Error("--threads: must be >= 1, got " + std::to_string(options.threads));
}

void validate_scan(const OperatorSpec& spec, Form form) {
  if (spec.variant == Variant::hla3 && spec.masked && form == Form::published && spec.decayed()) {
    throw Error(
        "--form published: the third-order scan operator (Eqs. 7.6-7.7, Alg. 4) is printed for "
        "gamma = 1 only");
  }
}

}  // namespace hla::fast
