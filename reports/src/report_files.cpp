// The report's files: data.csv and data.json (every cell), report.md (tables, plots, links), and
// the PNG plots drawn by reports/plot.py (matplotlib). Timings never enter these files, so the
// same seed gives the same bytes.

#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <map>
#include <ostream>
#include <set>
#include <sstream>

#include "hla/io/files.hpp"
#include "hla/io/interrupt.hpp"
#include "hla/reports/check.hpp"
#include "hla/reports/error_report.hpp"

namespace hla::reports {
namespace {

namespace fs = std::filesystem;

std::string number(double x) {
  if (std::isinf(x)) return x > 0 ? "inf" : "-inf";
  if (std::isnan(x)) return "nan";
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.4g", x);
  return buffer;
}

std::string json_number(double x) {
  return std::isfinite(x) ? number(x) : "null";
}

// "hla2/normalized" -> "hla2-normalized": a file name.
std::string file_stem(std::string name) {
  for (char& c : name)
    if (c == '/') c = '-';
  return name;
}

// Whether a row is of the report's own head (d, dv), not of one of its wide heads.
bool main_head(const Report& report, const ReportRow& r) {
  return r.d == report.options.d && r.dv == report.options.dv;
}

// Per operator and candidate: the worst of every cell, and the log-log slope of the largest
// normwise error against n (least squares over the lengths with a non-zero error).
struct Summary {
  double normwise_u = 0, componentwise_u = 0, test_ratio = 0, slope = NAN;
  long unbounded = 0, outputs = 0;
  std::uint64_t worst_seed = 0;
  std::string worst_where;
};

std::map<std::pair<std::string, std::string>, Summary> summarize(const Report& report,
                                                                 std::vector<std::string>& spec_order,
                                                                 Quantity quantity) {
  std::map<std::pair<std::string, std::string>, Summary> out;
  std::map<std::pair<std::string, std::string>, std::map<Index, double>> by_n;
  for (const ReportRow& r : report.rows) {
    if (!main_head(report, r) || r.quantity != quantity) continue;
    if (std::find(spec_order.begin(), spec_order.end(), r.spec) == spec_order.end())
      spec_order.push_back(r.spec);
    const auto key = std::make_pair(r.spec, r.implementation + " " + r.precision);
    Summary& s = out[key];
    if (r.metrics.normwise_u > s.normwise_u || s.worst_where.empty()) {
      s.normwise_u = std::max(s.normwise_u, r.metrics.normwise_u);
      s.worst_seed = r.worst_seed;
      s.worst_where = "gamma=" + r.decay + " " + r.family + " n=" + std::to_string(r.n) +
                      (r.chunk > 0 ? " C=" + std::to_string(r.chunk) : "");
    }
    s.componentwise_u = std::max(s.componentwise_u, r.metrics.componentwise_u);
    s.test_ratio = std::max(s.test_ratio, r.metrics.test_ratio);
    s.unbounded += r.metrics.unbounded;
    s.outputs += r.metrics.outputs;
    double& e = by_n[key][r.n];
    e = std::max(e, r.metrics.normwise_u);
  }
  for (auto& [key, s] : out) {
    double sx = 0, sy = 0, sxx = 0, sxy = 0;
    int m = 0;
    for (const auto& [n, e] : by_n[key]) {
      if (!(e > 0) || !std::isfinite(e)) continue;
      const double x = std::log2(static_cast<double>(n)), y = std::log2(e);
      sx += x, sy += y, sxx += x * x, sxy += x * y, ++m;
    }
    if (m >= 2) s.slope = (m * sxy - sx * sy) / (m * sxx - sx * sx);
  }
  return out;
}

void write_file(const fs::path& path, const std::string& text) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << text;
  out.flush();
  if (!out) throw Error(path.string() + ": cannot write the file");
}

// The first python that has matplotlib: Debian's /usr/bin/python3 (a python3 earlier on PATH may
// lack it), else python3 from PATH (e.g. a virtual environment that has it and a system one that
// does not); python3 from PATH when neither has it, so that the failure names the script.
std::string python() {
  for (const std::string candidate : {"/usr/bin/python3", "python3"}) {
    const int status = io::wait_child(io::start_child({candidate, "-c", "import matplotlib"}, "/dev/null"));
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) return candidate;
  }
  return "python3";
}

}  // namespace

std::string to_csv(const Report& report) {
  std::ostringstream out;
  out << "spec,decay,family,implementation,precision,quantity,u_bits,d,dv,n,chunk,normwise_u,componentwise_u,"
         "bound_normwise_u,test_ratio,min_den_ratio,unbounded,outputs,worst_seed\n";
  for (const ReportRow& r : report.rows) {
    out << r.spec << "," << r.decay << "," << r.family << "," << r.implementation << "," << r.precision << ","
        << quantity_name(r.quantity) << "," << r.unit_roundoff_bits << "," << r.d << "," << r.dv << "," << r.n
        << "," << r.chunk << "," << number(r.metrics.normwise_u) << "," << number(r.metrics.componentwise_u)
        << "," << number(r.metrics.bound_normwise_u) << "," << number(r.metrics.test_ratio) << ","
        << number(r.metrics.min_den_ratio) << "," << r.metrics.unbounded << "," << r.metrics.outputs << ","
        << r.worst_seed << "\n";
  }
  return out.str();
}

std::string to_json(const Report& report) {
  const ReportOptions& o = report.options;
  std::ostringstream out;
  out << "{\n  \"seed\": " << o.seed << ",\n  \"d\": " << o.d << ",\n  \"dv\": " << o.dv
      << ",\n  \"seeds_per_cell\": " << o.seeds << ",\n  \"n\": [";
  for (int e = o.min_log2_n; e <= o.max_log2_n; e += o.log2_n_step)
    out << (e > o.min_log2_n ? ", " : "") << (Index(1) << e);
  out << "],\n  \"chunks\": [";
  for (std::size_t i = 0; i < o.chunks.size(); ++i) out << (i ? ", " : "") << o.chunks[i];
  out << "],\n  \"backward_n\": [";
  for (int e = o.min_log2_n; e <= std::min(o.max_log2_n, o.backward_max_log2_n); e += o.log2_n_step)
    out << (e > o.min_log2_n ? ", " : "") << (Index(1) << e);
  out << "],\n  \"wide_heads\": [";
  for (std::size_t i = 0; i < o.wide_heads.size(); ++i)
    out << (i ? ", " : "") << "{\"d\": " << o.wide_heads[i].d
        << ", \"max_n\": " << (Index(1) << std::min(o.wide_heads[i].max_log2_n, o.max_log2_n)) << "}";
  out << "],\n  \"candidates\": [";
  for (std::size_t i = 0; i < report.candidate_names.size(); ++i)
    out << (i ? ", " : "") << "\"" << report.candidate_names[i] << "\"";
  out << "],\n  \"gpu_note\": \"" << report.gpu_note << "\",\n  \"rows\": [\n";
  for (std::size_t i = 0; i < report.rows.size(); ++i) {
    const ReportRow& r = report.rows[i];
    out << "    {\"spec\": \"" << r.spec << "\", \"decay\": \"" << r.decay << "\", \"family\": \"" << r.family
        << "\", \"implementation\": \"" << r.implementation << "\", \"precision\": \"" << r.precision
        << "\", \"quantity\": \"" << quantity_name(r.quantity) << "\", \"u_bits\": " << r.unit_roundoff_bits
        << ", \"d\": " << r.d << ", \"dv\": " << r.dv << ", \"n\": " << r.n << ", \"chunk\": " << r.chunk
        << ", \"normwise_u\": " << json_number(r.metrics.normwise_u)
        << ", \"componentwise_u\": " << json_number(r.metrics.componentwise_u)
        << ", \"bound_normwise_u\": " << json_number(r.metrics.bound_normwise_u)
        << ", \"test_ratio\": " << json_number(r.metrics.test_ratio)
        << ", \"min_den_ratio\": " << json_number(r.metrics.min_den_ratio)
        << ", \"unbounded\": " << r.metrics.unbounded << ", \"outputs\": " << r.metrics.outputs
        << ", \"worst_seed\": " << r.worst_seed << "}" << (i + 1 < report.rows.size() ? "," : "") << "\n";
  }
  out << "  ]\n}\n";
  return out.str();
}

namespace {

// The wide heads: per head size, operator and candidate, the worst test ratio and normwise error at
// each length run, and where the lengths stop.
std::string wide_heads_section(const Report& report) {
  const ReportOptions& o = report.options;
  if (o.wide_heads.empty()) return "";
  std::ostringstream out;
  out << "## The head sizes people use\n\n"
      << "d = dv =";
  const std::size_t heads = o.wide_heads.size();
  for (std::size_t i = 0; i < heads; ++i)
    out << (i == 0 ? " " : i + 1 < heads ? ", " : " and ") << o.wide_heads[i].d;
  out << ": ";
  for (std::size_t i = 0; i < o.wide_operators.size(); ++i) out << (i ? ", " : "") << o.wide_operators[i];
  out << " at gamma = 15/16 on gaussian inputs, one seed, every candidate, against the same 261-bit "
         "reference and within the same a-priori bounds (the verdict above covers them). The reference "
         "costs O(n d^2) per case in 261-bit arithmetic, so these cells stop early to keep the main job "
         "within 15 minutes on 2 cores:";
  for (std::size_t i = 0; i < o.wide_heads.size(); ++i) {
    const int longest = std::min(o.wide_heads[i].max_log2_n, o.max_log2_n);
    out << (i ? ";" : "") << " d = " << o.wide_heads[i].d << " up to n = " << (Index(1) << longest);
    if (longest < o.max_log2_n) out << " (the report's own head: n = " << (Index(1) << o.max_log2_n) << ")";
  }
  out << ". The third order (O(d^3) per token) is left out.\n\n"
      << "| d | operator | implementation | precision | n | normwise/u | test ratio |\n"
      << "|---|---|---|---|---|---|---|\n";
  // Worst over chunk sizes, per (d, operator, candidate, n), in the rows' order.
  std::map<std::tuple<Index, std::string, std::string, Index>, std::pair<double, double>> worst;
  std::vector<std::tuple<Index, std::string, std::string, Index>> order;
  for (const ReportRow& r : report.rows) {
    if (main_head(report, r) || r.quantity != Quantity::o) continue;
    const auto key = std::make_tuple(r.d, r.spec, r.implementation + " " + r.precision, r.n);
    auto [it, inserted] = worst.try_emplace(key, r.metrics.normwise_u, r.metrics.test_ratio);
    if (inserted) {
      order.push_back(key);
      continue;
    }
    it->second.first = std::max(it->second.first, r.metrics.normwise_u);
    it->second.second = std::max(it->second.second, r.metrics.test_ratio);
  }
  for (const auto& key : order) {
    const auto& [d, spec, candidate, n] = key;
    const auto space = candidate.find(' ');
    out << "| " << d << " | " << spec << " | " << candidate.substr(0, space) << " | "
        << candidate.substr(space + 1) << " | " << n << " | " << number(worst[key].first) << " | "
        << number(worst[key].second) << " |\n";
  }
  return out.str() + "\n";
}

std::string percent(long part, long whole) {
  return whole == 0 ? std::string("0") : number(100.0 * part / whole);
}

// One line of a summary table: operator, implementation, precision, [extra columns,] the metrics.
std::string summary_line(const std::string& spec, const std::string& candidate, const std::string& extra,
                         const Summary& s) {
  const auto space = candidate.find(' ');
  return "| " + spec + " | " + candidate.substr(0, space) + " | " + candidate.substr(space + 1) + " | " +
         extra + number(s.normwise_u) + " | " + number(s.componentwise_u) + " | " +
         (std::isnan(s.slope) ? std::string("-") : number(s.slope)) + " | " + number(s.test_ratio) +
         (s.unbounded > 0 ? " (" + percent(s.unbounded, s.outputs) + "% unbounded)" : std::string()) + " | " +
         s.worst_where + " | " + std::to_string(s.worst_seed) + " |\n";
}

// The backward rows: per operator, candidate and gradient, the worst over every cell.
std::string backward_section(const Report& report) {
  const ReportOptions& o = report.options;
  std::vector<std::string> specs;
  const Quantity gradients[3] = {Quantity::dq, Quantity::dk, Quantity::dv};
  std::map<std::pair<std::string, std::string>, Summary> summary[3];
  for (int p = 0; p < 3; ++p) summary[p] = summarize(report, specs, gradients[p]);
  if (specs.empty()) return "";
  std::ostringstream out;
  out << "## The backward: dQ, dK, dV\n\n"
      << "The gradients of <dO, O> for dO with N(0, 1) entries (a stream of each case's own seed, rounded to "
         "the "
         "inputs' format), at n = 2^"
      << o.min_log2_n << " .. 2^" << std::min(o.max_log2_n, o.backward_max_log2_n)
      << " for every decay, input family and seed above, each against the streaming backward in 261-bit MPFR "
         "on "
         "the same inputs and dO (a gradient depends on the tokens after it, so each length has its own "
         "run). "
         "The bound: gamma(K) x the backward's gauge, K and the gauge those of the backward itself (started "
         "from "
         "the adjoints of its readouts), plus, for the normalized operators, those adjoints' own error from "
         "the "
         "forward's through the division by den + eps (docs/error_report.md, \"The backward's bound\"). "
         "Worst over "
         "decays, input families, lengths, chunk sizes and seeds.\n\n"
      << "| operator | implementation | precision | gradient | normwise/u | componentwise/u | slope | test "
         "ratio | "
         "worst case | worst seed |\n|---|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& spec : specs)
    for (const std::string& candidate : report.candidate_names)
      for (int p = 0; p < 3; ++p) {
        const auto it = summary[p].find({spec, candidate});
        if (it != summary[p].end())
          out << summary_line(spec, candidate, std::string(quantity_name(gradients[p])) + " | ", it->second);
      }
  return out.str() + "\n";
}

}  // namespace

std::string to_markdown(const Report& report) {
  const ReportOptions& o = report.options;
  std::vector<std::string> specs;
  const auto summary = summarize(report, specs, Quantity::o);
  double worst_f64[2] = {0, 0}, worst_other[2] = {0, 0};       // O, the gradients
  long unbounded[2] = {0, 0}, normalized_outputs[2] = {0, 0};  // float64, float32 arithmetic
  for (const ReportRow& r : report.rows) {                     // every head
    const int i = r.unit_roundoff_bits == 53 ? 0 : 1;
    double& worst = (i == 0 ? worst_f64 : worst_other)[r.quantity == Quantity::o ? 0 : 1];
    worst = std::max(worst, r.metrics.test_ratio);
    unbounded[i] += r.metrics.unbounded;
    if (r.spec.find("normalized") != std::string::npos) normalized_outputs[i] += r.metrics.outputs;
  }
  std::ostringstream out;
  out << "# Rounding errors of every implementation\n\n"
      << "`hla report --seed " << o.seed << "`: d = " << o.d << ", dv = " << o.dv << ", n = 2^"
      << o.min_log2_n << ", 2^" << o.min_log2_n + o.log2_n_step << ", .., 2^" << o.max_log2_n
      << ", chunk sizes";
  for (const Index c : o.chunks) out << " " << c;
  out << ", " << o.seeds << " seeds per cell, decays 1, 15/16, 1/2. "
      << "The same seed gives the same files. Every cell, with its worst seed: [data.csv](data.csv), "
         "[data.json](data.json). Method, metrics and the derivation of the bounds: "
      << "[docs/error_report.md](" << o.docs_link << "/error_report.md).\n\n"
      << "The ledger of the paper's claims: "
      << (o.ledger_link.empty()
              ? "[docs/ledger.md](" + o.docs_link +
                    "/ledger.md) (this build has not written its own: `hla proofs "
                    "--markdown FILE`)"
              : "[ledger.md](" + o.ledger_link + ") (kept in the repository as [docs/ledger.md](" +
                    o.docs_link + "/ledger.md))")
      << "; the exact audit of every implementation against the reference: `hla audit`.\n\n";
  out << "## Verdict\n\n"
      << "- Largest float64 test ratio (error / a-priori bound): **" << number(worst_f64[0]) << "** for O, **"
      << number(worst_f64[1]) << "** for the gradients ("
      << (std::max(worst_f64[0], worst_f64[1]) <= 1 ? "every float64 error is within its bound"
                                                    : "A FLOAT64 ERROR EXCEEDS ITS BOUND")
      << ").\n"
      << "- Largest float32 / bf16-input test ratio: **" << number(worst_other[0]) << "** for O, **"
      << number(worst_other[1]) << "** for the gradients ("
      << (std::max(worst_other[0], worst_other[1]) <= 1 ? "within the bound" : "ABOVE THE BOUND") << ").\n"
      << "- Normalized outputs and gradients whose denominator bound does not exclude zero, so that no ratio "
         "is "
         "taken: "
      << percent(unbounded[0], normalized_outputs[0]) << "% in float64, "
      << percent(unbounded[1], normalized_outputs[1])
      << "% with float32 arithmetic (counted over every length, seed and cell).\n";
  // How errors grow with n, per implementation: the median slope over the unnormalized operators.
  std::map<std::string, std::vector<double>> slopes;
  for (const auto& [key, s] : summary) {
    if (key.first.find("normalized") == std::string::npos && !std::isnan(s.slope))
      slopes[key.second.substr(0, key.second.find(' '))].push_back(s.slope);
  }
  out << "- Growth with n (median log-log slope of the worst normwise error, unnormalized operators):";
  for (auto& [implementation, values] : slopes) {
    std::sort(values.begin(), values.end());
    out << " " << implementation << " " << number(values[values.size() / 2]) << ";";
  }
  out << " 0.5 is the sqrt(n) of a random walk of roundings, 0 a growth like log n or none.\n";
  if (!report.gpu_note.empty()) out << "- GPU rows: absent: " << report.gpu_note << ".\n";
  out << "\n## How it is measured\n\n"
      << "- Reference: streaming, proven equal to the n x n definition in exact arithmetic (ctest, `hla "
         "audit`), "
         "run in 261-bit MPFR on the same inputs; its own a-priori error (gamma_261(K) x gauge) is added to "
         "every bound.\n"
      << "- Inputs (per seed): `gaussian` q, k, v ~ N(0, 1/d) (every decay); `unit-keys` keys scaled to unit "
         "norm (gamma 1, 15/16); `drift` keys mu + N(0, 1/d) with |mu| = 1, so that the key moment grows "
         "like "
         "n mu mu^T (gamma 1); `cancel` (normalized operators only; gamma 1, 15/16) every odd token is minus "
         "the "
         "one before plus 2^-8 noise, so that den_t + eps nearly cancels (eps = 2^-10); the column "
         "min_den_ratio = min |den+eps|/gauge in data.csv shows how far. The inputs at length n are the "
         "first n "
         "tokens of the longest.\n"
      << "- Precisions: `float64` (u = 2^-53), `float32` (u = 2^-24) on inputs rounded to the format; "
         "`bf16-in/f32`: inputs rounded to bf16 (nearest, ties to even), arithmetic in float32 (u = 2^-24), "
         "the reference computed on the rounded inputs: it measures the accumulation error, not the input "
         "rounding. `bf16-in/bf16-mma` (`gpu-fast`, the fast path on the matrix units; masked hla2, ahla and "
         "hla3, normalized or not, any gamma; its backward hla2's and ahla's): bf16 inputs, operands rounded "
         "to bf16 "
         "for "
         "each matrix product, sums in float32, so u = 2^-8; d and dv padded with zero columns to multiples "
         "of 8 "
         "(denominators only when normalized).\n"
      << "- normwise/u: ||o_hat - o||_F / ||o||_F in units of u. componentwise/u: max over the entries of "
         "num "
         "and den of |error| / gauge in units of u, the gauge being the same algorithm run on |q|, |k|, |v| "
         "with "
         "subtractions turned into additions (the BLAS-style sum of absolute products). slope: least-squares "
         "slope of log2(worst normwise error) against log2(n). test ratio: max over outputs of |error| / "
         "a-priori bound, the bound being gamma(K) x gauge with K each output's rounding depth (normalized: "
         "propagated through the division); at most 1 when the bound holds.\n\n";
  out << "## Summary per operator and implementation\n\n"
      << "Worst over decays, input families, lengths, chunk sizes and seeds.\n\n"
      << "| operator | implementation | precision | normwise/u | componentwise/u | slope | test ratio | "
         "worst case "
         "| worst seed |\n|---|---|---|---|---|---|---|---|---|\n";
  for (const std::string& spec : specs) {
    for (const std::string& candidate : report.candidate_names) {
      const auto it = summary.find({spec, candidate});
      if (it != summary.end()) out << summary_line(spec, candidate, "", it->second);
    }
  }
  out << "\n## Error against n\n\n"
      << "Worst normwise relative error over decays, families, chunk sizes and seeds (solid), and the "
         "a-priori bound in the same norm (dashed), log-log.\n\n";
  for (const std::string& spec : specs)
    out << "### " << spec << "\n\n![" << spec << "](plots/" << file_stem(spec) << ".png)\n\n";
  out << backward_section(report);
  out << wide_heads_section(report);
  return out.str();
}

std::string default_plot_script() {
  return HLA_PLOT_SCRIPT;
}

std::string docs_dir() {
  return HLA_DOCS_DIR;
}

std::string relative_link(const std::string& target, const std::string& dir) {
  return fs::weakly_canonical(fs::absolute(target))
      .lexically_relative(fs::weakly_canonical(fs::absolute(dir)))
      .string();
}

ReportFiles write_report(const Report& report, const std::string& dir, const std::string& plot_script,
                         std::ostream& progress) {
  io::StagedDirectory staged("--out", dir);
  const fs::path& partial = staged.path();
  fs::create_directories(partial / "plots");
  write_file(partial / "data.csv", to_csv(report));
  write_file(partial / "data.json", to_json(report));
  progress << "report: drawing the plots\n" << std::flush;
  const std::vector<std::string> command{python(),
                                         plot_script,
                                         (partial / "data.csv").string(),
                                         (partial / "plots").string(),
                                         std::to_string(report.options.d),
                                         std::to_string(report.options.dv)};
  const int status = io::run_child(command);
  if (io::interrupted() == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
    throw Error("report: the plotting script failed: " + command[0] + " " + command[1] + " ...");
  write_file(partial / "report.md", to_markdown(report));
  staged.commit();
  return {(fs::path(dir) / "report.md").string()};
}

void write_check_report(const CheckResult& r, const CheckOptions& options, const std::string& dir,
                        std::ostream& progress) {
  io::StagedDirectory staged("--report", dir);
  const fs::path& partial = staged.path();
  std::ostringstream csv;
  csv << "token,worst_ratio,distance_units,own_distance_units\n" << std::setprecision(9);
  for (std::size_t t = 0; t < r.token_ratio.size(); ++t)
    csv << t << "," << r.token_ratio[t] << "," << r.token_distance_units[t] << ","
        << r.own_token_distance_units[t] << "\n";
  write_file(partial / "tokens.csv", csv.str());
  progress << "check: drawing the plot\n" << std::flush;
  const std::string script = (fs::path(HLA_PLOT_SCRIPT).parent_path() / "plot_check.py").string();
  const std::vector<std::string> command{
      python(),
      script,
      (partial / "tokens.csv").string(),
      (partial / "error.png").string(),
      r.own_name,
      std::string(format_name(options.output_format.value_or(options.precision)))};
  const int status = io::run_child(command);
  if (io::interrupted() == 0 && (!WIFEXITED(status) || WEXITSTATUS(status) != 0))
    throw Error("check: the plotting script failed: " + command[0] + " " + command[1] + " ...");
  std::ostringstream md;
  md << "# hla check\n\n```\n"
     << check_summary(r, options) << "```\n\n"
     << "The criteria: docs/check.md. Along the sequence, the worst error over its sound bound (at most "
        "1 within the bound) and the distance from the correctly rounded reference, beside the toolkit's "
     << r.own_name << " on the same inputs (data: tokens.csv):\n\n![error along the sequence](error.png)\n";
  if (!r.diagnosis.empty()) {
    md << "\n## Diagnosis (batch " << r.diagnosed.batch << ", head " << r.diagnosed.head
       << ")\n\nThe output's distance from each form, over the tight limit's base (a form matches at "
       << CheckResult::tight_factor << " or less):\n\n| form | distance | |\n|---|---|---|\n";
    for (const auto& d : r.diagnosis)
      md << "| `" << d.id << "` | " << std::setprecision(3) << d.ratio << " | " << d.description << " |\n";
  }
  write_file(partial / "check.md", md.str());
  staged.commit();
}

}  // namespace hla::reports
