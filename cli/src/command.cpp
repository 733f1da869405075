#include "hla/cli/command.hpp"

#include <charconv>
#include <iostream>
#include <cstdint>

namespace hla::cli {
namespace {

// A seed: a decimal integer from 0 to 2^64 - 1, nothing else (no sign, no wrap-around).
const CLI::Validator seed_check(
    [](std::string& text) -> std::string {
      std::uint64_t value = 0;
      const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
      if (text.empty() || error != std::errc() || end != text.data() + text.size())
        return "'" + text + "' is not a seed: an integer from 0 to 18446744073709551615";
      return "";
    },
    "SEED");

template <class Enum>
Enum parse_choice(const std::string& flag, const std::string& text, std::optional<Enum> parsed,
                  const std::string& choices) {
  if (!parsed) throw Error(flag + ": '" + text + "' is not one of " + choices);
  return *parsed;
}

// "reference, streaming, ..., gpu-fast", each implementation's name once.
std::string implementation_choices(const std::string& separator) {
  std::string out;
  for (const fast::Implementation i : fast::all_implementations) {
    out += (out.empty() ? "" : separator) + std::string(fast::implementation_name(i));
  }
  return out;
}

}  // namespace

CommandLine::CommandLine() {
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("hla ") + HLA_VERSION);

  eval = app.add_subcommand("eval", "evaluate one operator on q, k, v from .npy files");
  eval->add_option("--variant", variant, "linear | hla2 | ahla | hla3")->required();
  eval->add_option("--form", form, "published | corrected (default: the form equal to the reference)");
  eval->add_flag("--unmasked", unmasked, "the unmasked prefix form (hla2, hla3)");
  eval->add_flag("--normalize", request.spec.normalize, "divide by the masked denominator plus eps");
  eval->add_option("--eps", eps, "eps >= 0 (with --normalize)");
  eval->add_option("--ridge", ridge, "ridge lambda (hla2)");
  eval->add_option("--decay", decay, "decay gamma in (0, 1]");
  eval->add_option("--impl", impl, implementation_choices(" | "))->required();
  eval->add_option("--chunk", request.scan.chunk, "scan, chunked: tokens per chunk (default 64)");
  eval->add_option("--threads", request.scan.threads, "scan, chunked: threads (default 1)")
      ->check(CLI::Range(1, fast::max_threads));
  eval->add_option(
      "--ranks", request.ranks,
      "scan, gpu-scan, gpu-fast: split the sequence across P ranks (one thread each; on the GPU "
      "simulated on one device), slices of ceil(n / P) tokens, with --grad too (gpu-fast: hla2 and ahla; "
      "its slices but the last must be one length, a multiple of 64 tokens; docs/ranks.md)");
  eval->add_option("--slices", request.slices,
                   "scan, gpu-scan, gpu-fast: split the sequence in slices of these lengths, one a rank")
      ->delimiter(',');
  eval->add_option("--scalar", scalar, "exact | mpfr | f64 | f32 | modp")->required();
  eval->add_flag("--bf16-out", request.bf16_out, "gpu-fast: the outputs in bf16, as its kernels write them");
  eval->add_option("--q", request.q_path, "queries [n, d], float64 or float32 .npy")->required();
  eval->add_option("--k", request.k_path, "keys [n, d]")->required();
  eval->add_option("--v", request.v_path, "values [n, dv]")->required();
  eval->add_option("--out", request.out_path, "output [n, dv]: float64, or uint64 residues for modp")
      ->required();
  eval->add_option("--grad", request.grad_path,
                   "dO [n, dv]: also the gradients of <dO, O> (every --impl, within what `hla variants` "
                   "says; docs/gradients.md)");
  eval->add_option("--out-dq", request.dq_path, "with --grad: dQ [n, d]");
  eval->add_option("--out-dk", request.dk_path, "with --grad: dK [n, d]");
  eval->add_option("--out-dv", request.dv_path, "with --grad: dV [n, dv]");

  check = app.add_subcommand("check", "check a kernel's output against the exact operator (docs/check.md)");
  auto& c = check_args;
  check->add_option("--variant", c.variant, "linear | hla2 | ahla | hla3")->required();
  check->add_flag("--unmasked", c.unmasked, "the unmasked prefix form (hla2, hla3)");
  check->add_flag("--normalize", c.normalize, "divide by the masked denominator (see --eps-policy)");
  check->add_option("--eps", c.eps, "eps >= 0 (with --normalize)");
  check->add_option("--ridge", c.ridge, "ridge lambda (hla2)");
  check->add_option("--decay", c.decay, "decay gamma in (0, 1]");
  check->add_option("--scale", c.scale, "multiplies the queries first (FLA's default is d^-1/2)");
  check->add_option(
      "--eps-policy", c.eps_policy,
      "add: den + eps (the paper's) | signed-clamp: sign(den) max(|den|, eps) | clamp: max(den, eps)");
  check->add_option("--q", c.request.q_path, "queries, .npy (float64, float32 or float16)")->required();
  check->add_option("--k", c.request.k_path, "keys")->required();
  check->add_option("--v", c.request.v_path, "values (more heads than q and k: grouped queries)")->required();
  check->add_option("--o", c.request.o_path, "the kernel's output, shaped as the values");
  check->add_option("--grad", c.request.grad_path,
                    "dO, shaped as the values: check the kernel's gradients of <dO, O> (--dq, --dk, --dv)");
  check->add_option("--dq", c.request.dq_path, "with --grad: the kernel's dQ, shaped as the queries");
  check->add_option("--dk", c.request.dk_path, "with --grad: the kernel's dK, shaped as the keys");
  check->add_option("--dv", c.request.dv_path, "with --grad: the kernel's dV, shaped as the values");
  check->add_option("--layout", c.layout, "nd: [n, d], one head | bthd: [B, T, H, D] | bhtd: [B, H, T, D]");
  check->add_option("--precision", c.precision, "the inputs' format: f64 | f32 | bf16 | f16")->required();
  check->add_option("--output-dtype", c.output_dtype, "the output's format (default: --precision)");
  check->add_option("--algorithm", c.algorithm,
                    "the bound of: any (the loosest) | streaming | scan | chunked");
  check->add_option("--chunk", c.request.options.chunk,
                    "chunk size of the chunk-parallel bounds (default 64)");
  check->add_option("--criterion", c.criterion, "tight (default: sound and tight) | sound");
  check->add_option("--threads", c.request.options.threads, "heads checked at once (default: all cores)");
  check->add_flag("--progress", c.progress, "tell each phase and its seconds on stderr");
  check->add_option("--device", c.device,
                    "where the reference and the own runs take place: auto (the GPU where it can) | cpu | gpu");
  check->add_option("--json", c.request.json_path, "write the result as JSON");
  check->add_option("--report", c.request.report_dir,
                    "write check.md with a plot of the error along the sequence");

  app.add_subcommand("variants", "list variants, forms and options");

  audit = app.add_subcommand("audit", "exact audit of every implementation against the reference");
  audit->add_option("--cases", audit_options.cases, "random inputs per operator, form and scalar")
      ->check(CLI::Range(1, 1'000'000));
  audit->add_option("--seed", audit_options.seed, "seed of the random inputs")->check(seed_check);
  audit->add_option("--max-n", audit_options.max_n, "largest sequence length")->check(CLI::Range(0, 4096));

  report = app.add_subcommand("report",
                              "rounding errors of every implementation and precision (docs/error_report.md)");
  report->add_flag("--quick", report_quick, "n up to 4096 instead of 65536");
  report->add_option("--out", report_out,
                     "directory of report.md, data.csv, data.json, plots/ (default build/report)");
  report->add_option("--seed", report_options.seed, "seed of the random inputs")->check(seed_check);
  report->add_option("--seeds", report_options.seeds, "inputs per cell (default 2)")
      ->check(CLI::Range(1, 100));
  report->add_option("--threads", report_options.threads, "cases run at once (default: all cores)")
      ->check(CLI::Range(1, 256));
  report->add_option("--ledger", report_ledger, "the ledger that report.md links (default build/ledger.md)");
  report->add_option("--operator", report_options.operators,
                     "only these operators (e.g. hla2/normalized; repeatable)");
  report->add_option("--max-n", report_max_n, "longest sequence: 64, 256, 1024, 4096, 16384 or 65536");
  report
      ->add_option("--backward-max-n", report_backward_max_n,
                   "longest sequence of the backward rows: 0 (none), 64, 256 (with --quick), 1024 (default), "
                   "4096, 16384 or 65536")
      ->check(CLI::NonNegativeNumber);

  proofs = app.add_subcommand("proofs", "the ledger: every checkable claim of the paper, checked");
  proofs
      ->add_option("--cases", ledger_options.cases,
                   "random exact cases per identity (Z/p: a tenth, at least 20)")
      ->check(CLI::Range(1, 1'000'000));
  proofs->add_option("--seed", ledger_options.seed, "seed of the random cases")->check(seed_check);
  proofs->add_option("--threads", ledger_options.threads, "claims checked at once")
      ->check(CLI::Range(1, 256));
  proofs->add_option("--json", ledger_json, "write the ledger as JSON to this file");
  proofs->add_option("--markdown", ledger_markdown, "write the ledger as markdown to this file");

  fuzz = app.add_subcommand(
      "fuzz", "fuzz the laws of a scan operator (exit 0: none violated, 1: a violation, 2: error)");
  fuzz->add_flag("--list", fuzz_list, "name the operators");
  fuzz->add_option("--operator", fuzz_options.operator_id, "the operator (an id of hla fuzz --list)");
  fuzz->add_option("--seconds", fuzz_options.seconds, "length of the campaign (default 60)");
  fuzz->add_option("--jobs", fuzz_options.jobs, "fuzzer processes (default 1)")->check(CLI::Range(1, 256));
  fuzz->add_option("--corpus", fuzz_options.corpus, "start from and add to this corpus directory");
  fuzz->add_option("--explain", fuzz_options.explain, "decode a saved input and check it");

  bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  bench_cpu = bench->add_subcommand(
      "cpu", "tokens/s of streaming and the chunked form on 1 and 2 threads, forward or backward");
  bench_cpu->add_option("--variant", bench_variant, "linear | hla2 | ahla (masked, float32)");
  bench_cpu->add_option("--n", bench_options.n, "sequence length");
  bench_cpu->add_option("--d", bench_options.d, "key dimension");
  bench_cpu->add_option("--dv", bench_options.dv, "value dimension");
  bench_cpu->add_option("--chunk", bench_options.chunk, "chunk size");
  bench_cpu->add_option("--repetitions", bench_options.repetitions, "timed repetitions (median reported)");
  bench_cpu->add_option("--pass", bench_pass, "forward (O) | backward (the gradients of <dO, O>, and O)");
}

EvalRequest CommandLine::eval_request() const {
  EvalRequest out = request;
  out.spec.variant = parse_choice("--variant", variant, parse_variant(variant), "linear, hla2, ahla, hla3");
  out.spec.masked = !unmasked;
  out.spec.eps = parse_rational(eps, "--eps");
  out.spec.ridge = parse_rational(ridge, "--ridge");
  out.spec.decay = parse_rational(decay, "--decay");
  if (!form.empty()) out.form = parse_choice("--form", form, fast::parse_form(form), "published, corrected");
  out.impl = parse_choice("--impl", impl, fast::parse_implementation(impl), implementation_choices(", "));
  out.scalar = parse_choice("--scalar", scalar, parse_scalar_kind(scalar), "exact, mpfr, f64, f32, modp");
  if (eval->count("--ranks") > 0) fast::validate_ranks(out.ranks);  // --ranks 0 is refused, not "unsplit"
  return out;
}

CheckRequest CommandLine::check_request() const {
  const auto& c = check_args;
  CheckRequest out = c.request;
  OperatorSpec& spec = out.options.spec;
  spec.variant = parse_choice("--variant", c.variant, parse_variant(c.variant), "linear, hla2, ahla, hla3");
  spec.masked = !c.unmasked;
  spec.normalize = c.normalize;
  spec.eps = parse_rational(c.eps, "--eps");
  spec.ridge = parse_rational(c.ridge, "--ridge");
  spec.decay = parse_rational(c.decay, "--decay");
  validate(spec);
  out.options.scale = to_double(parse_rational(c.scale, "--scale"));
  if (!(out.options.scale > 0)) throw Error("--scale: must be positive");
  out.options.eps_policy = reports::parse_eps_policy(c.eps_policy);
  out.options.precision = reports::parse_format(c.precision, "--precision");
  if (!c.output_dtype.empty())
    out.options.output_format = reports::parse_format(c.output_dtype, "--output-dtype");
  if (c.algorithm != "any") {
    const auto impl = fast::parse_implementation(c.algorithm);
    if (!impl || (*impl != fast::Implementation::streaming && *impl != fast::Implementation::scan &&
                  *impl != fast::Implementation::chunked))
      throw Error("--algorithm: '" + c.algorithm + "' is not one of any, streaming, scan, chunked");
    out.options.algorithm = impl;
  }
  out.options.criterion = reports::parse_criterion(c.criterion);
  out.options.device = reports::parse_device(c.device);
  if (c.progress) out.options.progress = [](const std::string& line) { std::cerr << "hla check: " << line << "\n"; };
  out.layout = reports::parse_layout(c.layout);
  const bool any_gradient = !out.dq_path.empty() || !out.dk_path.empty() || !out.dv_path.empty();
  if (!out.grad_path.empty() && (out.dq_path.empty() || out.dk_path.empty() || out.dv_path.empty()))
    throw Error("--grad: needs --dq, --dk and --dv, the kernel's gradients");
  if (out.grad_path.empty() && any_gradient) throw Error("--dq, --dk, --dv: need --grad, the dO they are for");
  if (out.o_path.empty() && out.grad_path.empty())
    throw Error("check: --o (the output) or --grad with --dq, --dk, --dv (the gradients) is required");
  if (!out.report_dir.empty() && out.o_path.empty()) throw Error("--report: draws the output's check; give --o");
  if (out.options.chunk < 1) throw Error("--chunk: must be at least 1");
  if (out.options.threads < 0 || out.options.threads > fast::max_threads)
    throw Error("--threads: from 0 (all cores) to " + std::to_string(fast::max_threads));
  return out;
}

reports::ReportOptions CommandLine::report_request() const {
  reports::ReportOptions out = report_options;
  const Index max_n = report_max_n != 0 ? report_max_n : Index(report_quick ? 1 << 12 : 1 << 16);
  out.max_log2_n = -1;
  for (int e = 6; e <= 16; e += 2) {
    if (max_n == Index(1) << e) out.max_log2_n = e;
  }
  if (out.max_log2_n < 0)
    throw Error("--max-n: " + std::to_string(max_n) + " is not one of 64, 256, 1024, 4096, 16384, 65536");
  const Index backward_max_n =
      report_backward_max_n >= 0 ? report_backward_max_n : Index(report_quick ? 1 << 8 : 1 << 10);
  out.backward_max_log2_n = backward_max_n == 0 ? 0 : -1;
  for (int e = 6; e <= 16; e += 2) {
    if (backward_max_n == Index(1) << e) out.backward_max_log2_n = e;
  }
  if (out.backward_max_log2_n < 0)
    throw Error("--backward-max-n: " + std::to_string(backward_max_n) +
                " is not one of 0, 64, 256, 1024, 4096, 16384, 65536");
  if (report_out.empty()) throw Error("--out: an empty directory name");
  return out;
}

std::string parse_error_message(const CommandLine& command, int argc, const char* const* argv,
                                const CLI::ParseError& error) {
  const CLI::App& app = command.app;
  std::string names;
  bool known = false;
  for (const CLI::App* sub : app.get_subcommands(std::function<bool(const CLI::App*)>())) {
    names += (names.empty() ? "" : ", ") + sub->get_name();
    known = known || (argc > 1 && sub->get_name() == argv[1]);
  }
  if (argc > 1 && argv[1][0] != '-' && !known)
    return "'" + std::string(argv[1]) + "' is not a subcommand; they are " + names;
  return error.what();
}

bench::CpuBenchOptions CommandLine::bench_request() const {
  bench::CpuBenchOptions out = bench_options;
  out.variant = parse_choice("--variant", bench_variant, parse_variant(bench_variant), "linear, hla2, ahla");
  const std::optional<bool> backward = bench_pass == "forward"    ? std::optional<bool>(false)
                                       : bench_pass == "backward" ? std::optional<bool>(true)
                                                                  : std::nullopt;
  out.backward = parse_choice("--pass", bench_pass, backward, "forward, backward");
  return out;
}

}  // namespace hla::cli
