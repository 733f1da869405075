#pragma once

#include "hla/fast/algebra/linear.hpp"

namespace hla::fast {

// Asymmetric HLA, Thm 6.1 with the decay of Sec. 6.1 and Alg. 2, as printed:
// P_t = gamma P_{t-1} + k_t v_t^T, m_t = gamma m_{t-1} + k_t,
// E_t = gamma E_{t-1} + k_t (q_t^T P_t), n_t = gamma n_{t-1} + k_t (q_t^T m_t), o_t = q_t^T E_t.
template <class T>
class AhlaStream {
 public:
  AhlaStream(Index d, Index dv, const T& gamma)
      : gamma_(gamma),
        key_value_(Matrix<T>::Zero(d, dv)),
        key_mass_(Vector<T>::Zero(d)),
        routed_value_(Matrix<T>::Zero(d, dv)),
        routed_mass_(Vector<T>::Zero(d)) {}

  void push(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) {
    key_value_ = gamma_ * key_value_ + k * v;  // Alg. 2 line 3
    key_mass_ = gamma_ * key_mass_ + k;
    const RowVector<T> r = q.transpose() * key_value_;  // line 4
    const T s = q.dot(key_mass_);                       // line 5
    routed_value_ = gamma_ * routed_value_ + k * r;     // line 6
    routed_mass_ = gamma_ * routed_mass_ + s * k;
  }

  Readout<T> read(const Vector<T>& q) const {  // lines 7-9
    return {q.transpose() * routed_value_, q.dot(routed_mass_)};
  }

 private:
  T gamma_;
  Matrix<T> key_value_;     // P^KV
  Vector<T> key_mass_;      // m^K
  Matrix<T> routed_value_;  // E
  Vector<T> routed_mass_;   // n
};

}  // namespace hla::fast
