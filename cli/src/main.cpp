// hla: the command line. It only wires the toolkit's stages together.

#include <CLI/CLI.hpp>
#include <algorithm>
#include <filesystem>
#include <iomanip>
#include <iostream>
#include <sstream>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

#include "hla/bench/cpu.hpp"
#include "hla/cli/command.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/io/files.hpp"
#include "hla/io/interrupt.hpp"
#include "hla/proofs/ledger.hpp"
#include "hla/reports/audit.hpp"
#include "hla/reports/error_report.hpp"

namespace {

using namespace hla;

void print_variants(std::ostream& out) {
  out << R"(variant  options                                       paper
linear   --normalize --eps --decay                     Sec. 2.2 (baseline)
hla2     --unmasked --normalize --eps --ridge --decay  Thm 3.1, Eqs. 3.1-3.4, Sec. 4, Alg. 1
ahla     --normalize --eps --decay                     Thm 6.1, Sec. 6.2, Alg. 2
hla3     --unmasked --normalize --eps --decay          Thm 7.1, Eqs. 7.1-7.7, Alg. 3-4
Without options a variant is the masked, unnormalized, undecayed operator.
--eps E (>= 0), --ridge L, --decay G in (0, 1]: decimals or p/q rationals, used exactly.

implementations (--impl)
)";
  for (const fast::Implementation impl : fast::all_implementations) {
    out << "  " << std::left << std::setw(15) << fast::implementation_name(impl)
        << fast::implementation_summary(impl) << "\n";
  }
  out << R"(
forms (--form; the default is the one equal to the reference)
  published  the paper's formulas as printed
  corrected  where a finding below applies (docs/findings.md)
  The published third-order scan (Eqs. 7.6-7.7) is printed for gamma = 1 only, and Figures
  1(C) and 2(C) without decay or ridge.

findings (docs/findings.md)
)";
  for (const fast::Finding& f : fast::findings()) {
    std::string where;  // the implementations and the GPU kernels that compute their formulas
    for (const fast::Implementation impl : fast::all_implementations) {
      if (std::find(f.implementations.begin(), f.implementations.end(), fast::cpu_twin(impl)) ==
          f.implementations.end())
        continue;
      where += (where.empty() ? "" : ", ") + std::string(fast::implementation_name(impl));
    }
    out << "  " << f.id << "  " << f.summary << " (" << f.place
        << "): " << (where.empty() ? "a cost statement" : where) << (f.needs_decay ? ", with decay" : "")
        << "\n";
  }
  out << "\nscalars (--scalar): exact (GMP rationals), mpfr (261-bit MPFR), f64, f32, modp (Z/p, p = 2^61 - "
         "1)\n";
}

}  // namespace

int main(int argc, char** argv) {
#if defined(__GLIBC__)
  // Each heap growth keeps 64 MiB more than asked: the chunked forms' per-chunk temporaries on
  // several threads otherwise make glibc shrink and regrow the threads' heaps, page-faulting
  // under one lock (the chunked backward ran no faster on 2 threads than on 1: docs/perf.md).
  mallopt(M_TOP_PAD, 64 << 20);
#endif
  io::install_interrupt_handling();
  cli::CommandLine command;
  CLI::App& app = command.app;
  try {
    app.parse(argc, argv);
  } catch (const CLI::CallForHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForAllHelp& e) {
    return app.exit(e);
  } catch (const CLI::CallForVersion& e) {
    return app.exit(e);
  } catch (const CLI::ParseError& e) {
    std::cerr << "hla: " << cli::parse_error_message(command, argc, argv, e) << "\n";
    return 2;
  }

  try {
    if (app.got_subcommand("variants")) {
      print_variants(std::cout);
      return 0;
    }
    if (command.bench->got_subcommand("cpu")) {
      bench::run_cpu_bench(command.bench_request(), std::cout);
      return 0;
    }
    if (app.got_subcommand("fuzz")) {
      try {
        if (command.fuzz_list) {
          cli::list_fuzz_operators(std::cout);
          return 0;
        }
        if (!command.fuzz_options.explain.empty())
          return cli::explain_fuzz_input(command.fuzz_options, std::cout);
        if (command.fuzz_options.operator_id.empty())
          throw Error("hla fuzz: give --operator NAME, --explain FILE or --list");
        return cli::run_fuzz(command.fuzz_options, std::cout, std::cerr);
      } catch (const Error& e) {
        std::cerr << "hla: " << e.what() << "\n";
        return 2;
      }
    }
    if (app.got_subcommand("check")) {
      try {
        return cli::run_check(command.check_request(), std::cout);
      } catch (const Error& e) {
        std::cerr << "hla: " << e.what() << "\n";
        return 2;
      }
    }
    if (app.got_subcommand("proofs")) {
      std::vector<io::NamedPath> outputs;  // checked before the long run
      if (!command.ledger_json.empty()) outputs.push_back({"--json", command.ledger_json});
      if (!command.ledger_markdown.empty()) outputs.push_back({"--markdown", command.ledger_markdown});
      io::check_outputs(outputs);
      command.ledger_options.field_cases = std::max(20, command.ledger_options.cases / 10);
      const auto entries = proofs::run_ledger(proofs::all_claims(), command.ledger_options, std::cerr);
      proofs::print_table(entries, std::cout);
      if (!command.ledger_json.empty()) {
        std::ostringstream json;
        proofs::write_json(entries, command.ledger_options, json);
        io::write_output(command.ledger_json, json.str());
        std::cout << "JSON: " << command.ledger_json << "\n";
      }
      if (!command.ledger_markdown.empty()) {
        std::ostringstream markdown;
        proofs::write_markdown(entries, command.ledger_options, markdown);
        io::write_output(command.ledger_markdown, markdown.str());
        std::cout << "markdown: " << command.ledger_markdown << "\n";
      }
      return 0;
    }
    if (app.got_subcommand("report")) {
      reports::ReportOptions options = command.report_request();
      reports::validate(options);
      io::check_output_directory("--out", command.report_out);  // before anything runs
      // Links from report.md to the ledger and docs/, relative to its directory (resolved here,
      // not in the parser, which the CLI fuzzer links without the report's files).
      if (std::filesystem::is_regular_file(command.report_ledger)) {
        options.ledger_link = reports::relative_link(command.report_ledger, command.report_out);
      } else if (command.report->count("--ledger") > 0) {
        throw Error("--ledger: " + command.report_ledger +
                    ": no such file (hla proofs --markdown FILE writes it)");
      } else {
        options.ledger_link.clear();
      }
      options.docs_link = reports::relative_link(reports::docs_dir(), command.report_out);
      std::vector<reports::Candidate> candidates = reports::cpu_candidates();
      for (reports::Candidate& c : reports::gpu_candidates()) candidates.push_back(std::move(c));
      reports::Report report = reports::run_report(options, candidates, std::cerr);
      report.gpu_note = reports::gpu_candidates().empty() ? reports::gpu_candidates_absent_reason() : "";
      const auto files =
          reports::write_report(report, command.report_out, reports::default_plot_script(), std::cerr);
      std::cout << files.report_md << "\n";
      return 0;
    }
    if (app.got_subcommand("audit")) {
      const auto rows = reports::run_audit(command.audit_options, std::cerr);
      std::cout << "Exact audit: streaming and scan against the n x n reference, "
                << command.audit_options.cases
                << " random inputs per row (n <= " << command.audit_options.max_n
                << ", d, dv <= " << command.audit_options.max_d << ", seed " << command.audit_options.seed
                << "), compared with == in rationals and in Z/p\n";
      const std::string gpu_absent = reports::audit_gpu_absent_reason();
      std::cout << (gpu_absent.empty() ? std::string("GPU rows (gpu-streaming, gpu-scan): in Z/p only\n\n")
                                       : "GPU rows: absent (" + gpu_absent + ")\n\n");
      const reports::AuditVerdict verdict = reports::print_audit(rows, std::cout);
      std::string unreached;
      for (const std::string& f : verdict.unreached) unreached += (unreached.empty() ? "" : ", ") + f;
      std::cout << "\n";
      if (verdict.unexpected_difference) {
        std::cout << "FAILED: an implementation disagrees with the reference unexpectedly.\n";
      } else if (!unreached.empty()) {
        std::cout << "Every default form equals the reference; finding"
                  << (verdict.unreached.size() > 1 ? "s " : " ") << unreached
                  << " did not show with n <= " << command.audit_options.max_n << " and "
                  << command.audit_options.cases
                  << " cases (not a failure: the defaults, --max-n 16 --cases 50, show every finding).\n";
      } else {
        std::cout << "Every default form equals the reference; every recorded finding reproduces.\n";
      }
      return verdict.unexpected_difference ? 1 : 0;
    }
    // eval
    cli::run_eval(command.eval_request());
    return 0;
  } catch (const Error& e) {
    std::cerr << "hla: " << e.what() << "\n";
    return 1;
  } catch (const std::bad_alloc&) {
    std::cerr << "hla: out of memory: the problem does not fit in this machine's memory; try a smaller n\n";
    return 1;
  } catch (const std::exception& e) {
    std::cerr << "hla: internal error: " << e.what() << "\n";
    return 3;
  }
}
