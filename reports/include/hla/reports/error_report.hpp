#pragma once

// hla report: the rounding error of every implementation in every precision against a
// high-precision reference, on realistic inputs, with the metrics of numerical analysis
// (docs/error_report.md describes each).

#include <array>
#include <cstdint>
#include <iosfwd>
#include <string>
#include <vector>

#include "hla/reference/operator_spec.hpp"
#include "hla/reports/candidates.hpp"
#include "hla/reports/options.hpp"

namespace hla::reports {

// Input families (docs/error_report.md): Gaussian q, k, v / sqrt(d); unit-norm keys; keys with a common
// drift, so that the key moment grows like n; antithetic token pairs, so that the normalized
// denominators nearly cancel (normalized variants only).
enum class Family { gaussian, unit_keys, drift, cancel };
std::string_view family_name(Family family);

// One operator with its options, as the report names it ("hla2/normalized").
struct ReportSpec {
  std::string name;
  OperatorSpec spec;
};
std::vector<ReportSpec> report_specs();
std::vector<Rational> report_decays();  // 1, 15/16, 1/2: exact in every precision

// Which families run at which decay: Gaussian at every decay; unit keys and near-cancelling
// denominators (normalized operators only) at 1 and 15/16; the growing key moment at 1 only,
// since a decay bounds it.
bool family_applies(Family family, const OperatorSpec& spec, const Rational& decay);

// One case: an operator, a decay, an input family and a seed index; its inputs are derived from
// the report seed and this identity only, so results do not depend on the thread count.
struct ReportCase {
  std::size_t spec_index;
  Rational decay;
  Family family;
  int seed_index;
  std::uint64_t input_seed;
  Index d = 0, dv = 0;  // the head: the report's d and dv, or one of its wide heads
  int max_log2_n = 0;   // its longest length
  bool backward = false;  // its backward rows too (the report's own head)
};

// Inputs of one case at length n, before rounding to the candidates' formats.
Sequence<double> case_inputs(const ReportCase& c, Index n, Index d, Index dv);
// The upstream gradient dO of its backward rows: N(0, 1) entries, its own stream of the case's seed.
Matrix<double> case_upstream(const ReportCase& c, Index n, Index dv);

// The metrics of one case on one candidate at one n and chunk; in a row of data.csv, the worst
// over seeds.
struct CellMetrics {
  double normwise_u = 0;        // ||o_hat - o||_F / ||o||_F / u (a row: max over seeds)
  double componentwise_u = 0;   // max over entries of num, den of |err| / gauge / u
  double bound_normwise_u = 0;  // the a-priori bound, normwise: ||bound||_F / ||o||_F / u (a row: worst seed)
  double test_ratio = 0;        // max over outputs of |err| / bound (<= 1 when the bound holds)
  double min_den_ratio = 0;     // normalized: min over t of |den_t + eps| / (gauge_den_t + eps); else 0
  long unbounded = 0;           // outputs whose denominator bound does not exclude zero (no ratio taken),
  long outputs = 0;             // out of this many (a row: summed over seeds)
};

// What a row measures: the output O, or a gradient of <dO, O> (the backward rows).
enum class Quantity { o, dq, dk, dv };
std::string_view quantity_name(Quantity q);  // "O", "dQ", "dK", "dV"

// One row of data.csv: a cell (operator, decay, family, candidate, quantity, n, chunk), worst over seeds.
struct ReportRow {
  std::string spec, decay, family, implementation, precision;
  Quantity quantity = Quantity::o;
  int unit_roundoff_bits = 0;
  Index d = 0, dv = 0;
  Index n = 0, chunk = 0;  // chunk 0: not chunked
  CellMetrics metrics;
  std::uint64_t worst_seed = 0;  // input seed of the largest normwise error
};

struct Report {
  ReportOptions options;
  std::vector<ReportRow> rows;
  std::vector<std::string> candidate_names;  // "streaming float64", ...
  std::string gpu_note;                      // why GPU rows are absent, or empty
};

// Throws hla::Error naming what is wrong with the options (lengths, seeds, chunks, operators).
void validate(const ReportOptions& options);

// Runs every case on every candidate (after validate); progress lines go to `progress`.
Report run_report(const ReportOptions& options, const std::vector<Candidate>& candidates,
                  std::ostream& progress);

// The metrics of one case on one candidate at one n and chunk, against a reference computed in
// MPFR (261 bits) by streaming; exposed for the tests.
CellMetrics measure(const OperatorSpec& spec, const Candidate& candidate, const Sequence<double>& inputs,
                    const Terms<Mpfr>& reference, Index chunk);
// The same for the backward: dQ, dK, dV's metrics against the gradients `reference` (from
// reference_gradients, or exact ones), within the backward's bound (docs/error_report.md).
std::array<CellMetrics, 3> measure_backward(const OperatorSpec& spec, const Candidate& candidate,
                                            const Sequence<double>& inputs, const Matrix<double>& d_out,
                                            const Gradients<Mpfr>& reference, Index chunk);

// The files: data.csv, data.json, report.md (which links `ledger_link`), plots/*.png through
// the plotting script. Assembled beside `dir` and swapped in when complete (io::StagedDirectory),
// so that a failed or interrupted run leaves the previous report as it was.
// @pre io::check_output_directory("--out", dir) passed
struct ReportFiles {
  std::string report_md;  // path of report.md
};
ReportFiles write_report(const Report& report, const std::string& dir, const std::string& plot_script,
                         std::ostream& progress);

// reports/plot.py and docs/ in the source tree.
std::string default_plot_script();
std::string docs_dir();

// `target` as a relative link from directory `dir` (both as given on the command line).
std::string relative_link(const std::string& target, const std::string& dir);

std::string to_csv(const Report& report);
std::string to_json(const Report& report);
std::string to_markdown(const Report& report);

}  // namespace hla::reports
