#include "hla/fast/scan.hpp"

#include "hla/fast/chunked.hpp"

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

void validate_chunked(const OperatorSpec& spec, Form form) {
  if (spec.variant == Variant::hla3) {
    throw Error("--impl chunked: the paper draws no chunk-parallel matrix form for hla3 (use --impl scan)");
  }
  if (form == Form::published && spec.masked && spec.variant != Variant::linear &&
      (spec.decayed() || spec.ridge != 0)) {
    throw Error(std::string("--form published: Figure ") + (spec.variant == Variant::hla2 ? "1(C)" : "2(C)") +
                " prints the chunk form without decay or ridge");
  }
}

bool is_available(const OperatorSpec& spec, Impl impl, Form form) {
  try {
    validate(spec);
    validate_form(spec, impl, form);
    if (impl == Impl::scan) validate_scan(spec, form);
    if (impl == Impl::chunked) validate_chunked(spec, form);
    return true;
  } catch (const Error&) {
    return false;
  }
}

}  // namespace hla::fast
