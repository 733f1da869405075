#pragma once

// What the gradient tests share (reference/tests/gradient_test.cpp, fast/tests/backward_test.cpp):
// forward mode through any implementation's output, and the projection of a gradient on a
// direction, to compare a backward with the directional derivative of its own forward pass.

#include "hla/reference/definition.hpp"
#include "hla/reference/dual.hpp"
#include "hla/reference/gradient.hpp"

namespace hla::testing {

// Whether every normalized denominator of these terms is non-zero (the quotient's derivative
// exists there).
template <class T>
bool denominators_nonzero(const OperatorSpec& spec, const Terms<T>& terms) {
  if (!spec.normalize) return true;
  const T eps = from_rational<T>(spec.eps);
  for (Index t = 0; t < terms.den.size(); ++t)
    if (terms.den(t) + eps == T(0)) return false;
  return true;
}

// <a, b>, entrywise.
template <class T>
T inner(const Matrix<T>& a, const Matrix<T>& b) {
  T sum(0);
  for (Index i = 0; i < a.size(); ++i) sum += a.data()[i] * b.data()[i];
  return sum;
}

// <dQ, E_Q> + <dK, E_K> + <dV, E_V>.
template <class T>
T projected(const Gradients<T>& g, const Sequence<T>& e) {
  return inner(g.dq, e.q) + inner(g.dk, e.k) + inner(g.dv, e.v);
}

// d/de <dO, output(s + e E)> by forward mode: `output` maps a Sequence<Dual<T>> to its output
// (reference::output, an implementation's, ...), run on dual numbers whose e-parts are E.
template <class T, class Output>
T directional(Output&& output, const Sequence<T>& s, const Sequence<T>& e, const Matrix<T>& d_out) {
  const Sequence<Dual<T>> moved{dual(s.q, e.q), dual(s.k, e.k), dual(s.v, e.v)};
  const Matrix<Dual<T>> o = output(moved);
  T sum(0);
  for (Index i = 0; i < o.size(); ++i) sum += d_out.data()[i] * o.data()[i].derivative();
  return sum;
}

}  // namespace hla::testing
