#pragma once

// The hla command line: every subcommand and option, parsed, and converted into the toolkit's
// requests. Parsing runs nothing; main() dispatches on the result. Exposed for tests and fuzzing.

#include <CLI/CLI.hpp>
#include <string>

#include "hla/bench/cpu.hpp"
#include "hla/cli/check.hpp"
#include "hla/cli/eval.hpp"
#include "hla/cli/fuzz.hpp"
#include "hla/proofs/options.hpp"
#include "hla/reports/options.hpp"

namespace hla::cli {

struct CommandLine {
  CommandLine();
  CommandLine(const CommandLine&) = delete;
  CommandLine& operator=(const CommandLine&) = delete;

  // hla eval's options as a request. Throws hla::Error naming the flag whose value is invalid.
  EvalRequest eval_request() const;
  // hla bench cpu's options. Throws hla::Error for an unknown variant.
  bench::CpuBenchOptions bench_request() const;

  CLI::App app{"hla: Higher-order Linear Attention verification and reference toolkit"};
  CLI::App *eval, *audit, *proofs, *fuzz, *bench, *bench_cpu;

  // eval, as typed; eval_request() converts them
  std::string variant = "hla2", form, impl, scalar, eps = "0", ridge = "0", decay = "1";
  bool unmasked = false;
  EvalRequest request;

  // hla check's options as a request. Throws hla::Error naming the flag whose value is invalid.
  CheckRequest check_request() const;
  CLI::App* check = nullptr;
  struct {
    std::string variant = "hla2", eps = "0", ridge = "0", decay = "1", scale = "1", eps_policy = "add",
                layout = "nd", precision, output_dtype, algorithm = "any", criterion = "tight",
                device = "auto";
    bool unmasked = false, normalize = false, progress = false;
    CheckRequest request;
  } check_args;

  reports::AuditOptions audit_options;
  // hla report's options. Throws hla::Error naming the flag whose value is invalid.
  reports::ReportOptions report_request() const;
  CLI::App* report = nullptr;
  reports::ReportOptions report_options;
  std::string report_out = "build/report", report_ledger = "build/ledger.md";
  bool report_quick = false;
  Index report_max_n = 0;  // 0: 2^16, or 2^12 with --quick
  Index report_backward_max_n = -1;  // -1: 2^10, or 2^8 with --quick; 0: no backward rows
  proofs::LedgerOptions ledger_options;
  std::string ledger_json, ledger_markdown;
  FuzzOptions fuzz_options;
  bool fuzz_list = false;
  bench::CpuBenchOptions bench_options;
  std::string bench_variant = "hla2";
  std::string bench_pass = "forward";
};

// The one line hla prints for a parse error: CLI11's, or for an unknown subcommand one that names
// the word typed and the subcommands.
std::string parse_error_message(const CommandLine& command, int argc, const char* const* argv,
                                const CLI::ParseError& error);

}  // namespace hla::cli
