#pragma once

// The exact gradients of the scalar <dO, O> = sum_tc dO_tc O_tc with respect to Q, K and V (the
// vector-Jacobian product of the operator, what a backward pass computes), by reverse mode on the
// n x n matrix forms of definition.hpp, written out by hand (docs/gradients.md). Every weight
// matrix M is a composition of three steps, each with its adjoint:
//   Y = Gamma . X  (a fixed lower-triangular weight, lower(X, gamma)):  dX = Gamma . dY
//   Y = X Z:                                                         dX = dY Z^T, dZ = X^T dY
//   A = Q K^T, QQ = Q Q^T:                        dQ = dA K + (dQQ + dQQ^T) Q, dK = dA^T Q
// with W = Gamma . A (row t of it is definition.hpp's first_hop) and B = L . A:
//   linear          M = W
//   hla2 masked     M = Gamma . (W B^T)  [+ ridge Gamma . QQ]
//   hla2 unmasked   M = Gamma . (W A^T)  [+ ridge Gamma . QQ]
//   ahla            M = W W
//   hla3 masked     M = (Gamma^2 . (W B^T)) W
//   hla3 unmasked   M = Gamma . ((Gamma . (W A^T)) A)
// then num = M V, den = M 1 and O = num (unnormalized) or O_t = num_t / (den_t + eps).

#include <string>
#include <type_traits>

#include "hla/reference/definition.hpp"

namespace hla {

template <class T>
struct Gradients {
  Matrix<T> dq, dk, dv;
  Matrix<T> output;  // O itself, from the forward pass the gradients need anyway
  Terms<T> terms;    // that pass's num and den (output = finish(spec, terms)), as it computed them
};

namespace reference {

// The adjoints of num and den from the upstream gradient dO of O = finish(spec, terms): dO itself
// and zero unnormalized; normalized, with s_t = den_t + eps, dO_t / s_t and -(dO_t . num_t) / s_t^2.
// @pre den_t + eps != 0 when normalized (an exact zero throws hla::Error naming the token, counted
// from first_token: the rows' place in the sequence when they are a slice of it)
template <class T>
Terms<T> finish_adjoint(const OperatorSpec& spec, const Terms<T>& terms, const Matrix<T>& d_out,
                        Index first_token = 0) {
  const Index n = terms.num.rows();
  if (d_out.rows() != n || d_out.cols() != terms.num.cols()) throw Error("gradients: dO must have the shape of O");
  Terms<T> out{d_out, Vector<T>::Zero(n)};
  if (!spec.normalize) return out;
  const T eps = from_rational<T>(spec.eps);
  for (Index t = 0; t < n; ++t) {
    const T divisor = terms.den(t) + eps;
    const std::string what = "gradients: token " + std::to_string(first_token + t) + " (den + eps)";
    T weighted(0);  // dO_t . num_t
    for (Index c = 0; c < out.num.cols(); ++c) {
      out.num(t, c) = checked_divide(d_out(t, c), divisor, what);
      weighted += d_out(t, c) * terms.num(t, c);
    }
    out.den(t) = -checked_divide(weighted, T(divisor * divisor), what);
  }
  return out;
}

// O of a backward's forward pass: finish(spec, terms), or empty for a scalar without division
// (Gauge, Depth) on a normalized operator, whose runs bound the readouts and the gradients, not O.
template <class T>
Matrix<T> backward_output(const OperatorSpec& spec, const Terms<T>& terms) {
  if constexpr (!requires(const T& a) { a / a; }) {
    if (spec.normalize) return {};
  }
  return finish(spec, terms);
}

}  // namespace reference

// Where a backward pass starts: the gradient dO of the output O = finish(spec, terms) (a dO converts
// to one), or the adjoints of the readouts num and den themselves, which skips finish_adjoint: the
// backward of <d_num, num> + <d_den, den>. The rounding bound of a normalized operator's backward
// splits it there (docs/error_report.md). It refers to its matrices: a parameter type, not to be
// kept beyond the call it is passed to.
template <class T>
class Upstream {
 public:
  Upstream(const Matrix<T>& d_out) : d_out_(&d_out) {}  // implicit: every dO is an upstream
  static Upstream readouts(const Terms<T>& d_terms) {
    Upstream u;
    u.d_terms_ = &d_terms;
    return u;
  }
  // The adjoints of num and den, given the forward pass's readouts.
  Terms<T> adjoint(const OperatorSpec& spec, const Terms<T>& terms) const {
    if (!d_terms_) return reference::finish_adjoint(spec, terms, *d_out_);
    if (d_terms_->num.rows() != terms.num.rows() || d_terms_->num.cols() != terms.num.cols() ||
        d_terms_->den.size() != terms.den.size())
      throw Error("gradients: the readouts' adjoints must have the readouts' shapes");
    return *d_terms_;
  }
  // The same for rows [begin, begin + rows) of the sequence, given those rows' readouts (one slice of
  // it: the readouts' adjoints are row by row). Throws hla::Error where the rows or columns differ.
  Terms<T> adjoint_rows(const OperatorSpec& spec, const Terms<T>& terms, Index begin) const {
    const Index rows = terms.num.rows();
    if (begin < 0 || begin + rows > this->rows())
      throw Error("gradients: the upstream has no rows " + std::to_string(begin) + " to " +
                  std::to_string(begin + rows));
    if (!d_terms_)
      return reference::finish_adjoint(spec, terms, Matrix<T>(d_out_->middleRows(begin, rows)), begin);
    if (d_terms_->num.cols() != terms.num.cols() || d_terms_->den.size() != d_terms_->num.rows())
      throw Error("gradients: the readouts' adjoints must have the readouts' shapes");
    return {d_terms_->num.middleRows(begin, rows), d_terms_->den.segment(begin, rows)};
  }
  // The sequence's length it covers.
  Index rows() const { return d_terms_ ? d_terms_->num.rows() : d_out_->rows(); }

 private:
  Upstream() = default;
  const Matrix<T>* d_out_ = nullptr;
  const Terms<T>* d_terms_ = nullptr;
};

namespace reference {

// d<dO, O>/dQ, dK, dV at s, and O. Normalized: @pre den_t + eps != 0 at every t (an exact zero throws
// hla::Error naming the token, as output() does).
template <class T>
Gradients<T> gradients(const OperatorSpec& spec, const Sequence<T>& s,
                       const std::type_identity_t<Upstream<T>>& upstream) {
  validate(spec);
  const Index n = s.length();
  const T gamma = from_rational<T>(spec.decay), one(1);
  const Matrix<T> m = weights(spec, s.q, s.k);
  const Terms<T> forward = terms_of_weights(m, s.v);
  const Terms<T> adjoint = upstream.adjoint(spec, forward);
  const Matrix<T>& d_num = adjoint.num;
  const Vector<T>& d_den = adjoint.den;
  // The adjoint of the causal weights (the entries above the diagonal are zero whatever Q and K).
  Matrix<T> d_m = d_num * s.v.transpose();
  d_m.colwise() += d_den;
  d_m = lower(d_m, one);

  const Matrix<T> a = s.q * s.k.transpose();
  const Matrix<T> w = lower(a, gamma);
  Matrix<T> d_a = Matrix<T>::Zero(n, n), d_w = Matrix<T>::Zero(n, n);
  Matrix<T> dq = Matrix<T>::Zero(n, s.key_dim());
  switch (spec.variant) {
    case Variant::linear:
      d_w = d_m;
      break;
    case Variant::hla2: {
      const Matrix<T> b = spec.masked ? lower(a, one) : a;
      const Matrix<T> d_p = lower(d_m, gamma);  // P = W B^T
      d_w = d_p * b;
      const Matrix<T> d_b = d_p.transpose() * w;
      d_a += spec.masked ? lower(d_b, one) : d_b;
      if (spec.ridge != 0) {
        const Matrix<T> d_qq = from_rational<T>(spec.ridge) * d_p;
        dq += (d_qq + d_qq.transpose()) * s.q;
      }
      break;
    }
    case Variant::ahla:
      d_w = d_m * w.transpose() + w.transpose() * d_m;
      break;
    case Variant::hla3:
      if (spec.masked) {
        const Matrix<T> b = lower(a, one);
        const Matrix<T> p = lower(Matrix<T>(w * b.transpose()), T(gamma * gamma));  // M = P W
        const Matrix<T> d_r = lower(Matrix<T>(d_m * w.transpose()), T(gamma * gamma));  // R = W B^T
        d_w = p.transpose() * d_m + d_r * b;
        d_a += lower(Matrix<T>(d_r.transpose() * w), one);
      } else {
        const Matrix<T> p = lower(Matrix<T>(w * a.transpose()), gamma);  // M = Gamma . (P A)
        const Matrix<T> d_y = lower(d_m, gamma);
        const Matrix<T> d_r = lower(Matrix<T>(d_y * a.transpose()), gamma);  // P = Gamma . R, R = W A^T
        d_a += p.transpose() * d_y + d_r.transpose() * w;
        d_w = d_r * a;
      }
      break;
  }
  d_a += lower(d_w, gamma);
  dq += d_a * s.k;
  return {dq, Matrix<T>(d_a.transpose() * s.q), Matrix<T>(m.transpose() * d_num), finish(spec, forward),
          forward};
}

}  // namespace reference
}  // namespace hla
