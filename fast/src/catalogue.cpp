#include "hla/fast/catalogue.hpp"

#include <algorithm>
#include <string>

namespace hla::fast {
namespace {

using enum Implementation;

// What the fast path covers; its summary and its refusal say the same words.
constexpr std::string_view gpu_fast_coverage =
    "masked hla2, ahla and hla3 (F2's corrected summary), normalized or not, with --decay or hla2's --ridge "
    "(not both)";

bool affects(const Finding& f, Implementation impl) {
  return std::find(f.implementations.begin(), f.implementations.end(), cpu_twin(impl)) !=
         f.implementations.end();
}
bool concerns(const Finding& f, Variant v) {
  return std::find(f.variants.begin(), f.variants.end(), v) != f.variants.end();
}

// Findings name CPU implementations; a generic GPU kernel inherits its twin's (cpu_twin).
const std::vector<Finding> table{
    {.id = "F1",
     .summary = "Decayed hla2 cross-summaries",
     .place = "Sec. 4.3; Alg. 1 line 6",
     .variants = {Variant::hla2},
     .needs_decay = true,
     .implementations = {streaming},
     .ledger_ids = {"sec-4.3/num", "sec-4.3/den", "alg-1/decay"}},
    {.id = "F2",
     .summary = "Masked third-order streaming",
     .place = "Thm 7.1, Eqs. 7.1-7.3, Alg. 3; Eqs. 7.4-7.7, Alg. 4",
     .variants = {Variant::hla3},
     .implementations = {streaming, scan},
     .ledger_ids = {"thm-7.1/num", "thm-7.1/den", "thm-7.1/normalized", "alg-3", "alg-3/normalized",
                    "alg-3/decay", "alg-4", "alg-4/normalized"}},
    {.id = "F3",
     .summary = "Decay-aware masked scan operator for hla2",
     .place = "Sec. 4.2",
     .variants = {Variant::hla2},
     .needs_decay = true,
     .implementations = {scan},
     .ledger_ids = {"eq-4.1-decay/assoc", "thm-4.1/one-step-masked-decay", "thm-4.1/masked-decay",
                    "rem-4.2/two-level-decay", "sec-4.2-backward/masked-decay"},
     .fuzz_ids = {"eq-4.1-decay"}},
    {.id = "F4",
     .summary = "Decay-aware scan operator for AHLA",
     .place = "Sec. 6.2",
     .variants = {Variant::ahla},
     .needs_decay = true,
     .implementations = {scan},
     .ledger_ids = {"eq-6.2-decay/assoc", "sec-6.2/scan-decay", "sec-4.2-backward/ahla-decay"},
     .fuzz_ids = {"eq-6.2-decay"}},
    {.id = "F5",
     .summary = "Chunk-parallel output of Figure 1(C) (hla2)",
     .place = "Figure 1(C)",
     .variants = {Variant::hla2},
     .implementations = {chunked},
     .ledger_ids = {"fig-1c"}},
    {.id = "F6",
     .summary = "Chunk-parallel output of Figure 2(C) (AHLA)",
     .place = "Figure 2(C)",
     .variants = {Variant::ahla},
     .implementations = {chunked},
     .ledger_ids = {"fig-2c"}},
    {.id = "F7",
     .summary = "The stated cost of the chunk forms",
     .place = "Figures 1(C) and 2(C)",
     .variants = {Variant::hla2, Variant::ahla},
     .ledger_ids = {"fig-1c/time", "fig-2c/time"}},
    {.id = "F8",
     .summary = "Shapes and costs stated without dv",
     .place = "Sec. 3.1; Sec. 6.3; Sec. 9",
     .variants = {Variant::hla2, Variant::ahla},
     .ledger_ids = {"sec-3.1/shape", "sec-6.3/relation-costs", "conclusion/state", "conclusion/time"}},
    {.id = "F9",
     .summary = "Decay for the third-order scan",
     .place = "Sec. 7.3, last paragraph",
     .variants = {Variant::hla3},
     .needs_decay = true,
     .ledger_ids = {"sec-7.3/decay", "sec-7.3/decay-masked"}},
};

}  // namespace

std::span<const Finding> findings() {
  return table;
}

namespace {

using Spec = OperatorSpec;
using Dim = std::ptrdiff_t;

const Mistake mistake_table[] = {
    {"unmasked", "the unmasked prefix form (no causal mask inside the second-order weights)",
     [](const Spec& s, bool, Dim, Dim) {
       return s.masked && (s.variant == Variant::hla2 || s.variant == Variant::hla3);
     }},
    {"no-decay", "the operator without decay", [](const Spec& s, bool, Dim, Dim) { return s.decay != 1; }},
    {"decay-once",
     "G_t = g G_{t-1} + g k_t k_t^T C_{t-1} (and h): the decay of the cross-summaries applied once",
     [](const Spec& s, bool, Dim, Dim) { return s.variant == Variant::hla2 && s.masked && s.decay != 1; }},
    {"no-scale", "the queries not scaled", [](const Spec&, bool scaled, Dim, Dim) { return scaled; }},
    {"scale-twice", "the queries scaled twice", [](const Spec&, bool scaled, Dim, Dim) { return scaled; }},
    {"eps-policy", "the denominator under another --eps-policy",
     [](const Spec& s, bool, Dim, Dim) { return s.normalize; }},
    {"unnormalized", "the numerator alone (the division left out)",
     [](const Spec& s, bool, Dim, Dim) { return s.normalize; }},
    {"q-k-exchanged", "queries and keys exchanged (the keys scaled as queries)",
     [](const Spec&, bool, Dim, Dim) { return true; }},
    {"read-before-update",
     "each output read before its own token enters the summaries (a strict mask: token t does not attend to "
     "itself)",
     [](const Spec&, bool, Dim, Dim) { return true; }},
    {"one-token-late", "every output one token late (o_t = the operator's o_{t-1}, o_0 = 0)",
     [](const Spec&, bool, Dim, Dim) { return true; }},
    {"transposed-state",
     "the d x dv summaries read transposed, X q for q^T X (hla2: u C^T - q^T G^T; AHLA: "
     "(P q)^T and (E q)^T; d = dv)",
     [](const Spec& s, bool, Dim d, Dim dv) {
       return (s.variant == Variant::hla2 || s.variant == Variant::ahla) && d == dv && d > 1;
     }},
    {"other-operator", "the other second-order operator (AHLA, ((A A) . L) V, for hla2, or hla2 for AHLA)",
     [](const Spec& s, bool, Dim, Dim) {
       return (s.variant == Variant::hla2 && s.masked && s.ridge == 0) || s.variant == Variant::ahla;
     }},
};

const Mistake backward_mistake_table[] = {
    {"adjoint-late",
     "each token's dK and dV read from the adjoint state before its own readout's term enters it (the "
     "adjoint one step late)",
     [](const Spec&, bool, Dim, Dim) { return true; }},
    {"decay-outside-adjoint",
     "the decay applied outside the adjoint state's update, A_t = g (A_{t+1} + q_t dO_t^T) for "
     "g A_{t+1} + q_t dO_t^T (each readout's term decayed once too often)",
     [](const Spec& s, bool, Dim, Dim) { return s.decay != 1; }},
    {"cross-adjoint-dropped",
     "the adjoint of the cross-summaries G, h not carried back: each token's dG, dh from its own readout "
     "only",
     [](const Spec& s, bool, Dim, Dim) { return s.variant == Variant::hla2 && s.masked; }},
    {"den-adjoint-dropped",
     "the denominator treated as a constant: the adjoint of den, -(dO_t . num_t) / (den_t + eps)^2, left "
     "out",
     [](const Spec& s, bool, Dim, Dim) { return s.normalize; }},
};

}  // namespace

std::span<const Mistake> mistakes() {
  return mistake_table;
}

std::span<const Mistake> backward_mistakes() {
  return backward_mistake_table;
}

const Finding* finding_for(const OperatorSpec& spec, Implementation impl, Form form) {
  if (form != Form::published || !spec.masked) return nullptr;
  for (const Finding& f : table) {
    if (concerns(f, spec.variant) && affects(f, impl) && (!f.needs_decay || spec.decayed())) return &f;
  }
  return nullptr;
}

bool has_corrected_form(const OperatorSpec& spec, Implementation impl) {
  if (!spec.masked) return false;
  // The paper draws no chunk form for hla3: the toolkit's is built on F2's corrected summary.
  if (impl == chunked && spec.variant == Variant::hla3) return true;
  return std::any_of(table.begin(), table.end(),
                     [&](const Finding& f) { return concerns(f, spec.variant) && affects(f, impl); });
}

Form default_form(const OperatorSpec& spec, Implementation impl) {
  return has_corrected_form(spec, impl) ? Form::corrected : Form::published;
}

std::optional<std::string> unavailable(const OperatorSpec& spec, Implementation impl, Form form) {
  const bool hla3_printed_scan = spec.variant == Variant::hla3 && spec.masked && form == Form::published;
  if (form == Form::corrected && !has_corrected_form(spec, impl)) {
    return "--form corrected: " + describe(spec) + " has no corrected " +
           std::string(implementation_name(impl)) + " form; its published form equals the reference";
  }
  switch (impl) {
    case reference:
    case streaming:
    case gpu_streaming:
      return std::nullopt;
    case scan:
    case gpu_scan:
      if (hla3_printed_scan && spec.decayed()) {
        return "--form published: the third-order scan operator (Eqs. 7.6-7.7, Alg. 4) is printed for gamma "
               "= 1 "
               "only";
      }
      if (hla3_printed_scan && impl == gpu_scan) {
        return "--impl gpu-scan: the published third-order scan (Eqs. 7.6-7.7) keeps O(d^3 dv) maps per "
               "summary; the GPU scan has the corrected form (use --impl scan for the published one)";
      }
      return std::nullopt;
    case chunked:
      if (spec.variant == Variant::hla3 && !spec.masked) {
        return "--impl chunked: the third-order chunk form is the masked operator's (use --impl scan for "
               "--unmasked)";
      }
      if (spec.variant == Variant::hla3 && form == Form::published) {
        return "--form published: the paper draws no chunk-parallel matrix form for hla3; --form corrected "
               "(the default) is built on F2's corrected summary";
      }
      if (form == Form::published && spec.masked && spec.variant != Variant::linear &&
          (spec.decayed() || spec.ridge != 0)) {
        return std::string("--form published: Figure ") + (spec.variant == Variant::hla2 ? "1(C)" : "2(C)") +
               " prints the chunk form without decay or ridge";
      }
      return std::nullopt;
    case gpu_fast:
      if (spec.variant == Variant::linear || !spec.masked || (spec.ridge != 0 && spec.decayed())) {
        return "--impl gpu-fast: covers only " + std::string(gpu_fast_coverage);
      }
      return std::nullopt;
  }
  return "unknown implementation";
}

std::optional<std::string> ranks_unavailable(const OperatorSpec& spec, Implementation impl, Form form,
                                             bool backward) {
  if (auto why = unavailable(spec, impl, form)) return why;
  if (impl != scan && impl != gpu_scan && impl != gpu_fast)
    return "--ranks: the sequence splits across ranks by --impl scan (one thread a rank), gpu-scan and "
           "gpu-fast; --impl " +
           std::string(implementation_name(impl)) + " does not split it";
  if (const Finding* f = finding_for(spec, impl, form))
    return "--form published: the printed scan of " + describe(spec) +
           " is not the operator (docs/findings.md, " + std::string(f->id) +
           "), so split across ranks its result would depend on the slices; the corrected "
           "form splits";
  if (backward) return backward_unavailable(spec, impl, form);
  return std::nullopt;
}

std::optional<std::string> backward_unavailable(const OperatorSpec& spec, Implementation impl, Form form) {
  if (auto why = unavailable(spec, impl, form)) return why;
  if (impl == reference) return std::nullopt;
  // The chunk forms' backward is that of their own forward pass, published or corrected (Figures
  // 1(C) and 2(C) as printed carry with the corrected operator, so no bracketing question arises).
  if (impl == streaming || impl == gpu_streaming || impl == chunked) return std::nullopt;
  if (impl == scan) {
    // F3, F4: the printed decayed operators are not associative, so a scan's gradient would depend
    // on its bracketing; F2: the printed third-order scan's O(d^3 dv) maps have no adjoints here.
    if (const Finding* f = finding_for(spec, impl, form))
      return "--form published: the printed scan of " + describe(spec) + " is not the operator (docs/findings.md, " +
             std::string(f->id) + "); its backward is not built, the corrected form's is";
    return std::nullopt;
  }
  if (impl == gpu_scan) {
    // Each chunk's tokens go through the stream's backward from the chunk's carry
    // (fast/cuda/backward.cuh): the printed stream and the printed scan must be one operator.
    const Finding* f = finding_for(spec, streaming, form);
    if (!f) f = finding_for(spec, scan, form);
    if (f)
      return "--form published: the GPU scan's backward of " + describe(spec) +
             " runs each chunk through the stream from its carry, and the printed stream or scan is not "
             "the operator (docs/findings.md, " +
             std::string(f->id) + "); the corrected form's runs";
    return std::nullopt;
  }
  if (impl == gpu_fast) {
    if (spec.variant != Variant::hla3) return std::nullopt;
    return "--impl gpu-fast: the fast backward covers hla2 and ahla; hla3's gradients run by --impl chunked, "
           "streaming or the generic GPU kernels";
  }
  return "the backward of " + describe(spec) + " by " + std::string(implementation_name(impl)) +
         " is not built yet (docs/gradients.md)";
}

AlgebraId algebra_for(const OperatorSpec& spec, Implementation impl, Form form) {
  const Implementation strategy = cpu_twin(impl);
  switch (spec.variant) {
    case Variant::linear:
      return AlgebraId::linear;
    case Variant::hla2:
      return strategy == chunked && spec.masked && form == Form::corrected ? AlgebraId::hla2_moments
                                                                           : AlgebraId::hla2;
    case Variant::ahla:
      return AlgebraId::ahla;
    case Variant::hla3:
      if (form == Form::corrected) return AlgebraId::hla3;
      if (strategy == streaming) return AlgebraId::hla3_published_stream;
      return spec.masked ? AlgebraId::hla3_published_scan : AlgebraId::hla3;
  }
  throw Error("unknown variant");
}

void require_available(const OperatorSpec& spec, Implementation impl, Form form) {
  validate(spec);
  if (const auto reason = unavailable(spec, impl, form)) throw Error(*reason);
}

std::optional<std::string> unavailable(Implementation impl, ScalarKind scalar) {
  const std::string name(scalar_kind_name(scalar));
  if ((impl == gpu_streaming || impl == gpu_scan) &&
      (scalar == ScalarKind::exact || scalar == ScalarKind::mpfr)) {
    return "--impl " + std::string(implementation_name(impl)) + ": --scalar " + name +
           " has no GPU form; use f64, f32 or modp";
  }
  if (impl == gpu_fast && scalar != ScalarKind::f32) {
    return "--impl gpu-fast: computes with bf16 inputs and float32 sums; use --scalar f32 (the inputs are "
           "rounded "
           "to bf16)";
  }
  return std::nullopt;
}

std::string implementation_summary(Implementation impl) {
  switch (impl) {
    case reference:
      return "the n x n definition, O(n^3 + n^2 d)";
    case streaming:
      return "the recurrence, O(d^2 + d dv) per token";
    case scan:
      return "two-level Blelloch scan of segment summaries, Alg. 1 and 4 (--chunk C, --threads T); "
             "--ranks P or --slices L,L,...: the sequence split across ranks, one thread each "
             "(docs/ranks.md)";
    case chunked:
      return "chunk-parallel matrix form of Figures 1(C), 2(C): linear, hla2, ahla; masked hla3 by F2's "
             "summary (--chunk, --threads)";
    case gpu_streaming:
      return "CUDA streaming kernel, one thread block per sequence (f64, f32, modp)";
    case gpu_scan:
      return "CUDA chunk-parallel scan: chunk summaries, Blelloch scan, chunk outputs (--chunk; f64, f32, "
             "modp; also --impl gpu); --ranks or --slices: the sequence split across ranks simulated on "
             "this GPU (--grad too)";
    case gpu_fast:
      return "the fast path on Hopper's matrix units: " + std::string(gpu_fast_coverage) +
             ", d and dv multiples of " + std::to_string(fast_width_step) + " up to " +
             std::to_string(fast_width) +
             ", any n (the last chunk of 64 may be short); inputs rounded to bf16, sums in "
             "float32 (--scalar f32), outputs in float32 or, with --bf16-out, bf16; the forward up to " +
             std::to_string(fast_wide_width) +
             " (ahla's keys in one pass per value half, hla2's in two passes, hla3's in three, or for few "
             "heads composed of first-order causal products split into segments; hla2's and ahla's values "
             "alone wider by their halves); --grad too (hla2 and ahla; wider than " +
             std::to_string(fast_width) +
             " composed of first-order causal products); --ranks or --slices: the sequence split across "
             "ranks simulated on this GPU (up to " +
             std::to_string(fast_width) + "), every slice but the last one length, a multiple of 64";
  }
  return "?";
}

}  // namespace hla::fast
