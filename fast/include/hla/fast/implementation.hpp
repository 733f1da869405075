#pragma once

// The names of what the toolkit evaluates: how (Implementation) and after whose formulas (Form).
// Plain enums, shared by host code and kernels; what covers what is decided in catalogue.hpp.

#include <array>
#include <optional>
#include <string_view>

namespace hla::fast {

// How an operator is evaluated: the n x n definition, the recurrence, the two-level scan of
// segment summaries (Alg. 1, Alg. 4), the chunk-parallel matrix form (Figures 1(C), 2(C)), and on
// the GPU the streaming kernel, the chunk-parallel scan and the fast path on the matrix units.
enum class Implementation { reference, streaming, scan, chunked, gpu_streaming, gpu_scan, gpu_fast };

inline constexpr std::array<Implementation, 7> all_implementations{
    Implementation::reference, Implementation::streaming,     Implementation::scan,
    Implementation::chunked,   Implementation::gpu_streaming, Implementation::gpu_scan,
    Implementation::gpu_fast};

constexpr std::string_view implementation_name(Implementation impl) {
  constexpr std::array<std::string_view, 7> names{"reference",     "streaming", "scan",    "chunked",
                                                  "gpu-streaming", "gpu-scan",  "gpu-fast"};
  const auto i = static_cast<std::size_t>(impl);
  return i < names.size() ? names[i] : "unknown";
}

// The names above; "gpu" is accepted for gpu-scan.
constexpr std::optional<Implementation> parse_implementation(std::string_view name) {
  if (name == "gpu") return Implementation::gpu_scan;
  for (const Implementation impl : all_implementations) {
    if (implementation_name(impl) == name) return impl;
  }
  return std::nullopt;
}

constexpr bool on_gpu(Implementation impl) {
  return impl == Implementation::gpu_streaming || impl == Implementation::gpu_scan ||
         impl == Implementation::gpu_fast;
}

// The CPU implementation whose formulas, and so forms and findings, a generic GPU kernel
// computes; any other implementation is its own twin.
constexpr Implementation cpu_twin(Implementation impl) {
  if (impl == Implementation::gpu_streaming) return Implementation::streaming;
  if (impl == Implementation::gpu_scan) return Implementation::scan;
  return impl;
}

// published: the paper's formulas exactly as printed. corrected: the toolkit's derivation, beside
// the published one, where the printed formulas disagree with the definition (docs/findings.md;
// catalogue.hpp's findings() says where). An implementation without a corrected form has one
// form, Form::published.
enum class Form { published, corrected };

constexpr std::string_view form_name(Form f) {
  return f == Form::published ? "published" : "corrected";
}

constexpr std::optional<Form> parse_form(std::string_view name) {
  if (name == "published") return Form::published;
  if (name == "corrected") return Form::corrected;
  return std::nullopt;
}

}  // namespace hla::fast
