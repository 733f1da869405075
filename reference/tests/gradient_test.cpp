// The hand-written reverse mode of gradient.hpp against forward mode on the definition itself:
// dual numbers run through reference::output, which shares no code with the adjoints. For any
// direction E of the inputs, exactly,
//   <dQ, E_Q> + <dK, E_K> + <dV, E_V> == d/de <dO, O(Q + e E_Q, K + e E_K, V + e E_V)>.
// A wrong adjoint is a false polynomial identity, which random integer directions expose.

#include "hla/reference/gradient.hpp"

#include <catch2/catch.hpp>

#include "hla/reference/random.hpp"
#include "hla/testing/generators.hpp"
#include "hla/testing/gradients.hpp"
#include "hla/testing/property.hpp"

using namespace hla;
using hla::testing::property;

namespace {

using testing::projected;

// d/de <dO, O(s + e E)> by forward mode on the definition.
template <class T>
T directional(const OperatorSpec& spec, const Sequence<T>& s, const Sequence<T>& e, const Matrix<T>& d_out) {
  return testing::directional([&spec](const auto& moved) { return reference::output(spec, moved); }, s, e, d_out);
}

// One case in T: a spec of `variant`, inputs of at most max_n tokens and max_d columns, dO and a
// direction, all small integers or dyadics mapped to T.
template <class T>
void reverse_equals_forward(Variant variant, int max_n, int max_d) {
  const OperatorSpec spec = *testing::gen_spec(variant).as("spec");
  const Sequence<Rational> s = *testing::gen_any_sequence(max_n, max_d).as("sequence");
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
  const Sequence<Rational> e = *testing::gen_sequence(n, d, dv, false).as("direction");
  const Matrix<Rational> d_out = *testing::gen_matrix(n, dv, false).as("dO");
  const Sequence<T> st = convert<T>(s);
  RC_PRE(testing::denominators_nonzero(spec, reference::terms(spec, st)));
  const Sequence<T> et = convert<T>(e);
  const Matrix<T> dt = convert<T>(d_out);
  RC_ASSERT(projected(reference::gradients(spec, st, dt), et) == directional(spec, st, et, dt));
}

}  // namespace

TEST_CASE("gradients/reverse mode equals forward mode on the definition - Rational", "[reference][exact][gradient]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": <grad, E> is the directional derivative",
             [variant] { reverse_equals_forward<Rational>(variant, 7, 3); }, 200);
  }
}

TEST_CASE("gradients/reverse mode equals forward mode on the definition - ModP", "[reference][exact][gradient]") {
  for (const Variant variant : all_variants) {
    property(std::string(variant_name(variant)) + ": <grad, E> is the directional derivative in Z/p",
             [variant] { reverse_equals_forward<ModP>(variant, 24, 5); }, 200);
  }
}

TEST_CASE("gradients/the check tells the operators apart", "[reference][exact][gradient]") {
  // The masked hla2's gradient projected on a direction is not the unmasked one's derivative (nor
  // the reverse): the comparison above can fail.
  Rng rng(11);
  const Sequence<Rational> s = random_sequence(rng, 4, 2, 2, EntryKind::integer, 3);
  const Sequence<Rational> e = random_sequence(rng, 4, 2, 2, EntryKind::integer, 3);
  const Matrix<Rational> d_out = random_sequence(rng, 4, 2, 2, EntryKind::integer, 3).v;
  OperatorSpec masked, unmasked;
  unmasked.masked = false;
  CHECK(projected(reference::gradients(masked, s, d_out), e) == directional(masked, s, e, d_out));
  CHECK(projected(reference::gradients(unmasked, s, d_out), e) == directional(unmasked, s, e, d_out));
  CHECK(projected(reference::gradients(masked, s, d_out), e) != directional(unmasked, s, e, d_out));
  CHECK(projected(reference::gradients(unmasked, s, d_out), e) != directional(masked, s, e, d_out));
}

TEST_CASE("gradients/a zero normalized denominator is an error naming the token", "[reference][exact][gradient]") {
  OperatorSpec spec;
  spec.normalize = true;
  const Sequence<Rational> s{Matrix<Rational>::Zero(2, 1), Matrix<Rational>::Zero(2, 1), Matrix<Rational>::Ones(2, 1)};
  CHECK_THROWS_WITH(reference::gradients(spec, s, Matrix<Rational>(Matrix<Rational>::Ones(2, 1))),
                    Catch::Contains("token 0") && Catch::Contains("division by zero"));
}
