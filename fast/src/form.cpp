#include "hla/fast/form.hpp"

#include <string>

namespace hla::fast {

std::string_view impl_name(Impl impl) {
  switch (impl) {
    case Impl::reference:
      return "reference";
    case Impl::streaming:
      return "streaming";
    case Impl::scan:
      return "scan";
    case Impl::chunked:
      return "chunked";
  }
  return "?";
}

std::optional<Impl> parse_impl(std::string_view name) {
  for (const Impl impl : {Impl::reference, Impl::streaming, Impl::scan, Impl::chunked}) {
    if (impl_name(impl) == name) return impl;
  }
  return std::nullopt;
}

std::string_view form_name(Form f) {
  return f == Form::published ? "published" : "corrected";
}

std::optional<Form> parse_form(std::string_view name) {
  if (name == "published") return Form::published;
  if (name == "corrected") return Form::corrected;
  return std::nullopt;
}

bool has_corrected_form(const OperatorSpec& spec, Impl impl) {
  switch (impl) {
    case Impl::reference:
      return false;
    case Impl::streaming:
      return spec.masked && (spec.variant == Variant::hla2 || spec.variant == Variant::hla3);
    case Impl::scan:
      return spec.masked && spec.variant != Variant::linear;
    case Impl::chunked:
      return spec.masked && (spec.variant == Variant::hla2 || spec.variant == Variant::ahla);
  }
  return false;
}

Form default_form(const OperatorSpec& spec, Impl impl) {
  return has_corrected_form(spec, impl) ? Form::corrected : Form::published;
}

void validate_form(const OperatorSpec& spec, Impl impl, Form form) {
  if (form == Form::corrected && !has_corrected_form(spec, impl)) {
    throw Error("--form corrected: " + describe(spec) + " has no corrected " + std::string(impl_name(impl)) +
                " form; its published form equals the reference");
  }
}

}  // namespace hla::fast
