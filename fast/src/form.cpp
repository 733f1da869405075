#include "hla/fast/form.hpp"

#include <string>

namespace hla::fast {

std::string_view form_name(Form f) {
  return f == Form::published ? "published" : "corrected";
}

std::optional<Form> parse_form(std::string_view name) {
  if (name == "published") return Form::published;
  if (name == "corrected") return Form::corrected;
  return std::nullopt;
}

bool has_corrected_form(const OperatorSpec& spec) {
  return spec.masked && (spec.variant == Variant::hla2 || spec.variant == Variant::hla3);
}

Form default_form(const OperatorSpec& spec) {
  return has_corrected_form(spec) ? Form::corrected : Form::published;
}

void validate_form(const OperatorSpec& spec, Form form) {
  if (form == Form::corrected && !has_corrected_form(spec)) {
    throw Error("--form corrected: " + describe(spec) +
                " has no corrected form; its published form equals the reference");
  }
}

}  // namespace hla::fast
