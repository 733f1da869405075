#pragma once

#include "hla/reference/linalg.hpp"

namespace hla::fast {

// The value read out at one token: num_t (1 x dv) and den_t (num with v replaced by ones).
template <class T>
struct Readout {
  RowVector<T> num;
  T den;
};

// First-order linear attention (Sec. 2.2, identity feature map), the baseline:
// P_t = gamma P_{t-1} + k_t v_t^T,  m_t = gamma m_{t-1} + k_t,  o_t = q_t^T P_t.
template <class T>
class LinearStream {
 public:
  LinearStream(Index d, Index dv, const T& gamma)
      : gamma_(gamma), key_value_(Matrix<T>::Zero(d, dv)), key_mass_(Vector<T>::Zero(d)) {}

  void push(const Vector<T>& /*q*/, const Vector<T>& k, const RowVector<T>& v) {
    key_value_ = gamma_ * key_value_ + k * v;
    key_mass_ = gamma_ * key_mass_ + k;
  }

  Readout<T> read(const Vector<T>& q) const { return {q.transpose() * key_value_, q.dot(key_mass_)}; }

 private:
  T gamma_;
  Matrix<T> key_value_;  // P^KV
  Vector<T> key_mass_;   // m^K
};

}  // namespace hla::fast
