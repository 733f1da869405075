#pragma once

// The operators of the family by name: a plain header, shared by host code and kernels.

#include <array>
#include <optional>
#include <string_view>

namespace hla {

enum class Variant { linear, hla2, ahla, hla3 };

inline constexpr std::array<Variant, 4> all_variants{Variant::linear, Variant::hla2, Variant::ahla,
                                                     Variant::hla3};

constexpr std::string_view variant_name(Variant v) {
  constexpr std::array<std::string_view, 4> names{"linear", "hla2", "ahla", "hla3"};
  return names[static_cast<std::size_t>(v)];
}

constexpr std::optional<Variant> parse_variant(std::string_view name) {
  for (const Variant v : all_variants) {
    if (variant_name(v) == name) return v;
  }
  return std::nullopt;
}

constexpr bool supports_unmasked(Variant v) {  // hla2 and hla3
  return v == Variant::hla2 || v == Variant::hla3;
}
constexpr bool supports_ridge(Variant v) {  // hla2
  return v == Variant::hla2;
}

// Polynomial degree of the numerator in the inputs (q, k, v together): the order of the
// operator plus one for v; used for Schwartz-Zippel bounds and rounding-error depths.
constexpr int order(Variant v) {
  return v == Variant::linear ? 1 : v == Variant::hla3 ? 3 : 2;
}

}  // namespace hla
