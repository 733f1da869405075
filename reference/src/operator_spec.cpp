#include "hla/reference/operator_spec.hpp"

namespace hla {

void validate(const OperatorSpec& spec) {
  const std::string name(variant_name(spec.variant));
  if (!spec.masked && !supports_unmasked(spec.variant)) {
    throw Error("--unmasked: " + name + " has no unmasked form (only hla2 and hla3 do)");
  }
  if (spec.ridge != 0 && !supports_ridge(spec.variant)) {
    throw Error("--ridge: " + name + " has no ridge option (only hla2 does, Alg. 1)");
  }
  if (spec.eps < 0) throw Error("--eps: must be >= 0, got " + format_rational(spec.eps));
  if (spec.eps != 0 && !spec.normalize) throw Error("--eps: only meaningful with --normalize");
  if (spec.decay <= 0 || spec.decay > 1) {
    throw Error("--decay: gamma must lie in (0, 1], got " + format_rational(spec.decay));
  }
}

std::string describe(const OperatorSpec& spec) {
  std::string s(variant_name(spec.variant));
  s += spec.masked ? " masked" : " unmasked";
  if (spec.normalize) s += " normalized eps=" + format_rational(spec.eps);
  if (spec.ridge != 0) s += " ridge=" + format_rational(spec.ridge);
  if (spec.decayed()) s += " decay=" + format_rational(spec.decay);
  return s;
}

}  // namespace hla
