// The streaming backward (fast/backward.hpp): the default forms' gradients equal the exact
// gradients of the definition (reference::gradients) bit for bit, whatever the checkpoint
// interval; every form's, published or corrected, are the exact gradients of its own recurrence
// (checked by forward mode on that recurrence), and a published form's differ from the
// definition's where a finding says its forward pass does.

#include "hla/fast/backward.hpp"

#include <catch2/catch.hpp>

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

template <class T>
void streaming_equals_reference(Variant variant, int max_n, int max_d) {
  const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
  const Sequence<Rational> s = *testing::gen_any_sequence(max_n, max_d).as("sequence");
  const Matrix<Rational> d_out = *testing::gen_matrix(s.length(), s.value_dim(), false).as("dO");
  const Index checkpoint = *testing::gen_position(1, s.length() + 2).as("checkpoint");
  const Sequence<T> st = convert<T>(s);
  RC_PRE(testing::denominators_nonzero(spec, reference::terms(spec, st)));
  const Form form = fast::default_form(spec, Implementation::streaming);
  const Gradients<T> fast = fast::streaming_gradients(spec, form, st, convert<T>(d_out), checkpoint);
  const Gradients<T> exact = reference::gradients(spec, st, convert<T>(d_out));
  RC_ASSERT(fast.dq == exact.dq);
  RC_ASSERT(fast.dk == exact.dk);
  RC_ASSERT(fast.dv == exact.dv);
  RC_ASSERT(fast.output == reference::output(spec, st));
  RC_ASSERT(exact.output == fast.output);
}

}  // namespace

TEST_CASE("backward/streaming gradients equal the definition's exactly - Rational", "[backward][exact]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": streaming dQ dK dV equal reference::gradients",
             [variant] { streaming_equals_reference<Rational>(variant, 9, 3); }, 200);
  }
}

TEST_CASE("backward/streaming gradients equal the definition's exactly - ModP", "[backward][exact]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": streaming dQ dK dV equal reference::gradients in Z/p",
             [variant] { streaming_equals_reference<ModP>(variant, 40, 6); }, 200);
  }
}

TEST_CASE("backward/each stream's gradients are those of its own recurrence", "[backward][exact]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": in each form, <grad, E> is the recurrence's directional derivative",
             [variant] {
               const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
               const Sequence<Rational> s = *testing::gen_any_sequence(8, 3).as("sequence");
               const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
               const Sequence<Rational> e = *testing::gen_sequence(n, d, dv, false).as("direction");
               const Matrix<Rational> d_out = *testing::gen_matrix(n, dv, false).as("dO");
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
  const auto why = fast::backward_unavailable(spec, Implementation::scan, Form::corrected);
  REQUIRE(why.has_value());
  CHECK_THAT(*why, Catch::Contains("not built yet"));
  spec.variant = Variant::linear;  // linear attention has one form
  CHECK(fast::backward_unavailable(spec, Implementation::streaming, Form::corrected).has_value());
}
