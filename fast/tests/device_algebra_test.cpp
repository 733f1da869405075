// The device algebra (fast/cuda/algebra/) run on the host, where a thread block is one thread,
// against the CPU algebra (fast/algebra/): every push and read of the streaming states, every
// absorb, combine and read of the segment summaries, and the streaming backward's kernel body
// (fast/cuda/backward.cuh) equal the CPU's bit for bit in Z/p, for every variant, option and form
// the GPU implementations have. So the kernels' formulas are checked on
// every machine, CI included; the GPU tests check the drivers around them on the device.

#include <catch2/catch.hpp>

#include "../cuda/algebra/dispatch.cuh"
#include "../cuda/host.hpp"
#include "hla/fast/backward.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/random.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;
namespace gpu = hla::fast::gpu;
using fast::Form;
using fast::Implementation;
using T = ModP;
using Flat = std::vector<T>;

namespace {

// Writes a CPU matrix or vector into a device field (row-major, like the device arrays).
template <class M>
void put(T* field, const M& m) {
  for (Index i = 0; i < m.size(); ++i) field[i] = m.data()[i];
}

// A CPU summary in the layout of the device algebra that holds it.
Flat flat(const fast::LinearSummary<T>& s, Index d, Index dv) {
  Flat out(gpu::LinearAlgebra<T>::summary_size(d, dv));
  const gpu::LinearAlgebra<T>::Fields<T*> f(out.data(), d, dv);
  put(f.key_value, s.key_value), put(f.key_mass, s.key_mass), *f.rho = s.rho;
  return out;
}
Flat flat(const fast::Hla2Summary<T>& s, Index d, Index dv) {
  Flat out(gpu::Hla2Algebra<T>::summary_size(d, dv));
  const gpu::Hla2Algebra<T>::Fields<T*> f(out.data(), d, dv);
  put(f.key_moment, s.key_moment), put(f.query_value, s.query_value), put(f.query_mass, s.query_mass);
  put(f.cross_value, s.cross_value), put(f.cross_mass, s.cross_mass), *f.rho = s.rho;
  return out;
}
Flat flat(const fast::AhlaSummary<T>& s, Index d, Index dv) {
  Flat out(gpu::AhlaAlgebra<T>::summary_size(d, dv));
  const gpu::AhlaAlgebra<T>::Fields<T*> f(out.data(), d, dv);
  put(f.key_value, s.key_value), put(f.key_mass, s.key_mass), put(f.routed_value, s.routed_value);
  put(f.routed_mass, s.routed_mass), put(f.key_query, s.key_query), *f.rho = s.rho;
  return out;
}
Flat flat(const fast::Hla3Summary<T>& s, Index d, Index dv) {
  Flat out(gpu::Hla3Algebra<T>::summary_size(d, dv));
  const gpu::Hla3Algebra<T>::Fields<T*> f(out.data(), d, dv);
  put(f.key_moment, s.key_moment), put(f.key_value, s.key_value), put(f.key_mass, s.key_mass);
  put(f.corrected_value, s.corrected_value), put(f.corrected_mass, s.corrected_mass);
  put(f.query_moment, s.query_moment), put(f.query_value, s.query_value), put(f.query_mass, s.query_mass);
  put(f.key_query, s.key_query), *f.rho = s.rho;
  return out;
}
Flat flat(const fast::Hla3PublishedSummary<T>&, Index, Index) {
  throw Error("the published third-order scan has no device algebra");
}

struct Token {
  Flat q, k, v;
};
Token token(const Sequence<T>& s, Index t) {
  const auto row = [t](const Matrix<T>& m) { return Flat(m.row(t).data(), m.row(t).data() + m.cols()); };
  return {row(s.q), row(s.k), row(s.v)};
}

// Scratch for any algebra at these sizes.
Flat scratch(Index d, Index dv) {
  return Flat(4 * (d * d + d * dv + d + dv) + 8);
}

// Every operator the GPU evaluates, with the implementation and form, as the catalogue lists them.
struct Config {
  OperatorSpec spec;
  Implementation impl;
  Form form;
};
std::vector<Config> configs() {
  std::vector<Config> out;
  for (const Variant variant : all_variants) {
    for (const bool masked : {true, false}) {
      for (const bool ridge : {false, true}) {
        for (const bool decayed : {false, true}) {
          if ((!masked && !supports_unmasked(variant)) || (ridge && !supports_ridge(variant))) continue;
          OperatorSpec spec{.variant = variant, .masked = masked};
          spec.ridge = ridge ? Rational(1, 2) : Rational(0);
          spec.decay = decayed ? Rational(1, 2) : Rational(1);  // replaced by a random gamma below
          for (const Implementation impl : {Implementation::gpu_streaming, Implementation::gpu_scan}) {
            for (const Form form : {Form::published, Form::corrected}) {
              if (!fast::unavailable(spec, impl, form)) out.push_back({spec, impl, form});
            }
          }
        }
      }
    }
  }
  return out;
}

std::string name(const Config& c) {
  OperatorSpec undecayed = c.spec;
  undecayed.decay = 1;
  return describe(undecayed) + (c.spec.decayed() ? " decayed" : "") + " " +
         std::string(fast::implementation_name(c.impl)) + " " + std::string(fast::form_name(c.form));
}

// The streaming kernel's loop on the host: push token t, read o_t.
template <class Algebra>
Terms<T> device_stream(const Algebra& algebra, const Sequence<T>& s) {
  const Index d = s.key_dim(), dv = s.value_dim(), n = s.length();
  Flat state(gpu::streaming_state_size(algebra), T(0)), work = scratch(d, dv);
  Terms<T> out{Matrix<T>(n, dv), Vector<T>(n)};
  Flat num(dv);
  for (Index t = 0; t < n; ++t) {
    Token x = token(s, t);
    algebra.push(state.data(), work.data(), x.q.data(), x.k.data(), x.v.data());
    algebra.read(state.data(), work.data(), x.q.data(), num.data(), &out.den(t));
    for (Index j = 0; j < dv; ++j) out.num(t, j) = num[j];
  }
  return out;
}

// A random streaming case of config c: a sequence (n <= 8, d, dv <= 4) in Z/p, and c's operator
// with a random decay where it has one.
std::pair<OperatorSpec, Sequence<T>> gen_streaming_case(const Config& c) {
  const Sequence<Rational> exact = *testing::gen_any_sequence(8, 4).as("sequence");
  OperatorSpec spec = c.spec;
  if (spec.decayed()) spec.decay = *testing::gen_decay().as("gamma");
  return {spec, convert<T>(exact)};
}

// A random backward case of config c: gen_streaming_case's, normalized or not, with a random
// cotangent dO in Z/p.
struct BackwardCase {
  OperatorSpec spec;
  Sequence<T> s;
  Matrix<T> d_out;
};
BackwardCase gen_backward_case(const Config& c) {
  auto [spec, s] = gen_streaming_case(c);
  spec.normalize = *rc::gen::arbitrary<bool>().as("normalized");
  spec.eps = spec.normalize ? Rational(1, 2) : Rational(0);
  Rng rng(*rc::gen::arbitrary<std::uint64_t>().as("cotangent seed"));
  Matrix<T> d_out(s.length(), s.value_dim());
  for (Index i = 0; i < d_out.size(); ++i) d_out.data()[i] = ModP::from_residue(rng.next() % ModP::modulus);
  return {spec, s, d_out};
}

}  // namespace

TEST_CASE("device algebra/streaming push and read equal the CPU stream in Z/p", "[device][exact]") {
  for (const Config& c : configs()) {
    if (c.impl != Implementation::gpu_streaming) continue;
    property(name(c), [&c] {
      const auto [spec, s] = gen_streaming_case(c);
      const Terms<T> expected = fast::streaming_terms(spec, c.form, s);
      gpu::with_device_algebra(fast::algebra_params<T>(spec, c.impl, c.form, s.key_dim(), s.value_dim()),
                               [&](const auto& algebra) {
                                 const Terms<T> actual = device_stream(algebra, s);
                                 RC_ASSERT(actual.num == expected.num);
                                 RC_ASSERT(actual.den == expected.den);
                               });
    });
  }
}

TEST_CASE("device algebra/absorb combine and read equal the CPU segments in Z/p", "[device][exact]") {
  for (const Config& c : configs()) {
    if (c.impl != Implementation::gpu_scan) continue;
    property(name(c), [&c] {
      const Sequence<Rational> exact = *testing::gen_any_sequence(8, 4, 1).as("sequence");
      OperatorSpec spec = c.spec;
      if (spec.decayed()) spec.decay = *testing::gen_decay().as("gamma");
      const Sequence<T> s = convert<T>(exact);
      const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
      const Index cut = *testing::gen_position(0, n + 1).as("cut");
      fast::with_segments<T>(spec, c.form, d, dv, [&](const auto& seg) {
        gpu::with_device_algebra(
            fast::algebra_params<T>(spec, c.impl, c.form, d, dv), [&]<class Algebra>(const Algebra& algebra) {
              if constexpr (Algebra::has_segments) {
                auto left = seg.identity(), right = seg.identity();
                Flat device_left(Algebra::summary_size(d, dv)), device_right = device_left;
                algebra.identity(device_left.data());
                algebra.identity(device_right.data());
                Flat work = scratch(d, dv);
                for (Index t = 0; t < n; ++t) {  // absorb(s, x) == combine(s, token(x))
                  Token x = token(s, t);
                  auto& cpu = t < cut ? left : right;
                  Flat& device = t < cut ? device_left : device_right;
                  cpu =
                      seg.combine(cpu, seg.token(s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t)));
                  algebra.absorb(device.data(), work.data(), x.q.data(), x.k.data(), x.v.data());
                  RC_ASSERT(device == flat(cpu, d, dv));
                }
                Flat joined(Algebra::summary_size(d, dv));
                algebra.combine(device_left.data(), device_right.data(), joined.data(), work.data());
                const auto whole = seg.combine(left, right);
                RC_ASSERT(joined == flat(whole, d, dv));
                const Token last = token(s, n - 1);
                Flat num(dv);
                T den(0);
                algebra.read(joined.data(), work.data(), last.q.data(), num.data(), &den);
                const fast::Readout<T> r = seg.read(whole, s.q.row(n - 1).transpose());
                RC_ASSERT(num == Flat(r.num.data(), r.num.data() + dv));
                RC_ASSERT(den == r.den);
              } else {
                RC_FAIL("the catalogue lists a scan without device segments");
              }
            });
      });
    });
  }
}

TEST_CASE("device algebra/the streaming backward equals the CPU stream's in Z/p",
          "[device][exact][backward]") {
  for (const Config& c : configs()) {
    if (c.impl != Implementation::gpu_streaming) continue;
    property(name(c), [&c] {
      const auto [spec, s, d_out] = gen_backward_case(c);
      const Index n = s.length(), dv = s.value_dim();
      const Index checkpoint = *testing::gen_position(1, n + 2).as("checkpoint");
      Gradients<T> expected;
      Terms<T> d_terms;
      try {
        expected = fast::streaming_gradients(spec, c.form, s, d_out, checkpoint);
        d_terms = reference::finish_adjoint(spec, fast::streaming_terms(spec, c.form, s), d_out);
      } catch (const Error&) {
        RC_DISCARD("a normalized denominator is zero");
      }
      gpu::with_device_algebra(
          fast::algebra_params<T>(spec, c.impl, c.form, s.key_dim(), dv), [&](const auto& algebra) {
            const Gradients<T> actual = gpu::host::device_backward(algebra, s, d_terms, checkpoint);
            RC_ASSERT(actual.dq == expected.dq);
            RC_ASSERT(actual.dk == expected.dk);
            RC_ASSERT(actual.dv == expected.dv);
          });
    });
  }
}

// Whole, and split across ranks as the GPU ranks run it (docs/ranks.md): the sequence cut into 1 to 4
// slices anywhere (empty ones too), each rank's pass 1 from its carry, the ranks' chain
// (rank_after_adjoint), passes 2 and 3 from the adjoint after each slice.
TEST_CASE(
    "device algebra/the scan's backward whole and split across ranks equals the reference gradients in Z/p",
    "[device][exact][backward][ranks]") {
  for (const Config& c : configs()) {
    if (c.impl != Implementation::gpu_scan || fast::backward_unavailable(c.spec, c.impl, c.form)) continue;
    property(name(c), [&c] {
      const auto [spec, s, d_out] = gen_backward_case(c);
      const Index n = s.length(), dv = s.value_dim();
      const Index chunk = *testing::gen_position(1, n + 2).as("chunk");
      const Index checkpoint = *testing::gen_position(1, std::min(n, chunk) + 2).as("checkpoint");
      const fast::Slices slices = fast::slices_of_lengths(testing::gen_slice_lengths(n, 4));
      Gradients<T> expected;
      Terms<T> d_terms;
      try {
        expected = reference::gradients(spec, s, d_out);
        d_terms = reference::finish_adjoint(spec, reference::terms(spec, s), d_out);
      } catch (const Error&) {
        RC_DISCARD("a normalized denominator is zero");
      }
      const bool splits = !fast::ranks_unavailable(spec, c.impl, c.form, true);
      gpu::with_device_algebra(
          fast::algebra_params<T>(spec, c.impl, c.form, s.key_dim(), dv),
          [&]<class Algebra>(const Algebra& algebra) {
            if constexpr (Algebra::has_segments && requires { Algebra::carry_adjoint_scratch_size(0, 0); }) {
              const Index step = std::max<Index>(1, std::min(chunk, n));
              std::vector<Gradients<T>> actual{
                  gpu::host::device_scan_backward(algebra, s, d_terms, step, checkpoint)};
              if (splits)
                actual.push_back(
                    gpu::host::device_ranks_backward(algebra, s, d_terms, slices, step, checkpoint));
              for (const Gradients<T>& g : actual) {
                RC_ASSERT(g.dq == expected.dq);
                RC_ASSERT(g.dk == expected.dk);
                RC_ASSERT(g.dv == expected.dv);
              }
            } else {
              RC_FAIL("the catalogue lists a GPU scan backward without a carry adjoint");
            }
          });
    });
  }
}

// The premise of gpu_test.cpp's float64 backward test, on every machine: on small integers (|x| <= 3),
// gamma in {1, 1/2} and short sequences, both backward kernels' bodies in float64 give the exact
// gradients (of the form's own recurrence for the streaming kernel; the definition's for the scan).
TEST_CASE("device algebra/the backward kernels in float64 on small integers are exact",
          "[device][backward]") {
  for (const Config& c : configs()) {
    if (fast::backward_unavailable(c.spec, c.impl, c.form)) continue;
    property(name(c), [&c] {
      const OperatorSpec& spec = c.spec;
      const auto n = *testing::gen_position(0, spec.decayed() ? 5 : 13).as("n");
      const auto d = *testing::gen_position(1, 5).as("d");
      const auto dv = *testing::gen_position(1, 5).as("dv");
      const auto chunk = *testing::gen_position(1, 9).as("chunk");
      const Sequence<Rational> s = *testing::gen_sequence(n, d, dv, false).as("inputs");
      const Matrix<Rational> d_out = *testing::gen_matrix(n, dv, false).as("dO");
      const Gradients<Rational> exact = c.impl == Implementation::gpu_streaming
                                            ? fast::streaming_gradients(spec, c.form, s, d_out)
                                            : reference::gradients(spec, s, d_out);
      const Terms<double> d_terms{convert<double>(d_out), Vector<double>::Zero(n)};
      gpu::with_device_algebra(
          fast::algebra_params<double>(spec, c.impl, c.form, d, dv),
          [&]<class Algebra>(const Algebra& algebra) {
            Gradients<double> g;
            if (c.impl == Implementation::gpu_streaming) {
              g = gpu::host::device_backward(algebra, convert<double>(s), d_terms,
                                             fast::default_checkpoint(n));
            } else if constexpr (Algebra::has_segments &&
                                 requires { Algebra::carry_adjoint_scratch_size(0, 0); }) {
              g = gpu::host::device_scan_backward(algebra, convert<double>(s), d_terms,
                                                  std::max<Index>(1, std::min(chunk, n)),
                                                  fast::default_checkpoint(chunk));
            } else {
              RC_FAIL("the catalogue lists a GPU scan backward without a carry adjoint");
            }
            RC_ASSERT(g.dq == convert<double>(exact.dq));
            RC_ASSERT(g.dk == convert<double>(exact.dk));
            RC_ASSERT(g.dv == convert<double>(exact.dv));
          });
    });
  }
}
