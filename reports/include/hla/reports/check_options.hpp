#pragma once

// The options of hla check apart from the check itself, so that the command line needs no stage's
// full header (the parser is built into the command-line fuzzer without the reports library).

#include <optional>
#include <string>
#include <string_view>

#include "hla/fast/implementation.hpp"
#include "hla/reports/phases.hpp"
#include "hla/reference/error.hpp"
#include "hla/reference/linalg.hpp"
#include "hla/reference/operator_spec.hpp"

namespace hla::reports {

// Each option's values are named by an array indexed by the enum; parse() finds a name in it.
template <class Enum, std::size_t N>
Enum parse_named(std::string_view text, const std::string_view (&names)[N], const std::string& what) {
  for (std::size_t i = 0; i < N; ++i) {
    if (text == names[i]) return static_cast<Enum>(i);
  }
  std::string choices;
  for (const std::string_view name : names) choices += (choices.empty() ? "" : " | ") + std::string(name);
  throw Error(what + ": '" + std::string(text) + "' is not one of " + choices);
}

// The candidate's storage formats. Arithmetic: float64 for f64, float32 for the others.
enum class Format { f64, f32, bf16, f16 };
inline constexpr std::string_view format_names[] = {"f64", "f32", "bf16", "f16"};
inline std::string_view format_name(Format format) {
  return format_names[static_cast<std::size_t>(format)];
}
// Throws hla::Error("<flag>: ...") for a name that is not a format.
inline Format parse_format(std::string_view text, std::string_view flag) {
  return parse_named<Format>(text, format_names, std::string(flag));
}
inline int arithmetic_bits(Format format) {
  return format == Format::f64 ? 53 : 24;
}

// How a normalized output divides: num / (den + eps) (the paper's), num / (sign(den) max(|den|, eps))
// (FLA's, sign(0) = +1), or num / max(den, eps).
enum class EpsPolicy { add, signed_clamp, clamp };
inline constexpr EpsPolicy all_eps_policies[] = {EpsPolicy::add, EpsPolicy::signed_clamp, EpsPolicy::clamp};
inline constexpr std::string_view eps_policy_names[] = {"add", "signed-clamp", "clamp"};
inline std::string_view eps_policy_name(EpsPolicy policy) {
  return eps_policy_names[static_cast<std::size_t>(policy)];
}
inline EpsPolicy parse_eps_policy(std::string_view text) {
  return parse_named<EpsPolicy>(text, eps_policy_names, "--eps-policy");
}

enum class Criterion { tight, sound };
inline constexpr std::string_view criterion_names[] = {"tight", "sound"};
inline Criterion parse_criterion(std::string_view text) {
  return parse_named<Criterion>(text, criterion_names, "--criterion");
}

// How q, k, v and o are laid out: one head [n, d], FLA's [B, T, H, D], or [B, H, T, D].
enum class Layout { nd, bthd, bhtd };
inline constexpr std::string_view layout_names[] = {"nd", "bthd", "bhtd"};
inline std::string_view layout_name(Layout layout) {
  return layout_names[static_cast<std::size_t>(layout)];
}
inline Layout parse_layout(std::string_view text) {
  return parse_named<Layout>(text, layout_names, "--layout");
}

// Where the reference and the toolkit's own runs take place: the GPU when this build and machine
// have one that holds the operator at these head sizes (auto), the CPU, or the GPU (an error when
// it cannot). float64 candidates are checked on the CPU (their reference is MPFR).
enum class Device { automatic, cpu, gpu };
inline constexpr std::string_view device_names[] = {"auto", "cpu", "gpu"};
inline Device parse_device(std::string_view text) {
  return parse_named<Device>(text, device_names, "--device");
}

struct CheckOptions {
  OperatorSpec spec;
  double scale = 1;  // multiplies the queries before the operator
  EpsPolicy eps_policy = EpsPolicy::add;
  Format precision = Format::f32;                 // the format of q, k, v
  std::optional<Format> output_format;            // default: precision
  // streaming, scan or chunked; none: the loosest of streaming and chunked (the scan keeps a
  // summary per token, O(n (d^2 + d dv)) memory, and is used only when named)
  std::optional<fast::Implementation> algorithm;
  Index chunk = 64;                               // for the chunk-parallel implementations
  Criterion criterion = Criterion::tight;
  int threads = 0;  // heads checked at once; 0: all cores
  Device device = Device::automatic;
  Progress progress;  // told each phase as it ends (hla check --progress); may be empty
};

}  // namespace hla::reports
