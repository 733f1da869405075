// hla check with its runs on the GPU (label gpu): for every variant the GPU holds, a correct
// kernel passes and a faulty one fails with the same diagnosis as on the CPU; where the GPU
// cannot hold the check, --device gpu refuses in one line and auto runs on the CPU.

#include <catch2/catch.hpp>
#include <cstdlib>
#include <iostream>
#include <map>
#include <random>
#include <string>

#include "hla/fast/backward.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/fast/gpu.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/definition.hpp"
#include "hla/reports/check.hpp"
#include "hla/reports/check_grad.hpp"
#include "hla/reports/error_report.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using namespace hla::reports;

namespace {

std::uint64_t test_seed() {
  return testing::seed_from("HLA_CHECK_SEED", "check gpu test");
}

OperatorSpec spec_of(Variant variant) {
  OperatorSpec spec;
  spec.variant = variant;
  return spec;
}

// rows x cols Gaussian entries of standard deviation sd, each rounded to bf16.
Matrix<double> gaussian_bf16(std::mt19937_64& rng, Index rows, Index cols, double sd) {
  std::normal_distribution<double> normal;
  Matrix<double> m(rows, cols);
  for (Index i = 0; i < m.size(); ++i) m.data()[i] = round_to(Format::bf16, sd * normal(rng));
  return m;
}

// Four heads of bf16 inputs (n = 200: a tail chunk of 8 after six of 32) and a kernel's bf16
// output: the toolkit's float32 stream, with the query scale or, faulty, without it. With
// group > 1, each run of `group` heads shares the first one's q and k (grouped queries).
std::vector<HeadInput> heads(std::uint64_t seed, const CheckOptions& options, bool faulty, Index group = 1) {
  std::mt19937_64 rng(seed);
  const Index n = 200, d = 16, dv = 8;
  const auto draw = [&](Index cols, double sd) { return gaussian_bf16(rng, n, cols, sd); };
  std::vector<HeadInput> out;
  for (Index h = 0; h < 4; ++h) {
    HeadInput head{0, h, {draw(d, 1), draw(d, 0.5), draw(dv, 1)}, {}};
    if (h % group != 0) {
      head.tokens.q = out[std::size_t(h - h % group)].tokens.q;
      head.tokens.k = out[std::size_t(h - h % group)].tokens.k;
    }
    const float scale = faulty ? 1.0f : float(options.scale);
    const Sequence<float> s{head.tokens.q.cast<float>() * scale, head.tokens.k.cast<float>(),
                            head.tokens.v.cast<float>()};
    const Matrix<float> o = fast::streaming_output(
        options.spec, fast::default_form(options.spec, fast::Implementation::streaming), s);
    head.output = o.cast<double>().unaryExpr([](double x) { return round_to(Format::bf16, x); });
    out.push_back(std::move(head));
  }
  return out;
}

CheckOptions options_for(const OperatorSpec& spec) {
  CheckOptions options;
  options.spec = spec;
  options.scale = 0.25;
  options.precision = Format::bf16;
  options.chunk = 32;
  return options;
}

}  // namespace

TEST_CASE("check gpu/the GPU runs give the CPU's verdicts and diagnoses for every variant", "[gpu]") {
  const std::uint64_t seed = test_seed();
  OperatorSpec normalized = spec_of(Variant::hla2), ridge = spec_of(Variant::hla2);
  normalized.normalize = true;
  normalized.eps = Rational(1, 8);
  ridge.ridge = Rational(1, 4);
  for (const OperatorSpec& spec : {spec_of(Variant::linear), spec_of(Variant::hla2), normalized, ridge,
                                   spec_of(Variant::ahla), spec_of(Variant::hla3)}) {
    INFO(describe(spec) << ", seed " << seed);
    CheckOptions options = options_for(spec);
    for (const bool faulty : {false, true}) {
      const std::vector<HeadInput> input = heads(seed, options, faulty);
      options.device = Device::cpu;
      const CheckResult cpu = check(options, input);
      options.device = Device::gpu;
      const CheckResult gpu = check(options, input);
      INFO(check_summary(gpu, options));
      CHECK(gpu.reference_name.find("(GPU)") != std::string::npos);
      CHECK(gpu.own_name.find("gpu-") != std::string::npos);
      CHECK(cpu.passed == !faulty);
      CHECK(gpu.passed == !faulty);
      CHECK(gpu.sound == cpu.sound);
      // The GPU's depths are closed forms, looser than the CPU's counts: a normalized output's
      // denominator may be told from zero on the CPU only.
      CHECK(gpu.outputs + gpu.undefined == cpu.outputs + cpu.undefined);
      if (!spec.normalize) CHECK(gpu.undefined == 0);
      CHECK(gpu.matches == cpu.matches);
      if (faulty) CHECK(std::find(gpu.matches.begin(), gpu.matches.end(), "no-scale") != gpu.matches.end());
    }
  }
}

namespace {

// The four heads as arrays in `layout`: batch-major value heads (batch b, head h is head
// b * heads + h), q and k with heads / group heads of their own.
struct Arrays {
  std::vector<double> q, k, v, o;
  std::vector<std::int64_t> key_shape, value_shape;
};
Arrays arrays_of(const std::vector<HeadInput>& hs, Layout layout, Index batch, Index group) {
  const Index heads = Index(hs.size()) / batch, key_heads = heads / group;
  const Index n = hs[0].tokens.length(), d = hs[0].tokens.key_dim(), dv = hs[0].tokens.value_dim();
  const auto shape = [&](Index h, Index f) -> std::vector<std::int64_t> {
    if (layout == Layout::nd) return {n, f};
    if (layout == Layout::bthd) return {batch, n, h, f};
    return {batch, h, n, f};
  };
  const auto at = [&](Index b, Index t, Index h, Index f, Index hs_, Index fs) {
    return std::size_t(layout == Layout::bhtd ? ((b * hs_ + h) * n + t) * fs + f : ((b * n + t) * hs_ + h) * fs + f);
  };
  Arrays a{std::vector<double>(std::size_t(batch * key_heads * n * d)), {}, std::vector<double>(std::size_t(batch * heads * n * dv)), {},
           shape(key_heads, d), shape(heads, dv)};
  a.k = a.q;
  a.o = a.v;
  for (Index b = 0; b < batch; ++b)
    for (Index h = 0; h < heads; ++h) {
      const HeadInput& x = hs[std::size_t(b * heads + h)];
      for (Index t = 0; t < n; ++t) {
        for (Index f = 0; f < dv; ++f) {
          a.v[at(b, t, h, f, heads, dv)] = x.tokens.v(t, f);
          a.o[at(b, t, h, f, heads, dv)] = x.output(t, f);
        }
        if (h % group != 0) continue;
        for (Index f = 0; f < d; ++f) {
          a.q[at(b, t, h / group, f, key_heads, d)] = x.tokens.q(t, f);
          a.k[at(b, t, h / group, f, key_heads, d)] = x.tokens.k(t, f);
        }
      }
    }
  return a;
}

}  // namespace

TEST_CASE("check gpu/arrays in every layout and grouped heads give what their heads give", "[gpu]") {
  // check_arrays gathers the GPU's inputs straight from the arrays (not through HeadInput).
  const std::uint64_t seed = test_seed();
  CheckOptions options = options_for(spec_of(Variant::hla2));
  options.device = Device::gpu;
  struct Shape {
    Layout layout;
    Index batch, group;
  };
  for (const bool faulty : {false, true})
    for (const Shape& shape : {Shape{Layout::bthd, 2, 1}, Shape{Layout::bhtd, 2, 1}, Shape{Layout::bthd, 1, 2},
                               Shape{Layout::bhtd, 1, 4}}) {
      INFO(layout_name(shape.layout) << ", batch " << shape.batch << ", group " << shape.group << ", faulty "
                                     << faulty << ", seed " << seed);
      const std::vector<HeadInput> hs = heads(seed, options, faulty, shape.group);
      const Arrays a = arrays_of(hs, shape.layout, shape.batch, shape.group);
      const CheckResult from_arrays =
          check_arrays(options, shape.layout, {"q.npy", a.key_shape, a.q.data(), nullptr},
                       {"k.npy", a.key_shape, a.k.data(), nullptr}, {"v.npy", a.value_shape, a.v.data(), nullptr},
                       {"o.npy", a.value_shape, a.o.data(), nullptr});
      const CheckResult from_heads = check(options, hs);
      CHECK(from_arrays.passed == !faulty);
      CHECK(from_arrays.passed == from_heads.passed);
      CHECK(from_arrays.worst_ratio == from_heads.worst_ratio);
      CHECK(from_arrays.outputs == from_heads.outputs);
      CHECK(from_arrays.normwise_u == from_heads.normwise_u);
    }
  // One head, [n, d].
  const std::vector<HeadInput> one(1, heads(seed, options, false)[0]);
  const Arrays a = arrays_of(one, Layout::nd, 1, 1);
  const CheckResult r = check_arrays(options, Layout::nd, {"q.npy", a.key_shape, a.q.data(), nullptr},
                                     {"k.npy", a.key_shape, a.k.data(), nullptr},
                                     {"v.npy", a.value_shape, a.v.data(), nullptr},
                                     {"o.npy", a.value_shape, a.o.data(), nullptr});
  CHECK(r.passed);
  CHECK(r.worst_ratio == check(options, one).worst_ratio);
}

TEST_CASE("check gpu/where the GPU cannot hold the check --device gpu refuses and auto runs on the CPU",
          "[gpu]") {
  const std::uint64_t seed = test_seed();
  OperatorSpec decayed = spec_of(Variant::hla2);
  decayed.decay = Rational(999, 1000);
  CheckOptions options = options_for(decayed);
  const std::vector<HeadInput> input = heads(seed, options, false);
  options.device = Device::gpu;
  CHECK_THROWS_WITH(check(options, input), Catch::Contains("--device gpu: ") && Catch::Contains("decay"));
  options.device = Device::automatic;
  const CheckResult r = check(options, input);
  CHECK(r.passed);
  CHECK(r.reference_name.find("(CPU)") != std::string::npos);

  CheckOptions f64 = options_for(spec_of(Variant::hla2));
  f64.precision = Format::f64;
  f64.device = Device::gpu;
  CHECK_THROWS_WITH(check(f64, input), Catch::Contains("--device gpu: ") && Catch::Contains("MPFR"));
}

namespace {

// Two query/key heads of bf16 inputs (n = 200, d = 16), each with `group` value heads (dv = 8) and
// dO; the candidate: the toolkit's float32 streaming backward (q scaled by 0.25 first), or the
// float64 backward with one of the catalogue's backward mistakes, rounded to float32.
std::vector<GradientHead> gradient_heads(std::uint64_t seed, const CheckOptions& options,
                                         std::string_view mistake, Index group) {
  std::mt19937_64 rng(seed);
  const Index n = 200, d = 16, dv = 8;
  const auto draw = [&](Index cols, double sd) { return gaussian_bf16(rng, n, cols, sd); };
  const auto f32 = [](const Matrix<double>& x) { return Matrix<double>(x.cast<float>().cast<double>()); };
  std::vector<GradientHead> out;
  for (Index h = 0; h < 2; ++h) {
    GradientHead head{0, h, {draw(d, 1), draw(d, 0.5), draw(group * dv, 1)}, draw(group * dv, 1), {}, group};
    head.candidate = {
        Matrix<double>::Zero(n, d), Matrix<double>::Zero(n, d), Matrix<double>(n, group * dv), {}};
    for (Index g = 0; g < group; ++g) {
      const Sequence<double> s{head.tokens.q, head.tokens.k, head.tokens.v.middleCols(g * dv, dv)};
      const Matrix<double> d_out = head.d_out.middleCols(g * dv, dv);
      Gradients<double> x;
      if (mistake.empty()) {
        const Sequence<float> in{(s.q * options.scale).cast<float>(), s.k.cast<float>(), s.v.cast<float>()};
        const Gradients<float> own = fast::streaming_gradients(
            options.spec, fast::default_form(options.spec, fast::Implementation::streaming), in,
            Matrix<float>(d_out.cast<float>()));
        x = {own.dq.cast<double>() * options.scale, own.dk.cast<double>(), own.dv.cast<double>(), {}};
      } else {
        x = mistaken_gradients(options, mistake, s, d_out);
      }
      head.candidate.dq += x.dq;
      head.candidate.dk += x.dk;
      head.candidate.dv.middleCols(g * dv, dv) = x.dv;
    }
    head.candidate = {f32(head.candidate.dq), f32(head.candidate.dk), f32(head.candidate.dv), {}};
    out.push_back(std::move(head));
  }
  return out;
}

}  // namespace

// hla check --grad on the GPU (the streaming backward's runs there, the CPU's depths): the same
// verdicts, worst ratios (up to the order of the kernels' sums) and diagnoses as on the CPU.
TEST_CASE("check gpu/gradients on the GPU give the CPU's verdicts and diagnoses", "[gpu][backward]") {
  const std::uint64_t seed = test_seed();
  OperatorSpec decayed = spec_of(Variant::hla2), unmasked = spec_of(Variant::hla3);
  decayed.decay = Rational(99, 100);
  decayed.ridge = Rational(1, 4);
  unmasked.masked = false;
  for (const OperatorSpec& spec : {spec_of(Variant::linear), spec_of(Variant::hla2), decayed,
                                   spec_of(Variant::ahla), spec_of(Variant::hla3), unmasked}) {
    CheckOptions options = options_for(spec);
    for (const std::string_view mistake : {std::string_view(), std::string_view("adjoint-late")}) {
      for (const Index group : {Index(1), Index(2)}) {
        INFO(describe(spec) << ", mistake '" << mistake << "', group " << group << ", seed " << seed);
        const std::vector<GradientHead> input = gradient_heads(seed, options, mistake, group);
        options.device = Device::cpu;
        const GradientCheckResult cpu = check_gradients(options, input);
        options.device = Device::gpu;
        const GradientCheckResult gpu = check_gradients(options, input);
        INFO(gradient_check_summary(gpu, options));
        CHECK(gpu.reference_name == "float64 gpu-streaming backward (GPU)");
        CHECK(cpu.reference_name == "float64 streaming backward (CPU)");
        CHECK(cpu.passed == mistake.empty());
        CHECK(gpu.passed == cpu.passed);
        CHECK(gpu.sound == cpu.sound);
        CHECK(gpu.tight == cpu.tight);
        CHECK(std::abs(gpu.worst_ratio - cpu.worst_ratio) <= 1e-6 * cpu.worst_ratio);
        CHECK(gpu.matches == cpu.matches);
        if (!mistake.empty())
          CHECK(std::find(gpu.matches.begin(), gpu.matches.end(), std::string(mistake)) != gpu.matches.end());
      }
    }
  }
}

TEST_CASE("check gpu/gradients the GPU does not hold: --device gpu refuses and auto runs on the CPU",
          "[gpu][backward]") {
  const std::uint64_t seed = test_seed();
  OperatorSpec normalized = spec_of(Variant::hla2);
  normalized.normalize = true;
  normalized.eps = Rational(1, 8);
  for (const OperatorSpec& spec : {normalized, spec_of(Variant::hla2)}) {
    CheckOptions options = options_for(spec);
    if (!spec.normalize) options.algorithm = fast::Implementation::scan;
    INFO(describe(spec) << ", seed " << seed);
    const std::vector<GradientHead> input = gradient_heads(seed, options, "", 1);
    options.device = Device::gpu;
    CHECK_THROWS_WITH(check_gradients(options, input), Catch::StartsWith("--device gpu: "));
    options.device = Device::automatic;
    const GradientCheckResult r = check_gradients(options, input);
    CHECK(r.reference_name == "float64 streaming backward (CPU)");
    CHECK(r.sound);
  }
}

// The error report's GPU forward rows (gpu_candidates.cpp), the fast path's among them: for every
// operator of the report with its decay 15/16 and chunks of 5, each precision's outputs within
// their a-priori bound of the exact n x n definition (Gaussian inputs; normalized operators on
// inputs whose denominators the bound can tell from zero are counted, the rest `unbounded`).
TEST_CASE("report gpu/the forward rows stay within their bound", "[gpu]") {
  const std::uint64_t seed = test_seed();
  const Index n = 70, d = 3, dv = 2;  // a chunk of 64 and a short one for the fast path
  const std::vector<Candidate> candidates = gpu_candidates();
  std::size_t rows = 0, fast_rows = 0;
  for (const ReportSpec& rs : report_specs()) {
    OperatorSpec spec = rs.spec;
    spec.decay = Rational(15, 16);
    // The inputs rounded to each candidate's format and their exact terms, once per format.
    std::map<InputFormat, std::pair<Sequence<double>, Terms<Mpfr>>> cases;
    for (const Candidate& c : candidates) {
      if (!c.covers(spec)) continue;
      ++rows;
      if (c.implementation == "gpu-fast") ++fast_rows;
      INFO(c.implementation << " " << c.precision << ", " << rs.name << ", seed " << seed);
      if (!cases.contains(c.inputs)) {
        const auto round = [&](double x) { return round_input(c.inputs, x); };
        const Sequence<double> raw = case_inputs(ReportCase{0, 1, Family::gaussian, 0, seed}, n, d, dv);
        const Sequence<double> s{raw.q.unaryExpr(round), raw.k.unaryExpr(round), raw.v.unaryExpr(round)};
        const auto exact = [](const Matrix<double>& m) {
          return Matrix<Rational>(m.unaryExpr([](double x) { return Rational(x); }));
        };
        const Terms<Rational> t =
            reference::terms(spec, Sequence<Rational>{exact(s.q), exact(s.k), exact(s.v)});
        const auto mpfr = [](const Rational& x) { return from_rational<Mpfr>(x); };
        cases.emplace(c.inputs, std::pair{s, Terms<Mpfr>{t.num.unaryExpr(mpfr), t.den.unaryExpr(mpfr)}});
      }
      const auto& [s, reference] = cases.at(c.inputs);
      const CellMetrics m = measure(spec, c, s, reference, c.uses_chunk ? 5 : 0);
      CHECK(m.test_ratio <= 1);
      if (!spec.normalize) CHECK(m.unbounded == 0);
      CHECK(m.unbounded < m.outputs);  // some entries bounded: the ratio is not vacuous
    }
  }
  CHECK(rows > 0);
  CHECK(fast_rows >= 6);  // masked hla2, ahla and hla3, normalized and not
}

// The error report's GPU backward rows (gpu_candidates.cpp): for every operator of the report, with
// its decay 15/16 and chunks of 5 for the scan, each precision's dQ, dK, dV within their bound (the
// streaming backward's from the CPU's depths and gauge, the scan's from its kernels' bodies on the
// host) against the exact gradients of the n x n definition, every entry bounded where the operator
// is unnormalized; there, dK at one token off by 1 + 2^-10 (float64) or 1 + 2^-6 (float32 on float
// inputs) leaves it.
TEST_CASE("report gpu/the GPU backward's rows stay within their bound, and a little off leaves it",
          "[gpu][backward]") {
  const std::uint64_t seed = test_seed();
  const Index n = 24, d = 3, dv = 2;
  std::size_t rows = 0;
  for (const Candidate& c : gpu_candidates()) {
    if (!c.covers_backward) continue;
    for (const ReportSpec& rs : report_specs()) {
      OperatorSpec spec = rs.spec;
      spec.decay = Rational(15, 16);
      if (!c.covers_backward(spec)) continue;
      ++rows;
      INFO(c.implementation << " " << c.precision << ", " << rs.name << ", seed " << seed);
      const auto round = [&](double x) { return round_input(c.inputs, x); };
      const ReportCase at{0, 1, Family::gaussian, 0, seed};
      const Sequence<double> raw = case_inputs(at, n, d, dv);
      const Sequence<double> s{raw.q.unaryExpr(round), raw.k.unaryExpr(round), raw.v.unaryExpr(round)};
      const Matrix<double> d_out = case_upstream(at, n, dv).unaryExpr(round);
      const auto exact = [](const Matrix<double>& m) {
        return Matrix<Rational>(m.unaryExpr([](double x) { return Rational(x); }));
      };
      const Gradients<Rational> g =
          reference::gradients(spec, Sequence<Rational>{exact(s.q), exact(s.k), exact(s.v)}, exact(d_out));
      const auto mpfr = [](const auto& m) {
        return m.unaryExpr([](const Rational& x) { return from_rational<Mpfr>(x); });
      };
      const Gradients<Mpfr> reference{
          mpfr(g.dq), mpfr(g.dk), mpfr(g.dv), {}, {mpfr(g.terms.num), Vector<Mpfr>(mpfr(g.terms.den))}};
      const Index chunk = c.uses_chunk ? 5 : 0;
      const std::array<CellMetrics, 3> m = measure_backward(spec, c, s, d_out, reference, chunk);
      for (const CellMetrics& x : m) {
        CHECK(x.test_ratio <= 1);
        if (!spec.normalize) CHECK(x.unbounded == 0);
      }
      // As for the CPU rows: float64 and float32, unnormalized.
      if (c.inputs == InputFormat::bf16 || spec.normalize) continue;
      Candidate off = c;
      const double factor = 1 + (c.unit_roundoff_bits == 53 ? 0x1p-10 : 0x1p-6);
      off.backward = [&c, factor](const OperatorSpec& sp, const Sequence<double>& x, const Matrix<double>& dy,
                                  Index chunk) {
        BackwardRun run = c.backward(sp, x, dy, chunk);
        run.gradients.dk.row(3) *= factor;
        return run;
      };
      CHECK(measure_backward(spec, off, s, d_out, reference, chunk)[1].test_ratio > 1);
    }
  }
  CHECK(rows > 0);
}

int main(int argc, char* argv[]) {
  return testing::run_catch_unless(argc, argv, fast::gpu::unavailable_reason());
}
