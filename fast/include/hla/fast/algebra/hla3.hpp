#pragma once

#include "hla/fast/algebra/linear.hpp"

namespace hla::fast {

// Third-order HLA as printed: Thm 7.1, Eqs. 7.1-7.3, and Alg. 3 (with its decay).
// masked = false reads q^T S^K S^Q P^KV without the cross-summaries (Sec. 7.1, unmasked).
// The masked read-out does not equal the masked operator: docs/findings.md, F2.
template <class T>
class Hla3PublishedStream {
 public:
  Hla3PublishedStream(Index d, Index dv, const T& gamma, bool masked)
      : gamma_(gamma),
        masked_(masked),
        key_moment_(Matrix<T>::Zero(d, d)),
        query_moment_(Matrix<T>::Zero(d, d)),
        key_value_(Matrix<T>::Zero(d, dv)),
        key_mass_(Vector<T>::Zero(d)),
        g1_(Matrix<T>::Zero(d, dv)),
        g2_(Matrix<T>::Zero(d, dv)),
        g3_(Matrix<T>::Zero(d, dv)),
        h1_(Vector<T>::Zero(d)),
        h2_(Vector<T>::Zero(d)),
        h3_(Vector<T>::Zero(d)) {}

  void push(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) {
    const Matrix<T> key_prev = key_moment_;  // Alg. 3 line 4
    const Matrix<T> query_prev = query_moment_;
    const Matrix<T> value_prev = key_value_;
    const Vector<T> mass_prev = key_mass_;
    key_moment_ = gamma_ * key_prev + k * k.transpose();  // lines 6-7, Eq. 7.1
    query_moment_ = gamma_ * query_prev + q * q.transpose();
    key_value_ = gamma_ * value_prev + k * v;
    key_mass_ = gamma_ * mass_prev + k;
    if (!masked_) return;
    const Vector<T> u1 = query_prev * k;  // line 9, Eqs. 7.2-7.3 (first)
    g1_ = gamma_ * g1_ + k * (u1.transpose() * value_prev);
    h1_ = gamma_ * h1_ + u1.dot(mass_prev) * k;
    const Vector<T> a2 = key_prev * q;  // line 10 (second)
    g2_ = gamma_ * g2_ + a2 * (q.transpose() * value_prev);
    h2_ = gamma_ * h2_ + q.dot(mass_prev) * a2;
    const Vector<T> a3 = key_prev * (query_prev * k);  // line 11 (third)
    g3_ = gamma_ * g3_ + a3 * v;
    h3_ = gamma_ * h3_ + a3;
  }

  Readout<T> read(const Vector<T>& q) const {  // lines 13-17
    const Vector<T> z = query_moment_ * (key_moment_ * q);
    Readout<T> r{z.transpose() * key_value_, q.dot(key_moment_ * (query_moment_ * key_mass_))};
    if (masked_) {
      r.num -= q.transpose() * g1_ + q.transpose() * g2_ + q.transpose() * g3_;
      r.den -= q.dot(h1_) + q.dot(h2_) + q.dot(h3_);
    }
    return r;
  }

 private:
  T gamma_;
  bool masked_;
  Matrix<T> key_moment_;    // S^K
  Matrix<T> query_moment_;  // S^Q
  Matrix<T> key_value_;     // P^KV
  Vector<T> key_mass_;      // m^K
  Matrix<T> g1_, g2_, g3_;  // G^(1), G^(2), G^(3)
  Vector<T> h1_, h2_, h3_;  // h^(1), h^(2), h^(3)
};

// Masked third-order HLA, corrected (docs/findings.md, F2). The masked operator sums
// (q_t.k_i)(k_i.q_u)(q_u.k_j) v_j over i <= u, j <= u, u <= t, so with the decayed prefix
// moments S^K_u and P^KV_u taken at the middle index u:
//   F_t = gamma^3 F_{t-1} + (S^K_t q_t)(q_t^T P^KV_t),  eta_t = gamma^3 eta_{t-1} + (S^K_t q_t)(q_t^T m^K_t),
//   o_t = q_t^T F_t,  den_t = q_t^T eta_t.
// O(d^2 + d dv) per token; S^Q is not needed.
template <class T>
class Hla3CorrectedStream {
 public:
  Hla3CorrectedStream(Index d, Index dv, const T& gamma)
      : gamma_(gamma),
        gamma_cubed_(gamma * gamma * gamma),
        key_moment_(Matrix<T>::Zero(d, d)),
        key_value_(Matrix<T>::Zero(d, dv)),
        key_mass_(Vector<T>::Zero(d)),
        corrected_value_(Matrix<T>::Zero(d, dv)),
        corrected_mass_(Vector<T>::Zero(d)) {}

  void push(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) {
    key_moment_ = gamma_ * key_moment_ + k * k.transpose();
    key_value_ = gamma_ * key_value_ + k * v;
    key_mass_ = gamma_ * key_mass_ + k;
    const Vector<T> metric_query = key_moment_ * q;  // S^K_t q_t
    corrected_value_ = gamma_cubed_ * corrected_value_ + metric_query * (q.transpose() * key_value_);
    corrected_mass_ = gamma_cubed_ * corrected_mass_ + q.dot(key_mass_) * metric_query;
  }

  Readout<T> read(const Vector<T>& q) const {
    return {q.transpose() * corrected_value_, q.dot(corrected_mass_)};
  }

 private:
  T gamma_, gamma_cubed_;
  Matrix<T> key_moment_;       // S^K
  Matrix<T> key_value_;        // P^KV
  Vector<T> key_mass_;         // m^K
  Matrix<T> corrected_value_;  // F
  Vector<T> corrected_mass_;   // eta
};

}  // namespace hla::fast
