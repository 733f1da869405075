#pragma once

// The ground truth: every operator from its n x n matrix form, computed naively, O(n^3 + n^2 d).
// Nothing here uses a prefix summary or a recurrence. docs/operators.md gives each form and the
// reasons for its decay weights.

#include <functional>
#include <string>

#include "hla/reference/operator_spec.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::reference {

// Ages of the first `length` tokens seen from the last one: (gamma^(length-1), ..., gamma, 1).
template <class T>
RowVector<T> ages(Index length, const T& gamma) {
  RowVector<T> weights(length);
  T weight(1);
  for (Index j = length - 1; j >= 0; --j) {
    weights(j) = weight;
    weight = weight * gamma;
  }
  return weights;
}

// The masked block (L_gamma . X): gamma^(i-j) X_ij on and below the diagonal. Entries above it are
// set to zero, never multiplied by it, so that no sign of a masked-out value leaks (0 * -x = -0).
template <class T>
Matrix<T> lower(const Matrix<T>& x, const T& gamma) {
  Matrix<T> out = Matrix<T>::Zero(x.rows(), x.cols());
  for (Index i = 0; i < x.rows(); ++i) {
    T weight(1);
    for (Index j = i; j >= 0; --j) {
      out(i, j) = weight * x(i, j);
      weight = weight * gamma;
    }
  }
  return out;
}

// Row t of the operator's n x n weight matrix M (num = M V, den = M 1), columns 0..t.
// `a` = Q K^T and `qq` = Q Q^T of the first t + 1 tokens: a row of a matrix product is computed
// from the leading blocks only, so the row depends on tokens 1..t alone, bit for bit.
template <class T>
RowVector<T> weight_row(const OperatorSpec& spec, const Matrix<T>& a, const Matrix<T>& qq, const T& gamma) {
  const Index t = a.rows() - 1;
  const RowVector<T> age = ages(t + 1, gamma);                // gamma^(t-j)
  const RowVector<T> first_hop = a.row(t).cwiseProduct(age);  // row t of W_gamma = L_gamma . Q K^T
  switch (spec.variant) {
    case Variant::linear:  // o_t = sum_{j<=t} gamma^(t-j) (q_t . k_j) v_j
      return first_hop;
    case Variant::hla2: {
      // masked, Thm 3.1: [(W_gamma W^T) . L_gamma] V, weights gamma^((t-i)+(t-j)) over i <= j <= t;
      // unmasked, Eq. 3.1: q_t^T S^K_t C^QV_t, the same with i and j each over 1..t.
      const Matrix<T> second = spec.masked ? lower(a, T(1)) : a;
      RowVector<T> row = RowVector<T>(first_hop * second.transpose()).cwiseProduct(age);
      // Alg. 1 line 7: q_t^T (lambda I) C^QV_t adds lambda gamma^(t-j) (q_t . q_j).
      if (spec.ridge != 0) row += from_rational<T>(spec.ridge) * qq.row(t).cwiseProduct(age);
      return row;
    }
    case Variant::ahla:  // Sec. 6.1: [(A_gamma A_gamma) . L] V, weights gamma^((t-i)+(i-j)) over j <= i <= t
      return first_hop * lower(a, gamma);
    case Variant::hla3: {
      if (spec.masked) {
        // Thm 7.1: row t of ((W_gamma W^T) . L_gamma^2) W_gamma, i.e. (W W^T W) V with middle index
        // u <= t; weights gamma^((t-i)+(t-u)+(t-j)) over i <= u, j <= u, u <= t.
        const RowVector<T> middle =
            RowVector<T>(first_hop * lower(a, T(1)).transpose()).cwiseProduct(age).cwiseProduct(age);
        return middle * lower(a, gamma);
      }
      // Sec. 7.1: q_t^T S^K_t S^Q_t P^KV_t: i, u, j each over 1..t, each weighted by its age.
      const RowVector<T> middle = RowVector<T>(first_hop * a.transpose()).cwiseProduct(age);
      return RowVector<T>(middle * a).cwiseProduct(age);
    }
  }
  throw Error("unknown variant");
}

// Called with t once row t of the weights is done, for progress reports on long runs; may be empty.
using RowDone = std::function<void(Index)>;

// The operator's n x n weight matrix M, lower triangular, assembled row by row.
template <class T>
Matrix<T> weights(const OperatorSpec& spec, const Matrix<T>& q, const Matrix<T>& k,
                  const RowDone& done = {}) {
  const Index n = q.rows();
  const T gamma = from_rational<T>(spec.decay);
  const Matrix<T> a = q * k.transpose();  // each entry q_i . k_j involves tokens i and j only
  const Matrix<T> qq = q * q.transpose();
  Matrix<T> m = Matrix<T>::Zero(n, n);
  for (Index t = 0; t < n; ++t) {
    m.row(t).head(t + 1) =
        weight_row<T>(spec, a.topLeftCorner(t + 1, t + 1), qq.topLeftCorner(t + 1, t + 1), gamma);
    if (done) done(t);
  }
  return m;
}

// num_t = sum_{j<=t} M_tj v_j and den_t = sum_{j<=t} M_tj: sums over the causal range only.
template <class T>
Terms<T> terms_of_weights(const Matrix<T>& m, const Matrix<T>& v) {
  const Index n = m.rows();
  Terms<T> out{Matrix<T>(n, v.cols()), Vector<T>(n)};
  for (Index t = 0; t < n; ++t) {
    out.num.row(t) = m.row(t).head(t + 1) * v.topRows(t + 1);
    out.den(t) = m.row(t).head(t + 1).sum();
  }
  return out;
}

template <class T>
Terms<T> terms(const OperatorSpec& spec, const Sequence<T>& s, const RowDone& done = {}) {
  return terms_of_weights(weights(spec, s.q, s.k, done), s.v);
}

// o_t = num_t, or num_t / (den_t + eps) when normalized. Shared by every implementation.
template <class T>
Matrix<T> finish(const OperatorSpec& spec, const Terms<T>& terms) {
  if (!spec.normalize) return terms.num;
  const T eps = from_rational<T>(spec.eps);
  Matrix<T> out(terms.num.rows(), terms.num.cols());
  for (Index t = 0; t < out.rows(); ++t) {
    const T divisor = terms.den(t) + eps;
    const std::string what = "token " + std::to_string(t + 1) + ": normalized denominator";
    for (Index c = 0; c < out.cols(); ++c) out(t, c) = checked_divide(terms.num(t, c), divisor, what);
  }
  return out;
}

template <class T>
Matrix<T> output(const OperatorSpec& spec, const Sequence<T>& s, const RowDone& done = {}) {
  return finish(spec, terms(spec, s, done));
}

}  // namespace hla::reference
