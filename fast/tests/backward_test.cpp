// The streaming, the scan and the chunk-parallel backward (fast/backward.hpp): the default forms'
// gradients equal the exact gradients of the definition (reference::gradients) bit for bit,
// whatever the checkpoint interval, chunk size and thread count; every form's, published or corrected, are
// the exact gradients of its own forward pass (checked by forward mode on that pass), and a published form's
// differ from the definition's where a finding says its forward pass does. The fast backward's chunk
// algebra and its split into segments (the formulas of fast/cuda/tensor_core_backward.cu) give the
// definition's gradients exactly in Z/p.

#include "hla/fast/backward.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "hla/reference/random.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/gradients.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::fast::Form;
using hla::fast::Implementation;
using hla::testing::property;

namespace {

using testing::projected;

// The CPU implementations with a backward.
constexpr Implementation cpu_backwards[] = {Implementation::streaming, Implementation::scan,
                                            Implementation::chunked};

// Whether `impl` has a backward for some spec of `variant` (the chunk-parallel form has none for hla3).
bool has_backward(Implementation impl, Variant variant) {
  OperatorSpec spec;
  spec.variant = variant;
  return !fast::backward_unavailable(spec, impl, fast::default_form(spec, impl));
}

// The backward of `impl` (streaming: checkpoint = `every`; scan and chunked: chunk = `every`, 1 to
// 3 threads).
template <class T>
Gradients<T> backward(Implementation impl, const OperatorSpec& spec, Form form, const Sequence<T>& s,
                      const Matrix<T>& d_out, Index every) {
  if (impl == Implementation::streaming) return fast::streaming_gradients(spec, form, s, d_out, every);
  const int threads = *rc::gen::inRange(1, 4).as("threads");
  if (impl == Implementation::chunked)
    return fast::chunked_gradients(spec, form, s, d_out, fast::ScanOptions{every, threads});
  return fast::scan_gradients(spec, form, s, d_out, fast::ScanOptions{every, threads});
}

template <class T>
void equals_reference(Implementation impl, Variant variant, int max_n, int max_d) {
  const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
  const Sequence<Rational> s = *testing::gen_any_sequence(max_n, max_d).as("sequence");
  const Matrix<Rational> d_out = *testing::gen_matrix(s.length(), s.value_dim(), false).as("dO");
  const Index every = *testing::gen_position(1, s.length() + 2).as("checkpoint or chunk");
  const Sequence<T> st = convert<T>(s);
  RC_PRE(testing::denominators_nonzero(spec, reference::terms(spec, st)));
  const Form form = fast::default_form(spec, impl);
  const Gradients<T> fast = backward(impl, spec, form, st, convert<T>(d_out), every);
  const Gradients<T> exact = reference::gradients(spec, st, convert<T>(d_out));
  RC_ASSERT(fast.dq == exact.dq);
  RC_ASSERT(fast.dk == exact.dk);
  RC_ASSERT(fast.dv == exact.dv);
  RC_ASSERT(fast.output == reference::output(spec, st));
  RC_ASSERT(exact.output == fast.output);
}

// equals_reference for every CPU backward and every variant it has, 200 cases each.
template <class T>
void every_backward_equals_reference(const std::string& scalar, int max_n, int max_d) {
  for (const Implementation impl : cpu_backwards)
    for (const Variant variant : all_variants) {
      if (!has_backward(impl, variant)) continue;
      property(std::string(variant_name(variant)) + ": " + std::string(fast::implementation_name(impl)) +
                   " dQ dK dV equal reference::gradients" + scalar,
               [=] { equals_reference<T>(impl, variant, max_n, max_d); }, 200);
    }
}

}  // namespace

TEST_CASE("backward/every CPU backward's gradients equal the definition's exactly - Rational",
          "[backward][exact]") {
  every_backward_equals_reference<Rational>("", 9, 3);
}

TEST_CASE("backward/every CPU backward's gradients equal the definition's exactly - ModP",
          "[backward][exact]") {
  every_backward_equals_reference<ModP>(" in Z/p", 40, 6);
}

namespace {

// A case for comparing a backward with forward mode on its own forward pass: an operator, inputs,
// a direction E and dO.
struct DirectionCase {
  OperatorSpec spec;
  Sequence<Rational> s, e;
  Matrix<Rational> d_out;
};
DirectionCase draw_direction_case(Variant variant) {
  DirectionCase c;
  c.spec = *testing::gen_spec(variant).as("spec");
  c.s = *testing::gen_any_sequence(8, 3).as("sequence");
  c.e = *testing::gen_sequence(c.s.length(), c.s.key_dim(), c.s.value_dim(), false).as("direction");
  c.d_out = *testing::gen_matrix(c.s.length(), c.s.value_dim(), false).as("dO");
  return c;
}

}  // namespace

TEST_CASE("backward/each stream's gradients are those of its own recurrence", "[backward][exact]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": in each form, <grad, E> is the recurrence's directional derivative",
             [variant] {
               const auto [spec, s, e, d_out] = draw_direction_case(variant);
               for (const Form form : {Form::published, Form::corrected}) {
                 if (fast::backward_unavailable(spec, Implementation::streaming, form)) continue;
                 RC_PRE(testing::denominators_nonzero(spec, fast::streaming_terms(spec, form, s)));
                 const Gradients<Rational> g = fast::streaming_gradients(spec, form, s, d_out);
                 const auto output = [&](const auto& moved) { return fast::streaming_output(spec, form, moved); };
                 RC_ASSERT(projected(g, e) == testing::directional(output, s, e, d_out));
               }
             },
             100);
  }
}

// The gradient of each scan form's own bracketing, the catalogue's refusals aside.
template <class T>
Gradients<T> any_scan_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s, const Matrix<T>& d_out,
                                Index chunk) {
  return fast::bracketed_scan_gradients(spec, form, s, d_out, fast::ScanOptions{chunk, 1});
}

TEST_CASE("backward/each scan form's gradients are those of its own bracketing", "[backward][exact]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": in each form, <grad, E> is its scan's directional derivative",
             [variant] {
               const auto [spec, s, e, d_out] = draw_direction_case(variant);
               const Index n = s.length(), dv = s.value_dim();
               const Index chunk = *testing::gen_position(1, n + 2).as("chunk");
               for (const Form form : {Form::published, Form::corrected}) {
                 if (fast::unavailable(spec, Implementation::scan, form)) continue;
                 if (fast::algebra_for(spec, Implementation::scan, form) == fast::AlgebraId::hla3_published_scan)
                   continue;  // no adjoints for Eqs. 7.6-7.7's maps
                 Gradients<Rational> g;
                 try {  // a normalized denominator of this bracketing may be zero (then no derivative)
                   g = any_scan_gradients(spec, form, s, d_out, chunk);
                 } catch (const Error& error) {
                   RC_PRE(std::string(error.what()).find("division by zero") == std::string::npos);
                   throw;
                 }
                 const auto output = [&](const Sequence<Dual<Rational>>& moved) {
                   const Matrix<Dual<Rational>> zero = Matrix<Dual<Rational>>::Zero(n, dv);
                   return any_scan_gradients(spec, form, moved, zero, chunk).output;
                 };
                 RC_ASSERT(projected(g, e) == testing::directional(output, s, e, d_out));
               }
             },
             100);
  }
}

TEST_CASE("backward/each chunk form's gradients are those of its own forward pass", "[backward][exact]") {
  for (const Variant variant : all_variants) {
    if (!has_backward(Implementation::chunked, variant)) continue;
    property(
        std::string(variant_name(variant)) +
            ": in each form, <grad, E> is its chunk form's directional derivative",
        [variant] {
          const auto [spec, s, e, d_out] = draw_direction_case(variant);
          const Index chunk = *testing::gen_position(1, s.length() + 2).as("chunk");
          const fast::ScanOptions options{chunk, *rc::gen::inRange(1, 3).as("threads")};
          for (const Form form : {Form::published, Form::corrected}) {
            if (fast::backward_unavailable(spec, Implementation::chunked, form)) continue;
            RC_PRE(testing::denominators_nonzero(spec, fast::chunked_terms(spec, form, s, options)));
            const Gradients<Rational> g = fast::chunked_gradients(spec, form, s, d_out, options);
            RC_ASSERT(g.output == fast::chunked_output(spec, form, s, options));
            const auto output = [&](const auto& moved) {
              return fast::chunked_output(spec, form, moved, options);
            };
            RC_ASSERT(projected(g, e) == testing::directional(output, s, e, d_out));
          }
        },
        100);
  }
}

TEST_CASE("backward/the printed scan operators' gradients are not the serial recurrence's", "[backward][exact]") {
  // Sec. 4.2: "a reverse (decayed) scan applying (+)*_gamma ... yields gradients that match those
  // of the serial recurrence". With decay the printed (+)_gamma of hla2 (F3) and AHLA (F4) is not
  // associative: a scan in chunks differs from the serial fold, and so do their gradients.
  for (const Variant variant : {Variant::hla2, Variant::ahla}) {
    OperatorSpec spec;
    spec.variant = variant;
    spec.decay = Rational(1, 2);
    // Five tokens: with chunks of two, token 5 reads carry_2 (+) T_5 with carry_2 = (T_1 (+) T_2) (+)
    // (T_3 (+) T_4), where one chunk folds token after token.
    const Sequence<Rational> ones{Matrix<Rational>::Ones(5, 1), Matrix<Rational>::Ones(5, 1),
                                  Matrix<Rational>::Ones(5, 1)};
    const Matrix<Rational> d_out = Matrix<Rational>::Ones(5, 1);
    const Gradients<Rational> serial = any_scan_gradients(spec, Form::published, ones, d_out, 5);
    const Gradients<Rational> chunks = any_scan_gradients(spec, Form::published, ones, d_out, 2);
    CHECK(serial.output != chunks.output);
    CHECK(serial.dq != chunks.dq);
    const Gradients<Rational> corrected = any_scan_gradients(spec, Form::corrected, ones, d_out, 2);
    CHECK(corrected.dq == reference::gradients(spec, ones, d_out).dq);
  }
}

TEST_CASE("backward/a published form's gradients differ from the definition's where its forward pass does", "[backward][exact]") {
  // F1: with decay the printed cross-summaries are not the masked operator, nor their gradients.
  OperatorSpec spec;
  spec.decay = Rational(1, 2);
  Rng rng(5);
  const Sequence<Rational> s = random_sequence(rng, 3, 1, 1, EntryKind::integer, 3);
  const Matrix<Rational> d_out = Matrix<Rational>::Ones(3, 1);
  const Sequence<Rational> ones{Matrix<Rational>::Ones(3, 1), Matrix<Rational>::Ones(3, 1), Matrix<Rational>::Ones(3, 1)};
  CHECK(fast::streaming_gradients(spec, Form::published, ones, d_out).dq !=
        reference::gradients(spec, ones, d_out).dq);
  CHECK(fast::streaming_gradients(spec, Form::corrected, s, d_out).dq == reference::gradients(spec, s, d_out).dq);
  // F2: Alg. 3's masked third-order stream, even without decay.
  OperatorSpec third;
  third.variant = Variant::hla3;
  const Sequence<Rational> r = random_sequence(rng, 4, 2, 2, EntryKind::integer, 3);
  const Matrix<Rational> d_r = random_sequence(rng, 4, 2, 2, EntryKind::integer, 3).v;
  const Gradients<Rational> printed = fast::streaming_gradients(third, Form::published, r, d_r);
  const Gradients<Rational> exact = reference::gradients(third, r, d_r);
  CHECK((printed.dq != exact.dq || printed.dk != exact.dk || printed.dv != exact.dv));
  const Gradients<Rational> corrected = fast::streaming_gradients(third, Form::corrected, r, d_r);
  CHECK((corrected.dq == exact.dq && corrected.dk == exact.dk && corrected.dv == exact.dv));
}

TEST_CASE("backward/what has no backward yet is refused with a reason", "[backward]") {
  OperatorSpec spec;
  const Sequence<Rational> s{Matrix<Rational>::Ones(2, 1), Matrix<Rational>::Ones(2, 1), Matrix<Rational>::Ones(2, 1)};
  CHECK(fast::backward_unavailable(spec, Implementation::reference, Form::published) == std::nullopt);
  CHECK(fast::backward_unavailable(spec, Implementation::streaming, Form::corrected) == std::nullopt);
  CHECK(fast::backward_unavailable(spec, Implementation::scan, Form::corrected) == std::nullopt);
  CHECK(fast::backward_unavailable(spec, Implementation::gpu_streaming, Form::corrected) == std::nullopt);
  CHECK(fast::backward_unavailable(spec, Implementation::chunked, Form::corrected) == std::nullopt);
  CHECK(fast::backward_unavailable(spec, Implementation::gpu_scan, Form::corrected) == std::nullopt);
  spec.decay = Rational(1, 2);
  const auto printed = fast::backward_unavailable(spec, Implementation::scan, Form::published);
  REQUIRE(printed.has_value());
  CHECK_THAT(*printed, Catch::Contains("F3"));
  const auto printed_gpu = fast::backward_unavailable(spec, Implementation::gpu_scan, Form::published);
  REQUIRE(printed_gpu.has_value());
  CHECK_THAT(*printed_gpu, Catch::Contains("docs/findings.md"));
  OperatorSpec third;
  third.variant = Variant::hla3;
  CHECK(fast::backward_unavailable(third, Implementation::scan, Form::published).has_value());
  CHECK(fast::backward_unavailable(third, Implementation::scan, Form::corrected) == std::nullopt);
  CHECK(fast::backward_unavailable(third, Implementation::chunked, Form::corrected).has_value());
  CHECK(fast::backward_unavailable(third, Implementation::gpu_scan, Form::corrected) == std::nullopt);
  third.masked = false;  // the unmasked stream holds S^Q too (fast/cuda/algebra/hla3.cuh)
  CHECK(fast::backward_unavailable(third, Implementation::gpu_scan, Form::published) == std::nullopt);
  // The tensor-core backward: hla2 and ahla masked, unnormalized, decayed or not, without ridge;
  // the forward covers more.
  OperatorSpec plain;
  const Form fast_form = fast::default_form(plain, Implementation::gpu_fast);
  CHECK(fast::backward_unavailable(plain, Implementation::gpu_fast, fast_form) == std::nullopt);
  plain.variant = Variant::ahla;
  CHECK(fast::backward_unavailable(plain, Implementation::gpu_fast, fast_form) == std::nullopt);
  plain.decay = Rational(63, 64);
  CHECK(fast::backward_unavailable(plain, Implementation::gpu_fast, fast_form) == std::nullopt);
  for (const auto& change : {+[](OperatorSpec& s) { s.normalize = true; },
                             +[](OperatorSpec& s) {
                               s.normalize = true;
                               s.decay = Rational(63, 64);
                             },
                             +[](OperatorSpec& s) { s.ridge = Rational(1, 2); },
                             +[](OperatorSpec& s) {
                               s.variant = Variant::ahla;
                               s.normalize = true;
                             }}) {
    OperatorSpec other;
    change(other);
    CHECK_FALSE(fast::unavailable(other, Implementation::gpu_fast, fast_form).has_value());
    const auto why = fast::backward_unavailable(other, Implementation::gpu_fast, fast_form);
    REQUIRE(why.has_value());
    CHECK_THAT(*why, Catch::Contains("its backward covers only masked hla2 and ahla, unnormalized"));
  }
  spec.variant = Variant::linear;  // linear attention has one form
  CHECK(fast::backward_unavailable(spec, Implementation::streaming, Form::corrected).has_value());
}

namespace {

// Equal entry by entry, a NaN equal to a NaN (a zero denominator gives the same NaN to both runs).
bool same_values(const Matrix<double>& a, const Matrix<double>& b) {
  if (a.rows() != b.rows() || a.cols() != b.cols()) return false;
  for (Index i = 0; i < a.size(); ++i) {
    const double x = a.data()[i], y = b.data()[i];
    if (!(x == y || (std::isnan(x) && std::isnan(y)))) return false;
  }
  return true;
}

}  // namespace

TEST_CASE("backward/token j's gradients do not read dO before j, bit for bit in float64", "[backward]") {
  // O_t depends on tokens up to t only, so d<dO, O>/d(token j) is a sum over t >= j: changing the
  // rows of dO before j leaves rows j.. of dQ, dK, dV unchanged. Each backward processes tokens
  // from the last, so this holds bit for bit in floating point too.
  for (const Implementation impl :
       {Implementation::reference, Implementation::streaming, Implementation::scan, Implementation::chunked})
    for (const Variant variant : all_variants) {
      if (impl != Implementation::reference && !has_backward(impl, variant)) continue;
      property(std::string(variant_name(variant)) + ": " + std::string(fast::implementation_name(impl)) +
                   ", rows j.. of the gradients from rows j.. of dO",
               [impl, variant] {
                 const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
                 const Sequence<double> s = convert<double>(*testing::gen_any_sequence(16, 4).as("sequence"));
                 const Index n = s.length(), dv = s.value_dim();
                 const Matrix<double> d_out = convert<double>(*testing::gen_matrix(n, dv, false).as("dO"));
                 const Index j = *testing::gen_position(0, n).as("j");
                 Matrix<double> changed = d_out;
                 changed.topRows(j) = convert<double>(*testing::gen_matrix(j, dv, false).as("new rows before j"));
                 const Index every = *testing::gen_position(1, n + 2).as("checkpoint or chunk");
                 const Form form = fast::default_form(spec, impl);
                 const auto run = [&](const Matrix<double>& d) {
                   return impl == Implementation::reference ? reference::gradients(spec, s, d)
                                                            : backward(impl, spec, form, s, d, every);
                 };
                 const Gradients<double> a = run(d_out), b = run(changed);
                 RC_ASSERT(same_values(a.dq.bottomRows(n - j), b.dq.bottomRows(n - j)));
                 RC_ASSERT(same_values(a.dk.bottomRows(n - j), b.dk.bottomRows(n - j)));
                 RC_ASSERT(same_values(a.dv.bottomRows(n - j), b.dv.bottomRows(n - j)));
               },
               100);
    }
}

namespace {

using MP = Matrix<ModP>;

// The fast backward's chunk algebra (fast/cuda/tensor_core_backward.cu's header) for chunks of C
// tokens on the host, in exact arithmetic: the forward's states before each chunk (its checkpoints),
// then the reverse walk, each segment of `segment_chunks` chunks from the carry-in that the later
// segments' summaries (dS0, dF0, M) give through the carry kernel's combination. Rows past n are
// zeros, as the kernels' short last chunk.
Gradients<ModP> fast_chunk_algebra(const OperatorSpec& spec, const Sequence<ModP>& s, const MP& d_out,
                                   Index C, Index segment_chunks) {
  const bool ahla = spec.variant == Variant::ahla;
  const ModP g = to_mod_prime(spec.decay);
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim(), chunks = (n + C - 1) / C;
  const auto padded = [&](const MP& m) {
    MP out = MP::Zero(chunks * C, m.cols());
    out.topRows(n) = m;
    return out;
  };
  const MP q = padded(s.q), k = padded(s.k), v = padded(s.v), d_o = padded(d_out);
  const auto pw = [&](Index e) { return power(g, static_cast<long>(e)); };
  const auto rows = [&](Index first, Index step) {  // diag(g^(first + step r)), r = 0..C-1
    MP m = MP::Zero(C, C);
    for (Index r = 0; r < C; ++r) m(r, r) = pw(first + step * r);
    return m;
  };
  MP mask(C, C);  // L_g
  for (Index t = 0; t < C; ++t)
    for (Index j = 0; j < C; ++j) mask(t, j) = t >= j ? pw(t - j) : ModP(0);
  const MP mask2 = mask.cwiseProduct(mask);
  const MP offset = rows(1, 1), offset2 = rows(2, 2), age = rows(C - 1, -1), age2 = rows(2 * (C - 1), -2);
  const ModP rho = pw(C), rho2 = pw(2 * C);
  const auto block = [&](const MP& m, Index c) { return MP(m.middleRows(c * C, C)); };
  // The forward: the states before each chunk (hla2 S, F; ahla P, E) and the outputs.
  std::vector<MP> state1(chunks), state2(chunks);
  MP s1 = MP::Zero(d, ahla ? dv : d), s2 = MP::Zero(d, dv), out(chunks * C, dv);
  for (Index c = 0; c < chunks; ++c) {
    const MP qc = block(q, c), kc = block(k, c), vc = block(v, c);
    state1[c] = s1;
    state2[c] = s2;
    const MP a = MP(qc * kc.transpose()).cwiseProduct(mask);
    if (ahla) {
      const MP x = offset * qc * s1 + a * vc;
      out.middleRows(c * C, C) = offset * qc * s2 + a * x;
      s1 = rho * s1 + kc.transpose() * age * vc;
      s2 = rho * s2 + kc.transpose() * age * x;
    } else {
      const MP u = offset * qc * s1 + a * kc;
      out.middleRows(c * C, C) = offset2 * qc * s2 + MP(qc * u.transpose()).cwiseProduct(mask2) * vc;
      s1 = rho * s1 + kc.transpose() * age * kc;
      s2 = rho2 * s2 + MP(age2 * u).transpose() * vc;
    }
  }
  // The reverse walk over chunks first .. first + count - 1 from the adjoints (d1, d2) after them:
  // the gradients (when `g_out`) and M (when `m`).
  Gradients<ModP> grad{MP::Zero(chunks * C, d), MP::Zero(chunks * C, d), MP::Zero(chunks * C, dv), out, {}};
  const auto walk = [&](Index first, Index count, MP& d1, MP& d2, Gradients<ModP>* g_out, MP* m) {
    for (Index i = 0; i < count; ++i) {
      const Index c = first + count - 1 - i;
      const MP qc = block(q, c), kc = block(k, c), vc = block(v, c), doc = block(d_o, c);
      const MP a = MP(qc * kc.transpose()).cwiseProduct(mask);
      MP dq, dk, dvv;
      if (ahla) {
        const MP x = offset * qc * state1[c] + a * vc;
        const MP dx = a.transpose() * doc + age * kc * d2;
        const MP da = MP(doc * x.transpose() + dx * vc.transpose()).cwiseProduct(mask);
        dvv = age * kc * d1 + a.transpose() * dx;
        dq = offset * (doc * state2[c].transpose() + dx * state1[c].transpose()) + da * kc;
        dk = age * x * d2.transpose() + age * vc * d1.transpose() + da.transpose() * qc;
        if (m) *m += qc.transpose() * kc;
        d1 = rho * d1 + qc.transpose() * offset * dx;
        d2 = rho * d2 + qc.transpose() * offset * doc;
      } else {
        const MP u = offset * qc * state1[c] + a * kc;
        const MP w = MP(qc * u.transpose()).cwiseProduct(mask2);
        const MP dw = MP(doc * vc.transpose()).cwiseProduct(mask2);
        const MP du = dw.transpose() * qc + age2 * vc * d2.transpose();
        const MP da = MP(du * kc.transpose()).cwiseProduct(mask);
        dvv = w.transpose() * doc + age2 * u * d2;
        dq = offset2 * doc * state2[c].transpose() + dw * u + offset * du * state1[c].transpose() + da * kc;
        dk = a.transpose() * du + da.transpose() * qc + age * kc * MP(d1 + d1.transpose());
        if (m) *m = rho * *m + pw(2 * C * i) * qc.transpose() * rows(2 * C - 1, -1) * vc;
        d1 = rho * d1 + qc.transpose() * offset * du;
        d2 = rho2 * d2 + qc.transpose() * offset2 * doc;
      }
      if (g_out) {
        g_out->dq.middleRows(c * C, C) = dq;
        g_out->dk.middleRows(c * C, C) = dk;
        g_out->dv.middleRows(c * C, C) = dvv;
      }
    }
  };
  const Index segments = (chunks + segment_chunks - 1) / segment_chunks;
  const auto count_of = [&](Index seg) { return std::min(segment_chunks, chunks - seg * segment_chunks); };
  // The carry-ins, from the last segment back (the summary pass and the carry kernel).
  std::vector<MP> in1(segments, MP::Zero(d, ahla ? dv : d)), in2(segments, MP::Zero(d, dv));
  for (Index seg = segments - 1; seg >= 1; --seg) {
    MP d1 = MP::Zero(d, ahla ? dv : d), d2 = MP::Zero(d, dv), m = MP::Zero(d, ahla ? d : dv);
    walk(seg * segment_chunks, count_of(seg), d1, d2, nullptr, &m);
    const ModP r = pw(C * count_of(seg)), r2 = ahla ? r : pw(2 * C * count_of(seg));
    in1[seg - 1] =
        ahla ? MP(r * (in1[seg] + m * in2[seg]) + d1) : MP(r * in1[seg] + d1 + m * in2[seg].transpose());
    in2[seg - 1] = r2 * in2[seg] + d2;
  }
  for (Index seg = 0; seg < segments; ++seg)
    walk(seg * segment_chunks, count_of(seg), in1[seg], in2[seg], &grad, nullptr);
  grad.dq = MP(grad.dq.topRows(n));
  grad.dk = MP(grad.dk.topRows(n));
  grad.dv = MP(grad.dv.topRows(n));
  grad.output = MP(out.topRows(n));
  return grad;
}

}  // namespace

// The algebra the fast backward's kernels compute (their formulas, not their code: the kernels run on
// Hopper's matrix units only), chunks of 1 to 5 tokens, split into 1 to 4 segments: its outputs and
// gradients are the definition's, exactly, for masked unnormalized hla2 and ahla with any decay.
TEST_CASE(
    "backward/the fast path's chunk algebra and its segment split give the definition's gradients - ModP",
    "[backward][exact]") {
  for (const Variant variant : {Variant::hla2, Variant::ahla})
    property(
        std::string(variant_name(variant)) + ": the fast backward's algebra equals reference::gradients",
        [variant] {
          OperatorSpec spec = *testing::gen_spec(variant).as("spec");
          spec.masked = true;
          spec.normalize = false;
          spec.eps = 0;
          spec.ridge = 0;
          const Sequence<Rational> s = *testing::gen_any_sequence(24, 3, 1).as("sequence");
          const Matrix<Rational> d_out = *testing::gen_matrix(s.length(), s.value_dim(), false).as("dO");
          const Index chunk = *rc::gen::inRange(1, 6).as("chunk");
          const Index chunks = (s.length() + chunk - 1) / chunk;
          const Index segment_chunks = *rc::gen::inRange<Index>(1, chunks + 1).as("chunks per segment");
          const Sequence<ModP> sm = convert<ModP>(s);
          const MP d_out_m = convert<ModP>(d_out);
          const Gradients<ModP> got = fast_chunk_algebra(spec, sm, d_out_m, chunk, segment_chunks);
          const Gradients<ModP> exact = reference::gradients(spec, sm, d_out_m);
          RC_ASSERT(got.output == reference::output(spec, sm));
          RC_ASSERT(got.dq == exact.dq);
          RC_ASSERT(got.dk == exact.dk);
          RC_ASSERT(got.dv == exact.dv);
        },
        200);
}
