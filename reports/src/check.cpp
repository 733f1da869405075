#include "hla/reports/check.hpp"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cmath>
#include <deque>
#include <future>
#include <iomanip>
#include <limits>
#include <numeric>
#include <sstream>
#include <thread>

#include "hla/fast/catalogue.hpp"
#include "hla/fast/chunked.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/error.hpp"
#include "hla/reports/candidates.hpp"

#include "arrays.hpp"
#include "check_gpu.hpp"

namespace hla::reports {

namespace {

template <class T>
T divisor(EpsPolicy policy, const T& den, const T& eps) {
  switch (policy) {
    case EpsPolicy::add:
      return den + eps;
    case EpsPolicy::signed_clamp:
      return den >= 0 ? std::max<T>(den, eps) : std::min<T>(den, T(-eps));
    case EpsPolicy::clamp:
      return std::max<T>(den, eps);
  }
  return den + eps;
}

// A-priori depths, computed once per check and shared by every head (they depend on the shapes
// and the options, never on the data), while the heads' runs go on.
using SharedDepths = std::shared_future<Depths>;

struct OwnImplementation {
  const Candidate* candidate;
  SharedDepths depth;
};

// What every head uses: the float64 streaming row (the reference for float32, bf16 and f16
// candidates; its gauge and depths are the MPFR reference's too), its depths, and the toolkit's
// own implementations of the candidate's precision.
struct Plan {
  const Candidate* streaming64 = nullptr;
  SharedDepths reference_depth;
  std::vector<OwnImplementation> own;
};

// gauge_upper_bound for one entry: the gauge computed in double, divided by (1 - gamma_53(K)).
double gauge_up(double computed, double gamma53) {
  return computed / (1 - gamma53) * (1 + 0x1p-50);
}
double gauge_up(double computed, std::int64_t k) {
  return gauge_up(computed, gamma_bound(k, 53));
}

// gamma_bound(k, bits) and gamma_bound(k, 53) for the last k asked: along a row of outputs the
// depths rarely change, and the pass asks for them at every output.
struct DepthFactors {
  int bits;
  std::int64_t k = -1;
  double gamma = 0, gamma53 = 0;
  const DepthFactors& at(std::int64_t depth) {
    if (depth != k) {
      k = depth;
      gamma = gamma_bound(k, bits);
      gamma53 = gamma_bound(k, 53);
    }
    return *this;
  }
};

// The bound on |o_hat - o| of one implementation from its bounds N on num and E on den (the
// policy's divisor is 1-Lipschitz in den): |o_hat - o| <= u |o| + (1 + u) (N + |o| E) / (|D| - E)
// when E < |D| (docs/error_report.md); infinity when the bounds cannot separate D from 0.
double output_bound(bool normalize, double num_bound, double den_bound, double o, double d_abs, double u) {
  if (!normalize) return num_bound;
  if (den_bound >= d_abs) return INFINITY;
  return (u * o + (1 + u) * (num_bound + o * den_bound) / (d_abs - den_bound)) * (1 + 0x1p-50);
}

struct HeadOutcome {
  double worst_ratio = 0;
  Position worst;
  std::optional<Index> first_failure_token;
  Index first_failure_column = 0;
  std::optional<Index> first_departure_token;
  double error_sq = 0, reference_sq = 0;
  double distance_sq = 0;               // candidate, from the rounded reference, squared
  std::vector<double> own_distance_sq;  // per own implementation
  std::vector<double> own_error_sq;     // per own implementation, from the reference
  double unit = 0;                      // one unit of the output format at the rms output
  double base_sq = 0;                   // the tight limit's base, squared
  std::vector<double> growth = std::vector<double>(8, 0.0);
  // Per token: the worst ratio to the sound bound, squared distances (candidate, each own), outputs.
  std::vector<double> token_ratio, token_distance_sq;
  std::vector<std::vector<double>> own_token_distance_sq;
  std::vector<long> token_outputs;
  long undefined = 0, outputs = 0;
  bool tight = true;
  double tight_ratio = 0;
  std::size_t loosest_own = 0;
};

// The queries as the operator reads them: times --scale, in float64.
Sequence<double> scaled(const CheckOptions& options, const Sequence<double>& tokens) {
  return {tokens.q * options.scale, tokens.k, tokens.v};
}

// One head's num and den, not owned: in double or, from a float32 run, in float (the other null).
struct TermsView {
  const double *wide_num = nullptr, *wide_den = nullptr;
  const float *narrow_num = nullptr, *narrow_den = nullptr;
  Index dv = 0;

  double num(Index t, Index c) const {
    const std::size_t i = std::size_t(t * dv + c);
    return wide_num ? wide_num[i] : narrow_num[i];
  }
  double den(Index t) const { return wide_den ? wide_den[t] : narrow_den[t]; }
};

// One head's runs (the data's part of the check): the reference's num and den, the terms of each
// own implementation, and the gauges, one per implementation, which `reference_gauge` and
// `own_gauge` index. Views into `owned` (a CPU run's) or into every head's arrays (the GPU's).
struct HeadRuns {
  TermsView reference;
  std::vector<TermsView> own, gauges;
  std::size_t reference_gauge = 0;
  std::vector<std::size_t> own_gauge;
  std::deque<Terms<double>> owned;  // elements stay in place as it grows and moves

  TermsView keep(Terms<double> t) {
    const Terms<double>& kept = owned.emplace_back(std::move(t));
    return {kept.num.data(), kept.den.data(), nullptr, nullptr, kept.num.cols()};
  }
};

// On the CPU: MPFR streaming as the reference of a float64 candidate, float64 streaming else.
HeadRuns cpu_runs(const CheckOptions& options, const Sequence<double>& s, const Plan& plan) {
  const OperatorSpec& spec = options.spec;
  HeadRuns runs;
  std::vector<std::string> names;  // of the implementation of each gauge
  const auto gauge_of = [&](const Candidate& c) {
    const auto found = std::find(names.begin(), names.end(), c.implementation);
    if (found != names.end()) return std::size_t(found - names.begin());
    names.push_back(c.implementation);
    runs.gauges.push_back(runs.keep(c.gauge(spec, s, options.chunk)));
    return runs.gauges.size() - 1;
  };
  if (arithmetic_bits(options.precision) == 53) {
    const Sequence<Mpfr> exact{s.q.cast<Mpfr>(), s.k.cast<Mpfr>(), s.v.cast<Mpfr>()};
    const Terms<Mpfr> t =
        fast::streaming_terms(spec, fast::default_form(spec, fast::Implementation::streaming), exact);
    runs.reference = runs.keep({t.num.unaryExpr([](const Mpfr& x) { return to_double(x); }),
                                t.den.unaryExpr([](const Mpfr& x) { return to_double(x); })});
  } else {
    runs.reference = runs.keep(plan.streaming64->compute(spec, s, 0).terms);
  }
  runs.reference_gauge = gauge_of(*plan.streaming64);
  for (const OwnImplementation& impl : plan.own) {
    runs.own.push_back(runs.keep(impl.candidate->compute(spec, s, options.chunk).terms));
    runs.own_gauge.push_back(gauge_of(*impl.candidate));
  }
  return runs;
}

// One head's every output: its bounds and distances in one pass, with the shared depths, without
// a matrix per quantity.
HeadOutcome check_head(const CheckOptions& options, const HeadInput& head, const Plan& plan,
                       const HeadRuns& runs) {
  const OperatorSpec& spec = options.spec;
  const int bits = arithmetic_bits(options.precision);
  const double u = std::ldexp(1.0, -bits);
  const Format out_format = options.output_format.value_or(options.precision);
  // The final rounding: none when the output format holds the arithmetic's results.
  const bool rounds_output = binary(out_format).precision < bits;
  const double u_out = rounds_output ? unit_roundoff(out_format) : 0;
  const double eta_out = rounds_output ? underflow_error(out_format) : 0;
  const double eps = to_double(spec.eps);
  // The rounding of --scale times q: one more rounding per query factor of a monomial.
  const std::int64_t extra = options.scale != 1 ? query_degree(spec) : 0;
  const Index n = head.output.rows(), dv = head.output.cols();
  const std::size_t owns = plan.own.size();
  const TermsView& ref = runs.reference;
  const TermsView& ref_gauge = runs.gauges[runs.reference_gauge];
  const std::vector<TermsView>& own_terms = runs.own;
  std::vector<const TermsView*> own_gauge;
  for (const std::size_t i : runs.own_gauge) own_gauge.push_back(&runs.gauges[i]);

  const Depths& ref_depth = plan.reference_depth.get();
  std::vector<const Depths*> own_depth;
  for (const OwnImplementation& impl : plan.own) own_depth.push_back(&impl.depth.get());
  // The reference's own error bound on one num or den entry from its gauge and depth: float64
  // streaming, gamma_53(K + extra) times the gauge; MPFR, gamma_261(K) times it, the scale's
  // rounding in float64 and half an ulp for the widening to double.
  const double gamma_extra = gamma_bound(extra, 53);
  const auto reference_error = [&](DepthFactors& factors, double gauge, std::int64_t k, double value) {
    if (bits == 53) {
      const DepthFactors& f = factors.at(k);
      return f.gamma * gauge_up(gauge, f.gamma53) + gamma_extra * gauge_up(gauge, f.gamma53) +
             std::abs(value) * 0x1p-53;
    }
    const DepthFactors& f = factors.at(k + extra);
    return f.gamma * gauge_up(gauge, f.gamma53);
  };
  const int reference_bits = bits == 53 ? 261 : 53;
  DepthFactors reference_den{reference_bits}, reference_num{reference_bits};
  std::vector<DepthFactors> own_num(owns, DepthFactors{bits});
  // An own implementation's output in its arithmetic, from its num and den, under the policy.
  const auto own_value = [&](const TermsView& t, Index r, Index c) {
    if (!spec.normalize) return t.num(r, c);
    if (bits == 24)
      return double(float(t.num(r, c)) / divisor<float>(options.eps_policy, float(t.den(r)), float(eps)));
    return t.num(r, c) / divisor<double>(options.eps_policy, t.den(r), eps);
  };
  const int add = spec.normalize && options.eps_policy == EpsPolicy::add ? 1 : 0;  // den + eps rounds

  HeadOutcome h;
  h.own_distance_sq.assign(owns, 0.0);
  h.own_error_sq.assign(owns, 0.0);
  h.token_ratio.assign(n, 0.0);
  h.token_distance_sq.assign(n, 0.0);
  h.own_token_distance_sq.assign(owns, std::vector<double>(n, 0.0));
  h.token_outputs.assign(n, 0);
  std::vector<double> den_bound(owns), own_rounded(owns);
  for (Index t = 0; t < n; ++t) {
    const double d = divisor<double>(options.eps_policy, ref.den(t), eps);
    const double d_abs = std::abs(d);
    const double ref_den_error = reference_error(reference_den, ref_gauge.den(t), ref_depth.den(t), ref.den(t));
    for (std::size_t i = 0; i < owns; ++i) {
      const std::int64_t k = own_depth[i]->den(t) + extra;
      den_bound[i] = gamma_bound(k + add, bits) * (gauge_up(own_gauge[i]->den(t), k) + eps) + ref_den_error;
    }
    for (Index c = 0; c < dv; ++c) {
      const double o = spec.normalize ? ref.num(t, c) / d : ref.num(t, c);
      const double ref_num_error =
          reference_error(reference_num, ref_gauge.num(t, c), ref_depth.num(t, c), ref.num(t, c));
      const double r_out =
          output_bound(spec.normalize, ref_num_error, ref_den_error, std::abs(o), d_abs, 0x1p-53);
      double bound = 0;
      for (std::size_t i = 0; i < owns; ++i) {
        const DepthFactors& f = own_num[i].at(own_depth[i]->num(t, c) + extra);
        const double num_bound = f.gamma * gauge_up(own_gauge[i]->num(t, c), f.gamma53) + ref_num_error;
        bound = std::max(bound, output_bound(spec.normalize, num_bound, den_bound[i], std::abs(o), d_abs, u));
        own_rounded[i] = round_to(out_format, own_value(own_terms[i], t, c));
      }
      if (!std::isfinite(bound) || r_out >= INFINITY) {
        ++h.undefined;
        continue;
      }
      const double candidate = head.output(t, c);
      ++h.outputs;
      ++h.token_outputs[t];
      const double allowed = (bound + r_out) * (1 + u_out) + u_out * (std::abs(o) + r_out) + eta_out + r_out;
      const double error = std::abs(candidate - o);
      const double ratio = allowed == 0 ? (error == 0 ? 0 : INFINITY) : error / allowed;
      if (ratio > h.worst_ratio) {
        h.worst_ratio = ratio;
        h.worst = {head.batch, head.head, t, c};
      }
      h.token_ratio[t] = std::max(h.token_ratio[t], ratio);
      const std::size_t eighth = static_cast<std::size_t>(std::min<Index>(7, 8 * t / n));
      h.growth[eighth] = std::max(h.growth[eighth], ratio);
      if (ratio > 1 && !h.first_failure_token) {
        h.first_failure_token = t;
        h.first_failure_column = c;
      }
      h.error_sq += error * error;
      h.reference_sq += o * o;
      // Distances from the correctly rounded reference (normwise: with a narrow output format, a
      // correct kernel rounds to the same value almost everywhere, a subtly wrong one does not).
      const double rounded = round_to(out_format, o);
      const double x = candidate - rounded;
      h.distance_sq += x * x;
      h.token_distance_sq[t] += x * x;
      for (std::size_t i = 0; i < owns; ++i) {
        const double y = own_rounded[i] - rounded, e = own_rounded[i] - o;
        h.own_distance_sq[i] += y * y;
        h.own_token_distance_sq[i][t] += y * y;
        h.own_error_sq[i] += e * e;
      }
    }
  }
  h.loosest_own = static_cast<std::size_t>(
      std::max_element(h.own_distance_sq.begin(), h.own_distance_sq.end()) - h.own_distance_sq.begin());
  const double own_sq = h.own_distance_sq.empty() ? 0 : h.own_distance_sq[h.loosest_own];
  // The floor: tight_floor_units units of the output format at the rms output, in all.
  h.unit = 2 * unit_roundoff(out_format) * std::sqrt(h.reference_sq / std::max<double>(1, double(h.outputs)));
  const double floor_sq = std::pow(CheckResult::tight_floor_units * h.unit, 2);
  const double base_sq = std::max(own_sq, floor_sq);
  h.base_sq = base_sq;
  h.tight_ratio = base_sq == 0 ? (h.distance_sq == 0 ? 0 : INFINITY) : std::sqrt(h.distance_sq / base_sq);
  h.tight = h.tight_ratio <= CheckResult::tight_factor;
  // Where the candidate departs: the first token at which its distance so far passes the limit.
  const double limit_sq = CheckResult::tight_factor * CheckResult::tight_factor * base_sq;
  double so_far = 0;
  for (Index t = 0; t < n; ++t) {
    so_far += h.token_distance_sq[t];
    if (so_far > limit_sq) {
      h.first_departure_token = t;
      break;
    }
  }
  return h;
}

Matrix<double> policy_output(bool normalize, EpsPolicy policy, double eps, const Terms<double>& t) {
  if (!normalize) return t.num;
  Matrix<double> out(t.num.rows(), t.num.cols());
  for (Index r = 0; r < out.rows(); ++r) out.row(r) = t.num.row(r) / divisor<double>(policy, t.den(r), eps);
  return out;
}

// The operator of `spec` in float64 (the form equal to the reference), under a policy.
Matrix<double> operator_output(const OperatorSpec& spec, EpsPolicy policy, const Sequence<double>& s) {
  const Terms<double> t =
      fast::streaming_terms(spec, fast::default_form(spec, fast::Implementation::streaming), s);
  return policy_output(spec.normalize, policy, to_double(spec.eps), t);
}

// Every output read from the summaries before its own token enters them: the operator with a
// strict mask (token t attends to tokens before it only; o_0 reads the empty state).
Terms<double> read_before_update(const OperatorSpec& spec, const Sequence<double>& s) {
  const fast::Form form = fast::default_form(spec, fast::Implementation::streaming);
  return fast::with_stream<double>(spec, form, s.key_dim(), s.value_dim(), [&](auto stream) {
    const Index n = s.length();
    Terms<double> out{Matrix<double>(n, s.value_dim()), Vector<double>(n)};
    for (Index t = 0; t < n; ++t) {
      const Vector<double> q = s.q.row(t).transpose();
      const fast::Readout<double> r = stream.read(q);
      out.num.row(t) = r.num;
      out.den(t) = r.den;
      stream.push(q, s.k.row(t).transpose(), s.v.row(t));
    }
    return out;
  });
}

// The d x dv summaries read transposed (a kernel that forms X q where the form has q^T X; d = dv):
// hla2 with u C^T - q^T G^T, AHLA with r = (P q)^T and (E q)^T.
Terms<double> transposed_state(const OperatorSpec& spec, const Sequence<double>& s) {
  const Index n = s.length(), d = s.key_dim();
  const double g = to_double(spec.decay);
  Terms<double> out{Matrix<double>(n, s.value_dim()), Vector<double>(n)};
  if (spec.variant == Variant::hla2) {
    fast::Hla2Stream<double> stream(d, d, g, to_double(spec.ridge), spec.masked,
                                    fast::default_form(spec, fast::Implementation::streaming));
    for (Index t = 0; t < n; ++t) {
      const Vector<double> q = s.q.row(t).transpose();
      stream.push(q, s.k.row(t).transpose(), s.v.row(t));
      const Matrix<double> c = stream.query_value().transpose(), x = stream.cross_value().transpose();
      const fast::Readout<double> r =
          fast::hla2_read(q, to_double(spec.ridge), spec.masked, stream.key_moment(), c, stream.query_mass(),
                          x, stream.cross_mass());
      out.num.row(t) = r.num;
      out.den(t) = r.den;
    }
    return out;
  }
  Matrix<double> p = Matrix<double>::Zero(d, d), e = Matrix<double>::Zero(d, d);  // AHLA
  Vector<double> m = Vector<double>::Zero(d), mass = Vector<double>::Zero(d);
  for (Index t = 0; t < n; ++t) {
    const Vector<double> q = s.q.row(t).transpose(), k = s.k.row(t).transpose();
    p = g * p + k * s.v.row(t);
    m = g * m + k;
    e = g * e + k * (p * q).transpose();
    mass = g * mass + q.dot(m) * k;
    out.num.row(t) = (e * q).transpose();
    out.den(t) = q.dot(mass);
  }
  return out;
}

// The distance of the candidate's output from a form's rounded output, over the tight base
// scaled to the form's size where it is larger (rounding errors scale with the outputs: a form
// with queries 4x too large has outputs and errors 16x larger).
double form_ratio(const Matrix<double>& candidate, const Matrix<double>& form, Format out, double base_sq,
                  double reference_sq) {
  double sq = 0, form_sq = 0;
  for (Index i = 0; i < candidate.size(); ++i) {
    const double x = candidate.data()[i] - round_to(out, form.data()[i]);
    sq += std::isfinite(x) ? x * x : INFINITY;
    form_sq += form.data()[i] * form.data()[i];
  }
  const double base = base_sq * std::max(1.0, reference_sq > 0 ? form_sq / reference_sq : 1.0);
  return base > 0 ? std::sqrt(sq / base) : (sq == 0 ? 0 : INFINITY);
}

// Whether the runs take place on the GPU (options.device, docs/check.md "Where it runs").
bool on_gpu(const CheckOptions& options, Index d, Index dv) {
  return detail::runs_on_gpu(options, [&] { return detail::gpu_check_unavailable(options, d, dv); });
}

// A faster way to read head i for the GPU's runs (check_arrays has one): its q, k, v (before the
// scale) straight into float buffers [n, d], [n, d], [n, dv], and its batch, head and output
// without its tokens.
struct HeadGather {
  std::function<void(std::size_t, float*, float*, float*)> inputs;
  std::function<HeadInput(std::size_t)> output;
};

#if HLA_HAVE_CUDA
// Head i of every head's flat terms.
TermsView head_view(const detail::FlatTerms<double>& t, std::size_t i, Index n, Index dv) {
  return {t.num.get() + i * std::size_t(n * dv), t.den.get() + i * std::size_t(n), nullptr, nullptr, dv};
}
TermsView head_view(const detail::FlatTerms<float>& t, std::size_t i, Index n, Index dv) {
  return {nullptr, nullptr, t.num.get() + i * std::size_t(n * dv), t.den.get() + i * std::size_t(n), dv};
}

// Every head's runs on the GPU at once (check_gpu.hpp), then each head's pass on the CPU threads.
void check_heads_on_gpu(const CheckOptions& options, std::size_t count,
                        const std::function<HeadInput(std::size_t)>& head, const HeadGather* gather,
                        const HeadInput& first, const Plan& plan, std::vector<HeadOutcome>& outcomes,
                        std::vector<Position>& ids, Phases& phases) {
  const Index n = first.tokens.length(), d = first.tokens.key_dim(), dv = first.tokens.value_dim();
  const std::size_t keys = std::size_t(n * d), values = std::size_t(n * dv);
  detail::Buffer<float> q = detail::buffer<float>(count * keys), k = detail::buffer<float>(count * keys),
                        v = detail::buffer<float>(count * values);
  std::vector<HeadInput> outputs(count);  // the heads without their tokens
  parallel_for(count, options.threads, [&](std::size_t i) {
    if (gather) {
      gather->inputs(i, q.get() + i * keys, k.get() + i * keys, v.get() + i * values);
      outputs[i] = gather->output(i);
      return;
    }
    HeadInput h = i == 0 ? first : head(i);
    const auto narrow = [](const Matrix<double>& from, float* to) {  // exact: values of the precision
      for (Index j = 0; j < from.size(); ++j) to[j] = float(from.data()[j]);
    };
    narrow(h.tokens.q, q.get() + i * keys);
    narrow(h.tokens.k, k.get() + i * keys);
    narrow(h.tokens.v, v.get() + i * values);
    outputs[i] = {h.batch, h.head, {}, std::move(h.output)};
  });
  phases.done("the heads gathered");
  const detail::GpuCheckRuns gpu = detail::gpu_check_runs(options, std::int64_t(count), n, d, dv, std::move(q),
                                                          std::move(k), std::move(v), phases);
  const auto gauge_index = [&](fast::Implementation impl) {
    return std::size_t(std::find(gpu.implementations.begin(), gpu.implementations.end(), impl) -
                       gpu.implementations.begin());
  };
  const std::vector<fast::Implementation> own = detail::gpu_own_implementations(options);
  parallel_for(count, options.threads, [&](std::size_t i) {
    HeadRuns runs;
    runs.reference = head_view(gpu.reference, i, n, dv);
    for (const auto& g : gpu.gauges) runs.gauges.push_back(head_view(g, i, n, dv));
    runs.reference_gauge = gauge_index(fast::Implementation::gpu_streaming);
    for (std::size_t j = 0; j < own.size(); ++j) {
      runs.own.push_back(head_view(gpu.own[j], i, n, dv));
      runs.own_gauge.push_back(gauge_index(own[j]));
    }
    ids[i] = {outputs[i].batch, outputs[i].head, 0, 0};
    outcomes[i] = check_head(options, outputs[i], plan, runs);
    outputs[i].output = {};
  });
  phases.done("every output's bound and distance");
}
#endif

}  // namespace

double round_to(Format format, double x) {
  if (format == Format::f64 || x == 0 || !std::isfinite(x)) return x;
  const Binary b = binary(format);
  // The quantum of x's binade (of the subnormal range below the normal one): 2^(e - p + 1), built
  // from its bits (e - p + 1 >= -149 is a normal double's exponent). A subnormal double has a
  // biased exponent of 0, far below every format's minimum, so the clamp covers it.
  const int biased = int((std::bit_cast<std::uint64_t>(x) >> 52) & 0x7ff);
  const int exponent = std::max(biased - 1023, b.min_exponent);
  const double quantum = std::bit_cast<double>(std::uint64_t(exponent - (b.precision - 1) + 1023) << 52);
  const double r = std::nearbyint(x / quantum) * quantum;  // x / quantum is exact: one rounding
  // The largest finite value, (2 - 2^(1-p)) 2^emax.
  const double largest = (2 - 2 * std::bit_cast<double>(std::uint64_t(1023 - b.precision) << 52)) *
                         std::bit_cast<double>(std::uint64_t(b.max_exponent + 1023) << 52);
  if (std::abs(r) > largest) return std::copysign(INFINITY, x);
  return r;
}

std::vector<DiagnosisForm> diagnosis_forms(const CheckOptions& options, Index d, Index dv) {
  using fast::Implementation;
  const OperatorSpec spec = options.spec;
  const EpsPolicy policy = options.eps_policy;
  const double eps = to_double(spec.eps), scale = options.scale;
  const Index chunk = options.chunk;
  std::vector<DiagnosisForm> out;
  // The printed forms that a finding says differ from the operator, by their ledger ids.
  for (const Implementation impl :
       {Implementation::streaming, Implementation::scan, Implementation::chunked}) {
    if (fast::unavailable(spec, impl, fast::Form::published)) continue;
    const fast::Finding* f = fast::finding_for(spec, impl, fast::Form::published);
    if (f == nullptr || f->ledger_ids.empty()) continue;
    const std::string_view ledger = f->ledger_ids.front();
    const std::string id(ledger.substr(0, ledger.find('/')));
    if (std::any_of(out.begin(), out.end(), [&](const DiagnosisForm& x) { return x.id == id; })) continue;
    const std::string how = impl == Implementation::streaming ? "the streaming recurrence"
                            : impl == Implementation::scan    ? "the scan (a serial fold within each chunk)"
                                                              : "the chunk-parallel form";
    out.push_back({id,
                   how + " as printed (" + std::string(f->id) + ": " + std::string(f->summary) + ", " +
                       std::string(f->place) + ")",
                   [=](const Sequence<double>& s, const Sequence<double>&) {
                     const fast::Form published = fast::Form::published;
                     const Terms<double> t =
                         impl == Implementation::streaming ? fast::streaming_terms(spec, published, s)
                         : impl == Implementation::scan
                             ? fast::chunk_fold_terms(spec, published, s, chunk)
                             : fast::chunked_terms(spec, published, s, fast::ScanOptions{chunk, 1});
                     return policy_output(spec.normalize, policy, eps, t);
                   }});
  }
  // The common mistakes, as the catalogue lists them and where it says they apply; each computed
  // here from the form equal to the operator, changed as the mistake changes it.
  using Output = std::function<Matrix<double>(const Sequence<double>&, const Sequence<double>&)>;
  const auto changed = [](OperatorSpec x, EpsPolicy used) -> Output {
    return [=](const Sequence<double>& s, const Sequence<double>&) { return operator_output(x, used, s); };
  };
  const auto finished = [=](Terms<double> (*terms)(const OperatorSpec&, const Sequence<double>&)) -> Output {
    return [=](const Sequence<double>& s, const Sequence<double>&) {
      return policy_output(spec.normalize, policy, eps, terms(spec, s));
    };
  };
  for (const fast::Mistake& m : fast::mistakes()) {
    if (!m.applies(spec, scale != 1, d, dv)) continue;
    const std::string id(m.id);
    const auto add = [&](std::string name, std::string description, Output output) {
      out.push_back({std::move(name), std::move(description), std::move(output)});
    };
    if (id == "unmasked") {
      OperatorSpec x = spec;
      x.masked = false;
      add(id, std::string(m.description), changed(x, policy));
    } else if (id == "no-decay") {
      OperatorSpec x = spec;
      x.decay = 1;
      add(id, std::string(m.description), changed(x, policy));
    } else if (id == "decay-once") {
      const double g = to_double(spec.decay), ridge = to_double(spec.ridge);
      add(id, std::string(m.description), [=](const Sequence<double>& s, const Sequence<double>&) {
        const fast::Hla2Coefficients<double> once{g, g};
        return policy_output(
            spec.normalize, policy, eps,
            fast::run_stream(fast::Hla2Stream<double>(s.key_dim(), s.value_dim(), g, ridge, true, once), s));
      });
    } else if (id == "no-scale") {
      add(id, std::string(m.description), [=](const Sequence<double>&, const Sequence<double>& read) {
        return operator_output(spec, policy, read);
      });
    } else if (id == "scale-twice") {
      add(id, std::string(m.description), [=](const Sequence<double>& s, const Sequence<double>&) {
        return operator_output(spec, policy, Sequence<double>{s.q * scale, s.k, s.v});
      });
    } else if (id == "eps-policy") {
      for (const EpsPolicy other : all_eps_policies) {
        if (other == policy) continue;
        const std::string name(eps_policy_name(other));
        add(id + "-" + name, "the denominator under --eps-policy " + name, changed(spec, other));
      }
    } else if (id == "unnormalized") {
      OperatorSpec x = spec;
      x.normalize = false;
      x.eps = 0;
      add(id, std::string(m.description), changed(x, policy));
    } else if (id == "q-k-exchanged") {
      add(id, std::string(m.description), [=](const Sequence<double>&, const Sequence<double>& read) {
        return operator_output(spec, policy, Sequence<double>{read.k * scale, read.q, read.v});
      });
    } else if (id == "read-before-update") {
      add(id, std::string(m.description), finished(read_before_update));
    } else if (id == "one-token-late") {
      add(id, std::string(m.description), [=](const Sequence<double>& s, const Sequence<double>&) {
        const Matrix<double> o = operator_output(spec, policy, s);
        Matrix<double> late = Matrix<double>::Zero(o.rows(), o.cols());
        if (o.rows() > 1) late.bottomRows(o.rows() - 1) = o.topRows(o.rows() - 1);
        return late;
      });
    } else if (id == "transposed-state") {
      add(id, std::string(m.description), finished(transposed_state));
    } else if (id == "other-operator") {
      OperatorSpec x = spec;
      x.variant = spec.variant == Variant::ahla ? Variant::hla2 : Variant::ahla;
      add(std::string(variant_name(x.variant)),
          spec.variant == Variant::ahla ? "hla2, ((W W^T) . L) V, computed instead of AHLA"
                                        : "AHLA, ((A A) . L) V, computed instead of hla2",
          changed(x, policy));
    } else {
      throw Error("hla check: the catalogue's mistake " + id + " has no computation here");
    }
  }
  return out;
}

CheckResult check(const CheckOptions& options, const std::vector<HeadInput>& heads) {
  return check(options, heads.size(), [&heads](std::size_t i) { return heads[i]; });
}

namespace {

// check(options, count, head), reading the heads through `gather` where given and the runs are on the GPU.
CheckResult check_heads(const CheckOptions& options, std::size_t count,
                        const std::function<HeadInput(std::size_t)>& head, const HeadGather* gather) {
  if (count == 0) throw Error("hla check: no heads to check");
  Phases phases(options.progress);
  const OperatorSpec& spec = options.spec;
  const int bits = arithmetic_bits(options.precision);
  const HeadInput first = head(0);
  const Index n = first.tokens.length(), d = first.tokens.key_dim(), dv = first.tokens.value_dim();
  if (options.chunk < 1) throw Error("--chunk: must be at least 1");
  const std::string precision = bits == 53 ? "float64" : "float32";
  const bool gpu = on_gpu(options, d, dv);
#if HLA_HAVE_CUDA
  const std::vector<Candidate> all = gpu ? gpu_candidates() : cpu_candidates();
#else
  const std::vector<Candidate> all = cpu_candidates();
#endif
  const auto find = [&all](std::string_view implementation, std::string_view precision) -> const Candidate* {
    for (const Candidate& c : all)
      if (c.implementation == implementation && c.precision == precision) return &c;
    return nullptr;
  };
  Plan plan;
  plan.streaming64 = find(gpu ? "gpu-streaming" : "streaming", "float64");
  if (gpu) {
#if HLA_HAVE_CUDA
    for (const fast::Implementation impl : detail::gpu_own_implementations(options))
      plan.own.push_back({find(fast::implementation_name(impl), precision), {}});
#endif
  } else {
    for (const Candidate& c : all) {
      if (c.precision != precision || !c.covers(spec)) continue;
      if (options.algorithm ? c.implementation != fast::implementation_name(*options.algorithm)
                            : c.implementation == "scan")  // the scan holds a summary per token: O(n d^2)
        continue;
      plan.own.push_back({&c, {}});
    }
  }
  if (plan.own.empty())
    throw Error("hla check: no implementation of the toolkit covers this operator in " + precision);
  // The depths of each implementation, started at once on threads of their own.
  std::vector<std::pair<std::string, SharedDepths>> depths;
  const auto depth_of = [&](const Candidate& c) {
    for (const auto& [name, f] : depths)
      if (name == c.implementation) return f;
    const Index chunk = options.chunk;
    depths.emplace_back(c.implementation, std::async(std::launch::async, [&c, spec, n, d, dv, chunk] {
                                            return c.depth(spec, n, d, dv, chunk);
                                          }).share());
    return depths.back().second;
  };
  plan.reference_depth = depth_of(*plan.streaming64);
  for (OwnImplementation& impl : plan.own) impl.depth = depth_of(*impl.candidate);

  std::vector<HeadOutcome> outcomes(count);
  std::vector<Position> ids(count);
  if (gpu) {
#if HLA_HAVE_CUDA
    check_heads_on_gpu(options, count, head, gather, first, plan, outcomes, ids, phases);
#endif
  } else {
    parallel_for(count, options.threads, [&](std::size_t i) {
      const HeadInput h = i == 0 ? first : head(i);
      ids[i] = {h.batch, h.head, 0, 0};
      outcomes[i] = check_head(options, h, plan, cpu_runs(options, scaled(options, h.tokens), plan));
    });
    phases.done("the runs and every output's bound and distance");
  }

  CheckResult r;
  r.reference_name = bits == 53 ? "261-bit MPFR streaming (CPU)"
                                : "float64 " + plan.streaming64->implementation + (gpu ? " (GPU)" : " (CPU)");
  r.heads = static_cast<Index>(count);
  r.n = n;
  r.growth.assign(8, 0.0);
  r.token_ratio.assign(n, 0.0);
  std::vector<double> token_sq(n, 0.0), own_token_sq(n, 0.0);
  std::vector<long> token_outputs(n, 0);
  double error_sq = 0, own_error_sq = 0, reference_sq = 0;
  std::vector<Index> first_tokens;
  r.tight = true;
  double worst_tight = -1;
  for (std::size_t i = 0; i < count; ++i) {
    const HeadOutcome& h = outcomes[i];
    if (h.worst_ratio > r.worst_ratio || i == 0) {
      r.worst_ratio = h.worst_ratio;
      r.worst = h.worst;
    }
    for (int e = 0; e < 8; ++e) r.growth[e] = std::max(r.growth[e], h.growth[e]);
    for (Index t = 0; t < n; ++t) {
      r.token_ratio[t] = std::max(r.token_ratio[t], h.token_ratio[t]);
      token_sq[t] += h.token_distance_sq[t];
      if (!h.own_token_distance_sq.empty()) own_token_sq[t] += h.own_token_distance_sq[h.loosest_own][t];
      token_outputs[t] += h.token_outputs[t];
    }
    if (h.first_failure_token) {
      const Position p{ids[i].batch, ids[i].head, *h.first_failure_token, h.first_failure_column};
      if (!r.first_failure || p.token < r.first_failure->token) r.first_failure = p;
    }
    if (h.first_departure_token) {
      const Position p{ids[i].batch, ids[i].head, *h.first_departure_token, 0};
      if (!r.first_departure || p.token < r.first_departure->token) r.first_departure = p;
    }
    const std::optional<Index> first =
        h.first_failure_token ? h.first_failure_token : h.first_departure_token;
    if (first) first_tokens.push_back(*first);
    error_sq += h.error_sq;
    if (!h.own_error_sq.empty()) own_error_sq += h.own_error_sq[h.loosest_own];
    reference_sq += h.reference_sq;
    r.undefined += h.undefined;
    r.outputs += h.outputs;
    r.tight = r.tight && h.tight;
    if (h.tight_ratio > worst_tight) {
      worst_tight = h.tight_ratio;
      r.tight_ratio = h.tight_ratio;
      const double count = std::max<double>(1, double(h.outputs));
      const double unit = h.unit > 0 ? h.unit : 1;
      r.distance_units = std::sqrt(h.distance_sq / count) / unit;
      r.own_distance_units =
          h.own_distance_sq.empty() ? 0 : std::sqrt(h.own_distance_sq[h.loosest_own] / count) / unit;
      r.own_name = precision + " " + plan.own[h.loosest_own].candidate->implementation;
    }
  }
  // The per-token distances, rms over the heads' outputs, in units of the output format at the
  // rms output of the whole input.
  const Format out_format = options.output_format.value_or(options.precision);
  const double unit = 2 * std::ldexp(1.0, -binary(out_format).precision) *
                      std::sqrt(reference_sq / std::max<double>(1, double(r.outputs)));
  r.token_distance_units.assign(n, 0.0);
  r.own_token_distance_units.assign(n, 0.0);
  for (Index t = 0; t < n; ++t) {
    if (token_outputs[t] == 0 || unit == 0) continue;
    r.token_distance_units[t] = std::sqrt(token_sq[t] / double(token_outputs[t])) / unit;
    r.own_token_distance_units[t] = std::sqrt(own_token_sq[t] / double(token_outputs[t])) / unit;
  }
  if (r.outputs == 0)
    throw Error("hla check: no output has a finite bound, so none can be compared (" +
                std::to_string(r.undefined) +
                " outputs whose denominators the bounds cannot tell from zero, or whose rounding depth is "
                "too large)");
  r.sound = r.worst_ratio <= 1;
  r.passed = r.sound && (options.criterion == Criterion::sound || r.tight);
  const double scale = reference_sq > 0 ? std::sqrt(reference_sq) : 1;
  r.normwise_u = std::ldexp(std::sqrt(error_sq) / scale, bits);
  r.own_normwise_u = std::ldexp(std::sqrt(own_error_sq) / scale, bits);
  if (!r.passed) {
    std::size_t worst = 0;
    for (std::size_t i = 1; i < count; ++i)
      if (outcomes[i].tight_ratio > outcomes[worst].tight_ratio) worst = i;
    const HeadInput h = worst == 0 ? first : head(worst);
    r.diagnosed = {h.batch, h.head, 0, 0};
    const Sequence<double> queries_scaled = scaled(options, h.tokens);
    const Format out = options.output_format.value_or(options.precision);
    for (const DiagnosisForm& f : diagnosis_forms(options, d, dv)) {
      const double ratio = form_ratio(h.output, f.output(queries_scaled, h.tokens), out, outcomes[worst].base_sq,
                                      outcomes[worst].reference_sq);
      r.diagnosis.push_back({f.id, f.description, ratio});
    }
    std::stable_sort(r.diagnosis.begin(), r.diagnosis.end(),
                     [](const auto& a, const auto& b) { return a.ratio < b.ratio; });  // the closest first
    for (const auto& d : r.diagnosis)
      if (d.ratio <= CheckResult::tight_factor) r.matches.push_back(d.id);
    phases.done("the diagnosis");
  }
  // First failures that all sit at multiples of a chunk size (16 or more): the carry between chunks.
  if (!first_tokens.empty()) {
    Index g = 0;
    for (const Index t : first_tokens) g = std::gcd(g, t);
    if (g >= 16) {
      Index c = 1;
      while (g % (2 * c) == 0) c *= 2;
      if (c >= 16) r.chunk_boundary = c;
    }
  }
  return r;
}

}  // namespace

CheckResult check(const CheckOptions& options, std::size_t count,
                  const std::function<HeadInput(std::size_t)>& head) {
  return check_heads(options, count, head, nullptr);
}

std::string check_summary(const CheckResult& r, const CheckOptions& options) {
  std::ostringstream out;
  out << (r.passed  ? "PASS"
          : r.sound ? "FAIL (within the sound bound, outside the tight criterion)"
                    : "FAIL (outside the sound bound)");
  if (r.passed && !r.tight) out << " (sound criterion only; outside the tight criterion)";
  out << "\n";
  const auto where = [](const Position& p) {
    return "batch " + std::to_string(p.batch) + ", head " + std::to_string(p.head) + ", token " +
           std::to_string(p.token) + ", column " + std::to_string(p.column);
  };
  out << std::setprecision(3);
  out << "worst error / sound bound: " << r.worst_ratio << " at " << where(r.worst) << "\n";
  out << "normwise error: " << r.normwise_u << " u (u = 2^-" << arithmetic_bits(options.precision)
      << "); the toolkit's " << r.own_name << ": " << r.own_normwise_u << " u\n";
  out << "distance from the rounded reference: " << r.distance_units << " units of "
      << format_name(options.output_format.value_or(options.precision))
      << " at the rms output (rms, worst head), " << r.tight_ratio << "x the toolkit's " << r.own_name
      << " (tight limit " << CheckResult::tight_factor << "x)\n";
  if (r.first_failure) out << "first output outside the sound bound: " << where(*r.first_failure) << "\n";
  if (r.first_departure)
    out << "first token past the tight limit: token " << r.first_departure->token << " (batch "
        << r.first_departure->batch << ", head " << r.first_departure->head << ")\n";
  out << "worst ratio along the sequence (eighths):";
  for (const double g : r.growth) out << " " << g;
  out << "\n";
  if (r.chunk_boundary > 0)
    out << "the errors start at multiples of " << r.chunk_boundary
        << " tokens: look at the carry between chunks\n";
  if (!r.diagnosis.empty()) {
    out << "diagnosis (batch " << r.diagnosed.batch << ", head " << r.diagnosed.head << "): ";
    if (r.matches.empty()) {
      const auto closest = std::min_element(r.diagnosis.begin(), r.diagnosis.end(),
                                            [](const auto& a, const auto& b) { return a.ratio < b.ratio; });
      out << "no form in the catalogue matches; the closest is " << closest->id << " ("
          << closest->description << ") at " << closest->ratio << "x the tight limit's base\n";
    } else {
      out << "the output matches";
      for (const auto& d : r.diagnosis) {
        if (d.ratio <= CheckResult::tight_factor) out << "\n  " << d.id << ": " << d.description;
      }
      out << "\n";
    }
  }
  if (r.undefined > 0)
    out << r.undefined
        << " outputs without a finite bound were not compared (a denominator under --eps-policy "
        << eps_policy_name(options.eps_policy)
        << " that the bounds cannot tell from zero, or a rounding depth K with K u >= 1/2)\n";
  out << r.outputs << " outputs compared (" << r.heads << " heads, n = " << r.n
      << "; reference: " << r.reference_name << ")\n";
  return out.str();
}

void write_check_json(const CheckResult& r, const CheckOptions& options, std::ostream& out) {
  const auto number = json_double;
  const auto position = [](const std::optional<Position>& p) {
    if (!p) return std::string("null");
    return "{\"batch\": " + std::to_string(p->batch) + ", \"head\": " + std::to_string(p->head) +
           ", \"token\": " + std::to_string(p->token) + ", \"column\": " + std::to_string(p->column) + "}";
  };
  out << "{\"verdict\": \"" << (r.passed ? "pass" : "fail")
      << "\", \"sound\": " << (r.sound ? "true" : "false") << ", \"tight\": " << (r.tight ? "true" : "false")
      << ", \"criterion\": \"" << (options.criterion == Criterion::tight ? "tight" : "sound")
      << "\", \"worst_ratio\": " << number(r.worst_ratio) << ", \"worst\": " << position(r.worst)
      << ", \"first_failure\": " << position(r.first_failure)
      << ", \"first_departure\": " << position(r.first_departure)
      << ", \"normwise_u\": " << number(r.normwise_u) << ", \"own\": {\"implementation\": \"" << r.own_name
      << "\", \"normwise_u\": " << number(r.own_normwise_u)
      << ", \"distance_units\": " << number(r.own_distance_units)
      << "}, \"distance_units\": " << number(r.distance_units)
      << ", \"tight_ratio\": " << number(r.tight_ratio)
      << ", \"tight_factor\": " << number(CheckResult::tight_factor) << ", \"growth\": [";
  for (std::size_t i = 0; i < r.growth.size(); ++i) out << (i ? ", " : "") << number(r.growth[i]);
  out << "], \"diagnosis\": {\"matches\": [";
  for (std::size_t i = 0; i < r.matches.size(); ++i) out << (i ? ", " : "") << "\"" << r.matches[i] << "\"";
  out << "], \"candidates\": [";
  for (std::size_t i = 0; i < r.diagnosis.size(); ++i) {
    out << (i ? ", " : "") << "{\"id\": \"" << r.diagnosis[i].id << "\", \"description\": \""
        << r.diagnosis[i].description << "\", \"worst_ratio\": " << number(r.diagnosis[i].ratio) << "}";
  }
  out << "]}, \"chunk_boundary\": " << r.chunk_boundary << ", \"undefined\": " << r.undefined
      << ", \"outputs\": " << r.outputs << ", \"heads\": " << r.heads << ", \"n\": " << r.n
      << ", \"reference\": \"" << r.reference_name << "\", \"precision\": \"" << format_name(options.precision) << "\", \"output_dtype\": \""
      << format_name(options.output_format.value_or(options.precision)) << "\", \"eps_policy\": \""
      << eps_policy_name(options.eps_policy) << "\"}\n";
}

CheckResult check_arrays(const CheckOptions& options, Layout layout, const ArrayView& qa, const ArrayView& ka,
                         const ArrayView& va, const ArrayView& oa) {
  const Tensor q = tensor(qa, layout), k = tensor(ka, layout), v = tensor(va, layout), o = tensor(oa, layout);
  check_inputs(q, k, v);
  require(o.shape == v.shape, o.path + ": shape " + shape_text(o.shape) + " does not match " + v.path + " " +
                                  shape_text(v.shape) + " (the output has the values' shape)");
  Phases phases(options.progress);
  check_values(q, options.precision, options.threads);
  check_values(k, options.precision, options.threads);
  check_values(v, options.precision, options.threads);
  check_values(o, std::nullopt, options.threads);
  phases.done("the values checked");
  const auto output = [&](std::size_t i) {
    HeadInput h;
    h.batch = head_index(q, v, i).batch;
    h.head = head_index(q, v, i).value_head;
    h.output = Matrix<double>(v.tokens, v.features);
    for (Index t = 0; t < v.tokens; ++t)
      for (Index f = 0; f < v.features; ++f) h.output(t, f) = o.at(h.batch, t, h.head, f);
    return h;
  };
  // The inputs as float, exactly (they are values of the precision): straight from the arrays.
  const auto inputs = [&](std::size_t i, float* to_q, float* to_k, float* to_v) {
    const HeadIndex x = head_index(q, v, i);
    const Index b = x.batch, hv = x.value_head, hq = x.query_head;
    for (Index t = 0; t < q.tokens; ++t) {
      for (Index f = 0; f < q.features; ++f) {
        *to_q++ = float(q.at(b, t, hq, f));
        *to_k++ = float(k.at(b, t, hq, f));
      }
      for (Index f = 0; f < v.features; ++f) *to_v++ = float(v.at(b, t, hv, f));
    }
  };
  const HeadGather gather{inputs, output};
  return check_heads(options, std::size_t(v.batch * v.heads), [&](std::size_t i) {
    HeadInput h = head_tokens(q, k, v, i);
    h.output = output(i).output;
    return h;
  }, &gather);  // used by the GPU's runs only, whose candidates have float32 arithmetic
}

std::vector<double> reference_arrays(const CheckOptions& options, Layout layout, ScalarKind scalar,
                                     const ArrayView& qa, const ArrayView& ka, const ArrayView& va) {
  if (scalar != ScalarKind::exact && scalar != ScalarKind::mpfr && scalar != ScalarKind::f64)
    throw Error("scalar: the reference is computed in exact, mpfr or f64");
  const Tensor q = tensor(qa, layout), k = tensor(ka, layout), v = tensor(va, layout);
  check_inputs(q, k, v);
  for (const Tensor* x : {&q, &k, &v}) check_values(*x, Format::f64, options.threads);
  const OperatorSpec& spec = options.spec;
  std::vector<double> out(std::size_t(v.batch * v.heads * v.tokens * v.features));
  for (std::size_t i = 0; i < std::size_t(v.batch * v.heads); ++i) {
    const HeadInput h = head_tokens(q, k, v, i);
    const Matrix<double> o = with_scalar(scalar, [&]<class T>(TypeTag<T>) -> Matrix<double> {
      if constexpr (std::is_same_v<T, Rational> || std::is_same_v<T, Mpfr> || std::is_same_v<T, double>) {
        const auto cast = [](const Matrix<double>& m) {
          return Matrix<T>(m.unaryExpr([](double x) { return T(x); }));
        };
        const Sequence<T> s{cast(h.tokens.q * options.scale), cast(h.tokens.k), cast(h.tokens.v)};
        const Terms<T> t =
            fast::streaming_terms(spec, fast::default_form(spec, fast::Implementation::streaming), s);
        Matrix<double> result(t.num.rows(), t.num.cols());
        const T eps = from_rational<T>(spec.eps);
        for (Index r = 0; r < result.rows(); ++r) {
          const T d = spec.normalize ? divisor<T>(options.eps_policy, t.den(r), eps) : T(1);
          if constexpr (std::is_same_v<T, Rational>) {
            if (spec.normalize && d == 0)
              throw Error("the normalized output at token " + std::to_string(r) + " divides by zero exactly");
          }
          for (Index c = 0; c < result.cols(); ++c) result(r, c) = to_double(T(t.num(r, c) / d));
        }
        return result;
      } else {
        throw Error("unreachable scalar");
      }
    });
    for (Index t = 0; t < v.tokens; ++t)
      for (Index f = 0; f < v.features; ++f) out[v.index(h.batch, t, h.head, f)] = o(t, f);
  }
  return out;
}
}  // namespace hla::reports
