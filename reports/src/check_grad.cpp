#include "hla/reports/check_grad.hpp"

#include <algorithm>
#include <cmath>
#include <future>
#include <iomanip>
#include <sstream>

#include "arrays.hpp"
#include "check_gpu.hpp"
#include "hla/checking/instances.hpp"
#include "hla/reports/backward_bound.hpp"
#include "hla/reports/candidates.hpp"

namespace hla::reports {

namespace {

using fast::Implementation;

// The backward whose bound the sound criterion takes, as --algorithm says: by default the
// streaming backward's; the scan's or the chunk-parallel form's when named (the scan's depth and
// gauge runs on the instrumented scalars are about 20x the streaming's: docs/perf.md).
Implementation bound_implementation(const CheckOptions& options) {
  return options.algorithm ? *options.algorithm : Implementation::streaming;
}

template <class T>
Gradients<T> backward(const CheckOptions& options, Implementation impl, const Sequence<T>& s,
                      const std::type_identity_t<Upstream<T>>& upstream) {
  const OperatorSpec& spec = options.spec;
  const fast::Form form = fast::default_form(spec, impl);
  if (impl == Implementation::streaming) return fast::streaming_gradients<T>(spec, form, s, upstream);
  if (impl == Implementation::chunked)
    return fast::chunked_gradients<T>(spec, form, s, upstream, fast::ScanOptions{options.chunk, 1});
  return fast::scan_gradients<T>(spec, form, s, upstream, fast::ScanOptions{options.chunk, 1});
}

// Rounding depths K of every gradient entry (checking/depth.hpp) of one implementation in a
// precision of `Bits`: they depend on the operator, the shapes and the chunk only.
template <int Bits>
Gradients<std::int64_t> depths(const CheckOptions& options, Implementation impl, Index n, Index d, Index dv) {
  return backward_depths<Bits>(options.spec, n, d, dv, [&](const auto& seq, const auto& upstream) {
    return backward(options, impl, seq, upstream);
  });
}

// Gradient i of gradient_names: dQ, dK, dV.
template <class T>
const Matrix<T>& part(const Gradients<T>& g, int i) {
  return i == 0 ? g.dq : i == 1 ? g.dk : g.dv;
}

bool exact_power_of_two(double x) {
  int e = 0;
  return std::frexp(x, &e) == 0.5;
}

// runs[0] is the streaming backward (the reference's algorithm), runs.back() the one the sound
// bound takes (the same, or the scan). Depths per run: in the candidate's arithmetic and in
// float64 (for the gauge computed in double, and the reference), each with the roundings beyond
// the backward's added (--scale's, the group sum's).
struct Plan {
  std::vector<Implementation> runs;
  std::vector<Gradients<std::int64_t>> depth, depth53;
  int bits = 24;  // the candidate's arithmetic
  // --scale's roundings in double of dQ, dK, dV (q times the scale, dQ times it): those of the MPFR
  // reference's inputs and dQ, which its 261-bit depths do not price.
  std::int64_t scale_roundings[3] = {0, 0, 0};
  Format out = Format::f32;
  Index group = 1;
};

struct HeadOutcome {
  double worst_ratio = 0;
  int worst_part = 0;
  Position worst;
  std::optional<Position> first_failure;
  int first_failure_part = 0;
  double part_ratio[3] = {0, 0, 0};
  double distance_units[3] = {0, 0, 0}, own_distance_units[3] = {0, 0, 0}, tight[3] = {0, 0, 0};
  double limit[3] = {0, 0, 0};  // the tight limit on the rms distance from the rounded reference
  long unbounded = 0;           // entries without a finite bound, not compared
};

// A backward run in T on the inputs and dO (values of T: the inputs are checked to be), widened
// to double: its gradients, forward readouts (.terms) and the readouts' adjoints it computed
// (finish_adjoint of its own readouts, as inside the run; rounded to nearest from MPFR).
struct Run {
  Gradients<double> g;
  Terms<double> adjoints;
};

template <class T>
Run run_in(const CheckOptions& options, Implementation impl, const Sequence<double>& s,
           const Matrix<double>& d_out) {
  const auto cast = [](const Matrix<double>& m) {
    return Matrix<T>(m.unaryExpr([](double x) { return T(x); }));
  };
  const auto back = [](const auto& m) {
    return Matrix<double>(m.unaryExpr([](const T& x) { return static_cast<double>(x); }));
  };
  const Matrix<T> d_out_t = cast(d_out);
  const Gradients<T> g = backward(options, impl, Sequence<T>{cast(s.q), cast(s.k), cast(s.v)}, d_out_t);
  const Terms<T> c = reference::finish_adjoint(options.spec, g.terms, d_out_t);
  Run r{{back(g.dq), back(g.dk), back(g.dv), {}, {back(g.terms.num), Vector<double>(back(g.terms.den))}},
        {back(c.num), Vector<double>(back(c.den))}};
  r.g.dq *= options.scale;
  return r;
}

// Every entry's sound bound before the output format's rounding: the bounded run's a-priori bound
// plus the reference's own (backward_bound.hpp's terms), from the gauges G1 = G(|x|, |c_hat|) of
// the reference's run and of the bounded run (one when both are the streaming backward) and,
// normalized, G2 = G(|x|, E) (already an upper bound); `ref` the reference's gradients.
Gradients<double> entry_bounds(const CheckOptions& options, const Plan& plan,
                               const std::vector<Gradients<double>>& g1, const Gradients<double>& g2,
                               const Gradients<double>& ref) {
  const bool f64 = options.precision == Format::f64, normalize = options.spec.normalize;
  const std::size_t b = plan.runs.size() - 1;  // the bounded run
  const Gradients<double> up0 = gradient_gauge_upper_bound(g1[0], plan.depth53[0]);
  const Gradients<double> up_b = b ? gradient_gauge_upper_bound(g1[b], plan.depth53[b]) : Gradients<double>{};
  const auto bound = [&](int p) {
    const Matrix<double>& g = part(ref, p);
    const auto depth = [&](const std::vector<Gradients<std::int64_t>>& k,
                           std::size_t i) -> const Matrix<std::int64_t>& { return part(k[i], p); };
    const Matrix<double>& gauge0 = part(up0, p);
    const Matrix<double>& gauge_b = b ? part(up_b, p) : gauge0;
    Matrix<double> out(g.rows(), g.cols());
    for (Index i = 0; i < g.size(); ++i) {
      const double own_bound = gamma_bound(depth(plan.depth, b).data()[i], plan.bits) * gauge_b.data()[i];
      // The reference's own error: float64 streaming, gamma_53(K) times its gauge; MPFR, gamma_261(K)
      // times it, the scale's roundings in double (q scaled before it, dQ after) and half an ulp of
      // double for each narrowing (the group sum's too).
      const std::int64_t k53 = depth(plan.depth53, 0).data()[i];
      const double reference_bound =
          f64 ? (gamma_bound(k53, 261) + gamma_bound(plan.scale_roundings[p], 53)) * gauge0.data()[i] *
                        (1 + 0x1p-50) +
                    std::ldexp(std::abs(g.data()[i]), -53) * double(plan.group) + std::ldexp(1.0, -261)
              : gamma_bound(k53, 53) * gauge0.data()[i];
      const double total = own_bound + reference_bound;
      out.data()[i] = normalize ? (total + part(g2, p).data()[i]) * (1 + 0x1p-50) : total;
    }
    return out;
  };
  return {bound(0), bound(1), bound(2), {}, {}};
}

// One value head's backward runs: the reference, the toolkit's own backward of the bounded algorithm
// (--algorithm's, else the streaming one) in the precision, and every entry's sound bound before the output
// format's rounding (.bound: the bounded run's a-priori bound plus the reference's own, backward_bound.hpp's
// terms).
struct Runs {
  Gradients<double> ref, own, bound;
};

Runs runs_of(const CheckOptions& options, const Plan& plan, const Sequence<double>& s, const Matrix<double>& d_out) {
  const OperatorSpec& spec = options.spec;
  const bool f64 = options.precision == Format::f64;
  const std::size_t b = plan.runs.size() - 1;  // the bounded run
  // The reference: float64 streaming backward, or 261-bit MPFR for a float64 candidate. The own:
  // float64, or float32 on the inputs as float (the queries scaled in double, then rounded).
  const auto in_precision = [&](Implementation impl) {
    return f64 ? run_in<double>(options, impl, s, d_out) : run_in<float>(options, impl, s, d_out);
  };
  const Run ref = f64 ? run_in<Mpfr>(options, Implementation::streaming, s, d_out)
                      : run_in<double>(options, Implementation::streaming, s, d_out);
  // The own run is the bounded one: the tight criterion compares with the algorithm the candidate is
  // said to compute, and the bound takes its readouts' adjoints c_hat (dO and 0 unnormalized).
  const Run own = in_precision(plan.runs[b]);
  const Run& c_b = own;
  const auto gauge = [&](std::size_t i, const Terms<double>& adjoints) {
    Gradients<double> g = backward_gauge(s, adjoints, [&](const auto& seq, const auto& upstream) {
      return backward(options, plan.runs[i], seq, upstream);
    });
    g.dq *= options.scale;
    return g;
  };
  // |c_hat|, rounded up past a rounding to nearest of an MPFR value (exact unnormalized: dO and 0).
  const double up = spec.normalize ? 1 + 0x1p-52 : 1;
  const auto magnitude = [up](const Terms<double>& c) {
    return Terms<double>{c.num.cwiseAbs() * up, c.den.cwiseAbs() * up};
  };
  // G1 = G(|x|, |c_hat|) of the reference's run and of the bounded run: one gauge run on the larger
  // magnitudes when both are streaming.
  std::vector<Gradients<double>> g1;
  if (b == 0) {
    const Terms<double> r = magnitude(ref.adjoints), o = magnitude(c_b.adjoints);
    g1.push_back(gauge(0, {r.num.cwiseMax(o.num), r.den.cwiseMax(o.den)}));
  } else {
    g1.push_back(gauge(0, magnitude(ref.adjoints)));
    g1.push_back(gauge(b, magnitude(c_b.adjoints)));
  }
  // G2 = G(|x|, E) with E >= |c_hat - c| (backward_bound.hpp's adjoint_error), normalized only:
  // the reference's and the bounded run's, in one gauge run when both are streaming.
  Gradients<double> g2;
  if (spec.normalize) {
    const auto error = [&](std::size_t i, const Run& run, int bits, const Gradients<std::int64_t>& depth) {
      return adjoint_error(spec, bits, d_out, run.g.terms,
                           gauge_upper_bound(g1[std::min(i, g1.size() - 1)].terms, plan.depth53[i].terms),
                           depth.terms);
    };
    const Terms<double> e_ref = error(0, ref, f64 ? 261 : 53, plan.depth53[0]);
    const Terms<double> e_b = error(b, c_b, plan.bits, plan.depth[b]);
    const auto up_all = [&](const Gradients<double>& g, std::size_t i) {
      return gradient_gauge_upper_bound(g, plan.depth53[i]);
    };
    if (b == 0) {
      g2 = up_all(gauge(0, {e_ref.num + e_b.num, e_ref.den + e_b.den}), 0);
    } else {
      g2 = up_all(gauge(0, e_ref), 0);
      const Gradients<double> x = up_all(gauge(b, e_b), b);
      g2.dq += x.dq;
      g2.dk += x.dk;
      g2.dv += x.dv;
    }
  }
  Runs r{ref.g, own.g, {}};
  r.ref.terms = r.own.terms = {};
  r.bound = entry_bounds(options, plan, g1, g2, r.ref);
  return r;
}

// Adds a value head's runs to its group's: dQ, dK summed (their bounds too: the bound of a sum of
// the heads' gradients), dV placed in its columns.
void add_runs(Runs& to, const Runs& x, Index group_index, Index dv) {
  const auto add = [&](Gradients<double>& a, const Gradients<double>& b) {
    if (group_index == 0) {
      a.dq = b.dq;
      a.dk = b.dk;
    } else {
      a.dq += b.dq;
      a.dk += b.dk;
    }
    a.dv.middleCols(group_index * dv, dv) = b.dv;
  };
  add(to.ref, x.ref);
  add(to.own, x.own);
  add(to.bound, x.bound);
}

// One query/key head against its group's value heads' runs (`runs(g)` those of value head g).
HeadOutcome check_head(const Plan& plan, const GradientHead& head, const std::function<Runs(Index)>& runs) {
  const Index group = head.group, dv = head.tokens.value_dim() / group, n = head.tokens.length();
  // The group's value heads one after another: q and k shared, v, dO, dV in column blocks.
  Runs all;
  for (Gradients<double>* g : {&all.ref, &all.own, &all.bound}) g->dv = Matrix<double>(n, group * dv);
  for (Index g = 0; g < group; ++g) add_runs(all, runs(g), g, dv);
  // An entry's position: dQ, dK in the query/key head, dV in its value head of the group.
  const auto where = [&](int p, Index t, Index j) {
    return p < 2 ? Position{head.batch, head.head, t, j} : Position{head.batch, head.head * group + j / dv, t, j % dv};
  };
  const double u_out = unit_roundoff(plan.out), tiny = underflow_error(plan.out);
  const double sum_slack = group > 1 ? 1 + double(group) * 0x1p-52 : 1;
  HeadOutcome r;
  for (int p = 0; p < 3; ++p) {
    const Matrix<double>& c = part(head.candidate, p);
    const Matrix<double>& g = part(all.ref, p);
    const Matrix<double>& o = part(all.own, p);
    const Matrix<double>& bound = part(all.bound, p);
    double candidate_sq = 0, own_sq = 0, ref_sq = 0;
    Index compared = 0;
    for (Index t = 0; t < g.rows(); ++t)
      for (Index j = 0; j < g.cols(); ++j) {
        // dQ and dK of a group sum its value heads' bounds, rounded up for the sum's own roundings.
        const double total = p < 2 ? bound(t, j) * sum_slack : bound(t, j);
        if (!(total < INFINITY)) {  // a denominator it depends on not told from zero
          ++r.unbounded;
          continue;
        }
        ++compared;
        const double limit = total + u_out * (std::abs(g(t, j)) + total) + tiny;
        const double error = std::abs(c(t, j) - g(t, j));
        const double ratio = error / limit;  // limit >= the format's underflow error > 0
        if (ratio > r.part_ratio[p]) r.part_ratio[p] = ratio;
        if (ratio > r.worst_ratio) {
          r.worst_ratio = ratio;
          r.worst_part = p;
          r.worst = where(p, t, j);
        }
        if (!(ratio <= 1) && (!r.first_failure || t < r.first_failure->token)) {
          r.first_failure = where(p, t, j);
          r.first_failure_part = p;
        }
        const double rounded = round_to(plan.out, g(t, j));
        candidate_sq += (c(t, j) - rounded) * (c(t, j) - rounded);
        const double own_rounded = round_to(plan.out, o(t, j));
        own_sq += (own_rounded - rounded) * (own_rounded - rounded);
        ref_sq += g(t, j) * g(t, j);
      }
    const double count = double(std::max<Index>(1, compared));
    const double unit = u_out * std::sqrt(ref_sq / count);
    const double candidate_rms = std::sqrt(candidate_sq / count), own_rms = std::sqrt(own_sq / count);
    r.distance_units[p] = unit > 0 ? candidate_rms / unit : (candidate_rms > 0 ? INFINITY : 0);
    r.own_distance_units[p] = unit > 0 ? own_rms / unit : 0;
    const double limit = std::max(GradientCheckResult::tight_factor * own_rms, GradientCheckResult::tight_floor_units * unit);
    r.tight[p] = limit > 0 ? candidate_rms / limit : (candidate_rms > 0 ? INFINITY : 0);
    r.limit[p] = limit;
  }
  return r;
}

#if HLA_HAVE_CUDA
// Every value head's streaming backward on the GPU at once (check_gpu.hpp: float64, float32 and
// its gauge), then each query/key head's bounds and comparison on the CPU threads.
void check_heads_on_gpu(const CheckOptions& options, const Plan& plan, const std::vector<GradientHead>& heads,
                        std::vector<HeadOutcome>& outcomes, Phases& phases) {
  const Index group = heads[0].group, n = heads[0].tokens.length(), d = heads[0].tokens.key_dim(),
              dv = heads[0].tokens.value_dim() / group;
  const std::size_t count = heads.size() * std::size_t(group), keys = std::size_t(n * d),
                    values = std::size_t(n * dv);
  detail::Buffer<float> q = detail::buffer<float>(count * keys), k = detail::buffer<float>(count * keys),
                        v = detail::buffer<float>(count * values);
  const detail::Buffer<double> d_out = detail::buffer<double>(count * values);
  parallel_for(heads.size(), options.threads, [&](std::size_t i) {
    const GradientHead& head = heads[i];
    for (Index g = 0; g < group; ++g) {
      const std::size_t at = i * std::size_t(group) + std::size_t(g);
      for (Index t = 0; t < n; ++t) {
        for (Index j = 0; j < d; ++j) {
          q[at * keys + std::size_t(t * d + j)] = float(head.tokens.q(t, j));  // values of the precision
          k[at * keys + std::size_t(t * d + j)] = float(head.tokens.k(t, j));
        }
        for (Index j = 0; j < dv; ++j) {
          v[at * values + std::size_t(t * dv + j)] = float(head.tokens.v(t, g * dv + j));
          d_out[at * values + std::size_t(t * dv + j)] = head.d_out(t, g * dv + j);
        }
      }
    }
  });
  const detail::GpuGradientRuns gpu = detail::gpu_gradient_runs(
      options, std::int64_t(count), n, d, dv, std::move(q), std::move(k), std::move(v), d_out.get(), phases);
  parallel_for(heads.size(), options.threads, [&](std::size_t i) {
    outcomes[i] = check_head(plan, heads[i], [&](Index g) {
      const std::size_t at = i * std::size_t(group) + std::size_t(g);
      const auto read = [&]<class T>(const detail::FlatGradients<T>& x) {
        using Rows = Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>;
        Gradients<double> out{Eigen::Map<const Rows>(x.dq.get() + at * keys, n, d).template cast<double>(),
                              Eigen::Map<const Rows>(x.dk.get() + at * keys, n, d).template cast<double>(),
                              Eigen::Map<const Rows>(x.dv.get() + at * values, n, dv).template cast<double>(),
                              {},
                              {}};
        out.dq *= options.scale;
        return out;
      };
      Runs r{read(gpu.reference), read(gpu.own), {}};
      r.bound = entry_bounds(options, plan, {read(gpu.gauge)}, {}, r.ref);
      return r;
    });
  });
  phases.done("the bounds and the comparison");
}
#endif

// The streaming backward with one of the catalogue's backward mistakes (fast::backward_mistakes)
// in every token's step, from the stream's own backward().
struct MistakenStep {
  std::string_view id;
  double gamma;
  template <class Stream>
  fast::TokenGradient<double> operator()(const Stream& after, const Stream& before, const Vector<double>& q,
                                         const Vector<double>& k, const RowVector<double>& v,
                                         const RowVector<double>& d_num, const double& d_den,
                                         typename Stream::Adjoint& a) const {
    if (id == "adjoint-late") {  // dK, dV from the adjoint without this token's readout
      typename Stream::Adjoint later = a;
      const fast::TokenGradient<double> push =
          after.backward(before, q, k, v, RowVector<double>::Zero(d_num.size()), 0.0, later);
      fast::TokenGradient<double> g = after.backward(before, q, k, v, d_num, d_den, a);
      g.dk = push.dk;
      g.dv = push.dv;
      return g;
    }
    if (id == "decay-outside-adjoint") {  // the readout's term enters the adjoint decayed; dQ as it is
      typename Stream::Adjoint own = a;
      fast::TokenGradient<double> g =
          after.backward(before, q, k, v, RowVector<double>(gamma * d_num), gamma * d_den, a);
      g.dq = after.backward(before, q, k, v, d_num, d_den, own).dq;
      return g;
    }
    if (id == "den-adjoint-dropped") return after.backward(before, q, k, v, d_num, 0.0, a);
    if (id == "cross-adjoint-dropped") {
      fast::TokenGradient<double> g = after.backward(before, q, k, v, d_num, d_den, a);
      if constexpr (requires { a.cross_value; }) {
        a.cross_value.setZero();
        a.cross_mass.setZero();
      }
      return g;
    }
    throw Error("hla check --grad: the catalogue's backward mistake " + std::string(id) +
                " has no computation here");
  }
};

}  // namespace

Gradients<double> mistaken_gradients(const CheckOptions& options, std::string_view id,
                                     const Sequence<double>& tokens, const Matrix<double>& d_out) {
  const OperatorSpec& spec = options.spec;
  const fast::Form form = fast::default_form(spec, Implementation::streaming);
  const MistakenStep step{id, to_double(spec.decay)};
  const Sequence<double> s{tokens.q * options.scale, tokens.k, tokens.v};
  Gradients<double> g = fast::with_stream<double>(spec, form, s.key_dim(), s.value_dim(), [&](auto stream) {
    return fast::stream_gradients<double>(stream, spec, s, d_out, 0, step);
  });
  g.dq *= options.scale;
  return g;
}

namespace {

// The candidate's distance from a mistake's gradients (float64, rounded to the output format) over
// the tight limit, the largest over dQ, dK, dV; the group's value heads combined as the reference's.
double mistake_ratio(const CheckOptions& options, const Plan& plan, const GradientHead& head,
                     const HeadOutcome& outcome, std::string_view id) {
  const Index group = head.group, dv = head.tokens.value_dim() / group, n = head.tokens.length();
  const Index d = head.tokens.key_dim();
  Gradients<double> mistaken{
      Matrix<double>::Zero(n, d), Matrix<double>::Zero(n, d), Matrix<double>(n, group * dv), {}};
  for (Index g = 0; g < group; ++g) {
    const Gradients<double> x =
        mistaken_gradients(options, id, {head.tokens.q, head.tokens.k, head.tokens.v.middleCols(g * dv, dv)},
                           head.d_out.middleCols(g * dv, dv));
    mistaken.dq += x.dq;
    mistaken.dk += x.dk;
    mistaken.dv.middleCols(g * dv, dv) = x.dv;
  }
  double worst = 0;
  for (int p = 0; p < 3; ++p) {
    const Matrix<double>& c = part(head.candidate, p);
    const Matrix<double>& f = part(mistaken, p);
    double sq = 0;
    for (Index i = 0; i < c.size(); ++i) {
      const double x = c.data()[i] - round_to(plan.out, f.data()[i]);
      sq += std::isfinite(x) ? x * x : INFINITY;
    }
    const double rms = std::sqrt(sq / double(std::max<Index>(1, c.size())));
    worst = std::max(worst, outcome.limit[p] > 0 ? rms / outcome.limit[p] : (rms > 0 ? INFINITY : 0));
  }
  return worst;
}

std::string number_text(double x) {
  std::ostringstream s;
  s << std::setprecision(3) << x;
  return s.str();
}

std::string position_text(const Position& p, int part) {
  return std::string(gradient_names[part]) + " at token " + std::to_string(p.token) + ", column " +
         std::to_string(p.column) + " (batch " + std::to_string(p.batch) + ", head " + std::to_string(p.head) + ")";
}

}  // namespace

GradientCheckResult check_gradients(const CheckOptions& options, const std::vector<GradientHead>& heads) {
  const OperatorSpec& spec = options.spec;
  if (spec.normalize && options.eps_policy != EpsPolicy::add)
    throw Error(
        "--grad: the normalized backward divides by den + eps (--eps-policy add); the gradients under "
        "--eps-policy " +
        std::string(eps_policy_name(options.eps_policy)) + " cannot be checked yet");
  require(!heads.empty(), "--grad: no heads to check");
  const Index group = heads[0].group, n = heads[0].tokens.length(), d = heads[0].tokens.key_dim(),
              dv = heads[0].tokens.value_dim() / group;
  require(group >= 1 && dv * group == heads[0].tokens.value_dim(), "--grad: the value heads do not divide into the group");
  for (const GradientHead& h : heads) {
    const Index w = group * dv;
    require(h.group == group && h.tokens.length() == n && h.tokens.key_dim() == d && h.tokens.value_dim() == w &&
                h.d_out.rows() == n && h.d_out.cols() == w && h.candidate.dq.rows() == n && h.candidate.dq.cols() == d &&
                h.candidate.dk.rows() == n && h.candidate.dk.cols() == d && h.candidate.dv.rows() == n &&
                h.candidate.dv.cols() == w,
            "--grad: the heads differ in shape (batch " + std::to_string(h.batch) + ", head " + std::to_string(h.head) + ")");
  }
  Plan plan;
  const Implementation bounded = bound_implementation(options);
  plan.runs = {Implementation::streaming};
  if (bounded != Implementation::streaming) plan.runs.push_back(bounded);
  plan.bits = arithmetic_bits(options.precision);
  plan.out = options.output_format.value_or(options.precision);
  // Float32's depths bound float64's (a constant that double cannot hold, float cannot either), so
  // beside the reference's streaming run they serve for the gauges' rounding too. The runs at once.
  Phases phases(options.progress);
  std::vector<std::future<Gradients<std::int64_t>>> runs53, runs;
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    const Implementation impl = plan.runs[i];
    if (plan.bits == 24) runs.push_back(std::async(std::launch::async, [&, impl] { return depths<24>(options, impl, n, d, dv); }));
    if (plan.bits == 53 || i == 0)
      runs53.push_back(std::async(std::launch::async, [&, impl] { return depths<53>(options, impl, n, d, dv); }));
  }
  for (std::size_t i = 0; i < plan.runs.size(); ++i) {
    if (plan.bits == 24) plan.depth.push_back(runs[i].get());
    plan.depth53.push_back(plan.bits == 53 || i == 0 ? runs53[i].get() : plan.depth[i]);
    if (plan.bits == 53) plan.depth.push_back(plan.depth53[i]);
  }
  phases.done("the backward's rounding depths");
  // Roundings beyond the backward's: q times the scale rounds once per query factor of a monomial
  // (of the readouts too), dQ times the scale once more; dQ and dK of grouped heads sum the group's
  // value heads, G - 1 more.
  const int q = exact_power_of_two(options.scale) ? 0 : query_degree(spec);
  plan.group = group;
  if (q) {
    plan.scale_roundings[0] = q + 1;
    plan.scale_roundings[1] = plan.scale_roundings[2] = q;
  }
  for (auto* depths : {&plan.depth, &plan.depth53})
    for (Gradients<std::int64_t>& k : *depths) {
      k.dq.array() += q + (q ? 1 : 0) + (group - 1);
      k.dk.array() += q + (group - 1);
      k.dv.array() += q;
      k.terms.num.array() += q;
      k.terms.den.array() += q;
    }
  std::vector<HeadOutcome> outcomes(heads.size());
  const bool gpu =
      detail::runs_on_gpu(options, [&] { return detail::gpu_gradient_check_unavailable(options, d, dv); });
  if (gpu) {
#if HLA_HAVE_CUDA
    check_heads_on_gpu(options, plan, heads, outcomes, phases);
#endif
  } else {
    parallel_for(heads.size(), options.threads, [&](std::size_t i) {
      const GradientHead& head = heads[i];
      const Index dv = head.tokens.value_dim() / head.group;
      outcomes[i] = check_head(plan, head, [&](Index g) {
        const Sequence<double> s{head.tokens.q * options.scale, head.tokens.k,
                                 head.tokens.v.middleCols(g * dv, dv)};
        return runs_of(options, plan, s, head.d_out.middleCols(g * dv, dv));
      });
    });
    phases.done("the runs, bounds and comparison on the CPU");
  }

  GradientCheckResult r;
  for (const HeadOutcome& h : outcomes) r.unbounded += h.unbounded;
  r.heads = Index(heads.size());
  r.n = n;
  r.entries = long(heads.size()) * long(n) * long(2 * d + group * dv);
  r.reference_name = options.precision == Format::f64 ? "261-bit MPFR streaming backward (CPU)"
                     : gpu                            ? "float64 gpu-streaming backward (GPU)"
                                                      : "float64 streaming backward (CPU)";
  r.own_name = std::string(options.precision == Format::f64 ? "float64" : "float32") + " " +
               std::string(fast::implementation_name(gpu ? Implementation::gpu_streaming : bounded)) +
               " backward";
  r.bound_name =
      std::string(fast::implementation_name(gpu ? Implementation::gpu_streaming : bounded)) + " backward";
  if (bounded == Implementation::scan) r.bound_name += " (chunks of " + std::to_string(options.chunk) + ")";
  for (const HeadOutcome& h : outcomes) {
    if (h.worst_ratio > r.worst_ratio) {
      r.worst_ratio = h.worst_ratio;
      r.worst_part = h.worst_part;
      r.worst = h.worst;
    }
    for (int p = 0; p < 3; ++p) {
      r.part_ratio[p] = std::max(r.part_ratio[p], h.part_ratio[p]);
      if (h.tight[p] > r.tight_ratio) {
        r.tight_ratio = h.tight[p];
        r.tight_part = p;
      }
    }
    if (h.first_failure && (!r.first_failure || h.first_failure->token < r.first_failure->token)) {
      r.first_failure = h.first_failure;
      r.first_failure_part = h.first_failure_part;
    }
  }
  // The distances of the head with the largest tight ratio.
  std::size_t tight_head = 0;
  double largest = -1;
  for (std::size_t i = 0; i < outcomes.size(); ++i) {
    const double t = *std::max_element(outcomes[i].tight, outcomes[i].tight + 3);
    if (t > largest) {
      largest = t;
      tight_head = i;
    }
  }
  r.tight_head = {heads[tight_head].batch, heads[tight_head].head, 0, 0};
  for (int p = 0; p < 3; ++p) {
    r.distance_units[p] = outcomes[tight_head].distance_units[p];
    r.own_distance_units[p] = outcomes[tight_head].own_distance_units[p];
  }
  if (r.unbounded == r.entries)
    throw Error("--grad: no gradient entry has a finite bound, so none can be compared (" +
                std::to_string(r.unbounded) +
                " entries that depend on a denominator den + eps the bounds cannot tell from zero)");
  r.sound = r.worst_ratio <= 1;
  r.tight = r.tight_ratio <= 1;
  r.passed = r.sound && (options.criterion == Criterion::sound || r.tight);
  if (!r.passed) {
    r.diagnosed = r.tight_head;
    for (const fast::Mistake& m : fast::backward_mistakes()) {
      if (!m.applies(spec, options.scale != 1, d, dv)) continue;
      const double ratio = mistake_ratio(options, plan, heads[tight_head], outcomes[tight_head], m.id);
      r.diagnosis.push_back({std::string(m.id), std::string(m.description), ratio});
    }
    std::stable_sort(r.diagnosis.begin(), r.diagnosis.end(),
                     [](const auto& a, const auto& b) { return a.ratio < b.ratio; });  // the closest first
    for (const auto& x : r.diagnosis)
      if (x.ratio <= 1) r.matches.push_back(x.id);
  }
  return r;
}

GradientCheckResult check_gradient_arrays(const CheckOptions& options, Layout layout, const ArrayView& qa,
                                          const ArrayView& ka, const ArrayView& va, const ArrayView& d_outa,
                                          const ArrayView& dqa, const ArrayView& dka, const ArrayView& dva) {
  const Tensor q = tensor(qa, layout), k = tensor(ka, layout), v = tensor(va, layout);
  const Tensor d_out = tensor(d_outa, layout), dq = tensor(dqa, layout), dk = tensor(dka, layout),
               dv = tensor(dva, layout);
  check_inputs(q, k, v);
  for (const Tensor* x : {&d_out, &dv})
    require(x->shape == v.shape, x->path + ": shape " + shape_text(x->shape) + " does not match " + v.path + " " +
                                     shape_text(v.shape) + " (dO and dV have the values' shape)");
  for (const Tensor* x : {&dq, &dk})
    require(x->shape == q.shape, x->path + ": shape " + shape_text(x->shape) + " does not match " + q.path + " " +
                                     shape_text(q.shape) + " (dQ and dK have the queries' shape)");
  for (const Tensor* x : {&q, &k, &v}) check_values(*x, options.precision, options.threads);
  for (const Tensor* x : {&d_out, &dq, &dk, &dv}) check_values(*x, std::nullopt, options.threads);
  // One GradientHead per query/key head, its group's value heads side by side.
  const Index group = v.heads / q.heads;
  std::vector<GradientHead> heads;
  for (Index b = 0; b < q.batch; ++b)
    for (Index h = 0; h < q.heads; ++h) {
      const auto read = [&](const Tensor& x, Index head, Index count) {
        Matrix<double> m(x.tokens, count * x.features);
        for (Index g = 0; g < count; ++g)
          for (Index t = 0; t < x.tokens; ++t)
            for (Index f = 0; f < x.features; ++f) m(t, g * x.features + f) = x.at(b, t, head + g, f);
        return m;
      };
      GradientHead g{b, h, {read(q, h, 1), read(k, h, 1), read(v, h * group, group)}, read(d_out, h * group, group), {}, group};
      g.candidate = {read(dq, h, 1), read(dk, h, 1), read(dv, h * group, group), {}};
      heads.push_back(std::move(g));
    }
  return check_gradients(options, heads);
}

std::string gradient_check_summary(const GradientCheckResult& r, const CheckOptions& options) {
  std::ostringstream out;
  out << (r.passed ? "PASS" : r.sound ? "FAIL (within the sound bound, outside the tight criterion)"
                                      : "FAIL (outside the sound bound)")
      << ": the gradients dQ, dK, dV of <dO, O>\n";
  out << "checked: " << r.entries << " gradient entries of " << r.heads << " head(s), " << r.n
      << " tokens; reference: " << r.reference_name << "\n";
  out << "sound bound (" << r.bound_name << ", " << format_name(options.precision) << " inputs): worst |g - g_ref| / bound = "
      << number_text(r.worst_ratio) << " (" << position_text(r.worst, r.worst_part) << "); dQ " << number_text(r.part_ratio[0])
      << ", dK " << number_text(r.part_ratio[1]) << ", dV " << number_text(r.part_ratio[2]) << "\n";
  out << "tight: rms distance from the rounded reference in units of "
      << format_name(options.output_format.value_or(options.precision)) << " (batch " << r.tight_head.batch << ", head "
      << r.tight_head.head << "): ";
  for (int p = 0; p < 3; ++p)
    out << (p ? ", " : "") << gradient_names[p] << " " << number_text(r.distance_units[p]) << " (" << r.own_name << " "
        << number_text(r.own_distance_units[p]) << ")";
  out << "; worst ratio to the limit " << number_text(r.tight_ratio) << " (" << gradient_names[r.tight_part] << ", limit "
      << GradientCheckResult::tight_factor << "x the toolkit's or " << GradientCheckResult::tight_floor_units
      << " units)\n";
  if (r.unbounded > 0)
    out << r.unbounded
        << " gradient entries without a finite bound were not compared (each depends on a denominator den + "
           "eps "
           "that the bounds cannot tell from zero, or has a rounding depth K with K u >= 1/2)\n";
  if (r.first_failure)
    out << "first failure: " << position_text(*r.first_failure, r.first_failure_part) << "\n";
  if (!r.diagnosis.empty()) {
    out << "diagnosis (batch " << r.diagnosed.batch << ", head " << r.diagnosed.head << "): ";
    if (r.matches.empty()) {
      const auto& closest = r.diagnosis.front();
      out << "no backward mistake in the catalogue matches; the closest is " << closest.id << " ("
          << closest.description << ") at " << number_text(closest.ratio) << "x the tight limit\n";
    } else {
      out << "the gradients match";
      for (const auto& x : r.diagnosis)
        if (x.ratio <= 1) out << "\n  " << x.id << ": " << x.description;
      out << "\n";
    }
  }
  return out.str();
}

void write_gradient_check_json(const GradientCheckResult& r, const CheckOptions& options, std::ostream& out) {
  const auto number = json_double;
  const auto position = [](const std::optional<Position>& p, int part) {
    if (!p) return std::string("null");
    return "{\"gradient\": \"" + std::string(gradient_names[part]) + "\", \"batch\": " + std::to_string(p->batch) +
           ", \"head\": " + std::to_string(p->head) + ", \"token\": " + std::to_string(p->token) +
           ", \"column\": " + std::to_string(p->column) + "}";
  };
  out << "{\"verdict\": \"" << (r.passed ? "pass" : "fail") << "\", \"sound\": " << (r.sound ? "true" : "false")
      << ", \"tight\": " << (r.tight ? "true" : "false") << ", \"criterion\": \""
      << (options.criterion == Criterion::tight ? "tight" : "sound") << "\", \"worst_ratio\": " << number(r.worst_ratio)
      << ", \"worst\": " << position(r.worst, r.worst_part)
      << ", \"first_failure\": " << position(r.first_failure, r.first_failure_part) << ", \"gradients\": {";
  for (int p = 0; p < 3; ++p)
    out << (p ? ", " : "") << "\"" << gradient_names[p] << "\": {\"worst_ratio\": " << number(r.part_ratio[p])
        << ", \"distance_units\": " << number(r.distance_units[p])
        << ", \"own_distance_units\": " << number(r.own_distance_units[p]) << "}";
  out << "}, \"tight_ratio\": " << number(r.tight_ratio)
      << ", \"tight_factor\": " << number(GradientCheckResult::tight_factor)
      << ", \"diagnosis\": {\"matches\": [";
  for (std::size_t i = 0; i < r.matches.size(); ++i) out << (i ? ", " : "") << "\"" << r.matches[i] << "\"";
  out << "], \"candidates\": [";
  for (std::size_t i = 0; i < r.diagnosis.size(); ++i)
    out << (i ? ", " : "") << "{\"id\": \"" << r.diagnosis[i].id << "\", \"description\": \""
        << r.diagnosis[i].description << "\", \"worst_ratio\": " << number(r.diagnosis[i].ratio) << "}";
  out << "]}, \"own\": \"" << r.own_name << "\", \"bound\": \"" << r.bound_name << "\", \"reference\": \""
      << r.reference_name << "\", \"entries\": " << r.entries << ", \"unbounded\": " << r.unbounded
      << ", \"heads\": " << r.heads << ", \"n\": " << r.n << ", \"precision\": \""
      << format_name(options.precision) << "\", \"output_dtype\": \""
      << format_name(options.output_format.value_or(options.precision)) << "\"}\n";
}

}  // namespace hla::reports
