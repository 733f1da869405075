#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "hla/reference/host_device.hpp"

namespace hla {

// The prime field Z/p with p = 2^61 - 1 (a Mersenne prime). Exact arithmetic at machine speed:
// an identity that holds over the rationals holds here too, and a false polynomial identity of
// degree D survives a random evaluation with probability at most D/p (Schwartz-Zippel).
// @invariant 0 <= value < modulus
class ModP {
 public:
  static constexpr std::uint64_t modulus = (std::uint64_t{1} << 61) - 1;

  constexpr ModP() = default;  // host and device, as every defaulted constructor

  // Any integer maps to its residue; implicit so that generic code may write T(0), T(1), 2 * x.
  template <class Integer, std::enable_if_t<std::is_integral_v<Integer>, int> = 0>
  HLA_HOST_DEVICE constexpr ModP(Integer x) : value_(reduce_integer(x)) {}

  HLA_HOST_DEVICE static constexpr ModP from_residue(std::uint64_t residue) {
    ModP r;
    r.value_ = fold(residue);
    return r;
  }

  HLA_HOST_DEVICE constexpr std::uint64_t residue() const { return value_; }

  HLA_HOST_DEVICE friend constexpr ModP operator+(ModP a, ModP b) {
    return from_canonical(subtract_if_large(a.value_ + b.value_));
  }
  HLA_HOST_DEVICE friend constexpr ModP operator-(ModP a, ModP b) {
    return from_canonical(subtract_if_large(a.value_ + modulus - b.value_));
  }
  HLA_HOST_DEVICE constexpr ModP operator-() const { return ModP{} - *this; }
  HLA_HOST_DEVICE constexpr ModP operator+() const { return *this; }
  HLA_HOST_DEVICE friend constexpr ModP operator*(ModP a, ModP b) {
    return from_canonical(multiply(a.value_, b.value_));
  }
  // @pre b != 0 (the caller checks; see hla::checked_divide)
  HLA_HOST_DEVICE friend constexpr ModP operator/(ModP a, ModP b) { return a * b.inverse(); }

  HLA_HOST_DEVICE constexpr ModP& operator+=(ModP b) { return *this = *this + b; }
  HLA_HOST_DEVICE constexpr ModP& operator-=(ModP b) { return *this = *this - b; }
  HLA_HOST_DEVICE constexpr ModP& operator*=(ModP b) { return *this = *this * b; }
  HLA_HOST_DEVICE constexpr ModP& operator/=(ModP b) { return *this = *this / b; }

  HLA_HOST_DEVICE friend constexpr bool operator==(ModP a, ModP b) { return a.value_ == b.value_; }
  HLA_HOST_DEVICE friend constexpr bool operator!=(ModP a, ModP b) { return a.value_ != b.value_; }

  // Fermat: a^(p-2) = a^(-1) for a != 0; zero maps to zero.
  HLA_HOST_DEVICE constexpr ModP inverse() const { return power(modulus - 2); }

  HLA_HOST_DEVICE constexpr ModP power(std::uint64_t exponent) const {
    ModP result{1};
    ModP base = *this;
    for (; exponent != 0; exponent >>= 1) {
      if (exponent & 1) result *= base;
      base *= base;
    }
    return result;
  }

  friend std::ostream& operator<<(std::ostream& os, ModP a) { return os << a.value_; }

 private:
  std::uint64_t value_ = 0;

  HLA_HOST_DEVICE static constexpr ModP from_canonical(std::uint64_t v) {
    ModP r;
    r.value_ = v;
    return r;
  }
  HLA_HOST_DEVICE static constexpr std::uint64_t subtract_if_large(std::uint64_t v) {
    return v >= modulus ? v - modulus : v;
  }
  // 2^61 = 1 (mod p), so the bits above position 61 fold back onto the low ones.
  HLA_HOST_DEVICE static constexpr std::uint64_t fold(std::uint64_t v) {
    return subtract_if_large((v & modulus) + (v >> 61));
  }
  HLA_HOST_DEVICE static constexpr std::uint64_t multiply(std::uint64_t a, std::uint64_t b) {
#if defined(__CUDA_ARCH__)
    const std::uint64_t lo = a * b;
    const std::uint64_t hi = __umul64hi(a, b);
#else
    const unsigned __int128 product = static_cast<unsigned __int128>(a) * b;
    const auto lo = static_cast<std::uint64_t>(product);
    const auto hi = static_cast<std::uint64_t>(product >> 64);
#endif
    // product = high * 2^61 + (lo & p) with high < 2^61 since a, b < 2^61.
    const std::uint64_t high = (lo >> 61) | (hi << 3);
    return fold((lo & modulus) + high);
  }
  template <class Integer>
  HLA_HOST_DEVICE static constexpr std::uint64_t reduce_integer(Integer x) {
    if constexpr (std::is_signed_v<Integer>) {
      if (x < 0) {
        // -(x + 1) avoids overflow at the most negative value.
        const std::uint64_t magnitude = fold(static_cast<std::uint64_t>(-(x + 1))) + 1;
        return subtract_if_large(modulus - subtract_if_large(magnitude));
      }
    }
    return fold(static_cast<std::uint64_t>(x));
  }
};

}  // namespace hla
