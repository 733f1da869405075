#pragma once

#include "hla/fast/algebra/linear.hpp"

namespace hla::fast {

// Second-order HLA: prefix moments S^K, C^QV, m^Q (Sec. 3), the cross-summaries G, h that make
// it strictly causal (Thm 3.1), an optional ridge S^K + lambda I (Alg. 1) and decay (Sec. 4.3).
//
// The cross-summaries follow G_t = a G_{t-1} + b k_t (k_t^T C^QV_{t-1}), likewise h_t:
//   published (Sec. 3.1 online updates; Sec. 4.3; Alg. 1 line 6): a = gamma,   b = 1;
//   corrected (docs/findings.md, F1):                              a = gamma^2, b = gamma.
// The two agree for gamma = 1.
template <class T>
class Hla2Stream {
 public:
  struct CrossDecay {
    T previous;  // a
    T incoming;  // b
  };

  static CrossDecay published_cross_decay(const T& gamma) { return {gamma, T(1)}; }
  static CrossDecay corrected_cross_decay(const T& gamma) { return {gamma * gamma, gamma}; }

  // masked = false drops (G, h): the unmasked prefix form of Eq. 3.1 (Sec. 5.1).
  Hla2Stream(Index d, Index dv, const T& gamma, const T& ridge, bool masked, CrossDecay cross)
      : gamma_(gamma),
        ridge_(ridge),
        masked_(masked),
        cross_(cross),
        key_moment_(Matrix<T>::Zero(d, d)),
        query_value_(Matrix<T>::Zero(d, dv)),
        query_mass_(Vector<T>::Zero(d)),
        cross_value_(Matrix<T>::Zero(d, dv)),
        cross_mass_(Vector<T>::Zero(d)) {}

  void push(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) {
    if (masked_) {  // (k k^T) X = k (k^T X): O(d dv), read before C and m take token t
      cross_value_ = cross_.previous * cross_value_ + cross_.incoming * k * (k.transpose() * query_value_);
      cross_mass_ = cross_.previous * cross_mass_ + cross_.incoming * k * k.dot(query_mass_);
    }
    key_moment_ = gamma_ * key_moment_ + k * k.transpose();
    query_value_ = gamma_ * query_value_ + q * v;
    query_mass_ = gamma_ * query_mass_ + q;
  }

  // Alg. 1 lines 9-14: u = q^T S_eff, num = u C - q^T G, den = u m - q^T h.
  Readout<T> read(const Vector<T>& q) const {
    const RowVector<T> u = q.transpose() * key_moment_ + ridge_ * q.transpose();
    Readout<T> r{u * query_value_, u.dot(query_mass_)};
    if (masked_) {
      r.num -= q.transpose() * cross_value_;
      r.den -= q.dot(cross_mass_);
    }
    return r;
  }

 private:
  T gamma_, ridge_;
  bool masked_;
  CrossDecay cross_;
  Matrix<T> key_moment_;   // S^K
  Matrix<T> query_value_;  // C^QV
  Vector<T> query_mass_;   // m^Q
  Matrix<T> cross_value_;  // G
  Vector<T> cross_mass_;   // h
};

}  // namespace hla::fast
