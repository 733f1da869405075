#pragma once

#include <string>

#include "hla/reference/scalar.hpp"
#include "hla/reference/variant.hpp"

namespace hla {

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

// Throws hla::Error, naming the flag, when the options do not describe an operator.
void validate(const OperatorSpec& spec);

// "hla2 masked normalized eps=1/10 ridge=0 decay=1/2": the options that are in effect.
std::string describe(const OperatorSpec& spec);

}  // namespace hla
