#include "hla/reports/error_report.hpp"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <exception>
#include <map>
#include <mutex>
#include <ostream>
#include <sstream>
#include <thread>

#include "hla/fast/streaming.hpp"
#include "hla/reference/random.hpp"
#include "hla/reports/backward_bound.hpp"

namespace hla::reports {
// The reference's number type: 261-bit MPFR (as hla::Mpfr) with its limbs inside the object,
// which spares an allocation per temporary.
using ReferenceFloat = boost::multiprecision::number<
    boost::multiprecision::mpfr_float_backend<78, boost::multiprecision::allocate_stack>,
    boost::multiprecision::et_off>;
}  // namespace hla::reports

// The operators' constants (gamma, eps, ridge) are dyadic here: exact in double, hence in 261 bits.
template <>
hla::reports::ReferenceFloat hla::from_rational<hla::reports::ReferenceFloat>(const Rational& x) {
  const double value = to_double(x);
  if (Rational(value) != x) throw Error("report: the constant " + format_rational(x) + " is not a double");
  return hla::reports::ReferenceFloat(value);
}

namespace hla::reports {

std::string_view family_name(Family family) {
  switch (family) {
    case Family::gaussian:
      return "gaussian";
    case Family::unit_keys:
      return "unit-keys";
    case Family::drift:
      return "drift";
    case Family::cancel:
      return "cancel";
  }
  return "?";
}

std::string_view quantity_name(Quantity q) {
  switch (q) {
    case Quantity::o:
      return "O";
    case Quantity::dq:
      return "dQ";
    case Quantity::dk:
      return "dK";
    case Quantity::dv:
      return "dV";
  }
  return "?";
}

std::vector<ReportSpec> report_specs() {
  const auto make = [](Variant v, bool masked, bool normalize, Rational ridge) {
    OperatorSpec s;
    s.variant = v;
    s.masked = masked;
    s.normalize = normalize;
    s.eps = normalize ? Rational(1, 1024) : Rational(0);
    s.ridge = ridge;
    return s;
  };
  return {
      {"linear", make(Variant::linear, true, false, 0)},
      {"linear/normalized", make(Variant::linear, true, true, 0)},
      {"hla2", make(Variant::hla2, true, false, 0)},
      {"hla2/unmasked", make(Variant::hla2, false, false, 0)},
      {"hla2/normalized", make(Variant::hla2, true, true, 0)},
      {"hla2/ridge", make(Variant::hla2, true, false, Rational(1, 2))},
      {"ahla", make(Variant::ahla, true, false, 0)},
      {"ahla/normalized", make(Variant::ahla, true, true, 0)},
      {"hla3", make(Variant::hla3, true, false, 0)},
      {"hla3/unmasked", make(Variant::hla3, false, false, 0)},
      {"hla3/normalized", make(Variant::hla3, true, true, 0)},
  };
}

std::vector<Rational> report_decays() {
  return {Rational(1), Rational(15, 16), Rational(1, 2)};
}

namespace {

std::uint64_t mix(std::uint64_t h, std::string_view text) {
  return splitmix64(fnv1a(text, h));
}

}  // namespace

Sequence<double> case_inputs(const ReportCase& c, Index n, Index d, Index dv) {
  Rng rng(c.input_seed);
  const double scale = 1 / std::sqrt(static_cast<double>(d));
  const auto gaussian_row = [&](Index width, double factor) {
    RowVector<double> row(width);
    for (Index i = 0; i < width; ++i) row(i) = rng.gaussian() * factor;
    return row;
  };
  // The drift direction, drawn first so that every prefix sees the same one.
  RowVector<double> drift = gaussian_row(d, 1);
  drift /= drift.norm();
  Sequence<double> s{Matrix<double>(n, d), Matrix<double>(n, d), Matrix<double>(n, dv)};
  for (Index t = 0; t < n; ++t) {
    s.q.row(t) = gaussian_row(d, scale);
    s.k.row(t) = gaussian_row(d, scale);
    s.v.row(t) = gaussian_row(dv, scale);
    switch (c.family) {
      case Family::gaussian:
        break;
      case Family::unit_keys:
        s.k.row(t) /= s.k.row(t).norm();
        break;
      case Family::drift:  // k_t = mu + noise: the key moment grows like t mu mu^T
        s.k.row(t) += drift;
        break;
      case Family::cancel:  // each odd token nearly undoes the one before it
        if (t % 2 == 1) {
          s.q.row(t) = -s.q.row(t - 1) + s.q.row(t) / 256;
          s.k.row(t) = -s.k.row(t - 1) + s.k.row(t) / 256;
        }
        break;
    }
  }
  return s;
}

Matrix<double> case_upstream(const ReportCase& c, Index n, Index dv) {
  Rng rng(mix(c.input_seed, "upstream"));
  Matrix<double> out(n, dv);
  for (Index t = 0; t < n; ++t)
    for (Index j = 0; j < dv; ++j) out(t, j) = rng.gaussian();
  return out;
}

bool family_applies(Family family, const OperatorSpec& spec, const Rational& decay) {
  switch (family) {
    case Family::gaussian:
      return true;
    case Family::unit_keys:
      return decay != Rational(1, 2);
    case Family::drift:  // the key moment grows like n only without decay
      return decay == 1;
    case Family::cancel:
      return spec.normalize && decay != Rational(1, 2);
  }
  return false;
}

namespace {

double relative_u(double error, double reference, int bits) {
  return reference == 0 ? (error == 0 ? 0 : INFINITY) : std::ldexp(error / reference, bits);
}

Sequence<double> rounded(const Sequence<double>& s, InputFormat format) {
  const auto r = [format](double x) { return round_input(format, x); };
  return {s.q.unaryExpr(r), s.k.unaryExpr(r), s.v.unaryExpr(r)};
}

Sequence<double> prefix(const Sequence<double>& s, Index n) {
  return {s.q.topRows(n), s.k.topRows(n), s.v.topRows(n)};
}

// The reference on exactly representable inputs: streaming (proven equal to the n x n definition
// in exact arithmetic by the test suite and hla audit) in 261-bit MPFR.
Terms<ReferenceFloat> mpfr_reference(const OperatorSpec& spec, const Sequence<double>& s) {
  using R = ReferenceFloat;
  const Sequence<R> exact{s.q.cast<R>(), s.k.cast<R>(), s.v.cast<R>()};
  return fast::streaming_terms(spec, fast::default_form(spec, fast::Implementation::streaming), exact);
}

// The reference as double-double pairs (hi + lo, |lo| <= ulp(hi) / 2): an error |x - hi - lo| is
// then computed to within a relative 2^-52 of itself, in double.
struct DoubleDouble {
  Matrix<double> hi, lo;
  explicit DoubleDouble(Index rows, Index cols) : hi(rows, cols), lo(rows, cols) {}
  template <class R>
  void set(Index r, Index c, const R& x) {
    hi(r, c) = static_cast<double>(x);  // to nearest
    lo(r, c) = static_cast<double>(R(x - R(hi(r, c))));
  }
  double error(Index r, Index c, double computed) const { return std::abs((computed - hi(r, c)) - lo(r, c)); }
};

struct Exact {
  DoubleDouble num, den, out;  // den is n x 1; out = num / (den + eps) when normalized, else num
  Vector<double> divisor;      // |den + eps|
  template <class R>
  Exact(const OperatorSpec& spec, const Terms<R>& t)
      : num(t.num.rows(), t.num.cols()),
        den(t.num.rows(), 1),
        out(t.num.rows(), t.num.cols()),
        divisor(t.num.rows()) {
    const R eps = from_rational<R>(spec.eps);
    for (Index r = 0; r < t.num.rows(); ++r) {
      den.set(r, 0, t.den(r));
      const R d = t.den(r) + eps;
      divisor(r) = std::abs(static_cast<double>(d));
      for (Index c = 0; c < t.num.cols(); ++c) {
        num.set(r, c, t.num(r, c));
        out.set(r, c, spec.normalize ? R(t.num(r, c) / d) : t.num(r, c));
      }
    }
  }
};

// Metrics over the first n tokens. `run` and `depth` hold at least n rows.
CellMetrics metrics(const OperatorSpec& spec, int bits, const CandidateRun& run, const Depths& depth,
                    const Exact& reference, const Terms<double>& reference_error, Index n) {
  const Index dv = run.terms.num.cols();
  const double u = std::ldexp(1.0, -bits);
  const Terms<double> gauge = gauge_upper_bound({run.gauge.num.topRows(n), run.gauge.den.head(n)},
                                                {depth.num.topRows(n), depth.den.head(n)});
  const double eps = to_double(spec.eps);
  CellMetrics m;
  m.min_den_ratio = spec.normalize ? INFINITY : 0;
  double error_sq = 0, reference_sq = 0, bound_sq = 0;
  for (Index t = 0; t < n; ++t) {
    // num and den against their gauges
    if (run.has_den) {
      const double den_error = reference.den.error(t, 0, run.terms.den(t));
      m.componentwise_u = std::max(m.componentwise_u, relative_u(den_error, gauge.den(t), bits));
    }
    // den_hat + eps: one more rounding, and eps one more summand
    const double den_bound =
        gamma_bound(depth.den(t) + 1, bits) * (gauge.den(t) + eps) + reference_error.den(t);
    const double d_abs = reference.divisor(t);
    if (spec.normalize) m.min_den_ratio = std::min(m.min_den_ratio, d_abs / (gauge.den(t) + eps));
    for (Index c = 0; c < dv; ++c) {
      const double num_error = reference.num.error(t, c, run.terms.num(t, c));
      m.componentwise_u = std::max(m.componentwise_u, relative_u(num_error, gauge.num(t, c), bits));
      const double num_bound =
          gamma_bound(depth.num(t, c), bits) * gauge.num(t, c) + reference_error.num(t, c);
      // The output and its a-priori bound.
      const double o = std::abs(reference.out.hi(t, c));
      const double error = reference.out.error(t, c, run.output(t, c));
      error_sq += error * error;
      reference_sq += o * o;
      double bound = num_bound;
      if (spec.normalize) {
        // o_hat = fl(num_hat / fl(den_hat + eps)) with |num_hat - num| <= N, |den_hat + eps - D| <= E:
        // |o_hat - o| <= u |o| + (1 + u) (N + |o| E) / (|D| - E) when E < |D| (docs/error_report.md).
        if (den_bound >= d_abs) {
          ++m.unbounded;
          continue;
        }
        bound = (u * o + (1 + u) * (num_bound + o * den_bound) / (d_abs - den_bound)) * (1 + 0x1p-50);
      }
      bound_sq += bound * bound;
      m.test_ratio = std::max(m.test_ratio, bound == 0 ? (error == 0 ? 0 : INFINITY) : error / bound);
    }
  }
  m.outputs = n * dv;
  m.normwise_u = relative_u(std::sqrt(error_sq), std::sqrt(reference_sq), bits);
  m.bound_normwise_u =
      m.unbounded > 0 ? INFINITY : relative_u(std::sqrt(bound_sq), std::sqrt(reference_sq), bits);
  if (!spec.normalize) m.min_den_ratio = 0;
  return m;
}

// The backward's reference: each gradient as double-double pairs, and its own a-priori error.
struct ExactGradients {
  std::array<DoubleDouble, 3> parts;  // dQ, dK, dV
  Gradients<double> error;
  Terms<double> readouts;  // its forward num and den, rounded to double
  explicit ExactGradients(const OperatorSpec& spec, const Sequence<double>& inputs,
                          const Matrix<double>& d_out, const Gradients<Mpfr>& g,
                          const Gradients<std::int64_t>& streaming_depth)
      : parts{DoubleDouble(g.dq.rows(), g.dq.cols()), DoubleDouble(g.dk.rows(), g.dk.cols()),
              DoubleDouble(g.dv.rows(), g.dv.cols())} {
    const Matrix<Mpfr>* from[3] = {&g.dq, &g.dk, &g.dv};
    for (int p = 0; p < 3; ++p)
      for (Index r = 0; r < from[p]->rows(); ++r)
        for (Index c = 0; c < from[p]->cols(); ++c) parts[p].set(r, c, (*from[p])(r, c));
    const auto narrow = [](const auto& m) {
      return m.unaryExpr([](const Mpfr& x) { return static_cast<double>(x); });
    };
    readouts = {narrow(g.terms.num), narrow(g.terms.den)};
    const Matrix<Mpfr> d_out_exact = d_out.unaryExpr([](double x) { return Mpfr(x); });
    const Terms<Mpfr> adjoints = reference::finish_adjoint(spec, g.terms, d_out_exact);
    error = backward_bound(spec, 261, d_out, readouts, {narrow(adjoints.num), narrow(adjoints.den)},
                           streaming_depth,
                           [&](const Terms<double>& a) { return streaming_backward_gauge(spec, inputs, a); })
                .bound;
  }
};

// dQ, dK, dV's metrics of one backward run against the reference: as metrics() for O, the bound
// being the backward's (backward_bound.hpp) plus the reference's own.
std::array<CellMetrics, 3> backward_metrics(const OperatorSpec& spec, int bits, const BackwardRun& run,
                                            const BackwardBound& bound, const ExactGradients& reference) {
  const double eps = to_double(spec.eps);
  double min_den_ratio = 0;
  if (spec.normalize) {
    min_den_ratio = INFINITY;
    for (Index t = 0; t < reference.readouts.den.size(); ++t)
      min_den_ratio = std::min(min_den_ratio,
                               std::abs(reference.readouts.den(t) + eps) / (bound.gauge.terms.den(t) + eps));
  }
  std::array<CellMetrics, 3> out;
  const Matrix<double>* computed[3] = {&run.gradients.dq, &run.gradients.dk, &run.gradients.dv};
  const Matrix<double>* gauge[3] = {&bound.gauge.dq, &bound.gauge.dk, &bound.gauge.dv};
  const Matrix<double>* own[3] = {&bound.bound.dq, &bound.bound.dk, &bound.bound.dv};
  const Matrix<double>* theirs[3] = {&reference.error.dq, &reference.error.dk, &reference.error.dv};
  for (int p = 0; p < 3; ++p) {
    CellMetrics& m = out[p];
    m.min_den_ratio = min_den_ratio;
    double error_sq = 0, reference_sq = 0, bound_sq = 0;
    for (Index r = 0; r < computed[p]->rows(); ++r)
      for (Index c = 0; c < computed[p]->cols(); ++c) {
        const double error = reference.parts[p].error(r, c, (*computed[p])(r, c));
        const double g = std::abs(reference.parts[p].hi(r, c));
        error_sq += error * error;
        reference_sq += g * g;
        m.componentwise_u = std::max(m.componentwise_u, relative_u(error, (*gauge[p])(r, c), bits));
        const double limit = ((*own[p])(r, c) + (*theirs[p])(r, c)) * (1 + 0x1p-50);
        if (!(limit < INFINITY)) {
          ++m.unbounded;
          continue;
        }
        bound_sq += limit * limit;
        m.test_ratio = std::max(m.test_ratio, limit == 0 ? (error == 0 ? 0 : INFINITY) : error / limit);
      }
    m.outputs = computed[p]->size();
    m.normwise_u = relative_u(std::sqrt(error_sq), std::sqrt(reference_sq), bits);
    m.bound_normwise_u =
        m.unbounded > 0 ? INFINITY : relative_u(std::sqrt(bound_sq), std::sqrt(reference_sq), bits);
  }
  return out;
}

// The backward bound of one candidate's run.
BackwardBound bound_of(const OperatorSpec& spec, const Candidate& candidate, const Sequence<double>& inputs,
                       const Matrix<double>& d_out, const BackwardRun& run,
                       const Gradients<std::int64_t>& depth, Index chunk) {
  return backward_bound(
      spec, candidate.unit_roundoff_bits, d_out, run.gradients.terms, run.adjoints, depth,
      [&](const Terms<double>& a) { return candidate.backward_gauge(spec, inputs, a, chunk); });
}

struct CellKey {
  Index d, dv;
  std::size_t spec, decay;
  Family family;
  std::size_t candidate;
  Quantity quantity;
  Index n, chunk;
  friend auto operator<=>(const CellKey&, const CellKey&) = default;
};

struct CaseResult {
  std::vector<std::pair<CellKey, CellMetrics>> cells;
};

std::string format_duration(double seconds) {
  const long s = std::lround(seconds);
  std::ostringstream out;
  if (s >= 60) out << s / 60 << "m";
  out << (s % 60 < 10 && s >= 60 ? "0" : "") << s % 60 << "s";
  return out.str();
}

// Depths depend on the operator, shapes and chunk only: computed once, shared between threads.
template <class Value>
class DepthCache {
 public:
  template <class Compute>
  const Value& get(const std::string& implementation, int bits, std::size_t spec_key, Index d, Index dv,
                   Index n, Index chunk, const Compute& compute) {
    const auto key = std::make_tuple(implementation, bits, spec_key, d, dv, n, chunk);
    {
      std::lock_guard lock(mutex_);
      if (auto it = cache_.find(key); it != cache_.end()) return it->second;
    }
    Value computed = compute();
    std::lock_guard lock(mutex_);
    return cache_.try_emplace(key, std::move(computed)).first->second;  // std::map: stable references
  }

 private:
  std::mutex mutex_;
  std::map<std::tuple<std::string, int, std::size_t, Index, Index, Index, Index>, Value> cache_;
};

}  // namespace

CellMetrics measure(const OperatorSpec& spec, const Candidate& candidate, const Sequence<double>& inputs,
                    const Terms<Mpfr>& reference, Index chunk) {
  const Index n = inputs.length();
  const CandidateRun run = candidate.run(spec, inputs, chunk);
  const Depths depth = candidate.depth(spec, n, inputs.key_dim(), inputs.value_dim(), chunk);
  const Depths reference_depth = streaming_depth(spec, n, inputs.key_dim(), inputs.value_dim());
  return metrics(spec, candidate.unit_roundoff_bits, run, depth, Exact(spec, reference),
                 reference_error_bound(spec, inputs, reference_depth), n);
}

std::array<CellMetrics, 3> measure_backward(const OperatorSpec& spec, const Candidate& candidate,
                                            const Sequence<double>& inputs, const Matrix<double>& d_out,
                                            const Gradients<Mpfr>& reference, Index chunk) {
  const Index n = inputs.length(), d = inputs.key_dim(), dv = inputs.value_dim();
  const BackwardRun run = candidate.backward(spec, inputs, d_out, chunk);
  const Gradients<std::int64_t> depth = candidate.backward_depth(spec, n, d, dv, chunk);
  return backward_metrics(
      spec, candidate.unit_roundoff_bits, run, bound_of(spec, candidate, inputs, d_out, run, depth, chunk),
      ExactGradients(spec, inputs, d_out, reference, streaming_backward_depth(spec, n, d, dv)));
}

void validate(const ReportOptions& options) {
  if (options.min_log2_n < 1 || options.max_log2_n < options.min_log2_n || options.max_log2_n > 20)
    throw Error("report: lengths 2^" + std::to_string(options.min_log2_n) + " to 2^" +
                std::to_string(options.max_log2_n) + " are not in 2^1 .. 2^20");
  if (options.log2_n_step < 1 || (options.max_log2_n - options.min_log2_n) % options.log2_n_step != 0)
    throw Error("report: the longest length must be 2^min times a power of 2^step");
  if (options.seeds < 1) throw Error("report: --seeds must be at least 1");
  if (options.backward_max_log2_n < 0 || options.backward_max_log2_n > 20)
    throw Error("report: the backward's longest length 2^" + std::to_string(options.backward_max_log2_n) +
                " is not in 2^0 .. 2^20 (below the shortest length: no backward rows)");
  for (const ReportOptions::WideHeads& w : options.wide_heads)
    if (w.d < 1 || w.max_log2_n < options.min_log2_n)
      throw Error("report: a wide head needs d >= 1 and a longest length of at least 2^" +
                  std::to_string(options.min_log2_n));
  for (const Index c : options.chunks)
    if (c < 1) throw Error("report: chunk sizes must be at least 1");
  const std::vector<ReportSpec> specs = report_specs();
  for (const std::string& name : options.operators) {
    if (std::none_of(specs.begin(), specs.end(), [&](const ReportSpec& s) { return s.name == name; }))
      throw Error("report: no operator named '" + name + "' (see docs/error_report.md)");
  }
}

Report run_report(const ReportOptions& options, const std::vector<Candidate>& candidates,
                  std::ostream& progress) {
  validate(options);
  const std::vector<ReportSpec> specs = report_specs();
  const std::vector<Rational> decays = report_decays();
  std::vector<ReportCase> cases;
  for (std::size_t s = 0; s < specs.size(); ++s) {
    if (!options.operators.empty() && std::find(options.operators.begin(), options.operators.end(),
                                                specs[s].name) == options.operators.end())
      continue;
    for (const Rational& decay : decays) {
      for (const Family family : {Family::gaussian, Family::unit_keys, Family::drift, Family::cancel}) {
        if (!family_applies(family, specs[s].spec, decay)) continue;
        for (int i = 0; i < options.seeds; ++i) {
          const std::string identity = specs[s].name + "|" + format_rational(decay) + "|" +
                                       std::string(family_name(family)) + "|" + std::to_string(i);
          cases.push_back({s, decay, family, i, mix(options.seed * splitmix64_increment + 1, identity),
                           options.d, options.dv, options.max_log2_n, true});
        }
      }
    }
    const auto& wide = options.wide_operators;
    if (std::find(wide.begin(), wide.end(), specs[s].name) == wide.end()) continue;
    for (const ReportOptions::WideHeads& w : options.wide_heads) {
      const Rational decay(15, 16);
      const std::string identity =
          specs[s].name + "|" + format_rational(decay) + "|gaussian|0|d=" + std::to_string(w.d);
      cases.push_back({s, decay, Family::gaussian, 0, mix(options.seed * splitmix64_increment + 1, identity),
                       w.d, w.d, std::min(w.max_log2_n, options.max_log2_n)});
    }
  }
  // Wide heads and third-order cases first, so that the longest work starts early (the order of
  // the results is fixed).
  std::vector<std::size_t> order(cases.size());
  for (std::size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](std::size_t a, std::size_t b) {
    const auto cost = [&](const ReportCase& c) {
      return std::make_pair(c.d, hla::order(specs[c.spec_index].spec.variant));
    };
    return cost(cases[a]) > cost(cases[b]);
  });

  DepthCache<Depths> depths;
  DepthCache<Gradients<std::int64_t>> backward_depths;  // keyed by implementation: any precision's
  std::vector<CaseResult> results(cases.size());
  std::atomic<std::size_t> next{0}, done{0};
  std::mutex progress_mutex;
  const auto start = std::chrono::steady_clock::now();
  auto last_line = start - std::chrono::hours(1);
  progress << "report: " << cases.size() << " cases (operators x decays x input families x " << options.seeds
           << " seeds), n = 2^" << options.min_log2_n << " .. 2^" << options.max_log2_n << ", "
           << candidates.size() << " candidates\n";

  // The backward rows of case i: at each length up to 2^backward_max_log2_n, every format, every
  // candidate with a backward, against the MPFR backward of that length (a gradient depends on
  // the tokens after it: no prefix of a longer run serves).
  const auto backward_cells = [&](const ReportCase& c, std::size_t i, const OperatorSpec& spec,
                                  std::size_t spec_key, std::size_t decay_index,
                                  const std::vector<Index>& lengths) {
    const Index longest = std::min(lengths.back(), Index(1) << options.backward_max_log2_n);
    const Sequence<double> base = case_inputs(c, longest, c.d, c.dv);
    const Matrix<double> upstream = case_upstream(c, longest, c.dv);
    for (const InputFormat format : {InputFormat::f64, InputFormat::f32, InputFormat::bf16}) {
      const Sequence<double> inputs = rounded(base, format);
      const Matrix<double> d_out_all =
          upstream.unaryExpr([format](double x) { return round_input(format, x); });
      for (const Index n : lengths) {
        if (n > longest) break;
        const Sequence<double> head = prefix(inputs, n);
        const Matrix<double> d_out = d_out_all.topRows(n);
        std::optional<ExactGradients> reference;
        for (std::size_t k = 0; k < candidates.size(); ++k) {
          const Candidate& candidate = candidates[k];
          if (candidate.inputs != format || !candidate.covers_backward || !candidate.covers_backward(spec))
            continue;
          if (candidate.max_width && std::max(c.d, c.dv) > candidate.max_width(spec, true)) continue;
          if (!reference) {
            const auto& depth = backward_depths.get("streaming", 0, spec_key, c.d, c.dv, n, 0, [&] {
              return streaming_backward_depth(spec, n, c.d, c.dv);
            });
            reference.emplace(spec, head, d_out, reference_gradients(spec, head, d_out), depth);
          }
          for (const Index chunk : candidate.uses_chunk ? options.chunks : std::vector<Index>{0}) {
            const BackwardRun run = candidate.backward(spec, head, d_out, chunk);
            const auto& depth =
                backward_depths.get(candidate.implementation, 0, spec_key, c.d, c.dv, n, chunk,
                                    [&] { return candidate.backward_depth(spec, n, c.d, c.dv, chunk); });
            const std::array<CellMetrics, 3> m =
                backward_metrics(spec, candidate.unit_roundoff_bits, run,
                                 bound_of(spec, candidate, head, d_out, run, depth, chunk), *reference);
            for (int p = 0; p < 3; ++p)
              results[i].cells.push_back(
                  {{c.d, c.dv, c.spec_index, decay_index, c.family, k, Quantity(p + 1), n, chunk}, m[p]});
          }
        }
      }
    }
  };

  const auto work = [&] {
    for (std::size_t slot; (slot = next++) < cases.size();) {
      const std::size_t i = order[slot];
      const ReportCase& c = cases[i];
      OperatorSpec spec = specs[c.spec_index].spec;
      spec.decay = c.decay;
      const std::size_t decay_index = std::find(decays.begin(), decays.end(), c.decay) - decays.begin();
      const std::size_t spec_key = c.spec_index * decays.size() + decay_index;
      std::vector<Index> lengths;
      for (int e = options.min_log2_n; e <= c.max_log2_n; e += options.log2_n_step)
        lengths.push_back(Index(1) << e);
      const Index longest = lengths.back();
      const Sequence<double> base = case_inputs(c, longest, c.d, c.dv);
      for (const InputFormat format : {InputFormat::f64, InputFormat::f32, InputFormat::bf16}) {
        const Sequence<double> inputs = rounded(base, format);
        std::optional<Exact> reference;
        std::optional<Terms<double>> reference_error;
        for (std::size_t k = 0; k < candidates.size(); ++k) {
          const Candidate& candidate = candidates[k];
          if (candidate.inputs != format || !candidate.covers(spec)) continue;
          if (candidate.max_width && std::max(c.d, c.dv) > candidate.max_width(spec, false)) continue;
          if (!reference) {
            reference.emplace(spec, mpfr_reference(spec, inputs));
            const Depths& streaming = depths.get("streaming", 24, spec_key, c.d, c.dv, longest, 0,
                                                 [&] { return streaming_depth(spec, longest, c.d, c.dv); });
            reference_error = reference_error_bound(spec, inputs, streaming);
          }
          const auto depth_of = [&](Index n, Index chunk) -> const Depths& {
            return depths.get(candidate.implementation, candidate.unit_roundoff_bits, spec_key, c.d, c.dv, n,
                              chunk, [&] { return candidate.depth(spec, n, c.d, c.dv, chunk); });
          };
          const CellKey cell{c.d, c.dv, c.spec_index, decay_index, c.family, k, Quantity::o, 0, 0};
          if (candidate.causal_prefix) {
            const CandidateRun run = candidate.run(spec, inputs, 0);
            const Depths& depth = depth_of(longest, 0);
            for (const Index n : lengths) {
              CellKey key = cell;
              key.n = n;
              results[i].cells.push_back({key, metrics(spec, candidate.unit_roundoff_bits, run, depth,
                                                       *reference, *reference_error, n)});
            }
            continue;
          }
          for (const Index n : lengths) {
            const Sequence<double> head = prefix(inputs, n);
            for (const Index chunk : options.chunks) {
              const CandidateRun run = candidate.run(spec, head, chunk);
              const Depths& depth = depth_of(n, chunk);
              CellKey key = cell;
              key.n = n;
              key.chunk = chunk;
              results[i].cells.push_back({key, metrics(spec, candidate.unit_roundoff_bits, run, depth,
                                                       *reference, *reference_error, n)});
            }
          }
        }
      }
      if (c.backward) backward_cells(c, i, spec, spec_key, decay_index, lengths);
      const std::size_t finished = ++done;
      std::lock_guard lock(progress_mutex);
      const auto now = std::chrono::steady_clock::now();
      if (now - last_line > std::chrono::seconds(5) || finished == cases.size()) {
        last_line = now;
        const double elapsed = std::chrono::duration<double>(now - start).count();
        progress << "report: cases " << finished << "/" << cases.size() << ", elapsed "
                 << format_duration(elapsed);
        if (finished < cases.size())  // the costliest cases run first: an overestimate
          progress << ", left ~" << format_duration(elapsed / finished * (cases.size() - finished));
        progress << "\n" << std::flush;
      }
    }
  };
  const int threads =
      options.threads > 0 ? options.threads : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> pool;
  // A failure in one case (an Error of an implementation) stops the others and is rethrown here.
  std::exception_ptr failure;
  std::mutex failure_mutex;
  const auto guarded = [&] {
    try {
      work();
    } catch (...) {
      std::lock_guard lock(failure_mutex);
      if (!failure) failure = std::current_exception();
      next = cases.size();
    }
  };
  for (int t = 0; t < threads; ++t) pool.emplace_back(guarded);
  for (std::thread& t : pool) t.join();
  if (failure) std::rethrow_exception(failure);

  // Worst over seeds, per cell, in case order: independent of the thread count.
  std::map<CellKey, std::pair<CellMetrics, std::uint64_t>> worst;
  for (std::size_t i = 0; i < cases.size(); ++i) {
    for (const auto& [key, m] : results[i].cells) {
      auto [it, inserted] = worst.try_emplace(key, m, cases[i].input_seed);
      if (inserted) continue;
      CellMetrics& w = it->second.first;
      if (m.normwise_u > w.normwise_u) {
        w.normwise_u = m.normwise_u;
        w.bound_normwise_u = m.bound_normwise_u;
        it->second.second = cases[i].input_seed;
      }
      w.componentwise_u = std::max(w.componentwise_u, m.componentwise_u);
      w.test_ratio = std::max(w.test_ratio, m.test_ratio);
      w.min_den_ratio = std::min(w.min_den_ratio, m.min_den_ratio);
      w.unbounded += m.unbounded;
      w.outputs += m.outputs;
    }
  }
  Report report;
  report.options = options;
  for (const Candidate& c : candidates)
    report.candidate_names.push_back(c.implementation + " " + c.precision);
  for (const auto& [key, value] : worst) {
    const Candidate& c = candidates[key.candidate];
    report.rows.push_back({.spec = specs[key.spec].name,
                           .decay = format_rational(decays[key.decay]),
                           .family = std::string(family_name(key.family)),
                           .implementation = c.implementation,
                           .precision = c.precision,
                           .quantity = key.quantity,
                           .unit_roundoff_bits = c.unit_roundoff_bits,
                           .d = key.d,
                           .dv = key.dv,
                           .n = key.n,
                           .chunk = key.chunk,
                           .metrics = value.first,
                           .worst_seed = value.second});
  }
  return report;
}

}  // namespace hla::reports
