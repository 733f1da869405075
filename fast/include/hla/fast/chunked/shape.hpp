#pragma once

// What every chunk form (chunked/<variant>.hpp) works on: a chunk's tokens, masks and powers of
// gamma.

#include "hla/reference/definition.hpp"

namespace hla::fast {

namespace chunked_detail {

// The masks and powers of gamma for a chunk of a given length, built once per length.
template <class T>
struct ChunkShape {
  RowVector<T> age;  // g^(end - j): the age of each token at the chunk's end
  Vector<T> offset;  // g^tau, tau = 1..C: the age of the carry-in state at each token
  Matrix<T> decay;   // L_g on the chunk (g^(t-j), j <= t; 0 above)
  Matrix<T> causal;  // L
  Matrix<T> strict;  // L without its diagonal
  T rho;             // g^C

  ChunkShape(Index c, const T& gamma)
      : age(reference::ages(c, gamma)),
        offset(c),
        decay(reference::lower(Matrix<T>(Matrix<T>::Ones(c, c)), gamma)),
        causal(reference::lower(Matrix<T>(Matrix<T>::Ones(c, c)), T(1))),
        strict(causal - Matrix<T>::Identity(c, c)),
        rho(1) {
    for (Index t = 0; t < c; ++t) offset(t) = rho = rho * gamma;
  }
};

// One chunk: views of its tokens (no copies), its shape, and its position in the sequence.
template <class T>
struct Chunk {
  Eigen::Ref<const Matrix<T>> q, k, v;
  const ChunkShape<T>& shape;
  Index index;
  const RowVector<T>& age = shape.age;
  const Vector<T>& offset = shape.offset;
  const Matrix<T>& decay = shape.decay;
  const Matrix<T>& causal = shape.causal;
  const Matrix<T>& strict = shape.strict;
  const T& rho = shape.rho;
};

// Row-scales m by w: diag(w) m.
template <class T>
Matrix<T> scale_rows(const Vector<T>& w, const Matrix<T>& m) {
  return w.asDiagonal() * m;
}

}  // namespace chunked_detail

}  // namespace hla::fast
