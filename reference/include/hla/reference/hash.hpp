#pragma once

// The two hashes behind every seed of the toolkit (a plain header: the kernels use it too), so
// that the same seed gives the same inputs on every platform and launch configuration.

#include <cstdint>
#include <string_view>

#include "hla/reference/host_device.hpp"

namespace hla {

inline constexpr std::uint64_t splitmix64_increment = 0x9E3779B97F4A7C15ull;

// splitmix64 (Steele, Lea, Flood 2014): the output for state x, whose successor is x + increment.
HLA_HOST_DEVICE std::uint64_t splitmix64(std::uint64_t x) {
  std::uint64_t z = x + splitmix64_increment;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

// FNV-1a (64 bits) over `text`, continuing from `h` (the standard offset basis by default).
inline std::uint64_t fnv1a(std::string_view text, std::uint64_t h = 1469598103934665603ull) {
  for (const char c : text) h = (h ^ static_cast<unsigned char>(c)) * 1099511628211ull;
  return h;
}

}  // namespace hla
