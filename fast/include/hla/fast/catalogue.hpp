#pragma once

// What exists where: which implementation evaluates which operator in which form, and where the
// paper's printed formulas disagree with the definition (docs/findings.md). Every consumer (the
// drivers' preconditions, `hla variants` and `hla eval`, the audit, the error report, the fuzz
// registry, the tests and benchmarks) asks here; nothing else decides it.

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "hla/fast/algebra/select.hpp"
#include "hla/fast/implementation.hpp"
#include "hla/reference/operator_spec.hpp"
#include "hla/reference/scalar.hpp"

namespace hla::fast {

// One place where the paper's printed formulas disagree with the operator they define.
struct Finding {
  std::string_view id;       // "F1"
  std::string_view summary;  // one line, as docs/findings.md heads it
  std::string_view place;    // in the paper
  std::vector<Variant> variants;
  bool needs_decay;                             // shows only for gamma < 1
  std::vector<Implementation> implementations;  // whose published form it affects (none: a cost claim)
  std::vector<std::string_view> ledger_ids;     // the ledger entries it fails
  std::vector<std::string_view> fuzz_ids;       // the fuzz operators whose laws it breaks
};

// F1-F9, in docs/findings.md's order.
std::span<const Finding> findings();

// The common implementation mistakes that hla check's diagnosis tries beside the printed forms
// (docs/check.md): each an id, one sentence and where it applies. `eps-policy` stands for one
// entry per other normalization policy (`eps-policy-clamp`, ...), `other-operator` for `ahla` in
// an hla2 check and `hla2` in an AHLA one.
struct Mistake {
  std::string_view id;
  std::string_view description;
  // Whether it differs from the operator, and can be computed, for spec on heads of d key and dv
  // value features, with the queries scaled or not.
  bool (*applies)(const OperatorSpec& spec, bool scaled, std::ptrdiff_t d, std::ptrdiff_t dv);
};
std::span<const Mistake> mistakes();
// The backward mistakes that hla check --grad's diagnosis tries (docs/check.md "Gradients"), each
// computed as the streaming backward with one token step changed (reports/src/check_grad.cpp).
std::span<const Mistake> backward_mistakes();

// The finding that makes `impl` in `form` differ from the reference on `spec`, or nullptr.
// Every finding concerns a masked operator (ahla is always masked).
const Finding* finding_for(const OperatorSpec& spec, Implementation impl, Form form);

// Whether `impl` has a corrected form for spec's variant and mask: some finding affects it.
bool has_corrected_form(const OperatorSpec& spec, Implementation impl);

// The form that equals the reference: corrected where one exists, else published.
Form default_form(const OperatorSpec& spec, Implementation impl);

// Why `impl` cannot evaluate `spec` in `form`, as one line that names the flag to change, or
// nullopt when it can. Whether this machine has a usable GPU is asked of gpu::unavailable_reason().
// @pre validate(spec) passed
std::optional<std::string> unavailable(const OperatorSpec& spec, Implementation impl, Form form);

// validate(spec), then throws hla::Error with unavailable()'s reason.
void require_available(const OperatorSpec& spec, Implementation impl, Form form);

// Why `impl` has no backward (the gradients of <dO, O>, docs/gradients.md) for spec in `form`,
// as one line, or nullopt when it has: the reference (by reverse mode on the matrix forms), the
// streaming forms (CPU and GPU) and the chunk forms, published and corrected, and the scan forms but
// the printed ones a finding affects. Includes unavailable()'s reasons.
std::optional<std::string> backward_unavailable(const OperatorSpec& spec, Implementation impl, Form form);

// Why `impl` cannot evaluate spec in `form` with the sequence split across ranks (ranks.hpp; the
// forward, or with `backward` its gradients too), as one line, or nullopt when it can: the CPU scan,
// one thread a rank, and the generic GPU scan (gpu.hpp, rank_terms and rank_gradients), forward and
// backward, and the fast path (rank_fast_forward, rank_fast_backward), in the forms that are the operator (a
// printed form that a finding affects is not, and its result would depend on where the slices start).
// Includes unavailable()'s and, with `backward`, backward_unavailable()'s reasons.
std::optional<std::string> ranks_unavailable(const OperatorSpec& spec, Implementation impl, Form form,
                                             bool backward = false);

// The algebra that `impl` runs for `spec` in `form`: the one map from (operator, form, strategy)
// to code; each strategy lists its type for each AlgebraId (fast/algebra/select.hpp).
AlgebraId algebra_for(const OperatorSpec& spec, Implementation impl, Form form);

// require_available, then the algebra and its parameters in T.
template <class T>
AlgebraParams<T> algebra_params(const OperatorSpec& spec, Implementation impl, Form form, std::ptrdiff_t d,
                                std::ptrdiff_t dv) {
  require_available(spec, impl, form);
  return {algebra_for(spec, impl, form),
          static_cast<int>(d),
          static_cast<int>(dv),
          from_rational<T>(spec.decay),
          from_rational<T>(spec.ridge),
          spec.masked,
          form};
}

// The head sizes the fast path (Implementation::gpu_fast) takes: d and dv multiples of fast_width_step
// up to fast_width. Its tiles are fast_width wide; a narrower head's rows are read padded with zeros by
// the copy engine (whose rows are whole 16-byte pieces), which changes no sum or product, so such a
// head costs the products of d = dv = 64.
constexpr int fast_width = 64, fast_width_step = 8;
constexpr bool fast_covers_width(std::ptrdiff_t d) {
  return d >= fast_width_step && d <= fast_width && d % fast_width_step == 0;
}
// Heads wider than the tiles, d or dv up to fast_wide_width (multiples of fast_width_step): the forward
// without checkpoints, by the 64-column halves (ahla's value halves in one pass, hla2's in two, hla3's
// in three: tensor_core.cu, launch_value_halves, launch_hla2_halves, launch_hla3_halves; for few heads
// composed of causal products split into segments, launch_wide_forward); not ranks.
constexpr int fast_wide_width = 2 * fast_width;
constexpr bool fast_covers_wide_width(std::ptrdiff_t d) {
  return d >= fast_width_step && d <= fast_wide_width && d % fast_width_step == 0;
}

// Why `impl` does not compute in `scalar`, or nullopt.
std::optional<std::string> unavailable(Implementation impl, ScalarKind scalar);

// One line per implementation for `hla variants`: what it is and what it covers.
std::string implementation_summary(Implementation impl);

}  // namespace hla::fast
