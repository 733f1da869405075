#pragma once

#include <optional>
#include <string_view>

#include "hla/reference/operator_spec.hpp"

namespace hla::fast {

// published: the paper's formulas exactly as printed. corrected: the toolkit's derivation, beside
// the published one, for the operators where the printed formulas disagree with the definition
// (docs/findings.md). Only masked hla2 and masked hla3 have a corrected form.
enum class Form { published, corrected };

std::string_view form_name(Form f);
std::optional<Form> parse_form(std::string_view name);

bool has_corrected_form(const OperatorSpec& spec);

// The form that equals the reference: corrected where one exists, else published.
Form default_form(const OperatorSpec& spec);

// Throws hla::Error when `form` is corrected and the operator has none.
void validate_form(const OperatorSpec& spec, Form form);

}  // namespace hla::fast
