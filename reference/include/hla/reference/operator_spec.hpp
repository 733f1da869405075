#pragma once

#include <array>
#include <optional>
#include <string>
#include <string_view>

#include "hla/reference/scalar.hpp"

namespace hla {

enum class Variant { linear, hla2, ahla, hla3 };

inline constexpr std::array<Variant, 4> all_variants{Variant::linear, Variant::hla2, Variant::ahla,
                                                     Variant::hla3};

std::string_view variant_name(Variant v);
std::optional<Variant> parse_variant(std::string_view name);

// One operator of the family, with its options. The defaults give the masked, unnormalized,
// undecayed operator.
struct OperatorSpec {
  Variant variant = Variant::hla2;
  bool masked = true;      // false: the unmasked prefix form (hla2: Eq. 3.1; hla3: Sec. 7.1)
  bool normalize = false;  // o_t = num_t / (den_t + eps)
  Rational eps = 0;        // eps >= 0
  Rational ridge = 0;      // hla2 only: S^K_t + ridge * I (Alg. 1, line 7)
  Rational decay = 1;      // gamma in (0, 1]; 1 means no decay

  bool decayed() const { return decay != 1; }
  friend bool operator==(const OperatorSpec&, const OperatorSpec&) = default;
};

bool supports_unmasked(Variant v);  // hla2 and hla3
bool supports_ridge(Variant v);     // hla2

// Throws hla::Error, naming the flag, when the options do not describe an operator.
void validate(const OperatorSpec& spec);

// "hla2 masked normalized eps=1/10 ridge=0 decay=1/2": the options that are in effect.
std::string describe(const OperatorSpec& spec);

// Polynomial degree of the numerator in the inputs (q, k, v together): the order of the
// operator plus one for v; used for Schwartz-Zippel bounds and rounding-error depths.
int order(Variant v);

}  // namespace hla
