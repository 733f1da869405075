#pragma once

#include <optional>
#include <string_view>

#include "hla/reference/operator_spec.hpp"

namespace hla::fast {

// How an operator is evaluated: the n x n definition, the recurrence, the two-level scan of
// segment summaries (Alg. 1, Alg. 4), the chunk-parallel matrix form (Figures 1(C), 2(C)).
enum class Impl { reference, streaming, scan, chunked };

std::string_view impl_name(Impl impl);
std::optional<Impl> parse_impl(std::string_view name);

// published: the paper's formulas exactly as printed. corrected: the toolkit's derivation, beside
// the published one, where the printed formulas disagree with the definition (docs/findings.md):
//   streaming: masked hla2 (F1) and masked hla3 (F2);
//   scan:      masked hla2 (F3), ahla (F4) and masked hla3 (F2);
//   chunked:   masked hla2 (F5), ahla (F6).
enum class Form { published, corrected };

std::string_view form_name(Form f);
std::optional<Form> parse_form(std::string_view name);

bool has_corrected_form(const OperatorSpec& spec, Impl impl);

// The form that equals the reference: corrected where one exists, else published.
Form default_form(const OperatorSpec& spec, Impl impl);

// Throws hla::Error when `form` is corrected and the operator has none for `impl`.
void validate_form(const OperatorSpec& spec, Impl impl, Form form);

// Whether `impl` evaluates `spec` in `form` at all: the form exists, and the paper prints the
// published scan or chunk form for these options (see validate_scan, validate_chunked).
bool is_available(const OperatorSpec& spec, Impl impl, Form form);

}  // namespace hla::fast
