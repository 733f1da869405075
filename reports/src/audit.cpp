#include "hla/reports/audit.hpp"

#include <algorithm>
#include <iomanip>
#include <ostream>

#include "hla/fast/chunked.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/random.hpp"
#if HLA_HAVE_CUDA
#include "hla/fast/gpu.hpp"
#endif

namespace hla::reports {
namespace {

// Every combination of options that the variant supports, with decay and ridge as flags.
std::vector<OperatorSpec> operator_grid() {
  std::vector<OperatorSpec> grid;
  for (const Variant variant : all_variants) {
    for (const bool masked : {true, false}) {
      if (!masked && !supports_unmasked(variant)) continue;
      for (const bool normalize : {false, true}) {
        for (const bool decayed : {false, true}) {
          for (const bool ridge : {false, true}) {
            if (ridge && !supports_ridge(variant)) continue;
            OperatorSpec spec;
            spec.variant = variant;
            spec.masked = masked;
            spec.normalize = normalize;
            spec.eps = normalize ? Rational(1, 8) : Rational(0);
            spec.ridge = ridge ? Rational(1, 2) : Rational(0);
            spec.decay = decayed ? Rational(1, 2) : Rational(1);
            grid.push_back(spec);
          }
        }
      }
    }
  }
  return grid;
}

template <class T>
bool agrees(const OperatorSpec& spec, fast::Implementation impl, fast::Form form,
            const fast::ScanOptions& scan, const Sequence<Rational>& exact) {
  using fast::Implementation;
  const Sequence<T> s = convert<T>(exact);
  const Terms<T> expected = reference::terms(spec, s);
  Terms<T> actual;
  if (impl == Implementation::scan) {
    actual = fast::scan_terms(spec, form, s, scan);
  } else if (impl == Implementation::chunked) {
    actual = fast::chunked_terms(spec, form, s, scan);
  } else if (impl == Implementation::streaming) {
    actual = fast::streaming_terms(spec, form, s);
  } else {
#if HLA_HAVE_CUDA
    if constexpr (std::is_same_v<T, ModP>)
      actual = fast::gpu::terms(spec, form, impl, {s}, scan.chunk).front();
#endif
  }
  return expected.num == actual.num && expected.den == actual.den;
}

// The GPU rows need a device; the catalogue says the rest.
bool runs_here(const OperatorSpec& spec, fast::Implementation impl, fast::Form form) {
  if (fast::unavailable(spec, impl, form)) return false;
#if HLA_HAVE_CUDA
  return !fast::on_gpu(impl) || !fast::gpu::unavailable_reason();
#else
  return !fast::on_gpu(impl);
#endif
}

// `text` padded to `width`, with at least one space after it.
std::string column(std::string_view text, std::size_t width) {
  return std::string(text) + std::string(text.size() < width ? width - text.size() : 1, ' ');
}

std::string options_text(const OperatorSpec& spec) {
  std::string s = spec.masked ? "masked" : "unmasked";
  if (spec.normalize) s += " normalized";
  if (spec.ridge != 0) s += " ridge";
  if (spec.decayed()) s += " decay";
  return s;
}

}  // namespace

std::vector<AuditRow> run_audit(const AuditOptions& options, std::ostream& progress) {
  using fast::Implementation;
  // The implementations under audit, the CPU ones first (the fast path computes in bf16).
  const Implementation audited[] = {Implementation::streaming, Implementation::scan, Implementation::chunked,
                                    Implementation::gpu_streaming, Implementation::gpu_scan};
  std::vector<AuditRow> rows;
  const std::vector<OperatorSpec> grid = operator_grid();
  for (std::size_t g = 0; g < grid.size(); ++g) {
    const OperatorSpec& base = grid[g];
    for (const fast::Implementation impl : audited) {
      for (const fast::Form form : {fast::Form::published, fast::Form::corrected}) {
        if (!runs_here(base, impl, form)) continue;
        const bool on_gpu = fast::on_gpu(impl);
        const fast::Finding* finding = fast::finding_for(base, impl, form);
        AuditRow row;
        row.spec = base;
        row.implementation = impl;
        row.form = form;
        row.finding = finding ? std::string(finding->id) : "";
        row.expected_equal = finding == nullptr;
        for (int c = 0; c < options.cases; ++c) {
          const std::uint64_t case_seed = options.seed * 1'000'003 + g * 1'009 + c;
          Rng rng(case_seed);
          OperatorSpec spec = base;
          if (base.decayed()) {
            do spec.decay = random_decay(rng);
            while (spec.decay == 1);
          }
          const Index n = rng.uniform(0, options.max_n);
          const Index d = rng.uniform(1, options.max_d);
          const Index dv = rng.uniform(1, options.max_d);
          const Sequence<Rational> s =
              random_sequence(rng, n, d, dv, c % 2 ? EntryKind::dyadic : EntryKind::integer, 4);
          fast::ScanOptions scan;
          scan.chunk = rng.uniform(1, n + 2);
          scan.threads = static_cast<int>(rng.uniform(1, 2));
          const bool exact_ok = !on_gpu && agrees<Rational>(spec, impl, form, scan, s);
          const bool modp_ok = agrees<ModP>(spec, impl, form, scan, s);
          row.exact_agree += exact_ok;
          row.modp_agree += modp_ok;
          ++row.cases;
          if (((!exact_ok && !on_gpu) || !modp_ok) && row.first_difference.empty()) {
            row.first_difference = "n=" + std::to_string(n) + " d=" + std::to_string(d) +
                                   " dv=" + std::to_string(dv) + " gamma=" + format_rational(spec.decay) +
                                   " case-seed=" + std::to_string(case_seed);
          }
        }
        rows.push_back(row);
      }
    }
    progress << "audit: " << (g + 1) << "/" << grid.size() << " operators " << describe(base) << "\n";
  }
  return rows;
}

AuditVerdict print_audit(const std::vector<AuditRow>& rows, std::ostream& out) {
  AuditVerdict result;
  out << std::left << std::setw(8) << "variant" << std::setw(32) << "options" << std::setw(11) << "impl"
      << std::setw(11) << "form" << std::setw(11) << "exact ==" << std::setw(11) << "Z/p =="
      << "verdict\n";
  out << std::string(110, '-') << "\n";
  for (const AuditRow& r : rows) {
    const bool on_gpu = fast::on_gpu(r.implementation);
    const bool equal = (on_gpu || r.exact_agree == r.cases) && r.modp_agree == r.cases;
    std::string verdict;
    if (equal) {
      verdict = "equal to the reference";
    } else if (!r.expected_equal) {
      verdict = "differs: finding " + r.finding + " (docs/findings.md); first at " + r.first_difference;
    } else {
      verdict = "UNEXPECTED DIFFERENCE at " + r.first_difference;
      result.unexpected_difference = true;
    }
    if (equal && !r.expected_equal) {  // too few or too short inputs: not a failure of anything
      verdict = "equal in these cases; finding " + r.finding + " did not show (it needs larger inputs)";
      if (std::find(result.unreached.begin(), result.unreached.end(), r.finding) == result.unreached.end())
        result.unreached.push_back(r.finding);
    }
    out << std::left << std::setw(8) << variant_name(r.spec.variant) << std::setw(32) << options_text(r.spec)
        << column(fast::implementation_name(r.implementation), 11) << std::setw(11) << fast::form_name(r.form)
        << std::setw(11)
        << (on_gpu ? std::string("n/a") : std::to_string(r.exact_agree) + "/" + std::to_string(r.cases))
        << std::setw(11) << (std::to_string(r.modp_agree) + "/" + std::to_string(r.cases)) << verdict << "\n";
  }
  return result;
}

std::string audit_gpu_absent_reason() {
#if HLA_HAVE_CUDA
  if (const auto reason = fast::gpu::unavailable_reason()) return *reason;
  return "";
#else
  return "built without CUDA";
#endif
}

}  // namespace hla::reports
