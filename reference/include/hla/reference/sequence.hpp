#pragma once

#include "hla/reference/linalg.hpp"

namespace hla {

// One head's tokens: rows are time steps. q and k are [n, d], v is [n, dv].
template <class T>
struct Sequence {
  Matrix<T> q, k, v;

  Index length() const { return q.rows(); }
  Index key_dim() const { return q.cols(); }
  Index value_dim() const { return v.cols(); }
};

template <class T>
Sequence<T> convert(const Sequence<Rational>& s) {
  return {convert<T>(s.q), convert<T>(s.k), convert<T>(s.v)};
}

// An operator's output before the optional normalization: num is [n, dv], den is [n]
// (den is the numerator with v replaced by ones).
template <class T>
struct Terms {
  Matrix<T> num;
  Vector<T> den;
};

}  // namespace hla
