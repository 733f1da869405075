// The streaming, the scan and the chunk-parallel backward (fast/backward.hpp): the default forms'
// gradients equal the exact gradients of the definition (reference::gradients) bit for bit,
// whatever the checkpoint interval, chunk size and thread count; every form's, published or corrected, are
// the exact gradients of its own forward pass (checked by forward mode on that pass), and a published form's
// differ from the definition's where a finding says its forward pass does. The fast backward's chunk
// algebra and its split into segments (the formulas of fast/cuda/tensor_core_backward.cu) give the
// definition's gradients exactly in Z/p; so does the wide heads' composition of causal products, and each
// product's chunk algebra, split into segments, gives the product.

#include "hla/fast/backward.hpp"

#include <catch2/catch.hpp>
#include <cmath>

#include "../cuda/wide_composition.hpp"
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

// Whether `impl` has a backward for some spec of `variant`.
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
  RC_PRE(!fast::backward_unavailable(spec, impl, form));  // hla3's chunk form is the masked operator's
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
  CHECK(fast::backward_unavailable(third, Implementation::chunked, Form::corrected) == std::nullopt);
  CHECK(fast::backward_unavailable(third, Implementation::gpu_scan, Form::corrected) == std::nullopt);
  third.masked = false;  // the unmasked stream holds S^Q too (fast/cuda/algebra/hla3.cuh)
  CHECK(fast::backward_unavailable(third, Implementation::chunked, Form::corrected).has_value());
  CHECK(fast::backward_unavailable(third, Implementation::gpu_scan, Form::published) == std::nullopt);
  // The tensor-core backward covers what its forward does but hla3: hla2 and ahla masked, normalized
  // or not, with a decay or hla2's ridge.
  OperatorSpec plain;
  const Form fast_form = fast::default_form(plain, Implementation::gpu_fast);
  for (const auto& change : {+[](OperatorSpec&) {}, +[](OperatorSpec& s) { s.variant = Variant::ahla; },
                             +[](OperatorSpec& s) { s.decay = Rational(63, 64); },
                             +[](OperatorSpec& s) {
                               s.normalize = true;
                               s.decay = Rational(63, 64);
                             },
                             +[](OperatorSpec& s) {
                               s.variant = Variant::ahla;
                               s.normalize = true;
                             },
                             +[](OperatorSpec& s) { s.ridge = Rational(1, 2); }}) {
    OperatorSpec covered;
    change(covered);
    CHECK(fast::backward_unavailable(covered, Implementation::gpu_fast, fast_form) == std::nullopt);
  }
  for (const auto& change : {+[](OperatorSpec& s) {
                               s.variant = Variant::hla3;
                               s.masked = false;
                             },
                             +[](OperatorSpec& s) {
                               s.ridge = Rational(1, 2);
                               s.decay = Rational(1, 2);
                             }}) {
    OperatorSpec other;
    change(other);
    const auto why = fast::backward_unavailable(other, Implementation::gpu_fast, fast_form);
    REQUIRE(why.has_value());
    CHECK(why == fast::unavailable(other, Implementation::gpu_fast, fast_form));
  }
  // Masked hla3: its forward only.
  const OperatorSpec masked_third{.variant = Variant::hla3, .decay = Rational(63, 64)};
  CHECK(fast::unavailable(masked_third, Implementation::gpu_fast, fast_form) == std::nullopt);
  const auto why_third = fast::backward_unavailable(masked_third, Implementation::gpu_fast, fast_form);
  REQUIRE(why_third.has_value());
  CHECK_THAT(*why_third, Catch::Contains("the fast backward covers hla2 and ahla"));
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
                 RC_PRE(impl == Implementation::reference || !fast::backward_unavailable(spec, impl, form));
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

// The factors of the fast path's chunk algebra for chunks of C tokens and decay g: the mask L_g, its
// square, diag(g^tau), diag(g^(2 tau)), the ages diag(g^(C - tau)) and their squares, rho = g^C.
struct ChunkFactors {
  ModP g;
  Index C;
  MP mask, mask2, offset, offset2, age, age2, ones;
  ModP rho, rho2;
  ModP pw(Index e) const { return power(g, static_cast<long>(e)); }
  MP rows(Index first, Index step) const {  // diag(g^(first + step r)), r = 0..C-1
    MP m = MP::Zero(C, C);
    for (Index r = 0; r < C; ++r) m(r, r) = pw(first + step * r);
    return m;
  }
  ChunkFactors(ModP gamma, Index chunk) : g(gamma), C(chunk), mask(chunk, chunk) {
    for (Index t = 0; t < C; ++t)
      for (Index j = 0; j < C; ++j) mask(t, j) = t >= j ? pw(t - j) : ModP(0);
    mask2 = mask.cwiseProduct(mask);
    offset = rows(1, 1), offset2 = rows(2, 2), age = rows(C - 1, -1), age2 = rows(2 * (C - 1), -2);
    ones = MP::Constant(C, 1, ModP(1));
    rho = pw(C), rho2 = pw(2 * C);
  }
};

// The fast path's forward chunk algebra (fast/cuda/tensor_core.cu's header) over rows padded to whole
// chunks: the states and vectors before each chunk (hla2 S, F, -, f; ahla P, E, m, n: the backward's
// checkpoints) and the terms. The key side reads q_in and k_in where a wide head's cross term reads
// the inner half (hla2: A = (Q_in K_in^T) . L_g, U = diag(g^tau) Q_in S + A K (+ ridge Q), S = rho S +
// K_in^T D K; ahla: A_in = (Q_in K_in^T) . L_g, X = diag(g^tau) Q_in P + A_in V, P = rho P + K_in^T D V,
// m alike), the value side q and k; q_in = q, k_in = k otherwise.
struct ChunkForward {
  std::vector<MP> state1, state2, vector1, vector2;
  MP num, den;
};
ChunkForward fast_chunk_forward(bool ahla, const ChunkFactors& f, const ModP& ridge, const MP& q, const MP& k,
                                const MP& v, const MP& q_in, const MP& k_in) {
  const Index C = f.C, chunks = q.rows() / C, d = q.cols(), dv = v.cols();
  const auto block = [&](const MP& m, Index c) { return MP(m.middleRows(c * C, C)); };
  ChunkForward out{std::vector<MP>(chunks), std::vector<MP>(chunks), std::vector<MP>(chunks),
                   std::vector<MP>(chunks), MP(chunks * C, dv),      MP(chunks * C, 1)};
  MP s1 = MP::Zero(q_in.cols(), ahla ? dv : d), s2 = MP::Zero(d, dv), v1 = MP::Zero(q_in.cols(), 1),
     v2 = MP::Zero(d, 1);
  for (Index c = 0; c < chunks; ++c) {
    const MP qc = block(q, c), kc = block(k, c), vc = block(v, c), qi = block(q_in, c), ki = block(k_in, c);
    out.state1[c] = s1, out.state2[c] = s2, out.vector1[c] = v1, out.vector2[c] = v2;
    const MP a_in = MP(qi * ki.transpose()).cwiseProduct(f.mask);
    if (ahla) {
      const MP a = MP(qc * kc.transpose()).cwiseProduct(f.mask);
      const MP x = f.offset * qi * s1 + a_in * vc, x1 = f.offset * qi * v1 + a_in * f.ones;
      out.num.middleRows(c * C, C) = f.offset * qc * s2 + a * x;
      out.den.middleRows(c * C, C) = f.offset * qc * v2 + a * x1;
      s1 = f.rho * s1 + ki.transpose() * f.age * vc;
      v1 = f.rho * v1 + ki.transpose() * f.age * f.ones;
      s2 = f.rho * s2 + kc.transpose() * f.age * x;
      v2 = f.rho * v2 + kc.transpose() * f.age * x1;
    } else {
      const MP u = f.offset * qi * s1 + a_in * kc + ridge * qc;
      const MP w = MP(qc * u.transpose()).cwiseProduct(f.mask2);
      out.num.middleRows(c * C, C) = f.offset2 * qc * s2 + w * vc;
      out.den.middleRows(c * C, C) = f.offset2 * qc * v2 + w * f.ones;
      s1 = f.rho * s1 + ki.transpose() * f.age * kc;
      s2 = f.rho2 * s2 + MP(f.age2 * u).transpose() * vc;
      v2 = f.rho2 * v2 + MP(f.age2 * u).transpose() * f.ones;
    }
  }
  return out;
}

// Rows padded with zeros to `rows` (a short last chunk's rows past n).
MP padded_rows(const MP& m, Index rows) {
  MP out = MP::Zero(rows, m.cols());
  out.topRows(m.rows()) = m;
  return out;
}

// The fast backward's chunk algebra (fast/cuda/tensor_core_backward.cu's header) for chunks of C
// tokens on the host, in exact arithmetic: the forward's states and vectors before each chunk (its
// checkpoints), then the reverse walk from the readouts' adjoints (d_num, d_den), each segment of
// `segment_chunks` chunks from the carry-in that the later segments' summaries (dS0, dF0, M and the
// vectors' hla2 df0, mu; ahla dm0, dn0) give through the carry kernel's combination. Rows past n are
// zeros, as the kernels' short last chunk. `as_ranks`: the combination as the backward across ranks runs
// it (tensor_core_backward.cu, launch_rank), every segment's decay taken over segment_chunks chunks, the
// last one's too, whose length a rank does not know (it never enters: that step starts from zero).
Gradients<ModP> fast_chunk_algebra(const OperatorSpec& spec, const Sequence<ModP>& s,
                                   const Terms<ModP>& adjoints, Index C, Index segment_chunks,
                                   bool as_ranks = false) {
  const bool ahla = spec.variant == Variant::ahla;
  const ChunkFactors f(to_mod_prime(spec.decay), C);
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim(), chunks = (n + C - 1) / C;
  const auto padded = [&](const MP& m) { return padded_rows(m, chunks * C); };
  const MP q = padded(s.q), k = padded(s.k), v = padded(s.v), d_o = padded(adjoints.num),
           d_den = padded(MP(adjoints.den));
  const ModP ridge = to_mod_prime(spec.ridge);  // hla2 with gamma = 1: U + ridge Q in place of U
  const auto pw = [&](Index e) { return f.pw(e); };
  const auto rows = [&](Index first, Index step) { return f.rows(first, step); };
  const MP &mask = f.mask, &mask2 = f.mask2, &offset = f.offset, &offset2 = f.offset2, &age = f.age,
           &age2 = f.age2, &ones = f.ones;
  const ModP rho = f.rho, rho2 = f.rho2;
  const auto block = [&](const MP& m, Index c) { return MP(m.middleRows(c * C, C)); };
  // The forward: the states before each chunk (hla2 S, F, f; ahla P, E, m, n) and the terms.
  const ChunkForward forward = fast_chunk_forward(ahla, f, ridge, q, k, v, q, k);
  const std::vector<MP>&state1 = forward.state1, &state2 = forward.state2, &vector1 = forward.vector1,
        &vector2 = forward.vector2;
  const MP &num = forward.num, &den = forward.den;
  // The adjoints after a chunk: of the two states and the two vectors (hla2: -, f; ahla: m, n).
  struct Adjoints {
    MP d1, d2, dv1, dv2;
  };
  const auto zero_adjoints = [&] {
    return Adjoints{MP::Zero(d, ahla ? dv : d), MP::Zero(d, dv), MP::Zero(d, 1), MP::Zero(d, 1)};
  };
  // The reverse walk over chunks first .. first + count - 1 from the adjoints after them: the
  // gradients (when `g_out`) and M, mu (when `m`).
  Gradients<ModP> grad{MP::Zero(chunks * C, d), MP::Zero(chunks * C, d), MP::Zero(chunks * C, dv), {}, {}};
  const auto walk = [&](Index first, Index count, Adjoints& z, Gradients<ModP>* g_out, MP* m, MP* mu) {
    for (Index i = 0; i < count; ++i) {
      const Index c = first + count - 1 - i;
      const MP qc = block(q, c), kc = block(k, c), vc = block(v, c), doc = block(d_o, c),
               dd = block(d_den, c);
      const MP a = MP(qc * kc.transpose()).cwiseProduct(mask);
      MP dq, dk, dvv;
      if (ahla) {
        const MP x = offset * qc * state1[c] + a * vc, x1 = offset * qc * vector1[c] + a * ones;
        const MP dx = a.transpose() * doc + age * kc * z.d2, dx1 = a.transpose() * dd + age * kc * z.dv2;
        const MP da =
            MP(doc * x.transpose() + dx * vc.transpose() + dd * x1.transpose() + dx1 * ones.transpose())
                .cwiseProduct(mask);
        dvv = age * kc * z.d1 + a.transpose() * dx;
        dq = offset * (doc * state2[c].transpose() + dx * state1[c].transpose() +
                       dd * vector2[c].transpose() + dx1 * vector1[c].transpose()) +
             da * kc;
        dk = age * x * z.d2.transpose() + age * vc * z.d1.transpose() + age * x1 * z.dv2.transpose() +
             age * ones * z.dv1.transpose() + da.transpose() * qc;
        if (m) *m += qc.transpose() * kc;
        z.d1 = rho * z.d1 + qc.transpose() * offset * dx;
        z.dv1 = rho * z.dv1 + qc.transpose() * offset * dx1;
        z.d2 = rho * z.d2 + qc.transpose() * offset * doc;
        z.dv2 = rho * z.dv2 + qc.transpose() * offset * dd;
      } else {
        const MP u = offset * qc * state1[c] + a * kc + ridge * qc;
        const MP w = MP(qc * u.transpose()).cwiseProduct(mask2);
        const MP dw = MP(doc * vc.transpose() + dd * ones.transpose()).cwiseProduct(mask2);
        const MP du = dw.transpose() * qc + age2 * vc * z.d2.transpose() + age2 * ones * z.dv2.transpose();
        const MP da = MP(du * kc.transpose()).cwiseProduct(mask);
        dvv = w.transpose() * doc + age2 * u * z.d2;
        dq = offset2 * (doc * state2[c].transpose() + dd * vector2[c].transpose()) + dw * u +
             offset * du * state1[c].transpose() + da * kc + ridge * du;
        dk = a.transpose() * du + da.transpose() * qc + age * kc * MP(z.d1 + z.d1.transpose());
        if (m) {
          *m = rho * *m + pw(2 * C * i) * qc.transpose() * rows(2 * C - 1, -1) * vc;
          *mu = rho * *mu + pw(2 * C * i) * qc.transpose() * rows(2 * C - 1, -1) * ones;
        }
        z.d1 = rho * z.d1 + qc.transpose() * offset * du;
        z.d2 = rho2 * z.d2 + qc.transpose() * offset2 * doc;
        z.dv2 = rho2 * z.dv2 + qc.transpose() * offset2 * dd;
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
  std::vector<Adjoints> in(segments, zero_adjoints());
  for (Index seg = segments - 1; seg >= 1; --seg) {
    Adjoints z = zero_adjoints();
    MP m = MP::Zero(d, ahla ? d : dv), mu = MP::Zero(d, 1);
    walk(seg * segment_chunks, count_of(seg), z, nullptr, &m, &mu);
    const Index length = as_ranks ? segment_chunks : count_of(seg);
    const ModP r = pw(C * length), r2 = ahla ? r : pw(2 * C * length);
    const Adjoints& after = in[seg];
    Adjoints& before = in[seg - 1];
    if (ahla) {
      before.d1 = r * (after.d1 + m * after.d2) + z.d1;
      before.dv1 = r * (after.dv1 + m * after.dv2) + z.dv1;
    } else {
      before.d1 = r * after.d1 + z.d1 + m * after.d2.transpose() + mu * after.dv2.transpose();
    }
    before.d2 = r2 * after.d2 + z.d2;
    before.dv2 = r2 * after.dv2 + z.dv2;
  }
  for (Index seg = 0; seg < segments; ++seg)
    walk(seg * segment_chunks, count_of(seg), in[seg], &grad, nullptr, nullptr);
  grad.dq = MP(grad.dq.topRows(n));
  grad.dk = MP(grad.dk.topRows(n));
  grad.dv = MP(grad.dv.topRows(n));
  grad.terms = {MP(num.topRows(n)), Vector<ModP>(den.topRows(n))};
  return grad;
}

// A random operator of the fast path's: masked, with hla2's ridge only where gamma = 1.
OperatorSpec fast_spec(Variant variant) {
  OperatorSpec spec = *testing::gen_spec(variant).as("spec");
  spec.masked = true;
  if (spec.decayed()) spec.ridge = 0;
  return spec;
}

// Readouts' adjoints of spec over the tokens of s, in Z/p: d_num, and d_den when normalized (else zero).
Terms<ModP> gen_readout_adjoints(const OperatorSpec& spec, const Sequence<Rational>& s) {
  const Matrix<Rational> d_num = *testing::gen_matrix(s.length(), s.value_dim(), false).as("d_num");
  const Matrix<Rational> d_den = spec.normalize ? *testing::gen_matrix(s.length(), 1, false).as("d_den")
                                                : Matrix<Rational>::Zero(s.length(), 1);
  return {convert<ModP>(d_num), Vector<ModP>(convert<ModP>(d_den))};
}

// The definition's gradients of spec from the readouts' adjoints; the reference forms O too, which a
// zero denominator in Z/p leaves undefined, and such a case is discarded.
Gradients<ModP> exact_gradients(const OperatorSpec& spec, const Sequence<ModP>& s, const Terms<ModP>& adjoints) {
  try {
    return reference::gradients(spec, s, Upstream<ModP>::readouts(adjoints));
  } catch (const Error&) {
    RC_DISCARD("a normalized denominator is zero in Z/p");
  }
}

}  // namespace

// The algebra the fast backward's kernels compute (their formulas, not their code: the kernels run on
// Hopper's matrix units only), chunks of 1 to 5 tokens, split into segments (or ranks, whose carries
// take every segment's length as the first ones'): its terms and
// gradients are the definition's, exactly, for masked hla2 and ahla, normalized or not (the gradients
// of <d_num, num> + <d_den, den> from the readouts' adjoints; d_den zero unnormalized), with any decay
// or hla2's ridge.
TEST_CASE(
    "backward/the fast path's chunk algebra and its segment split give the definition's gradients - ModP",
    "[backward][exact]") {
  for (const Variant variant : {Variant::hla2, Variant::ahla})
    property(
        std::string(variant_name(variant)) + ": the fast backward's algebra equals reference::gradients",
        [variant] {
          const OperatorSpec spec = fast_spec(variant);
          const Sequence<Rational> s = *testing::gen_any_sequence(24, 3, 1).as("sequence");
          const Terms<ModP> adjoints = gen_readout_adjoints(spec, s);
          const Index chunk = *rc::gen::inRange(1, 6).as("chunk");
          const Index chunks = (s.length() + chunk - 1) / chunk;
          const Index segment_chunks = *rc::gen::inRange<Index>(1, chunks + 1).as("chunks per segment");
          const bool as_ranks = *rc::gen::arbitrary<bool>().as("the carries as the ranks combine them");
          const Sequence<ModP> sm = convert<ModP>(s);
          const Gradients<ModP> got = fast_chunk_algebra(spec, sm, adjoints, chunk, segment_chunks, as_ranks);
          const Gradients<ModP> exact = exact_gradients(spec, sm, adjoints);
          const Terms<ModP> terms = reference::terms(spec, sm);
          RC_ASSERT(got.terms.num == terms.num);
          RC_ASSERT(got.terms.den == terms.den);
          RC_ASSERT(got.dq == exact.dq);
          RC_ASSERT(got.dk == exact.dk);
          RC_ASSERT(got.dv == exact.dv);
        },
        200);
}

// A head wider than the kernel's tiles (fast/cuda/tensor_core.cu, launch_wide): the sum over its key
// halves (x, y) of the forward chunk algebra whose value side reads half x and whose key side half y
// (a cross term's q_in, k_in where x != y; hla2's ridge in the terms x = y) has the definition's terms,
// exactly, for masked hla2 and ahla with every option, the features cut anywhere.
TEST_CASE("backward/a wide head is the sum of its halves' cross terms - ModP", "[backward][exact]") {
  for (const Variant variant : {Variant::hla2, Variant::ahla})
    property(
        std::string(variant_name(variant)) + ": the halves' terms add up to reference::terms",
        [variant] {
          const OperatorSpec spec = fast_spec(variant);
          const Sequence<Rational> s = *testing::gen_any_sequence(16, 4, 1).as("sequence");
          RC_PRE(s.key_dim() >= 2);
          const Index cut = *rc::gen::inRange<Index>(1, s.key_dim()).as("first half's columns");
          const Index chunk = *rc::gen::inRange(1, 5).as("chunk");
          const Sequence<ModP> sm = convert<ModP>(s);
          const Index n = s.length(), rows = (n + chunk - 1) / chunk * chunk;
          const ChunkFactors f(to_mod_prime(spec.decay), chunk);
          const auto half = [&](const MP& m, int x) {
            return padded_rows(x == 0 ? MP(m.leftCols(cut)) : MP(m.rightCols(m.cols() - cut)), rows);
          };
          const MP v = padded_rows(sm.v, rows);
          MP num = MP::Zero(rows, s.value_dim()), den = MP::Zero(rows, 1);
          for (int x = 0; x < 2; ++x)
            for (int y = 0; y < 2; ++y) {
              const ModP ridge = x == y ? to_mod_prime(spec.ridge) : ModP(0);
              const ChunkForward term = fast_chunk_forward(variant == Variant::ahla, f, ridge, half(sm.q, x),
                                                           half(sm.k, x), v, half(sm.q, y), half(sm.k, y));
              num += term.num;
              den += term.den;
            }
          const Terms<ModP> terms = reference::terms(spec, sm);
          RC_ASSERT(MP(num.topRows(n)) == terms.num);
          RC_ASSERT(Vector<ModP>(den.topRows(n)) == terms.den);
        },
        200);
}

namespace {

namespace wide = hla::fast::gpu::detail::wide;

// LA_p (over the past: the state of tokens 0..t) or LR_p (over the future: of tokens t..n-1) of (a, b, c)
// with gp = g^p, by the recurrence S = gp S + b_t c_t^T, out_t = a_t S over the tokens in order or from
// the last (a and b over their common columns, as the device's zero-padded operands multiply).
MP causal_product(wide::Over over, const ModP& gp, const MP& a, const MP& b, const MP& c) {
  const Index common = std::min(a.cols(), b.cols()), n = a.rows();
  MP state = MP::Zero(common, c.cols()), result(n, c.cols());
  for (Index i = 0; i < n; ++i) {
    const Index t = over == wide::Over::past ? i : n - 1 - i;
    state = gp * state + b.row(t).head(common).transpose() * c.row(t);
    result.row(t) = a.row(t).head(common) * state;
  }
  return result;
}

// The same product by the chunk algebra of the kernel that runs it (launch_causal_product: tensor_core.cu's
// weights_side and outputs_side) for chunks of C tokens, walked in order (LA) or from the last (LR):
// chunk out = diag(f) A F + W C with W = (A B^T) . M, then F = rho F + (D B)^T C, rho = gp^C; in order
// M(r, j) = gp^(r - j) for j <= r, f_r = gp^(r + 1), D = diag(gp^(C - 1 - r)); from the last M(r, j) =
// gp^(j - r) for j >= r, f_r = gp^(C - r), D = diag(gp^r). Split into segments of L chunks in the walk's
// order: each summarized from zero (S_s), the carry-ins C_1 = S_0, C_(s+1) = l C_s + S_s with l = gp^(C L)
// (causal_product_carry_kernel), each segment's walk from its carry-in. Rows past n are zeros (the
// kernel's short last chunk).
MP chunked_causal_product(wide::Over over, const ModP& gp, Index C, Index L, const MP& a, const MP& b,
                          const MP& c) {
  const bool reversed = over == wide::Over::future;
  const Index n = a.rows(), common = std::min(a.cols(), b.cols()), chunks = (n + C - 1) / C;
  const MP A = padded_rows(MP(a.leftCols(common)), chunks * C),
           B = padded_rows(MP(b.leftCols(common)), chunks * C), V = padded_rows(c, chunks * C);
  const ChunkFactors f(gp, C);  // in order; from the last: the mask transposed, the rows' powers mirrored
  const MP mask = reversed ? MP(f.mask.transpose()) : f.mask, offset = reversed ? f.rows(C, -1) : f.offset,
           age = reversed ? f.rows(0, 1) : f.age;
  MP out = MP::Zero(chunks * C, c.cols());
  // Walk positions first .. first + count - 1 from `state`; the outputs when `write`; the state after.
  const auto walk = [&](Index first, Index count, MP state, bool write) {
    for (Index i = first; i < first + count; ++i) {
      const Index at = (reversed ? chunks - 1 - i : i) * C;
      const MP ac = A.middleRows(at, C), bc = B.middleRows(at, C), vc = V.middleRows(at, C);
      if (write)
        out.middleRows(at, C) = offset * ac * state + MP(ac * bc.transpose()).cwiseProduct(mask) * vc;
      state = f.rho * state + bc.transpose() * age * vc;
    }
    return state;
  };
  const Index segments = (chunks + L - 1) / L;
  std::vector<MP> carry(segments, MP::Zero(common, c.cols()));
  for (Index s = 0; s + 1 < segments; ++s) {
    const MP summary = walk(s * L, L, MP::Zero(common, c.cols()), false);
    carry[s + 1] = s == 0 ? summary : MP(f.pw(C * L) * carry[s] + summary);
  }
  for (Index s = 0; s < segments; ++s) walk(s * L, std::min(L, chunks - s * L), carry[s], true);
  return out.topRows(n);
}

// The wide heads' backward and forward (fast/cuda/wide_composition.hpp) on one sequence-head in Z/p: its
// Run with LA_p and LR_p by causal_product's recurrence, the operands' rows as they are (Z/p rounds
// nothing), the backward's gradients into `out`, the forward's terms into `terms`.
class ExactRun {
 public:
  static constexpr int vector_columns = 1;
  struct Rows {
    const MP* rows;  // null: a column of ones
  };
  using Operand = MP;
  using Floats = MP;
  using Target = MP*;
  ExactRun(const OperatorSpec& spec, const Sequence<ModP>& s, const Terms<ModP>& adjoints,
           Gradients<ModP>& out)
      : spec_(spec),
        s_(s),
        d_num_(adjoints.num),
        d_den_(MP(adjoints.den)),
        gamma_(to_mod_prime(spec.decay)),
        out_(&out) {
    const Index n = s.length();
    out.dq = MP::Zero(n, s.key_dim()), out.dk = MP::Zero(n, s.key_dim()), out.dv = MP::Zero(n, s.value_dim());
  }
  ExactRun(const OperatorSpec& spec, const Sequence<ModP>& s, Terms<ModP>& terms)
      : spec_(spec), s_(s), gamma_(to_mod_prime(spec.decay)), terms_(&terms) {}
  int key_dim() const { return static_cast<int>(s_.key_dim()); }
  int value_dim() const { return static_cast<int>(s_.value_dim()); }
  bool normalized() const { return spec_.normalize; }
  bool ridge() const { return spec_.ridge != 0; }

  Rows rows(wide::Input which) const {
    switch (which) {
      case wide::Input::q:
        return {&s_.q};
      case wide::Input::k:
        return {&s_.k};
      case wide::Input::v:
        return {&s_.v};
      case wide::Input::d_num:
        return {&d_num_};
      default:
        return {&d_den_};
    }
  }
  Rows ones() const { return {nullptr}; }
  Rows of(const MP& from) const { return {&from}; }
  MP input(wide::Input which) const { return *rows(which).rows; }
  MP rows_of(const Rows& from, int columns) const {
    const MP m = read(from);
    RC_ASSERT(m.cols() <= columns);
    MP out = MP::Zero(m.rows(), columns);
    out.leftCols(m.cols()) = m;
    return out;
  }
  MP floats(int columns) const { return MP::Zero(s_.length(), columns); }
  MP* target(MP& to) const { return &to; }
  MP* gradient(wide::Input which) const {
    return which == wide::Input::q ? &out_->dq : which == wide::Input::k ? &out_->dk : &out_->dv;
  }
  // LA_p (over the past: the state of tokens 0..t) or LR_p (over the future: of tokens t..n-1).
  void product(wide::Over over, int p, const MP& a, const MP& b, const MP& c, MP* out, bool add) const {
    RC_ASSERT(out->rows() == a.rows() && out->cols() == c.cols());
    const MP result = causal_product(over, power(gamma_, static_cast<long>(p)), a, b, c);
    *out = add ? MP(*out + result) : result;
  }
  MP rounded(wide::Over over, int p, const MP& a, const MP& b, const MP& c) const {
    MP out = MP::Zero(a.rows(), c.cols());
    product(over, p, a, b, c, &out, false);
    return out;
  }
  void add_ridge(MP* to, const Rows& from) const { *to += to_mod_prime(spec_.ridge) * read(from); }
  void outputs(int p, const MP& a, const MP& b, const MP& c, const MP* den) const {
    RC_ASSERT((den != nullptr) == spec_.normalize);
    terms_->num = causal_product(wide::Over::past, power(gamma_, static_cast<long>(p)), a, b, c);
    terms_->den = den ? Vector<ModP>(den->col(0)) : Vector<ModP>::Zero(a.rows());
  }

 private:
  MP read(const Rows& from) const {
    return from.rows ? *from.rows : MP(MP::Constant(s_.length(), 1, ModP(1)));
  }

  const OperatorSpec& spec_;
  const Sequence<ModP>& s_;
  MP d_num_, d_den_;
  ModP gamma_;
  Gradients<ModP>* out_ = nullptr;
  Terms<ModP>* terms_ = nullptr;
};

}  // namespace

// Heads wider than the kernel's tiles: the backward composed of first-order causal products
// (fast/cuda/wide_composition.hpp, the composition wide_backward.cu runs on the matrix units) gives the
// definition's gradients, exactly, for masked hla2 and ahla with every option (the gradients of <d_num,
// num> + <d_den, den> from the readouts' adjoints; d_den zero unnormalized).
TEST_CASE("backward/the wide heads' composition of causal products gives the definition's gradients - ModP",
          "[backward][exact]") {
  for (const Variant variant : {Variant::hla2, Variant::ahla})
    property(
        std::string(variant_name(variant)) + ": the composition's gradients equal reference::gradients",
        [variant] {
          const OperatorSpec spec = fast_spec(variant);
          const Sequence<Rational> s = *testing::gen_any_sequence(16, 4, 1).as("sequence");
          const Terms<ModP> adjoints = gen_readout_adjoints(spec, s);
          const Sequence<ModP> sm = convert<ModP>(s);
          Gradients<ModP> got;
          wide::wide_backward(variant == Variant::ahla, ExactRun(spec, sm, adjoints, got));
          const Gradients<ModP> exact = exact_gradients(spec, sm, adjoints);
          RC_ASSERT(got.dq == exact.dq);
          RC_ASSERT(got.dk == exact.dk);
          RC_ASSERT(got.dv == exact.dv);
        },
        200);
}

// The chunk algebra of the kernel that runs each causal product, split into segments as few heads run it
// (a summary pass, causal_product_carry_kernel's carry-ins, the outputs pass), gives the product exactly:
// chunks of 1 to 5 tokens (a short last one), segments of 1 to 4 chunks, powers 1 and 2, either direction.
TEST_CASE("backward/the wide products' chunk algebra and its segment split give LA_p and LR_p - ModP",
          "[backward][exact]") {
  property("the chunked, split product equals the recurrence", [] {
    const wide::Over over = *rc::gen::element(wide::Over::past, wide::Over::future).as("over");
    const int p = *rc::gen::inRange(1, 3).as("power");
    const Index C = *rc::gen::inRange<Index>(1, 6).as("chunk"),
                L = *rc::gen::inRange<Index>(1, 5).as("segment");
    const ModP gp = power(to_mod_prime(fast_spec(Variant::hla2).decay), static_cast<long>(p));
    const Sequence<ModP> s = convert<ModP>(*testing::gen_any_sequence(16, 4, 1).as("sequence"));
    RC_ASSERT(chunked_causal_product(over, gp, C, L, s.q, s.k, s.v) ==
              causal_product(over, gp, s.q, s.k, s.v));
    const MP ones = MP::Constant(s.length(), 1, ModP(1));
    RC_ASSERT(chunked_causal_product(over, gp, C, L, s.k, s.q, ones) ==
              causal_product(over, gp, s.k, s.q, ones));
  });
}

// The forward that the wide heads' backward recomputes, and that launch_wide_forward runs for few heads,
// composed of causal products (wide_composition.hpp's wide_forward): hla2 U = LA_1(Q, K, K) (+ ridge Q),
// num = LA_2(Q, U, V), den = LA_2(Q, U, 1); ahla X = LA_1(Q, K, V), num = LA_1(Q, K, X), x = LA_1(Q, K,
// 1), den = LA_1(Q, K, x); hla3 Z = LA_1(Q, K, K), R = LA_1(Q, K, V), num = LA_3(Q, Z, R), den = LA_3(Q,
// Z, LA_1(Q, K, 1)): the definition's terms, exactly, for masked hla2, ahla and hla3 with every option.
TEST_CASE(
    "backward/the wide heads' forward, composed of causal products, gives the definition's terms - ModP",
    "[backward][exact]") {
  for (const Variant variant : {Variant::hla2, Variant::ahla, Variant::hla3})
    property(std::string(variant_name(variant)) + ": the products' terms equal reference::terms", [variant] {
      const OperatorSpec spec = fast_spec(variant);
      const Sequence<ModP> s = convert<ModP>(*testing::gen_any_sequence(16, 4, 1).as("sequence"));
      Terms<ModP> got;
      wide::wide_forward(variant, ExactRun(spec, s, got));
      const Terms<ModP> terms = reference::terms(spec, s);
      RC_ASSERT(got.num == terms.num);
      if (spec.normalize) RC_ASSERT(got.den == terms.den);  // unnormalized, the forward forms no den
    });
}
