// The GPU implementations against the reference: bit for bit in Z/p (every variant, option and
// form, small random inputs; and n = 65536, d = dv = 64 against the CPU stream), bit for bit in
// float64 on small integers, and within stated a-priori bounds in float32 and with bf16 inputs.
// The same for the GPU backward (streaming and scan) against the CPU's and the definition's
// gradients; its float32 bounds from the kernels' own operations run on the host (fast/cuda/host.hpp).
// Without a usable GPU the executable reports "skipped" and exits with 77 (ctest: skipped).

#include "hla/fast/gpu.hpp"

#include <cuda_runtime_api.h>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdlib>
#include <future>
#include <iostream>
#include <limits>
#include <sstream>
#include <string_view>
#include <utility>

#include "../cuda/host.hpp"
#include "../cuda/segments.cuh"
#include "field_sequence.hpp"
#include "hla/checking/instances.hpp"
#include "hla/fast/ranks.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/definition.hpp"
#include "hla/reference/random.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using fast::Form;
using fast::Implementation;
using testing::property;
using testing::random_field_sequence;

namespace {

constexpr Implementation methods[] = {Implementation::gpu_streaming, Implementation::gpu_scan};

std::string_view method_name(Implementation m) {
  return m == Implementation::gpu_streaming ? "streaming" : "scan";
}

bool gpu_has(const OperatorSpec& spec, Form form, Implementation method) {
  return !fast::unavailable(spec, method, form);
}

// What the GPU must equal: the reference for the default form; for a published form that differs
// from it, the CPU implementation of the same printed formulas with the GPU's bracketing.
template <class T>
Terms<T> expected_terms(const OperatorSpec& spec, Form form, Implementation method, const Sequence<T>& s,
                        Index chunk) {
  if (form == fast::default_form(spec, fast::cpu_twin(method))) return reference::terms(spec, s);
  if (method == Implementation::gpu_streaming) return fast::streaming_terms(spec, form, s);
  return fast::chunk_fold_terms(spec, form, s, chunk);
}

template <class T>
std::vector<Sequence<T>> convert_all(const std::vector<Sequence<Rational>>& heads) {
  std::vector<Sequence<T>> out;
  for (const auto& s : heads) out.push_back(convert<T>(s));
  return out;
}

std::vector<Form> forms_of(const OperatorSpec& spec, Implementation method) {
  std::vector<Form> forms{fast::default_form(spec, fast::cpu_twin(method))};
  if (forms.front() == Form::corrected && gpu_has(spec, Form::published, method))
    forms.push_back(Form::published);
  return forms;
}

template <class T>
std::vector<Sequence<Rational>> gen_heads(int max_n, int max_d) {
  const auto heads = *testing::gen_position(1, 4).as("sequence-heads");
  const auto n = *testing::gen_position(0, max_n + 1).as("n");
  const auto d = *testing::gen_position(1, max_d + 1).as("d");
  const auto dv = *testing::gen_position(1, max_d + 1).as("dv");
  std::vector<Sequence<Rational>> out;
  for (Index h = 0; h < heads; ++h)
    out.push_back(*testing::gen_sequence(n, d, dv, std::is_same_v<T, ModP>).as("head"));
  return out;
}

Matrix<ModP> random_field_matrix(std::uint64_t seed, Index rows, Index cols) {
  return random_field_sequence(seed, rows, 1, cols).v;
}

// "" when equal, else the first differing entry of dQ, dK or dV.
std::string first_difference(const Gradients<ModP>& got, const Gradients<ModP>& want) {
  const std::pair<const char*, Matrix<ModP> Gradients<ModP>::*> parts[] = {
      {"dQ", &Gradients<ModP>::dq}, {"dK", &Gradients<ModP>::dk}, {"dV", &Gradients<ModP>::dv}};
  for (const auto& [name, part] : parts) {
    const Matrix<ModP>&a = got.*part, &b = want.*part;
    if (a.rows() != b.rows() || a.cols() != b.cols()) return std::string(name) + ": shapes differ";
    for (Index i = 0; i < b.size(); ++i) {
      if (a.data()[i] != b.data()[i]) {
        std::ostringstream out;
        out << name << "(" << i / b.cols() << ", " << i % b.cols() << "): " << a.data()[i]
            << " != " << b.data()[i];
        return out.str();
      }
    }
  }
  return "";
}

}  // namespace

TEST_CASE("gpu/every variant option and form equals its CPU definition in Z/p", "[gpu][exact]") {
  for (const Variant variant : all_variants) {
    for (const Implementation method : methods) {
      property(
          std::string(variant_name(variant)) + " " + std::string(method_name(method)) +
              ": num and den equal the reference (default form) or the printed formulas (published form)",
          [variant, method] {
            const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            const auto chunk = *testing::gen_position(1, 6).as("chunk");
            const auto heads = convert_all<ModP>(gen_heads<ModP>(12, 4));
            for (const Form form : forms_of(spec, method)) {
              RC_LOG() << "form " << fast::form_name(form) << "\n";
              const auto gpu = fast::gpu::terms(spec, form, method, heads, chunk);
              for (std::size_t h = 0; h < heads.size(); ++h) {
                const Terms<ModP> want = expected_terms(spec, form, method, heads[h], chunk);
                RC_ASSERT(gpu[h].num == want.num);
                RC_ASSERT(gpu[h].den == want.den);
              }
            }
          },
          40);
    }
  }
}

// Sequence parallelism (docs/ranks.md) with 1 to 4 ranks simulated on this GPU, slices of any lengths.
TEST_CASE("gpu/split across simulated ranks, the scan equals its CPU definition in Z/p",
          "[gpu][exact][ranks]") {
  for (const Variant variant : all_variants) {
    property(
        std::string(variant_name(variant)) +
            ": num and den across 1 to 4 ranks equal the reference and the "
            "unsplit GPU scan",
        [variant] {
          const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          const auto chunk = *testing::gen_position(1, 6).as("chunk");
          const auto heads = convert_all<ModP>(gen_heads<ModP>(24, 4));
          const fast::Slices slices =
              fast::slices_of_lengths(testing::gen_slice_lengths(heads.front().length(), 4));
          for (const Form form : {Form::published, Form::corrected}) {
            if (fast::ranks_unavailable(spec, Implementation::gpu_scan, form)) continue;
            RC_LOG() << "form " << fast::form_name(form) << "\n";
            const auto split = fast::gpu::ranks_terms(spec, form, heads, slices, chunk);
            const auto whole = fast::gpu::terms(spec, form, Implementation::gpu_scan, heads, chunk);
            for (std::size_t h = 0; h < heads.size(); ++h) {
              const Terms<ModP> want = reference::terms(spec, heads[h]);
              RC_ASSERT(split[h].num == want.num);
              RC_ASSERT(split[h].den == want.den);
              RC_ASSERT(split[h].num == whole[h].num);
              RC_ASSERT(split[h].den == whole[h].den);
            }
          }
        },
        30);
  }
}

TEST_CASE("gpu/what the GPU cannot split is refused with a reason", "[gpu][ranks]") {
  const OperatorSpec decayed{.variant = Variant::ahla, .decay = Rational(1, 2)};
  const std::vector<Sequence<ModP>> heads{convert<ModP>(Sequence<Rational>{
      Matrix<Rational>::Ones(4, 2), Matrix<Rational>::Ones(4, 2), Matrix<Rational>::Ones(4, 2)})};
  CHECK_THROWS_WITH(fast::gpu::ranks_terms(decayed, Form::published, heads, fast::even_slices(4, 2), 2),
                    Catch::Contains("F4") && Catch::Contains("corrected form splits"));
  const std::vector<Index> short_slices{1, 2};
  CHECK_THROWS_WITH(
      fast::gpu::ranks_terms(decayed, Form::corrected, heads, fast::slices_of_lengths(short_slices), 2),
      Catch::StartsWith("--slices: the slices must cover the 4 tokens"));
  const std::vector<Matrix<ModP>> d_outs{Matrix<ModP>::Ones(4, 2)};
  CHECK_THROWS_WITH(fast::gpu::ranks_gradients(decayed, Form::published, heads, d_outs,
                                               fast::even_slices(4, 2), {Implementation::gpu_scan}),
                    Catch::Contains("F4"));
  CHECK_THROWS_WITH(fast::gpu::ranks_gradients(decayed, Form::corrected, heads, d_outs,
                                               fast::even_slices(4, 2), {Implementation::gpu_streaming}),
                    Catch::Contains("splits by gpu-scan"));
  CHECK_THROWS_WITH(fast::gpu::ranks_gradients(decayed, Form::corrected, heads, {}, fast::even_slices(4, 2),
                                               {Implementation::gpu_scan}),
                    Catch::Contains("one dO per sequence-head"));
}

// Device pointers, batch 2 x heads 3, and the device-side normalization, in Z/p.
TEST_CASE("gpu/the device-pointer interface reads the batch-head layout and finishes on the device",
          "[gpu][exact]") {
  for (const Variant variant : all_variants) {
    for (const Implementation method : methods) {
      property(
          std::string(variant_name(variant)) + " " + std::string(method_name(method)) +
              ": o of every (b, h) equals the reference's",
          [variant, method] {
            OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            spec.normalize = true;
            const auto n = *testing::gen_position(1, 10).as("n");
            const fast::gpu::Problem problem{2, 3, n, 3, 2};
            std::vector<Sequence<ModP>> heads;
            for (int h = 0; h < 6; ++h) {
              heads.push_back(convert<ModP>(*testing::gen_sequence(n, 3, 2, false).as("head")));
            }
            std::vector<Matrix<ModP>> want;
            try {
              for (const auto& s : heads) want.push_back(reference::output(spec, s));
            } catch (const Error&) {
              RC_DISCARD("a zero denominator");
            }
            const std::size_t keys = n * 3, values = n * 2;
            ModP *q, *k, *v, *num, *den, *out;
            for (ModP** p : {&q, &k})
              RC_ASSERT(cudaMalloc(reinterpret_cast<void**>(p), 6 * keys * sizeof(ModP)) == cudaSuccess);
            for (ModP** p : {&v, &num, &out})
              RC_ASSERT(cudaMalloc(reinterpret_cast<void**>(p), 6 * values * sizeof(ModP)) == cudaSuccess);
            RC_ASSERT(cudaMalloc(reinterpret_cast<void**>(&den), 6 * n * sizeof(ModP)) == cudaSuccess);
            for (int h = 0; h < 6; ++h) {
              cudaMemcpy(q + h * keys, heads[h].q.data(), keys * sizeof(ModP), cudaMemcpyHostToDevice);
              cudaMemcpy(k + h * keys, heads[h].k.data(), keys * sizeof(ModP), cudaMemcpyHostToDevice);
              cudaMemcpy(v + h * values, heads[h].v.data(), values * sizeof(ModP), cudaMemcpyHostToDevice);
            }
            const Form form = fast::default_form(spec, fast::cpu_twin(method));
            fast::gpu::terms(spec, form, method, problem, 4, q, k, v, num, den);
            fast::gpu::finish(spec, problem, num, den, out);
            std::vector<ModP> host(6 * values);
            RC_ASSERT(cudaMemcpy(host.data(), out, host.size() * sizeof(ModP), cudaMemcpyDeviceToHost) ==
                      cudaSuccess);
            for (ModP* p : {q, k, v, num, den, out}) cudaFree(p);
            for (int h = 0; h < 6; ++h) {
              const Matrix<ModP> got = Eigen::Map<const Matrix<ModP>>(host.data() + h * values, n, 2);
              RC_ASSERT(got == want[h]);
            }
          },
          10);
    }
  }
}

TEST_CASE("gpu/a zero normalized denominator in Z/p is an error naming the token", "[gpu][exact]") {
  OperatorSpec spec;
  spec.variant = Variant::linear;
  spec.normalize = true;
  Sequence<ModP> s{Matrix<ModP>::Zero(3, 2), Matrix<ModP>::Zero(3, 2), Matrix<ModP>::Ones(3, 2)};
  const auto terms = fast::gpu::terms(spec, Form::published, Implementation::gpu_scan, {s}, 2);
  const fast::gpu::Problem problem{1, 1, 3, 2, 2};
  ModP *num, *den, *out;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&num), 6 * sizeof(ModP)) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&den), 3 * sizeof(ModP)) == cudaSuccess);
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&out), 6 * sizeof(ModP)) == cudaSuccess);
  cudaMemcpy(num, terms[0].num.data(), 6 * sizeof(ModP), cudaMemcpyHostToDevice);
  cudaMemcpy(den, terms[0].den.data(), 3 * sizeof(ModP), cudaMemcpyHostToDevice);
  REQUIRE_THROWS_WITH(fast::gpu::finish(spec, problem, num, den, out),
                      Catch::Contains("token 1 of sequence-head 0") && Catch::Contains("division by zero"));
  for (ModP* p : {num, den, out}) cudaFree(p);
}

TEST_CASE("gpu/the published third-order scan is refused with a reason", "[gpu]") {
  OperatorSpec spec;
  spec.variant = Variant::hla3;
  REQUIRE_THROWS_WITH(fast::require_available(spec, Implementation::gpu_scan, Form::published),
                      Catch::Contains("O(d^3 dv)"));
  REQUIRE_NOTHROW(fast::require_available(spec, Implementation::gpu_streaming, Form::published));
}

// Small integers (|x| <= 3), gamma in {1, 1/2}, integer ridge and eps in {0, 1/4}: every value the
// kernels form is a dyadic rational. With n <= 48 and d, dv <= 4 (n <= 8 when decayed, so that at
// most 3 * 8 fraction bits appear) their magnitudes stay far below 2^53 (hla3: at most
// n^3 (9 d)^3 * 3 < 2^36), so float64 represents every one and the GPU result is exact; normalized
// outputs are then one correctly rounded division, the exact quotient rounded to nearest.
TEST_CASE("gpu/float64 on small integers equals the exact result bit for bit", "[gpu][float64]") {
  for (const Variant variant : all_variants) {
    for (const Implementation method : methods) {
      property(
          std::string(variant_name(variant)) + " " + std::string(method_name(method)) +
              ": o == exact o rounded once",
          [variant, method] {
            OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            const bool decayed = *rc::gen::arbitrary<bool>().as("decayed");
            spec.decay = decayed ? Rational(1, 2) : Rational(1);
            spec.eps =
                spec.normalize ? *rc::gen::element(Rational(0), Rational(1, 4)).as("eps") : Rational(0);
            const auto n = *testing::gen_position(0, decayed ? 9 : 49).as("n");
            const auto d = *testing::gen_position(1, 5).as("d");
            const auto dv = *testing::gen_position(1, 5).as("dv");
            const auto chunk = *testing::gen_position(1, 9).as("chunk");
            const Sequence<Rational> s = *testing::gen_sequence(n, d, dv, false).as("inputs");
            const Form form = fast::default_form(spec, fast::cpu_twin(method));
            const Terms<Rational> exact = reference::terms(spec, s);
            for (Index i = 0; i < exact.num.size(); ++i)
              RC_ASSERT(abs(exact.num.data()[i]) < Rational(1LL << 53));
            const Terms<double> gpu = fast::gpu::terms(spec, form, method, {convert<double>(s)}, chunk)[0];
            RC_ASSERT(gpu.num == convert<double>(exact.num));
            RC_ASSERT(gpu.den ==
                      Vector<double>(exact.den.unaryExpr([](const Rational& x) { return to_double(x); })));
            if (spec.normalize) {
              Matrix<Rational> o;
              try {
                o = reference::finish(spec, exact);
              } catch (const Error&) {
                RC_DISCARD("a zero denominator");
              }
              RC_ASSERT(reference::finish(spec, gpu) == convert<double>(o));
            }
          },
          40);
    }
  }
}

namespace {

template <class F>
Rational unit_roundoff() {
  return power(Rational(1, 2), std::numeric_limits<F>::digits);
}

int log2_ceil(Index x) {
  return x <= 1 ? 0 : 64 - std::countl_zero(static_cast<std::uint64_t>(x - 1));
}

// The GPU's a-priori depths (docs/gpu.md): a push or absorb updates each state entry as
// a x + (at most five products of at most four factors), so a monomial already in the state takes
// at most 6 roundings per step; a new product adds its factors' depths, at most d + 1 for each
// dot-product factor, plus 4. Per field of an order-r state that gives at most (r + 1)(6 t + 3 d + 12)
// after t steps, read-out included. The scan passes a token through at most C absorbs into its
// chunk's summary, 2 ceil(log2 B) combines (each like an absorb, with d-term matrix products) and C
// absorbs from the carry-in: (r + 1)(6 L + 4 d + 16), L = 2 C + 2 ceil(log2 B).
Rational gpu_depth(const OperatorSpec& spec, Implementation method, Index t, Index d, Index n, Index chunk) {
  const int r = order(spec.variant);
  if (method == Implementation::gpu_streaming) return Rational((r + 1) * (6 * (t + 1) + 3 * d + 12));
  const Index size = std::min<Index>(chunk, std::max<Index>(n, 1));
  const Index levels = 2 * size + 2 * log2_ceil((n + size - 1) / size);
  return Rational((r + 1) * (6 * levels + 4 * d + 16));
}

// The operators of the float32 bounds' tests: unnormalized, decay gamma, a ridge for hla2.
OperatorSpec bound_spec(Variant variant, const Rational& gamma) {
  OperatorSpec spec;
  spec.variant = variant;
  spec.decay = gamma;
  if (variant == Variant::hla2) spec.ridge = Rational(1, 2);
  return spec;
}

// Gaussian q, k, v (1/sqrt(d)-scaled), each rounded to float, or to bf16 for the bf16 path: the
// exact results are computed on these, so an error is the GPU's float32 arithmetic alone.
Sequence<Rational> representable_inputs(Rng& rng, Index n, Index d, Index dv, bool bf16) {
  Sequence<Rational> s = gaussian_sequence(rng, n, d, dv);
  for (Matrix<Rational>* m : {&s.q, &s.k, &s.v}) {
    *m = m->unaryExpr([bf16](const Rational& x) {
      const float f = from_rational<float>(x);
      return exact_value(bf16 ? fast::gpu::to_float(fast::gpu::to_bfloat16(f)) : f);
    });
  }
  return s;
}

// Largest |gpu - exact| / (gamma(K) gauge) over every entry; <= 1 is within the bound.
double worst_ratio(const OperatorSpec& spec, Implementation method, const Terms<Rational>& exact,
                   const Terms<float>& gpu, const Terms<Gauge<Rational>>& gauge, Index d, Index chunk,
                   const Rational& u) {
  Rational worst = 0;
  const Index n = exact.den.size();
  const auto within = [&](const Rational& got, const Rational& want, const Rational& g,
                          const Rational& factor) {
    const Rational err = abs(got - want);
    if (err == 0) return;
    const Rational bound = factor * g;
    const Rational ratio = bound == 0 ? Rational(1000000) : err / bound;
    if (ratio > worst) worst = ratio;
  };
  for (Index t = 0; t < n; ++t) {
    const Rational depth = gpu_depth(spec, method, t, d, n, chunk);
    const Rational factor = depth * u / (1 - depth * u);
    for (Index c = 0; c < exact.num.cols(); ++c) {
      within(exact_value(gpu.num(t, c)), exact.num(t, c), gauge.num(t, c).value(), factor);
    }
    within(exact_value(gpu.den(t)), exact.den(t), gauge.den(t).value(), factor);
  }
  return to_double(worst);
}

}  // namespace

// Gaussian inputs scaled by 1/sqrt(d), rounded to float (or to bf16 for the bf16 path); the exact
// result is computed on those rounded inputs, so the measured error is the GPU's float32
// arithmetic alone (u = 2^-24). gamma in {1, 1/2} keeps every decay factor exact in float.
TEST_CASE("gpu/float32 and bf16-input results stay within the a-priori bound", "[gpu][float32]") {
  const std::uint64_t seed = 20261130;
  INFO("seed " << seed);
  for (const Variant variant : all_variants) {
    for (const Implementation method : methods) {
      for (const bool bf16 : {false, true}) {
        for (const Rational& gamma : {Rational(1), Rational(1, 2)}) {
          const OperatorSpec spec = bound_spec(variant, gamma);
          const Index n = 96, d = 8, dv = 8, chunk = 16;
          Rng rng(seed + static_cast<int>(variant));
          const Sequence<Rational> s = representable_inputs(rng, n, d, dv, bf16);
          const Form form = fast::default_form(spec, fast::cpu_twin(method));
          const Terms<Rational> exact =
              fast::streaming_terms(spec, fast::default_form(spec, fast::Implementation::streaming), s);
          const Sequence<Gauge<Rational>> magnitudes{s.q.cast<Gauge<Rational>>(), s.k.cast<Gauge<Rational>>(),
                                                     s.v.cast<Gauge<Rational>>()};
          const Terms<Gauge<Rational>> gauge = method == Implementation::gpu_streaming
                                                   ? fast::streaming_terms(spec, form, magnitudes)
                                                   : fast::chunk_fold_terms(spec, form, magnitudes, chunk);
          const Sequence<float> inputs = convert<float>(s);
          const Terms<float> gpu = bf16 ? fast::gpu::terms_bf16(spec, form, method, {inputs}, chunk)[0]
                                        : fast::gpu::terms(spec, form, method, {inputs}, chunk)[0];
          const double ratio = worst_ratio(spec, method, exact, gpu, gauge, d, chunk, unit_roundoff<float>());
          INFO(describe(spec) << ", " << method_name(method) << (bf16 ? ", bf16 inputs" : ", float32")
                              << ": worst |error| / bound = " << ratio);
          CHECK(ratio <= 1.0);
          std::cout << "  " << describe(spec) << " " << method_name(method) << (bf16 ? " bf16" : " f32")
                    << ": worst error / bound = " << ratio << "\n";
        }
      }
    }
  }
}

namespace {

// "" when equal, else the first differing entry (the matrices are too large to print).
std::string first_difference(const Terms<ModP>& got, const Terms<ModP>& want) {
  for (Index t = 0; t < want.num.rows(); ++t) {
    for (Index c = 0; c < want.num.cols(); ++c) {
      if (got.num(t, c) != want.num(t, c)) {
        std::ostringstream out;
        out << "num(" << t << ", " << c << "): " << got.num(t, c) << " != " << want.num(t, c);
        return out.str();
      }
    }
    if (got.den(t) != want.den(t)) {
      std::ostringstream out;
      out << "den(" << t << "): " << got.den(t) << " != " << want.den(t);
      return out.str();
    }
  }
  return "";
}

Index large_length() {
  const char* text = std::getenv("HLA_GPU_LARGE_N");  // a shorter run while developing
  return text ? std::atol(text) : 65536;
}

// GPU streaming and GPU scan (chunk 64) against the CPU stream, which the test suite and
// `hla audit` prove equal to the reference, at n = 65536, d = dv = 64.
void check_large(OperatorSpec spec, Form form, bool scan_too) {
  const Index n = large_length(), d = 64, dv = 64;
  const std::uint64_t seed = 7 + static_cast<int>(spec.variant);
  INFO(describe(spec) << ", form " << fast::form_name(form) << ", n = " << n << ", d = dv = 64, seed "
                      << seed);
  const Sequence<ModP> s = random_field_sequence(seed, n, d, dv);
  const Terms<ModP> cpu = fast::streaming_terms(spec, form, s);
  const Terms<ModP> streamed = fast::gpu::terms(spec, form, Implementation::gpu_streaming, {s}, 64)[0];
  CHECK(first_difference(streamed, cpu) == "");
  if (scan_too) {
    const Terms<ModP> scanned = fast::gpu::terms(spec, form, Implementation::gpu_scan, {s}, 64)[0];
    CHECK(first_difference(scanned, cpu) == "");
  }
}

OperatorSpec make_spec(Variant variant, bool masked, const Rational& decay, const Rational& ridge = 0) {
  OperatorSpec spec;
  spec.variant = variant;
  spec.masked = masked;
  spec.decay = decay;
  spec.ridge = ridge;
  return spec;
}

}  // namespace

// n = 65536 and d = dv = 64 (HLA_GPU_LARGE_N overrides n).
TEST_CASE("gpu/large/linear decayed equals the CPU stream in Z/p", "[gpu][large]") {
  check_large(make_spec(Variant::linear, true, Rational(7, 8)), Form::published, true);
}
TEST_CASE("gpu/large/hla2 masked with ridge and decay equals the CPU stream in Z/p", "[gpu][large]") {
  check_large(make_spec(Variant::hla2, true, Rational(7, 8), Rational(1, 3)), Form::corrected, true);
}
TEST_CASE("gpu/large/hla2 unmasked with decay equals the CPU stream in Z/p", "[gpu][large]") {
  check_large(make_spec(Variant::hla2, false, Rational(7, 8), Rational(2)), Form::published, true);
}
TEST_CASE("gpu/large/hla2 masked decayed as printed (Sec. 4.3) equals the CPU's printed stream in Z/p",
          "[gpu][large]") {
  check_large(make_spec(Variant::hla2, true, Rational(7, 8)), Form::published, false);
}
TEST_CASE("gpu/large/ahla decayed equals the CPU stream in Z/p", "[gpu][large]") {
  check_large(make_spec(Variant::ahla, true, Rational(7, 8)), Form::published, false);
  OperatorSpec spec = make_spec(Variant::ahla, true, Rational(7, 8));
  const Index n = large_length();
  const Sequence<ModP> s = random_field_sequence(99, n, 64, 64);
  INFO("ahla scan, corrected form, seed 99, n = " << n);
  const Terms<ModP> cpu = fast::streaming_terms(spec, Form::published, s);
  const Terms<ModP> scanned = fast::gpu::terms(spec, Form::corrected, Implementation::gpu_scan, {s}, 64)[0];
  CHECK(first_difference(scanned, cpu) == "");
}
TEST_CASE("gpu/large/hla3 masked decayed (corrected) equals the CPU stream in Z/p", "[gpu][large]") {
  check_large(make_spec(Variant::hla3, true, Rational(7, 8)), Form::corrected, true);
}
TEST_CASE("gpu/large/hla2 normalized with decay across 4 uneven simulated ranks equals the CPU split in Z/p",
          "[gpu][exact][ranks][large][backward]") {
  const OperatorSpec spec{
      .variant = Variant::hla2, .normalize = true, .eps = Rational(1, 4), .decay = Rational(7, 8)};
  const std::vector<Index> lengths{1500, 0, 2600, 901};
  const fast::Slices slices = fast::slices_of_lengths(lengths);
  std::vector<Sequence<ModP>> heads;
  std::vector<Matrix<ModP>> d_outs;
  for (int h = 0; h < 2; ++h) {
    heads.push_back(random_field_sequence(17 + h, 5001, 16, 16));
    d_outs.push_back(random_field_matrix(41 + h, 5001, 16));
  }
  const fast::gpu::BackwardOptions options{Implementation::gpu_scan, 0, 64};
  const fast::ScanOptions cpu_options{64, 2};
  const auto split = fast::gpu::ranks_terms(spec, Form::corrected, heads, slices, 64);
  const auto split_gradients =
      fast::gpu::ranks_gradients(spec, Form::corrected, heads, d_outs, slices, options);
  const auto whole_gradients = fast::gpu::gradients(spec, Form::corrected, heads, d_outs, options);
  for (std::size_t h = 0; h < heads.size(); ++h) {
    const Terms<ModP> want = fast::ranks_terms(spec, Form::corrected, heads[h], slices, cpu_options);
    CHECK(split[h].num == want.num);
    CHECK(split[h].den == want.den);
    const Gradients<ModP> cpu =
        fast::ranks_gradients(spec, Form::corrected, heads[h], d_outs[h], slices, cpu_options);
    CHECK(first_difference(split_gradients[h], cpu) == "");
    CHECK(first_difference(split_gradients[h], whole_gradients[h]) == "");
  }
}
TEST_CASE("gpu/large/hla3 unmasked decayed equals the CPU stream in Z/p", "[gpu][large]") {
  check_large(make_spec(Variant::hla3, false, Rational(7, 8)), Form::published, true);
}
TEST_CASE("gpu/large/hla3 masked as printed (Alg. 3) equals the CPU's printed stream in Z/p",
          "[gpu][large]") {
  check_large(make_spec(Variant::hla3, true, Rational(1)), Form::published, false);
}

// gpu::Inputs (hla check's runs): one upload, then float64, float32 and Gauge<double> runs of every
// head. The first two equal the per-call kernels bit for bit; the gauge, computed in double by the
// same kernels on |q|, |k|, |v| and rounded upwards to float32, is at most gamma_53(K) below the
// exact gauge of the algorithm (the CPU twin's in Gauge<Rational>), K the kernel's depth of
// docs/gpu.md, and at most that plus 2^-23 above it.
TEST_CASE("gpu/one upload serves float64 float32 and gauge runs of every head", "[gpu]") {
  const std::uint64_t seed = 20261201;
  INFO("seed " << seed);
  for (const Variant variant : all_variants) {
    for (const Implementation method : methods) {
      OperatorSpec spec;
      spec.variant = variant;
      if (variant == Variant::hla2) spec.ridge = Rational(1, 2);
      const Index n = 80, d = 8, dv = 4, chunk = 16, count = 3;
      Rng rng(seed + static_cast<int>(variant));
      std::vector<Sequence<Rational>> heads;
      std::vector<float> q, k, v;
      for (Index h = 0; h < count; ++h) {
        Sequence<Rational> s = gaussian_sequence(rng, n, d, dv);
        for (Matrix<Rational>* m : {&s.q, &s.k, &s.v})
          *m = m->unaryExpr([](const Rational& x) { return exact_value(from_rational<float>(x)); });
        for (const auto& [m, to] : {std::pair{&s.q, &q}, std::pair{&s.k, &k}, std::pair{&s.v, &v}})
          for (Index i = 0; i < m->size(); ++i) to->push_back(from_rational<float>(m->data()[i]));
        heads.push_back(std::move(s));
      }
      const Form form = fast::default_form(spec, fast::cpu_twin(method));
      const fast::gpu::Inputs inputs(count, n, int(d), int(dv), q.data(), k.data(), v.data());
      std::vector<double> num64(count * n * dv), den64(count * n);
      std::vector<float> num32(count * n * dv), den32(count * n);
      std::vector<float> gauge_num(count * n * dv), gauge_den(count * n);
      inputs.terms(spec, form, method, chunk, num64.data(), den64.data());
      inputs.terms(spec, form, method, chunk, num32.data(), den32.data());
      inputs.gauge(spec, form, method, chunk, gauge_num.data(), gauge_den.data());
      const auto per64 = fast::gpu::terms(spec, form, method, convert_all<double>(heads), chunk);
      const auto per32 = fast::gpu::terms(spec, form, method, convert_all<float>(heads), chunk);
      const std::int64_t r = order(variant), blocks = (n + chunk - 1) / chunk;
      const std::int64_t levels = 2 * chunk + 2 * std::int64_t(std::ceil(std::log2(double(blocks))));
      INFO(describe(spec) << ", " << method_name(method));
      double worst = 0;
      for (Index h = 0; h < count; ++h) {
        const Sequence<Gauge<Rational>> magnitudes{heads[h].q.cast<Gauge<Rational>>(),
                                                   heads[h].k.cast<Gauge<Rational>>(),
                                                   heads[h].v.cast<Gauge<Rational>>()};
        const Terms<Gauge<Rational>> exact = method == Implementation::gpu_streaming
                                                 ? fast::streaming_terms(spec, form, magnitudes)
                                                 : fast::chunk_fold_terms(spec, form, magnitudes, chunk);
        for (Index t = 0; t < n; ++t) {
          const std::int64_t depth = method == Implementation::gpu_streaming ? (r + 1) * (6 * (t + 1) + 3 * d + 12)
                                                                             : (r + 1) * (6 * levels + 4 * d + 16);
          const double gamma = depth * 0x1p-53 / (1 - depth * 0x1p-53);
          // Rounded upwards to float32: at most 2^-23 above the double computed, never below it.
          const auto close = [&](float computed, const Gauge<Rational>& e) {
            const double want = to_double(e.value()), got = computed;
            const double below = std::max(0.0, want - got), above = std::max(0.0, got - want);
            if (want > 0) worst = std::max(worst, below / (gamma * want));
            return below <= gamma * want * (1 + 0x1p-50) && above <= (gamma + 0x1p-23) * want * (1 + 0x1p-20);
          };
          const std::size_t row = std::size_t(h * n + t);
          CHECK(den64[row] == per64[h].den(t));
          CHECK(den32[row] == per32[h].den(t));
          CHECK(close(gauge_den[row], exact.den(t)));
          for (Index c = 0; c < dv; ++c) {
            const std::size_t i = row * std::size_t(dv) + std::size_t(c);
            CHECK(num64[i] == per64[h].num(t, c));
            CHECK(num32[i] == per32[h].num(t, c));
            CHECK(close(gauge_num[i], exact.num(t, c)));
          }
        }
      }
      std::cout << "  " << describe(spec) << " " << method_name(method)
                << ": worst gauge error / gamma_53(K) gauge = " << worst << "\n";
    }
  }
}

// ---------------------------------------------------------------------------------------------
// The streaming backward (fast::gpu::gradients).

namespace {

// The GPU backward of one sequence-head at n = 65536 (HLA_GPU_LARGE_N), d = dv = 64, by the
// streaming kernel and the scan's (chunks of 64), each in the form that equals the definition,
// against the CPU streaming backward, which the suite proves equal to the definition's gradients.
void check_large_backward(const OperatorSpec& spec) {
  const Index n = large_length(), d = 64, dv = 64;
  const std::uint64_t seed = 70 + static_cast<int>(spec.variant);
  INFO(describe(spec) << ", n = " << n << ", d = dv = 64, seed " << seed);
  const Sequence<ModP> s = random_field_sequence(seed, n, d, dv);
  const Matrix<ModP> d_out = random_field_matrix(seed + 1, n, dv);
  const Gradients<ModP> cpu =
      fast::streaming_gradients(spec, fast::default_form(spec, Implementation::streaming), s, d_out);
  for (const Implementation method : methods) {
    const Form form = fast::default_form(spec, fast::cpu_twin(method));
    INFO("GPU " << method_name(method) << " backward, form " << fast::form_name(form));
    REQUIRE_FALSE(fast::backward_unavailable(spec, method, form));
    const Gradients<ModP> gpu = fast::gpu::gradients(spec, form, {s}, {d_out}, {method})[0];
    CHECK(first_difference(gpu, cpu) == "");
  }
}

}  // namespace

TEST_CASE("gpu backward/every variant option and form equals the CPU streaming backward in Z/p",
          "[gpu][exact][backward]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": dQ, dK, dV and O equal the CPU's", [variant] {
      const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
      const auto heads = convert_all<ModP>(gen_heads<ModP>(12, 4));
      const Index n = heads.front().length(), dv = heads.front().value_dim();
      const auto checkpoint = *testing::gen_position(0, n + 2).as("checkpoint (0: the default)");
      const auto seed = *rc::gen::arbitrary<std::uint64_t>().as("cotangent seed");
      std::vector<Matrix<ModP>> d_outs;
      for (std::size_t h = 0; h < heads.size(); ++h) d_outs.push_back(random_field_matrix(seed + h, n, dv));
      for (const Form form : forms_of(spec, Implementation::gpu_streaming)) {
        RC_LOG() << "form " << fast::form_name(form) << "\n";
        std::vector<Gradients<ModP>> cpu;
        try {
          for (std::size_t h = 0; h < heads.size(); ++h)
            cpu.push_back(fast::streaming_gradients(spec, form, heads[h], d_outs[h], checkpoint));
        } catch (const Error&) {
          RC_DISCARD("a normalized denominator is zero in Z/p");
        }
        const auto gpu =
            fast::gpu::gradients(spec, form, heads, d_outs, {Implementation::gpu_streaming, checkpoint});
        for (std::size_t h = 0; h < heads.size(); ++h) {
          RC_ASSERT(first_difference(gpu[h], cpu[h]) == "");
          RC_ASSERT(gpu[h].output == cpu[h].output);
        }
      }
    });
  }
}

// Whole, and split across 1 to 4 ranks simulated on this GPU (docs/ranks.md) with slices of any lengths.
TEST_CASE(
    "gpu backward/the scan's backward whole and split across simulated ranks equals the definition's in Z/p",
    "[gpu][exact][backward][ranks]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": dQ, dK, dV and O equal the reference's", [variant] {
      const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
      const auto heads = convert_all<ModP>(gen_heads<ModP>(24, 4));
      const Index n = heads.front().length(), dv = heads.front().value_dim();
      const auto chunk = *testing::gen_position(1, n + 2).as("chunk");
      const auto checkpoint = *testing::gen_position(0, chunk + 2).as("checkpoint (0: the default)");
      const fast::Slices slices = fast::slices_of_lengths(testing::gen_slice_lengths(n, 4));
      const auto seed = *rc::gen::arbitrary<std::uint64_t>().as("cotangent seed");
      std::vector<Matrix<ModP>> d_outs;
      for (std::size_t h = 0; h < heads.size(); ++h) d_outs.push_back(random_field_matrix(seed + h, n, dv));
      const fast::gpu::BackwardOptions options{Implementation::gpu_scan, checkpoint, chunk};
      for (const Form form : forms_of(spec, Implementation::gpu_scan)) {
        RC_LOG() << "form " << fast::form_name(form) << "\n";
        if (const auto why = fast::backward_unavailable(spec, Implementation::gpu_scan, form)) {
          RC_ASSERT_THROWS_AS(fast::gpu::gradients(spec, form, heads, d_outs, {Implementation::gpu_scan}),
                              Error);
          continue;
        }
        std::vector<Gradients<ModP>> exact;
        try {
          for (std::size_t h = 0; h < heads.size(); ++h)
            exact.push_back(reference::gradients(spec, heads[h], d_outs[h]));
        } catch (const Error&) {
          RC_DISCARD("a normalized denominator is zero in Z/p");
        }
        std::vector<std::vector<Gradients<ModP>>> runs{
            fast::gpu::gradients(spec, form, heads, d_outs, options)};
        if (!fast::ranks_unavailable(spec, Implementation::gpu_scan, form, true))
          runs.push_back(fast::gpu::ranks_gradients(spec, form, heads, d_outs, slices, options));
        for (const auto& gpu : runs) {
          for (std::size_t h = 0; h < heads.size(); ++h) {
            RC_ASSERT(first_difference(gpu[h], exact[h]) == "");
            RC_ASSERT(gpu[h].output == exact[h].output);
          }
        }
      }
    });
  }
}

// Small integer inputs and cotangents (|x| <= 3), gamma in {1, 1/2}, unnormalized, short
// sequences: every intermediate of either backward kernel is an integer times a power of two
// within 53 bits, so float64 gives the definition's gradients exactly.
TEST_CASE("gpu backward/float64 on small integers equals the exact gradients bit for bit",
          "[gpu][float64][backward]") {
  for (const Variant variant : all_variants) {
    for (const Implementation method : methods) {
      property(
          std::string(variant_name(variant)) + " " + std::string(method_name(method)) +
              ": dQ, dK, dV == the exact ones",
          [variant, method] {
            OperatorSpec spec = *testing::gen_spec(variant).as("spec");
            spec.normalize = false;
            spec.eps = 0;
            const bool decayed = *rc::gen::arbitrary<bool>().as("decayed");
            spec.decay = decayed ? Rational(1, 2) : Rational(1);
            // gamma = 1/2: a state aged t tokens and an adjoint aged as long meet in one sum with the
            // undecayed terms, 2^(6 t) apart at the third order: t <= 4 keeps every sum within 53 bits.
            const auto n = *testing::gen_position(0, decayed ? 5 : 13).as("n");
            const auto d = *testing::gen_position(1, 5).as("d");
            const auto dv = *testing::gen_position(1, 5).as("dv");
            const auto chunk = *testing::gen_position(1, 9).as("chunk");
            const Sequence<Rational> s = *testing::gen_sequence(n, d, dv, false).as("inputs");
            const Matrix<Rational> d_out = *testing::gen_matrix(n, dv, false).as("dO");
            const Form form = fast::default_form(spec, fast::cpu_twin(method));
            if (fast::backward_unavailable(spec, method, form)) RC_DISCARD("no backward by this kernel");
            const Gradients<Rational> exact = reference::gradients(spec, s, d_out);
            for (const Matrix<Rational>* g : {&exact.dq, &exact.dk, &exact.dv})
              for (Index i = 0; i < g->size(); ++i) RC_ASSERT(abs(g->data()[i]) < Rational(1LL << 53));
            const Gradients<double> gpu = fast::gpu::gradients(
                spec, form, {convert<double>(s)}, {convert<double>(d_out)}, {method, 0, chunk})[0];
            RC_ASSERT(gpu.dq == convert<double>(exact.dq));
            RC_ASSERT(gpu.dk == convert<double>(exact.dk));
            RC_ASSERT(gpu.dv == convert<double>(exact.dv));
          },
          40);
    }
  }
}

// The streaming kernel computes the CPU stream's backward formulas in the CPU's grouping (sums
// aside, whose order the rounding depth does not depend on), so the CPU backward's depths K
// (checking::Depth) and exact gauge bound it: |g_hat - g| <= gamma(K) gauge for every entry
// (rounding_test.cpp). The scan's kernels are bounded by their own operations, run on the host in
// the instrumented scalars (fast/cuda/host.hpp), chunks of 16. float32 inputs, and bf16 inputs with
// float32 arithmetic; gamma in {1, 1/2}.
TEST_CASE("gpu backward/float32 and bf16-input gradients stay within gamma(K) times the gauge",
          "[gpu][float32][backward]") {
  using D = checking::Depth<24>;
  using G = Gauge<Rational>;
  const std::uint64_t seed = 20261202;
  const Index n = 64, d = 8, dv = 8, chunk = 16;
  INFO("seed " << seed);
  // Every variant masked, and the unmasked third order (whose scan runs its own stream, with S^Q).
  std::vector<std::pair<Variant, bool>> cases;
  for (const Variant variant : all_variants) cases.emplace_back(variant, true);
  cases.emplace_back(Variant::hla3, false);
  for (const auto& variant_masked : cases) {
    const Variant variant = variant_masked.first;
    for (const bool bf16 : {false, true}) {
      for (const Rational& gamma : {Rational(1), Rational(1, 2)}) {
        OperatorSpec spec = bound_spec(variant, gamma);
        spec.masked = variant_masked.second;
        Rng rng(seed + static_cast<int>(variant));
        const Sequence<Rational> s = representable_inputs(rng, n, d, dv, bf16);
        const Matrix<Rational> d_out = representable_inputs(rng, n, 1, dv, false).v;  // dO in float32
        const Gradients<Rational> exact =  // the definition's gradients
            fast::streaming_gradients(spec, fast::default_form(spec, Implementation::streaming), s, d_out);
        const auto magnitude = [](const Matrix<Rational>& m) {
          return Matrix<G>(m.unaryExpr([](const Rational& x) { return G(abs(x)); }));
        };
        const Sequence<G> gauge_inputs{magnitude(s.q), magnitude(s.k), magnitude(s.v)};
        const auto symbolic = [](Index rows, Index cols) {
          return Matrix<D>(Matrix<D>::Constant(rows, cols, D::input()));
        };
        const Sequence<D> depth_inputs{symbolic(n, d), symbolic(n, d), symbolic(n, dv)};
        const Sequence<float> inputs = convert<float>(s);
        const Matrix<float> d_out32 =
            d_out.unaryExpr([](const Rational& x) { return from_rational<float>(x); });
        // The scan's kernels on the host (unnormalized: the readouts' adjoints are dO and zero), whole or
        // split across ranks as `slices`.
        const auto emulate = [&]<class T>(const Sequence<T>& in, const Matrix<T>& d_num,
                                          const fast::Slices* slices) {
          const Form form = fast::default_form(spec, Implementation::scan);
          Gradients<T> g;
          fast::gpu::with_device_algebra(
              fast::algebra_params<T>(spec, Implementation::gpu_scan, form, d, dv),
              [&]<class Algebra>(const Algebra& algebra) {
                if constexpr (Algebra::has_segments &&
                              requires { Algebra::carry_adjoint_scratch_size(0, 0); }) {
                  const Terms<T> d_terms{d_num, Vector<T>::Zero(n)};
                  const Index checkpoint = fast::default_checkpoint(chunk);
                  g = slices ? fast::gpu::host::device_ranks_backward(algebra, in, d_terms, *slices, chunk,
                                                                      checkpoint)
                             : fast::gpu::host::device_scan_backward(algebra, in, d_terms, chunk, checkpoint);
                } else {
                  FAIL("the catalogue lists a GPU scan backward without a carry adjoint");
                }
              });
          return g;
        };
        for (const Implementation method : methods) {
          const Form form =
              fast::default_form(spec, fast::cpu_twin(method));  // the one equal to the definition
          REQUIRE_FALSE(fast::backward_unavailable(spec, method, form));
          Gradients<G> gauge;
          Gradients<D> depth;
          if (method == Implementation::gpu_streaming) {
            gauge = fast::streaming_gradients(spec, form, gauge_inputs, magnitude(d_out));
            depth = fast::streaming_gradients(spec, form, depth_inputs, symbolic(n, dv));
          } else {
            gauge = emulate(gauge_inputs, magnitude(d_out), nullptr);
            depth = emulate(depth_inputs, symbolic(n, dv), nullptr);
          }
          const fast::gpu::BackwardOptions options{method, 0, chunk};
          const Gradients<float> gpu =
              bf16 ? fast::gpu::gradients_bf16(spec, form, {inputs}, {d_out32}, options)[0]
                   : fast::gpu::gradients(spec, form, {inputs}, {d_out32}, options)[0];
          const Rational unit = exact_value(std::numeric_limits<float>::epsilon() / 2);
          // The worst |error| / (gamma(K) gauge) over dQ, dK and dV.
          const auto worst_of = [&](const Gradients<float>& got, const Gradients<G>& g,
                                    const Gradients<D>& k) {
            Rational worst = 0;
            const auto within = [&](const Matrix<float>& x, const Matrix<Rational>& want, const Matrix<G>& gx,
                                    const Matrix<D>& kx) {
              for (Index i = 0; i < want.size(); ++i) {
                const Rational depth_k(kx.data()[i].count());
                const Rational bound = depth_k * unit / (1 - depth_k * unit) * gx.data()[i].value();
                const Rational error = abs(exact_value(x.data()[i]) - want.data()[i]);
                if (error > 0) worst = std::max(worst, bound > 0 ? error / bound : Rational(1000000));
              }
            };
            within(got.dq, exact.dq, g.dq, k.dq);
            within(got.dk, exact.dk, g.dk, k.dk);
            within(got.dv, exact.dv, g.dv, k.dv);
            return worst;
          };
          const Rational worst = worst_of(gpu, gauge, depth);
          INFO(describe(spec) << (bf16 ? ", bf16 inputs" : ", float32") << ", GPU " << method_name(method)
                              << ": worst |error| / bound = " << to_double(worst));
          CHECK(worst <= 1);
          std::cout << "  backward " << method_name(method) << " " << describe(spec)
                    << (bf16 ? " bf16" : " f32") << ": worst error / bound = " << to_double(worst) << "\n";
          if (method == Implementation::gpu_scan && !bf16 &&
              !fast::ranks_unavailable(spec, method, form, true)) {  // split across three uneven ranks
            const std::vector<Index> lengths{23, 0, 41};
            const fast::Slices slices = fast::slices_of_lengths(lengths);
            const Gradients<float> split =
                fast::gpu::ranks_gradients(spec, form, {inputs}, {d_out32}, slices, options)[0];
            const Rational split_worst = worst_of(split, emulate(gauge_inputs, magnitude(d_out), &slices),
                                                  emulate(depth_inputs, symbolic(n, dv), &slices));
            INFO("split across ranks of 23, 0 and 41 tokens: worst |error| / bound = "
                 << to_double(split_worst));
            CHECK(split_worst <= 1);
            std::cout << "  backward gpu-scan across 3 ranks " << describe(spec)
                      << " f32: worst error / bound = " << to_double(split_worst) << "\n";
          }
        }
      }
    }
  }
}

// n = 65536 and d = dv = 64 (HLA_GPU_LARGE_N overrides n).
TEST_CASE("gpu/large/backward of hla2 masked with ridge and decay equals the CPU's in Z/p",
          "[gpu][large][backward]") {
  check_large_backward(make_spec(Variant::hla2, true, Rational(999, 1000), Rational(1, 2)));
}
TEST_CASE("gpu/large/backward of linear ahla and hla3 (masked and unmasked) decayed equals the CPU's in Z/p",
          "[gpu][large][backward]") {
  check_large_backward(make_spec(Variant::linear, true, Rational(999, 1000)));
  check_large_backward(make_spec(Variant::ahla, true, Rational(999, 1000)));
  check_large_backward(make_spec(Variant::hla3, true, Rational(999, 1000)));
  check_large_backward(make_spec(Variant::hla3, false, Rational(999, 1000)));
}

int main(int argc, char* argv[]) {
  return testing::run_catch_unless(argc, argv, fast::gpu::unavailable_reason());
}

// ---------------------------------------------------------------------------------------------
// The fast path (tensor cores). Its products take bf16 operands and sum in float32: componentwise,
// numerators and denominators are within ((1 + gamma_8(b))(1 + gamma_22(K)) - 1) gauge of the exact
// result, with b bf16 roundings and K float32 roundings from gpu::fast_roundings (docs/gpu.md, "The
// fast path's bound"). The CPU stream in float64 stands in for the exact result, with its own
// bound (docs/operators.md); the gauge is that stream's on |q|, |k|, |v| in float64, inflated by
// 1e-9. Normalized outputs: with e_n, e_d those bounds and D = den + eps, the kernel's
// fl(num_hat fl(1 / fl(den_hat + fl(eps)))) is within e_q + (2 u + u^2)(|o| + e_q) of o = num / D,
// where e_q = (e_n + |o| e_D) / (|D| - e_D) and e_D = e_d + u eps + u (|D| + e_d + u eps), u = 2^-24;
// a bf16 output adds 2^-8 (|o| + e) to a bound e. The decays used (1, 63/64, 7/8, 1/2) are exact in
// float32 and float64.

namespace {

double gamma_of(double k, double u) {
  return k * u / (1 - k * u);
}

// Gaussian q, k (n x d) and v (n x dv, dv = d unless given) scaled by 1/sqrt(d) and rounded to bf16: the
// values of gaussian_sequence (same generator, same order), without their rationals; q and k by
// absolute value when `positive` (normalized operators: denominators far from zero).
Sequence<float> bf16_gaussian_sequence(Rng& rng, Index n, Index d, bool positive = false, Index dv = 0,
                                       bool positive_values = false) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto matrix = [&](bool absolute, Index columns) {
    Matrix<float> m(n, columns);
    for (Index r = 0; r < n; ++r)
      for (Index c = 0; c < columns; ++c) {
        const float x =
            fast::gpu::to_float(fast::gpu::to_bfloat16(static_cast<float>(rng.gaussian() * scale)));
        m(r, c) = absolute ? std::abs(x) : x;
      }
    return m;
  };
  Matrix<float> q = matrix(positive, d), k = matrix(positive, d);
  return {std::move(q), std::move(k), matrix(positive_values, dv > 0 ? dv : d)};
}

float round_to_bf16(float x) {
  return fast::gpu::to_float(fast::gpu::to_bfloat16(x));
}

struct FastCase {
  bool normalize = false;
  Rational decay = 1;
  Rational ridge = 0;        // hla2 only
  bool nonnegative = false;  // q, k and v >= 0 (normalized: q and k always)
};

std::string describe_case(const FastCase& c) {
  std::ostringstream out;
  out << (c.normalize ? "normalized" : "unnormalized") << ", gamma = " << c.decay;
  if (c.ridge != 0) out << ", ridge = " << c.ridge;
  if (c.nonnegative) out << ", nonnegative inputs";
  return out.str();
}

// The fast path on `heads` sequences of n tokens with d key and dv value columns: its terms within the
// bound above of the exact result and within the sum of the two bounds of the generic GPU scan; its
// outputs (float32 and bf16) the terms' quotient bit for bit, and within their bound. A head wider than
// 64 is checked against the exact result alone.
void check_fast_path(Index n, Index heads, std::uint64_t seed, const FastCase& fast_case = {}, Index d = 64,
                     Index dv = 64) {
  const double u = 0x1p-24, u8 = 0x1p-8;
  const bool wide = d > fast::fast_width || dv > fast::fast_width;
  for (const Variant variant : {Variant::hla2, Variant::ahla, Variant::hla3}) {
    if (fast_case.ridge != 0 && variant != Variant::hla2) continue;
    OperatorSpec spec;
    spec.variant = variant;
    spec.ridge = fast_case.ridge;
    spec.normalize = fast_case.normalize;
    spec.eps = fast_case.normalize ? Rational(1, 4) : Rational(0);
    spec.decay = fast_case.decay;
    const double eps = to_double(spec.eps);
    std::vector<Sequence<float>> inputs;
    Rng rng(seed + static_cast<int>(variant));
    for (Index h = 0; h < heads; ++h) {
      inputs.push_back(bf16_gaussian_sequence(rng, n, d, spec.normalize || fast_case.nonnegative, dv,
                                              fast_case.nonnegative));
    }
    const std::vector<Terms<float>> got = fast::gpu::fast_terms(spec, inputs);
    const std::vector<Matrix<float>> out32 = fast::gpu::fast_outputs(spec, inputs, false),
                                     out16 = fast::gpu::fast_outputs(spec, inputs, true);
    const std::vector<Terms<float>> generic =
        wide ? std::vector<Terms<float>>{}
             : fast::gpu::terms_bf16(spec, fast::default_form(spec, fast::Implementation::scan),
                                     Implementation::gpu_scan, inputs, 64);
    const int r = order(variant);
    const fast::gpu::FastRoundings roundings = fast::gpu::fast_roundings(variant, spec.decayed(), n, d, dv);
    const double fast_factor =
        (1 + gamma_of(roundings.bf16, u8)) * (1 + gamma_of(static_cast<double>(roundings.float32), 0x1p-22)) -
        1;
    const double generic_factor =
        gamma_of(to_double(gpu_depth(spec, Implementation::gpu_scan, 0, d, n, 64)), 0x1p-24);
    double worst = 0, worst_output = 0, normwise = 0, generic_difference = 0, generic_ratio = 0;
    Index mismatches = 0;
    const auto ratio = [](double error, double bound) {  // a NaN fails
      if (error == 0) return 0.0;
      const double r = bound > 0 ? error / bound : 1e300;
      return std::isnan(r) ? 1e300 : r;
    };
    for (Index h = 0; h < heads; ++h) {
      const Sequence<double> s{inputs[h].q.cast<double>(), inputs[h].k.cast<double>(),
                               inputs[h].v.cast<double>()};
      const Form form = fast::default_form(spec, fast::Implementation::streaming);
      const Terms<double> reference = fast::streaming_terms(spec, form, s);
      const Sequence<Gauge<double>> magnitudes{s.q.cast<Gauge<double>>(), s.k.cast<Gauge<double>>(),
                                               s.v.cast<Gauge<double>>()};
      const Terms<Gauge<double>> gauge = fast::streaming_terms(spec, form, magnitudes);
      for (Index t = 0; t < n; ++t) {
        const double factor = fast_factor + gamma_of((r + 1) * (2.0 * (t + 1) + 2 * d + 4), 0x1p-53);
        const double e_d = spec.normalize ? factor * gauge.den(t).value() * (1 + 1e-9) : 0;
        if (spec.normalize)
          worst = std::max(worst, ratio(std::abs(double(got[h].den(t)) - reference.den(t)), e_d));
        const float inverse = 1.0f / (got[h].den(t) + static_cast<float>(eps));
        for (Index c = 0; c < dv; ++c) {
          const double e_n = factor * gauge.num(t, c).value() * (1 + 1e-9);
          worst = std::max(worst, ratio(std::abs(double(got[h].num(t, c)) - reference.num(t, c)), e_n));
          // The outputs: the terms' quotient (or num), bit for bit, and within their bound.
          const float quotient = spec.normalize ? got[h].num(t, c) * inverse : got[h].num(t, c);
          if (std::bit_cast<std::uint32_t>(out32[h](t, c)) != std::bit_cast<std::uint32_t>(quotient) ||
              out16[h](t, c) != round_to_bf16(quotient))
            ++mismatches;
          double exact = reference.num(t, c), e = e_n;
          if (spec.normalize) {
            const double D = reference.den(t) + eps;
            const double e_D = e_d + u * eps + u * (std::abs(D) + e_d + u * eps);
            REQUIRE(std::abs(D) > e_D);  // positive q, k: denominators far from zero
            exact = reference.num(t, c) / D;
            const double e_q = (e_n + std::abs(exact) * e_D) / (std::abs(D) - e_D);
            e = e_q + (2 * u + u * u) * (std::abs(exact) + e_q);
          }
          worst_output = std::max(worst_output, ratio(std::abs(double(out32[h](t, c)) - exact), e));
          worst_output = std::max(
              worst_output, ratio(std::abs(double(out16[h](t, c)) - exact), e + u8 * (std::abs(exact) + e)));
        }
      }
      normwise =
          std::max(normwise, (got[h].num.cast<double>() - reference.num).norm() / reference.num.norm());
      // Both within their componentwise bounds of the exact result, so within the sum of the two of each
      // other (numerators, and denominators when normalized).
      const auto compare = [&](const auto& fast_values, const auto& generic_values,
                               const auto& gauge_values) {
        const double difference = (fast_values - generic_values).template cast<double>().norm();
        const double gauge_norm =
            gauge_values.unaryExpr([](const Gauge<double>& g) { return g.value(); }).norm();
        generic_difference =
            std::max(generic_difference, difference / generic_values.template cast<double>().norm());
        generic_ratio = std::max(generic_ratio, difference / ((fast_factor + generic_factor) * gauge_norm));
      };
      if (wide) continue;
      compare(got[h].num, generic[h].num, gauge.num);
      if (spec.normalize) compare(got[h].den, generic[h].den, gauge.den);
    }
    INFO(variant_name(variant) << " " << describe_case(fast_case) << ", n = " << n << ", " << heads
                               << " heads, d = " << d << ", dv = " << dv << ", seed " << seed
                               << ": worst error / bound " << worst << ", outputs " << worst_output
                               << ", normwise relative error " << normwise
                               << ", against the generic GPU scan " << generic_difference);
    std::cout << "  fast " << variant_name(variant) << " " << describe_case(fast_case) << " n = " << n
              << ", d = " << d << ", dv = " << dv << ": worst error / bound = " << worst << ", outputs "
              << worst_output << ", normwise relative error = " << normwise
              << ", relative difference to the generic scan = " << generic_difference << "\n";
    CHECK(worst <= 1.0);
    CHECK(worst_output <= 1.0);
    CHECK(mismatches == 0);
    CHECK(generic_ratio <= 1.0);
  }
}

const FastCase fast_cases[] = {{false, 1},
                               {true, 1},
                               {false, Rational(63, 64)},
                               {true, Rational(7, 8)},
                               {false, 1, Rational(1, 2)},
                               {true, 1, Rational(1, 3)}};

}  // namespace

// Two heads of 65 chunks: each sequence runs as two segments (33 and 32 chunks), the second from
// the carry-in that the first one's summary gives; every option.
TEST_CASE("gpu/fast/hla2 ahla and hla3 on the matrix units stay within the bf16 bound", "[gpu][fast]") {
  for (const FastCase& c : fast_cases) check_fast_path(65 * 64, 2, 20261130, c);
}

// As many heads as SMs: one block per sequence-head, no segments; 10 chunks go round the four
// input buffers twice.
TEST_CASE("gpu/fast/one block per sequence-head when the heads fill the GPU", "[gpu][fast]") {
  int device = 0, sms = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess);
  check_fast_path(10 * 64, sms, 20261202);
  check_fast_path(10 * 64, sms, 20261206, fast_cases[3]);
}

// A short last chunk (its rows past n read as zeros, its outputs stored up to n only): one short
// chunk alone; two heads of 65 chunks and 17 tokens, so that each runs as two segments, the second
// ending short; as many heads as SMs with 100 tokens.
TEST_CASE("gpu/fast/a sequence whose length is not a multiple of 64 ends with a short chunk", "[gpu][fast]") {
  int device = 0, sms = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess);
  for (const FastCase& c : fast_cases) {
    check_fast_path(37, 3, 20261203, c);
    check_fast_path(65 * 64 + 17, 2, 20261204, c);
  }
  check_fast_path(100, sms, 20261205);
}

// One gamma per head: each head's terms equal, bit for bit, those of a run with that head's gamma
// for every head (the same number of heads, so the same split into segments). Normalized, so that
// the denominators' sums are covered too; gamma = 1 runs the decaying kernel with unit powers. Heads
// of 64 and of 32 (the narrow kernels).
TEST_CASE("gpu/fast/one decay per head gives each head its own operator", "[gpu][fast]") {
  const double decays[] = {1, 63.0 / 64, 7.0 / 8, 0.5};
  for (const Index d : {Index{64}, Index{32}})
    for (const Variant variant : {Variant::hla2, Variant::ahla, Variant::hla3}) {
      OperatorSpec spec{.variant = variant, .normalize = true, .eps = Rational(1, 4)};
      std::vector<Sequence<float>> inputs;
      Rng rng(20261207);
      for (int h = 0; h < 4; ++h) inputs.push_back(bf16_gaussian_sequence(rng, 65 * 64 + 17, d, true));
      const std::vector<Terms<float>> mixed = fast::gpu::fast_terms(spec, inputs, decays);
      for (int h = 0; h < 4; ++h) {
        OperatorSpec single = spec;
        single.decay = Rational(static_cast<std::int64_t>(decays[h] * 64), 64);
        const Terms<float> alone = fast::gpu::fast_terms(single, inputs).at(h);
        INFO(variant_name(variant) << ", d = dv = " << d << ", head " << h << ", gamma = " << single.decay);
        CHECK((mixed[h].num.array() == alone.num.array()).all());
        CHECK((mixed[h].den.array() == alone.den.array()).all());
      }
    }
}

// Four segments per sequence (two heads of 130 chunks), normalized, with a decay near 1, so that
// the carry kernel combines nonzero states with l = g^2112 (about 0.13) and l^2, and the chunks'
// decays g^64 and g^128 of the sums and the denominators' vectors differ by more than the bound.
TEST_CASE("gpu/fast/several segments carry decayed states and denominators", "[gpu][fast]") {
  check_fast_path(130 * 64, 2, 20261209, {true, Rational(1023, 1024)});
  check_fast_path(130 * 64 + 5, 2, 20261210, {false, Rational(1023, 1024)});
}

// The sequence split across ranks on the fast path (docs/ranks.md), simulated on this GPU: with the
// slices where the unsplit run's segments fall (two heads leave the SMs idle, so it splits each sequence
// into segments of equal chunks), each rank's summary pass, carry kernel and outputs pass from its carry
// compute what that segment does, so its outputs equal the unsplit fast path's bit for bit (which the
// tests above bound), float32 and bf16, every variant and option; the same with an empty last rank.
// So does the backward (hla2 and ahla): each rank's forward writes its chunks' checkpoints, the backward's
// summary pass over each rank's slice but the first, the carry kernel over the ranks after it and the
// gradient pass from its carry are the unsplit backward's segments (which run the same split). Heads of
// 64 and of 32 (the narrow kernels).
TEST_CASE("gpu/fast/split across simulated ranks equals the unsplit fast path bit for bit",
          "[gpu][fast][ranks]") {
  for (const auto& [n, d] : {std::pair<Index, Index>{130 * 64 + 5, 64}, std::pair<Index, Index>{99 * 64, 64},
                             std::pair<Index, Index>{130 * 64 + 5, 32}}) {
    const Index chunks = (n + 63) / 64;
    const fast::gpu::detail::Split split = fast::gpu::detail::split_sequences(2, chunks);
    REQUIRE(split.segments > 1);
    std::vector<Index> lengths;
    for (int g = 0; g < split.segments; ++g)
      lengths.push_back(std::min(n, (g + 1) * split.segment_chunks * 64) - g * split.segment_chunks * 64);
    if (n % 64 == 0) lengths.push_back(0);  // an empty last rank
    const fast::Slices slices = fast::slices_of_lengths(lengths);
    for (const FastCase& c : fast_cases) {
      for (const Variant variant : {Variant::hla2, Variant::ahla, Variant::hla3}) {
        if (c.ridge != 0 && variant != Variant::hla2) continue;
        const OperatorSpec spec{.variant = variant,
                                .normalize = c.normalize,
                                .eps = c.normalize ? Rational(1, 4) : Rational(0),
                                .ridge = c.ridge,
                                .decay = c.decay};
        Rng rng(20261205 + static_cast<int>(variant));
        std::vector<Sequence<float>> inputs;
        for (int h = 0; h < 2; ++h) inputs.push_back(bf16_gaussian_sequence(rng, n, d, c.normalize));
        INFO(variant_name(variant) << " " << describe_case(c) << ", n = " << n << ", d = dv = " << d << ", "
                                   << slices.ranks() << " ranks of " << slices.length(0)
                                   << " tokens but the last");
        for (const bool bf16 : {false, true}) {
          const auto whole = fast::gpu::fast_outputs(spec, inputs, bf16);
          const auto split_outputs = fast::gpu::ranks_fast_outputs(spec, inputs, slices, bf16);
          for (int h = 0; h < 2; ++h) CHECK((split_outputs[h].array() == whole[h].array()).all());
        }
        if (variant == Variant::hla3) continue;  // no fast backward
        std::vector<Matrix<float>> d_outs;
        for (int h = 0; h < 2; ++h) d_outs.push_back(bf16_gaussian_sequence(rng, n, d).v);
        const auto whole = fast::gpu::fast_gradients(spec, inputs, d_outs);
        const auto split = fast::gpu::ranks_fast_gradients(spec, inputs, d_outs, slices);
        for (int h = 0; h < 2; ++h) {
          INFO("head " << h);
          CHECK((split[h].output.array() == whole[h].output.array()).all());
          CHECK((split[h].dq.array() == whole[h].dq.array()).all());
          CHECK((split[h].dk.array() == whole[h].dk.array()).all());
          CHECK((split[h].dv.array() == whole[h].dv.array()).all());
        }
      }
    }
  }
  const OperatorSpec hla2{.variant = Variant::hla2};
  std::vector<Sequence<float>> inputs;
  Rng rng(7);
  inputs.push_back(bf16_gaussian_sequence(rng, 200, 64));
  const std::vector<Index> uneven{64, 128, 8}, ragged{100, 100};
  CHECK_THROWS_WITH(fast::gpu::ranks_fast_outputs(hla2, inputs, fast::slices_of_lengths(uneven), false),
                    Catch::Contains("every slice but the last must have the same length"));
  CHECK_THROWS_WITH(fast::gpu::ranks_fast_outputs(hla2, inputs, fast::slices_of_lengths(ragged), false),
                    Catch::Contains("a multiple of 64 tokens"));
  const std::vector<Matrix<float>> d_outs{bf16_gaussian_sequence(rng, 200, 64).v};
  CHECK_THROWS_WITH(fast::gpu::ranks_fast_gradients(hla2, inputs, d_outs, fast::slices_of_lengths(uneven)),
                    Catch::Contains("every slice but the last must have the same length"));
  CHECK_THROWS_WITH(fast::gpu::ranks_fast_gradients({.variant = Variant::hla3}, inputs, d_outs,
                                                    fast::slices_of_lengths(ragged)),
                    Catch::Contains("the fast backward covers hla2 and ahla"));
}

// Heads narrower than the tiles (the copy engine reads their rows padded with zeros, the outputs leave
// in rows of dv): d = dv = 32 with every option, and d = 16 with dv = 40 normalized with decay, on two
// heads of 65 chunks and 17 tokens (two segments, a short last chunk); d = 56 with dv = 8 on three
// heads of 100 tokens.
TEST_CASE("gpu/fast/heads narrower than 64 stay within the bf16 bound", "[gpu][fast]") {
  for (const FastCase& c : fast_cases) check_fast_path(65 * 64 + 17, 2, 20261230, c, 32, 32);
  check_fast_path(65 * 64 + 17, 2, 20261231, fast_cases[3], 16, 40);
  check_fast_path(100, 3, 20261232, fast_cases[1], 56, 8);
}

// Nonnegative q, k and v: no sum cancels, so the gauge is the exact result itself and the bound a few
// percent of each output (bf16's four roundings, 1.6%, and the float32 ones), where signed Gaussian
// inputs let the gauge exceed the outputs by orders of magnitude (a wrong power of the decay in hla2's
// D^2 U once gave outputs 10% off, normwise, within that looser bound). Unnormalized, with decay and
// without, at d = 64, 32 and 128.
TEST_CASE("gpu/fast/nonnegative inputs stay within a bound of the outputs' own size", "[gpu][fast]") {
  for (const Index d : {64, 32, 128})
    for (const Rational& decay : {Rational(1), Rational(63, 64), Rational(7, 8)})
      check_fast_path(65 * 64 + 17, 2, 20261260, {.decay = decay, .nonnegative = true}, d, d);
}

// Heads wider than 64 (hla2 with keys wider than 64: two passes, U by key halves to a scratch, then the
// outputs by value halves; ahla with keys wider than 64: one pass per value half, both key halves on
// chip; hla3: three passes, Z by key halves, R by value halves, then the outputs; hla2 and ahla with
// d <= 64 < dv: the value halves' operators): d = dv = 128 with every option, two heads of 62 chunks
// and 17 tokens (63 chunks: too few to split, so the passes run, not the products of the test below);
// the key halves alone (d = 128, dv = 64), the value halves alone (d = 64, dv = 128), and uneven halves
// (d = 96, dv = 72) on three heads of 100 tokens.
TEST_CASE("gpu/fast/heads wider than 64 stay within the bf16 bound", "[gpu][fast]") {
  for (const FastCase& c : fast_cases) check_fast_path(62 * 64 + 17, 2, 20261240, c, 128, 128);
  check_fast_path(100, 3, 20261241, fast_cases[3], 128, 64);
  check_fast_path(100, 3, 20261242, fast_cases[1], 64, 128);
  check_fast_path(100, 3, 20261243, fast_cases[2], 96, 72);
}

// Few heads wider than 64 (a head's value halves filling at most half the SMs, 64 chunks or more; ahla
// from four segments): the forward composed of causal products (wide_composition.hpp's wide_forward),
// each split into segments of at least 32 chunks: d = dv = 128 with every option on two heads, and
// uneven halves (d = 96, dv = 72) and the value halves alone for hla3 (d = 64, dv = 128: hla2 and ahla
// run the value halves' operators) on one head, of 130 chunks and 17 tokens (four segments).
TEST_CASE("gpu/fast/few heads wider than 64 composed of causal products stay within the bf16 bound",
          "[gpu][fast]") {
  // Two heads of two value halves in four segments: ahla composes too.
  REQUIRE(fast::gpu::detail::split_sequences(2 * 2, 131).segments >= 4);
  for (const FastCase& c : fast_cases) check_fast_path(130 * 64 + 17, 2, 20261265, c, 128, 128);
  check_fast_path(130 * 64 + 17, 1, 20261266, fast_cases[3], 96, 72);
  check_fast_path(130 * 64 + 17, 1, 20261267, fast_cases[5], 96, 72);
  check_fast_path(130 * 64 + 17, 1, 20261268, fast_cases[1], 64, 128);
}

TEST_CASE("gpu/large/the fast path at n = 65536 stays within the bf16 bound", "[gpu][fast][large]") {
  check_fast_path(65536, 1, 20261201);
  check_fast_path(65536, 1, 20261208, fast_cases[3]);
}

// ---------------------------------------------------------------------------------------------
// The fast backward (masked hla2 and ahla, normalized or not, any decay), from the readouts'
// adjoints d_num (bf16) and d_den (float32; zero unnormalized): the gradients of <d_num, num> +
// <d_den, den>. Every monomial of a gradient entry passes through at most b roundings to bf16 and K
// float32 roundings at u = 2^-22, counted by gpu::fast_backward_roundings (docs/gpu.md, "The fast
// backward and its bound"), and num and den of the masked operators are sums of monomials with
// positive coefficients, so these gradients are too (in q, k, v, d_num, d_den): componentwise,
// |fast - exact| <= ((1 + gamma_8(b))(1 + gamma_22(K)) - 1) gauge, the gauge the gradients on |q|, |k|,
// |v|, |d_num|, |d_den|. The CPU stream's backward in float64 from the same adjoints stands in for the
// exact result, with its own bound gamma_53(K64) times the gauge, K64 its depths (checking::Depth<53>);
// the gauge in float64 is inflated by 1e-9 as the forward's is. The decays used are exact in float32
// and float64.

namespace {

using ReferenceDepth = checking::Depth<53>;

// The float64 reference backward's depths for n tokens, d key and dv value columns (the same for every
// head), from adjoints of depth zero (d_num, and d_den when normalized).
Gradients<ReferenceDepth> reference_backward_depths(const OperatorSpec& spec, Index n, Index d, Index dv) {
  using D = ReferenceDepth;
  const auto symbolic = [](Index rows, Index cols) {
    return Matrix<D>(Matrix<D>::Constant(rows, cols, D::input()));
  };
  const Terms<D> adjoints{
      symbolic(n, dv), spec.normalize ? Vector<D>(Vector<D>::Constant(n, D::input())) : Vector<D>::Zero(n)};
  return fast::streaming_gradients(spec, fast::default_form(spec, Implementation::streaming),
                                   Sequence<D>{symbolic(n, d), symbolic(n, d), symbolic(n, dv)},
                                   Upstream<D>::readouts(adjoints));
}

// Readouts' adjoints for a test: d_num bf16 Gaussian entries (exact in bf16, so the kernel reads them
// unchanged); normalized, d_den float32 Gaussian entries, else zero; their magnitudes when `nonnegative`.
Terms<float> gaussian_adjoints(Rng& rng, Index n, Index dv, bool normalized, bool nonnegative = false) {
  Terms<float> adjoints{bf16_gaussian_sequence(rng, n, dv, false, 0, nonnegative).v, Vector<float>::Zero(n)};
  if (normalized) {
    for (Index t = 0; t < n; ++t) {
      const auto x = static_cast<float>(rng.gaussian());
      adjoints.den(t) = nonnegative ? std::abs(x) : x;
    }
  }
  return adjoints;
}

// One sequence-head's gradients against the exact ones: the worst error / bound and the normwise
// relative error, folded into `worst` and `normwise`; `depth` from reference_backward_depths.
void compare_fast_gradients(const OperatorSpec& spec, const Sequence<float>& input,
                            const Terms<float>& adjoints, const Gradients<float>& got,
                            const Gradients<ReferenceDepth>& depth, double& worst, double& normwise) {
  using D = ReferenceDepth;
  const Form form = fast::default_form(spec, Implementation::streaming);
  const fast::gpu::FastRoundings roundings =
      fast::gpu::fast_backward_roundings(spec, input.length(), input.key_dim(), input.value_dim());
  const double fast_factor = (1 + gamma_of(roundings.bf16, 0x1p-8)) *
                                 (1 + gamma_of(static_cast<double>(roundings.float32), 0x1p-22)) -
                             1;
  const Sequence<double> s{input.q.cast<double>(), input.k.cast<double>(), input.v.cast<double>()};
  const Terms<double> exact_adjoints{adjoints.num.unaryExpr([](float x) { return double(round_to_bf16(x)); }),
                                     adjoints.den.cast<double>()};
  const Gradients<double> reference =
      fast::streaming_gradients(spec, form, s, Upstream<double>::readouts(exact_adjoints));
  const auto magnitude = [](const auto& m) {
    return m.unaryExpr([](double x) { return Gauge<double>(std::abs(x)); }).eval();
  };
  const Terms<Gauge<double>> gauge_adjoints{magnitude(exact_adjoints.num), magnitude(exact_adjoints.den)};
  const Gradients<Gauge<double>> gauge = fast::streaming_gradients(
      spec, form, Sequence<Gauge<double>>{magnitude(s.q), magnitude(s.k), magnitude(s.v)},
      Upstream<Gauge<double>>::readouts(gauge_adjoints));
  const auto within = [&](const Matrix<float>& fast_values, const Matrix<double>& exact,
                          const Matrix<Gauge<double>>& g, const Matrix<D>& k) {
    for (Index i = 0; i < exact.size(); ++i) {
      const double bound = (fast_factor + gamma_of(static_cast<double>(k.data()[i].count()), 0x1p-53)) *
                           g.data()[i].value() * (1 + 1e-9);
      const double error = std::abs(double(fast_values.data()[i]) - exact.data()[i]);
      const double ratio = error == 0 ? 0.0 : bound > 0 ? error / bound : 1e300;
      if (!(ratio <= worst)) worst = std::isnan(ratio) ? 1e300 : ratio;  // a NaN gradient fails
    }
    normwise = std::max(normwise, (fast_values.cast<double>() - exact).norm() / exact.norm());
  };
  within(got.dq, reference.dq, gauge.dq, depth.dq);
  within(got.dk, reference.dk, gauge.dk, depth.dk);
  within(got.dv, reference.dv, gauge.dv, depth.dv);
}

bool same_bits(const Matrix<float>& a, const Matrix<float>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Index i = 0; i < a.size(); ++i)
    if (std::bit_cast<std::uint32_t>(a.data()[i]) != std::bit_cast<std::uint32_t>(b.data()[i])) return false;
  return true;
}

void check_fast_backward(Variant variant, Index n, Index heads, std::uint64_t seed, Rational decay = 1,
                         bool normalize = false, Rational ridge = 0, Index d = 64, Index dv = 64,
                         bool nonnegative = false) {
  const OperatorSpec spec{.variant = variant,
                          .normalize = normalize,
                          .eps = Rational(normalize ? 1 : 0, 4),
                          .ridge = ridge,
                          .decay = decay};
  Rng rng(seed);
  std::vector<Sequence<float>> inputs;
  std::vector<Terms<float>> adjoints;
  for (Index h = 0; h < heads; ++h) {
    inputs.push_back(bf16_gaussian_sequence(rng, n, d, normalize || nonnegative, dv, nonnegative));
    adjoints.push_back(gaussian_adjoints(rng, n, dv, normalize, nonnegative));
  }
  // The exact gradients' rounding depths (one sequential pass in Depth, seconds at n = 8325) are
  // counted beside the GPU's work, and the heads are compared in parallel: the host's references
  // take most of these tests' time.
  std::future<Gradients<ReferenceDepth>> depth_counted =
      std::async(std::launch::async, [&spec, n, d, dv] { return reference_backward_depths(spec, n, d, dv); });
  const std::vector<Gradients<float>> got = fast::gpu::fast_readout_gradients(spec, inputs, adjoints);
  const std::vector<Matrix<float>> forward = fast::gpu::fast_outputs(spec, inputs, false);
  const Gradients<ReferenceDepth> depth = depth_counted.get();
  std::vector<double> worst_of(heads, 0.0), normwise_of(heads, 0.0);
  std::vector<char> mismatched(heads, 0);
#pragma omp parallel for schedule(dynamic)
  for (Index h = 0; h < heads; ++h) {
    compare_fast_gradients(spec, inputs[h], adjoints[h], got[h], depth, worst_of[h], normwise_of[h]);
    // The forward that writes the checkpoints gives the outputs of the one that does not, bit for bit.
    mismatched[h] = !same_bits(got[h].output, forward[h]);
  }
  const double worst = *std::max_element(worst_of.begin(), worst_of.end()),  // NaNs are 1e300 there
      normwise = *std::max_element(normwise_of.begin(), normwise_of.end());
  const auto forward_mismatches = std::count(mismatched.begin(), mismatched.end(), 1);
  std::ostringstream label;  // the operator
  label << variant_name(variant) << (normalize ? " normalized" : "");
  if (ridge != 0) label << " ridge " << ridge;
  if (nonnegative) label << " nonnegative";
  INFO("fast backward, " << label.str() << ", gamma = " << decay << ", n = " << n << ", " << heads
                         << " heads, d = " << d << ", dv = " << dv << ", seed " << seed
                         << ": worst error / bound " << worst << ", normwise relative error " << normwise);
  std::cout << "  fast backward " << label.str() << " gamma = " << decay << " n = " << n << ", " << heads
            << " heads, d = " << d << ", dv = " << dv << ": worst error / bound = " << worst
            << ", normwise relative error = " << normwise << "\n";
  CHECK(worst <= 1.0);
  CHECK(forward_mismatches == 0);
}

}  // namespace

// hla2's ridge (gamma = 1: the forward's U + ridge Q, and dQ += ridge dU), unnormalized and normalized:
// one short chunk, 65 chunks and 17 tokens, as many heads as SMs, one head in four segments.
TEST_CASE("gpu/fast/the backward with hla2's ridge stays within the bf16 bound", "[gpu][fast][backward]") {
  int device = 0, sms = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess);
  for (const bool normalize : {false, true}) {
    check_fast_backward(Variant::hla2, 37, 3, 20261226, 1, normalize, Rational(1, 2));
    check_fast_backward(Variant::hla2, 65 * 64 + 17, 2, 20261227, 1, normalize, Rational(1, 2));
    check_fast_backward(Variant::hla2, 100, sms, 20261228, 1, normalize, Rational(1, 2));
    check_fast_backward(Variant::hla2, 130 * 64 + 5, 1, 20261229, 1, normalize, Rational(1, 2));
  }
}

// One short chunk; 10 chunks (the input buffers go round several times); two heads of 65 chunks and
// 17 tokens (a short last chunk, first in the reverse walk); as many heads as SMs. Without decay,
// and with gamma = 63/64 and 7/8; unnormalized and normalized.
TEST_CASE("gpu/fast/the backward on the matrix units stays within the bf16 bound", "[gpu][fast][backward]") {
  int device = 0, sms = 0;
  REQUIRE(cudaGetDevice(&device) == cudaSuccess);
  REQUIRE(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, device) == cudaSuccess);
  for (const bool normalize : {false, true}) {
    for (const Variant variant : {Variant::hla2, Variant::ahla}) {
      for (const Rational& decay : {Rational(1), Rational(63, 64), Rational(7, 8)}) {
        check_fast_backward(variant, 37, 3, 20261211, decay, normalize);
        check_fast_backward(variant, 10 * 64, 2, 20261212, decay, normalize);
        check_fast_backward(variant, 65 * 64 + 17, 2, 20261213, decay, normalize);
      }
      check_fast_backward(variant, 100, sms, 20261214, 1, normalize);
      check_fast_backward(variant, 100, sms, 20261217, Rational(63, 64), normalize);
    }
  }
}

namespace {

// Sequence-heads of a batch with one gamma per head (shared by the batch): each sequence-head's
// gradients equal, bit for bit, those of a run of that head alone with its own gamma for every head,
// and stay within that operator's bound. Normalized or not; gamma = 1 runs the decaying kernel with
// unit powers.
void check_decays_per_head(Variant variant, bool normalize, std::span<const double> decays, Index batch,
                           Index n, std::uint64_t seed) {
  const OperatorSpec spec{.variant = variant, .normalize = normalize, .eps = Rational(normalize ? 1 : 0, 4)};
  const Index heads = static_cast<Index>(decays.size());
  Rng rng(seed);
  std::vector<Sequence<float>> inputs;
  std::vector<Terms<float>> adjoints;
  for (Index i = 0; i < batch * heads; ++i) {
    inputs.push_back(bf16_gaussian_sequence(rng, n, 64, normalize));
    adjoints.push_back(gaussian_adjoints(rng, n, 64, normalize));
  }
  const Index count = batch * heads;
  const std::vector<Gradients<float>> mixed =
      fast::gpu::fast_readout_gradients(spec, inputs, adjoints, decays, batch);
  std::vector<OperatorSpec> singles;
  std::vector<Gradients<float>> alone;
  for (Index i = 0; i < count; ++i) {
    singles.push_back(spec);
    singles.back().decay = Rational(static_cast<std::int64_t>(decays[i % heads] * 1024), 1024);
    alone.push_back(fast::gpu::fast_readout_gradients(singles.back(), {inputs[i]}, {adjoints[i]}).front());
  }
  // The comparisons with the exact gradients on the host, in parallel (most of the test's time).
  std::vector<double> worst_of(count, 0.0), normwise_of(count, 0.0);
#pragma omp parallel for schedule(dynamic)
  for (Index i = 0; i < count; ++i)
    compare_fast_gradients(singles[i], inputs[i], adjoints[i], mixed[i],
                           reference_backward_depths(singles[i], n, 64, 64), worst_of[i], normwise_of[i]);
  for (Index i = 0; i < count; ++i) {
    INFO(variant_name(variant) << (normalize ? " normalized" : "") << ", batch " << batch
                               << ", sequence-head " << i << ", gamma = " << singles[i].decay << ", n = " << n
                               << ", seed " << seed << ": worst error / bound " << worst_of[i]);
    CHECK(same_bits(mixed[i].dq, alone[i].dq));
    CHECK(same_bits(mixed[i].dk, alone[i].dk));
    CHECK(same_bits(mixed[i].dv, alone[i].dv));
    CHECK(worst_of[i] <= 1.0);
  }
}

}  // namespace

TEST_CASE("gpu/fast/the backward with one decay per head gives each head its own gradients",
          "[gpu][fast][backward]") {
  const double decays[] = {1, 63.0 / 64, 7.0 / 8, 0.5};
  for (const bool normalize : {false, true})
    for (const Variant variant : {Variant::hla2, Variant::ahla})
      check_decays_per_head(variant, normalize, decays, 1, 10 * 64 + 5, 20261218);
}

// Batch 2 x 2 heads of 131 chunks: the sequences split into four segments (as one head alone does),
// so the segments' summaries and carries run with each head's own gamma too.
TEST_CASE("gpu/fast/the backward of a batch with decays per head split into segments",
          "[gpu][fast][backward]") {
  const double decays[] = {1023.0 / 1024, 1};
  for (const bool normalize : {false, true})
    for (const Variant variant : {Variant::hla2, Variant::ahla})
      check_decays_per_head(variant, normalize, decays, 2, 130 * 64 + 5, 20261221);
}

// The backward split across ranks where no unsplit segment falls (three simulated ranks of 20, 20 and a
// part of a chunk: 2,597 tokens, two heads): each rank's slice is a segment of its own, so its gradients
// stay within the fast backward's bound of the exact ones (the readouts' adjoints those the split forward
// gives: reference::finish_adjoint of its terms, row by row as each rank forms them).
TEST_CASE("gpu/fast/the backward split across uneven simulated ranks stays within the bf16 bound",
          "[gpu][fast][backward][ranks]") {
  const std::vector<Index> lengths{20 * 64, 20 * 64, 37};
  const fast::Slices slices = fast::slices_of_lengths(lengths);
  const Index n = slices.begin(2) + lengths[2];
  struct Case {
    Variant variant;
    bool normalize;
    Rational decay, ridge;
  };
  for (const Case& c :
       {Case{Variant::hla2, false, 1, 0}, Case{Variant::ahla, false, 1, 0},
        Case{Variant::hla2, true, Rational(1023, 1024), 0},
        Case{Variant::ahla, true, Rational(1023, 1024), 0}, Case{Variant::hla2, true, 1, Rational(1, 3)}}) {
    const OperatorSpec spec{.variant = c.variant,
                            .normalize = c.normalize,
                            .eps = Rational(c.normalize ? 1 : 0, 4),
                            .ridge = c.ridge,
                            .decay = c.decay};
    const std::uint64_t seed = 20261206 + static_cast<int>(c.variant);
    Rng rng(seed);
    std::vector<Sequence<float>> inputs;
    std::vector<Matrix<float>> d_outs;
    for (int h = 0; h < 2; ++h) {
      inputs.push_back(bf16_gaussian_sequence(rng, n, 64, c.normalize));
      d_outs.push_back(bf16_gaussian_sequence(rng, n, 64).v);
    }
    const std::vector<Gradients<float>> got = fast::gpu::ranks_fast_gradients(spec, inputs, d_outs, slices);
    const Gradients<ReferenceDepth> depth = reference_backward_depths(spec, n, 64, 64);
    double worst = 0, normwise = 0;
    for (int h = 0; h < 2; ++h) {
      const Terms<float> adjoints = reference::finish_adjoint(spec, got[h].terms, d_outs[h]);
      compare_fast_gradients(spec, inputs[h], adjoints, got[h], depth, worst, normwise);
    }
    INFO(variant_name(c.variant) << (c.normalize ? " normalized" : "") << ", gamma = " << c.decay
                                 << ", ridge " << c.ridge << ", seed " << seed << ": worst error / bound "
                                 << worst << ", normwise relative error " << normwise);
    std::cout << "  fast backward across ranks " << variant_name(c.variant)
              << (c.normalize ? " normalized" : "") << " gamma = " << c.decay
              << ": worst error / bound = " << worst << "\n";
    CHECK(worst <= 1.0);
  }
}

// fast_gradients forms the readouts' adjoints from dO on the host (reference::finish_adjoint in float32
// on the forward's terms): the same gradients, bit for bit, as fast_readout_gradients given them.
TEST_CASE("gpu/fast/the fast gradients of dO are those of the readouts' adjoints", "[gpu][fast][backward]") {
  for (const Variant variant : {Variant::hla2, Variant::ahla}) {
    const OperatorSpec spec{
        .variant = variant, .normalize = true, .eps = Rational(1, 4), .decay = Rational(63, 64)};
    Rng rng(20261222);
    const std::vector<Sequence<float>> inputs{bf16_gaussian_sequence(rng, 200, 64, true)};
    const std::vector<Matrix<float>> d_outs{bf16_gaussian_sequence(rng, 200, 64).v};
    const Gradients<float> got = fast::gpu::fast_gradients(spec, inputs, d_outs).front();
    const Terms<float> terms = fast::gpu::fast_terms(spec, inputs).front();
    const Terms<float> adjoints = reference::finish_adjoint(spec, terms, d_outs.front());
    const Gradients<float> want = fast::gpu::fast_readout_gradients(spec, inputs, {adjoints}).front();
    INFO(variant_name(variant));
    CHECK(same_bits(got.terms.num, terms.num));
    CHECK(same_bits(got.dq, want.dq));
    CHECK(same_bits(got.dk, want.dk));
    CHECK(same_bits(got.dv, want.dv));
    CHECK(same_bits(got.output, fast::gpu::fast_outputs(spec, inputs, false).front()));
  }
}

// One head of 131 chunks: the sequence splits into four segments (the summary pass, the carry
// kernel's combination of nonzero adjoints, the gradient pass from each carry-in), with and without
// decay (gamma = 1023/1024: the carry's g^(64 L) and g^(128 L) about 0.13 and 0.017), unnormalized
// and normalized.
TEST_CASE("gpu/fast/the backward splits a long sequence of few heads into segments",
          "[gpu][fast][backward]") {
  for (const bool normalize : {false, true})
    for (const Variant variant : {Variant::hla2, Variant::ahla})
      for (const Rational& decay : {Rational(1), Rational(1023, 1024)})
        check_fast_backward(variant, 130 * 64 + 5, 1, 20261220, decay, normalize);
}

// Heads narrower than the tiles: d = dv = 32, unnormalized and normalized, gamma 1 and 63/64, on two
// heads of 65 chunks and 17 tokens; hla2's ridge at d = 16, dv = 40.
TEST_CASE("gpu/fast/the backward of heads narrower than 64 stays within the bf16 bound",
          "[gpu][fast][backward]") {
  for (const bool normalize : {false, true})
    for (const Variant variant : {Variant::hla2, Variant::ahla})
      for (const Rational& decay : {Rational(1), Rational(63, 64)})
        check_fast_backward(variant, 65 * 64 + 17, 2, 20261233, decay, normalize, 0, 32, 32);
  check_fast_backward(Variant::hla2, 100, 3, 20261234, 1, true, Rational(1, 2), 16, 40);
}

// Heads wider than 64 (the backward composed of causal products, without checkpoints): d = dv = 128,
// unnormalized and normalized, gamma 1 and 63/64, on two heads of 10 chunks and 17 tokens, and
// normalized with decay on one head of 65 chunks and 17 tokens; the keys wider alone (d = 128, dv = 64),
// the values alone (64, 128) and uneven halves (96, 72) on three heads of 100 tokens; hla2's ridge. One
// head leaves SMs idle, so its products split into segments (launch_causal_product; on 132 SMs two of
// 33 chunks at 66 chunks, four at 131 chunks, unnormalized and normalized with the vector columns'
// products: the reversed walk's first segment holds the short chunk); so do three heads of 131 chunks
// (four segments each).
TEST_CASE("gpu/fast/the backward of heads wider than 64 stays within the bf16 bound",
          "[gpu][fast][backward]") {
  for (const bool normalize : {false, true})
    for (const Variant variant : {Variant::hla2, Variant::ahla}) {
      for (const Rational& decay : {Rational(1), Rational(63, 64)})
        check_fast_backward(variant, 10 * 64 + 17, 2, 20261250, decay, normalize, 0, 128, 128);
      if (normalize)
        check_fast_backward(variant, 65 * 64 + 17, 1, 20261251, Rational(63, 64), true, 0, 128, 128);
    }
  check_fast_backward(Variant::hla2, 100, 3, 20261252, 1, false, 0, 128, 64);
  check_fast_backward(Variant::ahla, 100, 3, 20261253, Rational(7, 8), true, 0, 64, 128);
  check_fast_backward(Variant::hla2, 100, 3, 20261254, Rational(63, 64), true, 0, 96, 72);
  check_fast_backward(Variant::ahla, 100, 3, 20261255, 1, false, 0, 96, 72);
  for (const bool normalize : {false, true})
    check_fast_backward(Variant::hla2, 300, 2, 20261256, 1, normalize, Rational(1, 2), 128, 128);
  check_fast_backward(Variant::hla2, 130 * 64 + 17, 1, 20261258, Rational(63, 64), false, 0, 128, 128);
  check_fast_backward(Variant::ahla, 130 * 64 + 17, 1, 20261259, 1, false, 0, 96, 72);
  check_fast_backward(Variant::hla2, 130 * 64 + 17, 1, 20261260, Rational(63, 64), true, 0, 128, 128);
  check_fast_backward(Variant::ahla, 130 * 64 + 17, 1, 20261261, Rational(7, 8), true, 0, 96, 72);
  check_fast_backward(Variant::ahla, 130 * 64 + 17, 3, 20261264, Rational(7, 8), false, 0, 128, 128);
}

// Nonnegative q, k, v and readouts' adjoints: the gradients are sums of monomials with positive
// coefficients of nonnegative numbers, so the gauge is the exact gradient itself and the bound a few
// percent of each entry (the forward's test on nonnegative inputs says why). hla2 and ahla, unnormalized
// and normalized, with decay, at d = 64, 32 and 128 (the chunk kernels and the composed backward).
TEST_CASE("gpu/fast/the backward on nonnegative inputs stays within a bound of the gradients' own size",
          "[gpu][fast][backward]") {
  for (const Index d : {64, 32, 128})
    for (const Variant variant : {Variant::hla2, Variant::ahla})
      for (const bool normalize : {false, true})
        check_fast_backward(variant, 10 * 64 + 17, 2, 20261257, Rational(63, 64), normalize, 0, d, d, true);
}

namespace {

Matrix<float> pad_columns(const Matrix<float>& m) {
  Matrix<float> out = Matrix<float>::Zero(m.rows(), fast::fast_width);
  out.leftCols(m.cols()) = m;
  return out;
}

// The narrower head test's case: n tokens, d, dv (below).
void check_narrower_head(Index n, Index d, Index dv) {
  const auto left = [](const Matrix<float>& m, Index columns) { return Matrix<float>(m.leftCols(columns)); };
  for (const FastCase& c : fast_cases) {
    for (const Variant variant : {Variant::hla2, Variant::ahla, Variant::hla3}) {
      if (c.ridge != 0 && variant != Variant::hla2) continue;
      const OperatorSpec spec{.variant = variant,
                              .normalize = c.normalize,
                              .eps = Rational(c.normalize ? 1 : 0, 4),
                              .ridge = c.ridge,
                              .decay = c.decay};
      Rng rng(20261235);
      std::vector<Sequence<float>> narrow, padded;
      std::vector<Terms<float>> adjoints, padded_adjoints;
      for (int h = 0; h < 2; ++h) {
        narrow.push_back(bf16_gaussian_sequence(rng, n, d, c.normalize, dv));
        padded.push_back(
            {pad_columns(narrow.back().q), pad_columns(narrow.back().k), pad_columns(narrow.back().v)});
        adjoints.push_back(gaussian_adjoints(rng, n, dv, c.normalize));
        padded_adjoints.push_back({pad_columns(adjoints.back().num), adjoints.back().den});
      }
      const std::vector<Terms<float>> terms = fast::gpu::fast_terms(spec, narrow),
                                      padded_terms = fast::gpu::fast_terms(spec, padded);
      const std::vector<Matrix<float>> out16 = fast::gpu::fast_outputs(spec, narrow, true),
                                       padded_out16 = fast::gpu::fast_outputs(spec, padded, true);
      for (int h = 0; h < 2; ++h) {
        INFO(variant_name(variant) << " " << describe_case(c) << ", head " << h << ", d = " << d
                                   << ", dv = " << dv << ", n = " << n << ", seed 20261235");
        CHECK(same_bits(terms[h].num, left(padded_terms[h].num, dv)));
        CHECK((terms[h].den.array() == padded_terms[h].den.array()).all());
        CHECK(same_bits(out16[h], left(padded_out16[h], dv)));
      }
      if (variant == Variant::hla3) continue;  // the fast backward covers hla2 and ahla
      const std::vector<Gradients<float>> got = fast::gpu::fast_readout_gradients(spec, narrow, adjoints),
                                          padded_got = fast::gpu::fast_readout_gradients(spec, padded,
                                                                                         padded_adjoints);
      for (int h = 0; h < 2; ++h) {
        INFO(variant_name(variant) << " " << describe_case(c) << " backward, head " << h << ", d = " << d
                                   << ", dv = " << dv << ", n = " << n << ", seed 20261235");
        CHECK(same_bits(got[h].dq, left(padded_got[h].dq, d)));
        CHECK(same_bits(got[h].dk, left(padded_got[h].dk, d)));
        CHECK(same_bits(got[h].dv, left(padded_got[h].dv, dv)));
        CHECK(same_bits(got[h].output, left(padded_got[h].output, dv)));
      }
    }
  }
}

}  // namespace

// A narrower head is its zero-padded head: d = 24, dv = 40 (the 64-wide kernels) and d = 24, dv = 32,
// d = 8, dv = 24 and d = 32, dv = 16 (the narrow kernels, their products over the features 32 wide)
// give, bit for bit, the terms, the bf16 outputs and the gradients (with the float32 outputs of the
// forward that writes the checkpoints) of the same head padded with zero columns to 64 on the host,
// for every option (each a kernel of its own), on two heads of 3 chunks and 17 tokens, and of 65
// chunks and 17 tokens (two segments each: the summary pass and the carries).
TEST_CASE("gpu/fast/a narrower head computes exactly what its zero-padded head does",
          "[gpu][fast][backward]") {
  struct Shape {
    Index n, d, dv;
  };
  for (const Shape shape : {Shape{3 * 64 + 17, 24, 40}, Shape{3 * 64 + 17, 24, 32}, Shape{3 * 64 + 17, 8, 24},
                            Shape{65 * 64 + 17, 32, 16}})
    check_narrower_head(shape.n, shape.d, shape.dv);
}

// 1,024 chunks in 32 segments.
TEST_CASE("gpu/large/the fast backward at n = 65536 stays within the bf16 bound",
          "[gpu][fast][large][backward]") {
  check_fast_backward(Variant::hla2, 65536, 1, 20261215);
  check_fast_backward(Variant::ahla, 65536, 1, 20261216);
  check_fast_backward(Variant::hla2, 65536, 1, 20261219, Rational(1023, 1024));
}
TEST_CASE("gpu/large/the normalized fast backward at n = 65536 stays within the bf16 bound",
          "[gpu][fast][large][backward]") {
  check_fast_backward(Variant::hla2, 65536, 1, 20261223, Rational(1023, 1024), true);
  check_fast_backward(Variant::ahla, 65536, 1, 20261224, 1, true);
}

// Heads of 128 at n = 65536, one head: the forward (normalized with decay 7/8) and the backward, both
// composed of causal products, each split into 32 segments (the backward normalized, decay 1023/1024,
// the vector columns' products too).
TEST_CASE("gpu/large/heads of 128 at n = 65536 stay within the bf16 bound", "[gpu][fast][large][backward]") {
  check_fast_path(65536, 1, 20261262, fast_cases[3], 128, 128);
  check_fast_backward(Variant::hla2, 65536, 1, 20261263, Rational(1023, 1024), true, 0, 128, 128);
}

TEST_CASE("gpu/fast/the fast backward refuses what it does not cover", "[gpu][fast][backward]") {
  const fast::gpu::Problem fine{1, 1, 64, 64, 64}, wrong_d{1, 1, 64, 136, 128}, wide{1, 1, 64, 128, 128};
  const OperatorSpec hla2{.variant = Variant::hla2}, normalized{.variant = Variant::hla2, .normalize = true},
      ridge{.variant = Variant::hla2, .ridge = Rational(1, 2)}, hla3{.variant = Variant::hla3};
  float somewhere[1];  // never written: the calls are refused before any device work
  CHECK_THROWS_WITH(fast::gpu::fast_backward(hla3, fine, nullptr, nullptr, nullptr, nullptr, nullptr, nullptr,
                                             somewhere, somewhere, somewhere),
                    Catch::Contains("--impl gpu-fast: the fast backward covers hla2 and ahla"));
  CHECK_THROWS_WITH(fast::gpu::fast_backward(hla2, wrong_d, nullptr, nullptr, nullptr, nullptr, nullptr,
                                             nullptr, somewhere, somewhere, somewhere),
                    Catch::Contains("d and dv must be multiples of 8 up to 128"));
  const auto* aligned_input = reinterpret_cast<const fast::gpu::BFloat16*>(std::uintptr_t{256});
  CHECK_THROWS_WITH(
      fast::gpu::fast_backward(hla2, wide, aligned_input, aligned_input, aligned_input, aligned_input,
                               nullptr, aligned_input, somewhere, somewhere, somewhere),
      Catch::Contains("heads wider than 64 take no checkpoints"));
  const auto* odd = reinterpret_cast<const fast::gpu::BFloat16*>(std::uintptr_t{2});
  CHECK_THROWS_WITH(
      fast::gpu::fast_backward(hla2, fine, odd, odd, odd, odd, nullptr, odd, somewhere, somewhere, somewhere),
      Catch::Contains("16-byte aligned"));
  const double decays[] = {0.5, 0.0};
  const fast::gpu::Problem two_heads{1, 2, 64, 64, 64};
  CHECK_THROWS_WITH(fast::gpu::fast_backward(hla2, two_heads, nullptr, nullptr, nullptr, nullptr, nullptr,
                                             nullptr, somewhere, somewhere, somewhere, nullptr, decays),
                    Catch::Contains("gamma must be in (0, 1]"));
  const auto* aligned = reinterpret_cast<const fast::gpu::BFloat16*>(std::uintptr_t{256});
  const double fine_decays[] = {0.5, 1.0};
  CHECK_THROWS_WITH(fast::gpu::fast_backward(ridge, two_heads, aligned, aligned, aligned, aligned, nullptr,
                                             aligned, somewhere, somewhere, somewhere, nullptr, fine_decays),
                    Catch::Contains("--ridge with decays per head is not covered"));
  CHECK_THROWS_WITH(fast::gpu::fast_backward(hla2, fine, aligned, aligned, aligned, aligned, nullptr, nullptr,
                                             somewhere, somewhere, somewhere),
                    Catch::Contains("must be given"));
  CHECK_THROWS_WITH(fast::gpu::fast_backward(normalized, fine, aligned, aligned, aligned, aligned, nullptr,
                                             aligned, somewhere, somewhere, somewhere),
                    Catch::Contains("needs d_den"));
  CHECK_THROWS_WITH(fast::gpu::fast_backward(hla2, fine, aligned, aligned, aligned, aligned, somewhere,
                                             aligned, somewhere, somewhere, somewhere),
                    Catch::Contains("d_den is for a normalized operator only"));
  const auto* odd_float = reinterpret_cast<const float*>(std::uintptr_t{258});
  CHECK_THROWS_WITH(fast::gpu::fast_backward(normalized, fine, aligned, aligned, aligned, aligned, odd_float,
                                             aligned, somewhere, somewhere, somewhere),
                    Catch::Contains("d_den must start at a 4-byte aligned address"));
  float* odd_floats = reinterpret_cast<float*>(std::uintptr_t{260});
  CHECK_THROWS_WITH(fast::gpu::fast_backward(hla2, fine, aligned, aligned, aligned, aligned, nullptr, aligned,
                                             odd_floats, somewhere, somewhere),
                    Catch::Contains("8-byte aligned"));
  // The counts: the forward's, one more float32 rounding for hla2 normalized or with the ridge without
  // decay, the decayed ones for decays per head whatever spec.decay says.
  const auto forward = fast::gpu::fast_roundings(Variant::hla2, false, 1000, 64, 64),
             forward_decayed = fast::gpu::fast_roundings(Variant::hla2, true, 1000, 64, 64);
  CHECK(fast::gpu::fast_backward_roundings(hla2, 1000, 64, 64).float32 == forward.float32);
  CHECK(fast::gpu::fast_backward_roundings(normalized, 1000, 64, 64).float32 == forward.float32 + 1);
  CHECK(fast::gpu::fast_backward_roundings(ridge, 1000, 64, 64).float32 == forward.float32 + 1);
  const OperatorSpec ahla_normalized{.variant = Variant::ahla, .normalize = true};
  CHECK(fast::gpu::fast_backward_roundings(ahla_normalized, 1000, 64, 64).float32 == forward.float32);
  CHECK(fast::gpu::fast_backward_roundings(normalized, 1000, 64, 64, true).bf16 == 6);
  CHECK(fast::gpu::fast_backward_roundings(normalized, 1000, 64, 64, true).float32 ==
        forward_decayed.float32);
  const fast::gpu::Problem shape{8, 16, 65536, 64, 64};
  CHECK(fast::gpu::fast_checkpoint_bytes(hla2, shape) == std::int64_t{8} * 16 * 1024 * 16384);
  CHECK(fast::gpu::fast_checkpoint_bytes(normalized, shape) == std::int64_t{8} * 16 * 1024 * (16384 + 256));
  Rng rng(20261225);
  const std::vector<Sequence<float>> one{bf16_gaussian_sequence(rng, 64, 64)};
  Terms<float> with_den = gaussian_adjoints(rng, 64, 64, true);
  CHECK_THROWS_WITH(fast::gpu::fast_readout_gradients(hla2, one, {with_den}),
                    Catch::Contains("its adjoint must be zero"));
  with_den.den.resize(63);
  CHECK_THROWS_WITH(fast::gpu::fast_readout_gradients(normalized, one, {with_den}),
                    Catch::Contains("the readouts' shapes"));
}

TEST_CASE("gpu/fast/the fast path refuses what it does not cover", "[gpu][fast]") {
  const fast::gpu::Problem wrong_d{1, 1, 64, 12, 64}, wrong_dv{1, 1, 64, 64, 12}, too_wide{1, 1, 64, 72, 64},
      wider{1, 1, 64, 136, 64}, fine{1, 1, 64, 64, 64};
  const OperatorSpec hla2{.variant = Variant::hla2}, ahla{.variant = Variant::ahla},
      hla3{.variant = Variant::hla3}, hla3_unmasked{.variant = Variant::hla3, .masked = false},
      linear{.variant = Variant::linear},
      ridge_and_decay{.variant = Variant::hla2, .ridge = Rational(1, 2), .decay = Rational(1, 2)},
      ridge{.variant = Variant::hla2, .ridge = Rational(1, 2)},
      normalized{.variant = Variant::hla2, .normalize = true};
  const fast::gpu::FastOutput nowhere;
  for (const OperatorSpec& spec : {hla2, ahla, hla3})  // heads up to 128 wide, without checkpoints
    for (const fast::gpu::Problem& wrong : {wrong_d, wrong_dv, wider})
      CHECK_THROWS_WITH(fast::gpu::fast_forward(spec, wrong, nullptr, nullptr, nullptr, nowhere),
                        Catch::Contains("d and dv must be multiples of 8 up to 128"));
  for (const OperatorSpec& spec : {hla3_unmasked, linear})
    CHECK_THROWS_WITH(fast::gpu::fast_forward(spec, fine, nullptr, nullptr, nullptr, nowhere),
                      Catch::Contains("--impl gpu-fast: covers only masked hla2, ahla and hla3"));
  void* checkpoints = reinterpret_cast<void*>(std::uintptr_t{256});  // never written
  CHECK_THROWS_WITH(
      fast::gpu::fast_forward(hla3, fine, nullptr, nullptr, nullptr,
                              {.out = nullptr, .bf16 = false, .den = nullptr, .checkpoints = checkpoints}),
      Catch::Contains("hla3 writes no checkpoints"));
  CHECK_THROWS_WITH(  // the backward's checkpoints are of heads up to 64 wide
      fast::gpu::fast_forward(hla2, too_wide, nullptr, nullptr, nullptr,
                              {.out = nullptr, .bf16 = false, .den = nullptr, .checkpoints = checkpoints}),
      Catch::Contains("d and dv must be multiples of 8 up to 64"));
  CHECK_THROWS_WITH(fast::gpu::fast_forward(ridge_and_decay, fine, nullptr, nullptr, nullptr, nowhere),
                    Catch::Contains("--impl gpu-fast: covers"));
  const auto* odd = reinterpret_cast<const fast::gpu::BFloat16*>(std::uintptr_t{2});
  CHECK_THROWS_WITH(fast::gpu::fast_forward(hla2, fine, odd, nullptr, nullptr, nowhere),
                    Catch::Contains("16-byte aligned"));
  const fast::gpu::Problem too_long{1 << 16, 1, 1 << 15, 64, 64};
  CHECK_THROWS_WITH(fast::gpu::fast_forward(hla2, too_long, nullptr, nullptr, nullptr, nowhere),
                    Catch::Contains("below 2^31"));
  float somewhere[1];  // never written: the calls are refused before any device work
  CHECK_THROWS_WITH(
      fast::gpu::fast_forward(hla2, fine, nullptr, nullptr, nullptr, {nullptr, false, somewhere}),
      Catch::Contains("normalized operator only"));
  CHECK_THROWS_WITH(
      fast::gpu::fast_forward(normalized, fine, nullptr, nullptr, nullptr, {nullptr, true, somewhere}),
      Catch::Contains("num in float32"));
  const double decays[] = {0.5, 0.0};
  const fast::gpu::Problem two_heads{1, 2, 64, 64, 64};
  CHECK_THROWS_WITH(
      fast::gpu::fast_forward(hla2, two_heads, nullptr, nullptr, nullptr, nowhere, nullptr, decays),
      Catch::Contains("gamma must be in (0, 1]"));
  CHECK_THROWS_WITH(fast::gpu::fast_forward(hla2, two_heads, nullptr, nullptr, nullptr, nowhere, nullptr,
                                            std::span(decays, 1)),
                    Catch::Contains("one decay per head"));
  const double fine_decays[] = {0.5, 1};
  CHECK_THROWS_WITH(
      fast::gpu::fast_forward(ridge, two_heads, nullptr, nullptr, nullptr, nowhere, nullptr, fine_decays),
      Catch::Contains("--ridge with decays per head"));
}
