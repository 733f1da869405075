#include "hla/reference/operator_spec.hpp"

namespace hla {

std::string_view variant_name(Variant v) {
  switch (v) {
    case Variant::linear:
      return "linear";
    case Variant::hla2:
      return "hla2";
    case Variant::ahla:
      return "ahla";
    case Variant::hla3:
      return "hla3";
  }
  return "?";
}

std::optional<Variant> parse_variant(std::string_view name) {
  for (const Variant v : all_variants) {
    if (variant_name(v) == name) return v;
  }
  return std::nullopt;
}

bool supports_unmasked(Variant v) {
  return v == Variant::hla2 || v == Variant::hla3;
}
bool supports_ridge(Variant v) {
  return v == Variant::hla2;
}

int order(Variant v) {
  switch (v) {
    case Variant::linear:
      return 1;
    case Variant::hla2:
      return 2;
    case Variant::ahla:
      return 2;
    case Variant::hla3:
      return 3;
  }
  return 0;
}

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
