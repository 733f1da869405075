#pragma once

// What every chunk form (chunked/<variant>.hpp) works on: a chunk's tokens, masks and powers of
// gamma, and for the backward the adjoints of its readouts and its rows of the gradients.
//
// A chunk form has summary(chunk) and outputs(chunk, carry) (chunked.hpp runs them); one with a
// backward (backward.hpp, chunked_gradients) also has their adjoints, each the reverse mode of the
// method it is named after, written out as matrix products:
//   outputs_adjoint(chunk, carry, d_readouts, g) -> d_carry, adding to g what flows from the readouts
//     to the chunk's tokens (the carry held fixed);
//   summary_adjoint(chunk, d_summary, g), adding to g what flows from the chunk's summary.

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

// The adjoints of one chunk's readouts, d<dO, O>/d num and d den (views of the whole sequence's).
template <class T>
struct ReadoutAdjoints {
  Eigen::Ref<const Matrix<T>> num;
  Eigen::Ref<const Vector<T>> den;
};

// One chunk's rows of dQ, dK, dV: views of the whole sequence's, which each adjoint adds to.
template <class T>
struct ChunkGradients {
  Eigen::Ref<Matrix<T>> dq, dk, dv;
};

// Row-scales m by w: diag(w) m.
template <class T>
Matrix<T> scale_rows(const Vector<T>& w, const Matrix<T>& m) {
  return w.asDiagonal() * m;
}

}  // namespace chunked_detail

}  // namespace hla::fast
