// hla: the command line. It only wires the toolkit's stages together.

#include <CLI/CLI.hpp>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "hla/bench/cpu.hpp"
#include "hla/cli/eval.hpp"
#include "hla/cli/npy.hpp"
#include "hla/proofs/ledger.hpp"
#include "hla/reports/audit.hpp"

namespace {

using namespace hla;

template <class Enum>
Enum parse_choice(const std::string& flag, const std::string& text, std::optional<Enum> parsed,
                  const std::string& choices) {
  if (!parsed) throw Error(flag + ": '" + text + "' is not one of " + choices);
  return *parsed;
}

void print_variants(std::ostream& out) {
  out << R"(variant  options                                       paper
linear   --normalize --eps --decay                     Sec. 2.2 (baseline)
hla2     --unmasked --normalize --eps --ridge --decay  Thm 3.1, Eqs. 3.1-3.4, Sec. 4, Alg. 1
ahla     --normalize --eps --decay                     Thm 6.1, Sec. 6.2, Alg. 2
hla3     --unmasked --normalize --eps --decay          Thm 7.1, Eqs. 7.1-7.7, Alg. 3-4
Without options a variant is the masked, unnormalized, undecayed operator.
--eps E (>= 0), --ridge L, --decay G in (0, 1]: decimals or p/q rationals, used exactly.

implementations (--impl)
  reference  the n x n definition, O(n^3 + n^2 d)
  streaming  the recurrence, O(d^2 + d dv) per token
  scan       two-level Blelloch scan of segment summaries, Alg. 1 and 4 (--chunk C, --threads T)
  chunked    chunk-parallel matrix form of Figures 1(C), 2(C): linear, hla2, ahla (--chunk, --threads)

forms (--form; the default is the one equal to the reference, docs/findings.md)
  published  the paper's formulas as printed
  corrected  streaming: masked hla2 (F1: decayed cross-summaries), masked hla3 (F2: Thm 7.1)
             scan: masked hla2 (F3: decayed Sec. 4.2), ahla (F4: decayed Sec. 6.2), masked hla3 (F2)
             chunked: masked hla2 (F5: Figure 1(C)), ahla (F6: Figure 2(C))
  The published third-order scan (Eqs. 7.6-7.7) is printed for gamma = 1 only, and Figures
  1(C) and 2(C) without decay or ridge.

scalars (--scalar): exact (GMP rationals), mpfr (261-bit MPFR), f64, f32, modp (Z/p, p = 2^61 - 1)
)";
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"hla: Higher-order Linear Attention verification and reference toolkit"};
  app.require_subcommand(1);

  std::string variant = "hla2", form, impl, scalar, eps = "0", ridge = "0", decay = "1";
  cli::EvalRequest request;
  bool unmasked = false;
  CLI::App* eval = app.add_subcommand("eval", "evaluate one operator on q, k, v from .npy files");
  eval->add_option("--variant", variant, "linear | hla2 | ahla | hla3")->required();
  eval->add_option("--form", form,
                   "published | corrected (streaming; default: the form equal to the reference)");
  eval->add_flag("--unmasked", unmasked, "the unmasked prefix form (hla2, hla3)");
  eval->add_flag("--normalize", request.spec.normalize, "divide by the masked denominator plus eps");
  eval->add_option("--eps", eps, "eps >= 0 (with --normalize)");
  eval->add_option("--ridge", ridge, "ridge lambda (hla2)");
  eval->add_option("--decay", decay, "decay gamma in (0, 1]");
  eval->add_option("--impl", impl, "reference | streaming | scan | chunked")->required();
  eval->add_option("--chunk", request.scan.chunk, "scan, chunked: tokens per chunk (default 64)");
  eval->add_option("--threads", request.scan.threads, "scan, chunked: threads (default 1)");
  eval->add_option("--scalar", scalar, "exact | mpfr | f64 | f32 | modp")->required();
  eval->add_option("--q", request.q_path, "queries [n, d], float64 or float32 .npy")->required();
  eval->add_option("--k", request.k_path, "keys [n, d]")->required();
  eval->add_option("--v", request.v_path, "values [n, dv]")->required();
  eval->add_option("--out", request.out_path, "output [n, dv]: float64, or uint64 residues for modp")
      ->required();

  app.add_subcommand("variants", "list variants, forms and options");

  reports::AuditOptions audit_options;
  CLI::App* audit = app.add_subcommand("audit", "exact audit of every implementation against the reference");
  audit->add_option("--cases", audit_options.cases, "random inputs per operator, form and scalar")
      ->check(CLI::Range(1, 1'000'000));
  audit->add_option("--seed", audit_options.seed, "seed of the random inputs");
  audit->add_option("--max-n", audit_options.max_n, "largest sequence length")->check(CLI::Range(0, 4096));

  proofs::LedgerOptions ledger_options;
  std::string ledger_json, ledger_markdown;
  CLI::App* proofs_cmd =
      app.add_subcommand("proofs", "the ledger: every checkable claim of the paper, checked");
  proofs_cmd
      ->add_option("--cases", ledger_options.cases,
                   "random exact cases per identity (Z/p: a tenth, at least 20)")
      ->check(CLI::Range(1, 1'000'000));
  proofs_cmd->add_option("--seed", ledger_options.seed, "seed of the random cases");
  proofs_cmd->add_option("--threads", ledger_options.threads, "claims checked at once")
      ->check(CLI::Range(1, 256));
  proofs_cmd->add_option("--json", ledger_json, "write the ledger as JSON to this file");
  proofs_cmd->add_option("--markdown", ledger_markdown, "write the ledger as markdown to this file");

  bench::CpuBenchOptions bench_options;
  std::string bench_variant = "hla2";
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  CLI::App* bench_cpu =
      bench->add_subcommand("cpu", "tokens/s of streaming and the chunked form on 1 and 2 threads");
  bench_cpu->add_option("--variant", bench_variant, "linear | hla2 | ahla (masked, float32)");
  bench_cpu->add_option("--n", bench_options.n, "sequence length");
  bench_cpu->add_option("--d", bench_options.d, "key dimension");
  bench_cpu->add_option("--dv", bench_options.dv, "value dimension");
  bench_cpu->add_option("--chunk", bench_options.chunk, "chunk size");
  bench_cpu->add_option("--repetitions", bench_options.repetitions, "timed repetitions (median reported)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "hla: " << e.what() << "\n";
    return 2;
  }

  try {
    if (app.got_subcommand("variants")) {
      print_variants(std::cout);
      return 0;
    }
    if (bench->got_subcommand("cpu")) {
      bench_options.variant =
          parse_choice("--variant", bench_variant, parse_variant(bench_variant), "linear, hla2, ahla");
      bench::run_cpu_bench(bench_options, std::cout);
      return 0;
    }
    if (app.got_subcommand("proofs")) {
      for (const std::string& path : {ledger_json, ledger_markdown}) {  // fail before the long run
        const std::filesystem::path parent = std::filesystem::path(path).parent_path();
        if (!path.empty() && !parent.empty() && !std::filesystem::is_directory(parent))
          throw Error(path + ": cannot create the output file (no such directory)");
      }
      ledger_options.field_cases = std::max(20, ledger_options.cases / 10);
      const auto entries = proofs::run_ledger(proofs::all_claims(), ledger_options, std::cerr);
      proofs::print_table(entries, std::cout);
      if (!ledger_json.empty()) {
        std::ostringstream json;
        proofs::write_json(entries, ledger_options, json);
        cli::write_atomically(ledger_json, json.str());
        std::cout << "JSON: " << ledger_json << "\n";
      }
      if (!ledger_markdown.empty()) {
        std::ostringstream markdown;
        proofs::write_markdown(entries, ledger_options, markdown);
        cli::write_atomically(ledger_markdown, markdown.str());
        std::cout << "markdown: " << ledger_markdown << "\n";
      }
      return 0;
    }
    if (app.got_subcommand("audit")) {
      const auto rows = reports::run_audit(audit_options, std::cerr);
      std::cout << "Exact audit: streaming and scan against the n x n reference, " << audit_options.cases
                << " random inputs per row (n <= " << audit_options.max_n
                << ", d, dv <= " << audit_options.max_d << ", seed " << audit_options.seed
                << "), compared with == in rationals and in Z/p\n\n";
      const bool as_expected = reports::print_audit(rows, std::cout);
      std::cout << "\n"
                << (as_expected
                        ? "Every default form equals the reference; every recorded finding reproduces."
                        : "FAILED: an implementation disagrees with the reference unexpectedly.")
                << "\n";
      return as_expected ? 0 : 1;
    }
    // eval
    request.spec.variant =
        parse_choice("--variant", variant, parse_variant(variant), "linear, hla2, ahla, hla3");
    request.spec.masked = !unmasked;
    request.spec.eps = parse_rational(eps, "--eps");
    request.spec.ridge = parse_rational(ridge, "--ridge");
    request.spec.decay = parse_rational(decay, "--decay");
    if (!form.empty())
      request.form = parse_choice("--form", form, fast::parse_form(form), "published, corrected");
    request.impl =
        parse_choice("--impl", impl, fast::parse_impl(impl), "reference, streaming, scan, chunked");
    request.scalar =
        parse_choice("--scalar", scalar, parse_scalar_kind(scalar), "exact, mpfr, f64, f32, modp");
    cli::run_eval(request);
    return 0;
  } catch (const Error& e) {
    std::cerr << "hla: " << e.what() << "\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "hla: internal error: " << e.what() << "\n";
    return 3;
  }
}
