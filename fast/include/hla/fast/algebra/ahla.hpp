#pragma once

#include "hla/fast/algebra/coefficients.hpp"
#include "hla/fast/algebra/linear.hpp"

namespace hla::fast {

// Asymmetric HLA, Thm 6.1 with the decay of Sec. 6.1 and Alg. 2, as printed:
// P_t = gamma P_{t-1} + k_t v_t^T, m_t = gamma m_{t-1} + k_t,
// E_t = gamma E_{t-1} + k_t (q_t^T P_t), n_t = gamma n_{t-1} + k_t (q_t^T m_t), o_t = q_t^T E_t.
template <class T>
class AhlaStream {
 public:
  static constexpr AlgebraId id = AlgebraId::ahla;
  explicit AhlaStream(const AlgebraParams<T>& p) : AhlaStream(p.d, p.dv, p.gamma) {}
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

  // Scalars held between tokens (besides gamma): P, m, E, n.
  Index state_size() const {
    return key_value_.size() + key_mass_.size() + routed_value_.size() + routed_mass_.size();
  }

  Readout<T> read(const Vector<T>& q) const {  // lines 7-9
    return {q.transpose() * routed_value_, q.dot(routed_mass_)};
  }

  // The backward, as LinearStream's (docs/gradients.md): the read, then lines 6, 4-5 and 3 in
  // reverse, with P_t and m_t of this (the state after the token).
  struct Adjoint {
    Matrix<T> key_value;
    Vector<T> key_mass;
    Matrix<T> routed_value;
    Vector<T> routed_mass;
  };
  Adjoint zero_adjoint() const {
    return {Matrix<T>::Zero(key_value_.rows(), key_value_.cols()), Vector<T>::Zero(key_mass_.size()),
            Matrix<T>::Zero(routed_value_.rows(), routed_value_.cols()), Vector<T>::Zero(routed_mass_.size())};
  }
  TokenGradient<T> backward(const AhlaStream& /*before*/, const Vector<T>& q, const Vector<T>& k,
                            const RowVector<T>& v, const RowVector<T>& d_num, const T& d_den, Adjoint& a) const {
    TokenGradient<T> g;
    g.dq = routed_value_ * d_num.transpose() + d_den * routed_mass_;  // lines 7-9
    a.routed_value += q * d_num;
    a.routed_mass += d_den * q;
    // line 6: E += k (q^T P), n += (q . m) k, with lines 4-5's r and s
    const RoutedAdjoint<T> routed =
        routed_update_adjoint(k, q, key_value_, key_mass_, a.routed_value, a.routed_mass, a.key_value, a.key_mass);
    g.dk = routed.d_a;
    g.dq += routed.d_u;
    g.dk += a.key_value * v.transpose() + a.key_mass;  // line 3
    g.dv = k.transpose() * a.key_value;
    a.key_value = gamma_ * a.key_value;
    a.key_mass = gamma_ * a.key_mass;
    a.routed_value = gamma_ * a.routed_value;
    a.routed_mass = gamma_ * a.routed_mass;
    return g;
  }

 private:
  T gamma_;
  Matrix<T> key_value_;     // P^KV
  Vector<T> key_mass_;      // m^K
  Matrix<T> routed_value_;  // E
  Vector<T> routed_mass_;   // n
};

template <class T>
struct AhlaSummary {
  Matrix<T> key_query;     // R^KQ = sum k_i q_i^T
  Matrix<T> key_value;     // P^KV
  Vector<T> key_mass;      // m^K
  Matrix<T> routed_value;  // E
  Vector<T> routed_mass;   // n
  T rho;

  friend bool operator==(const AhlaSummary&, const AhlaSummary&) = default;
};

// Segments of AHLA: Eq. 6.2, and its decay-aware form (Sec. 6.2), printed with
//   R_AB = rho_B R_A + R_B   (published),
// which is not associative for gamma < 1 (docs/findings.md, F4). The cross-term of a token i in B
// is gamma^(end-i) k_i q_i^T gamma^(i-end_A) P_A = rho_B k_i q_i^T P_A whatever i, so R^KQ must not
// decay: corrected R_AB = R_A + R_B. Undecayed, the two agree (ahla_coefficients).
template <class T>
class AhlaSegments {
 public:
  using Summary = AhlaSummary<T>;

  static constexpr AlgebraId id = AlgebraId::ahla;
  explicit AhlaSegments(const AlgebraParams<T>& p) : AhlaSegments(p.d, p.dv, p.gamma, p.form) {}
  AhlaSegments(Index d, Index dv, const T& gamma, Form form) : d_(d), dv_(dv), gamma_(gamma), form_(form) {}

  Summary identity() const {
    return {Matrix<T>::Zero(d_, d_),  Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),      T(1)};
  }
  // A single token: E = k (q^T k v^T), n = k (q^T k).
  Summary token(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) const {
    const T score = q.dot(k);
    return {k * q.transpose(), k * v, k, score * (k * v), score * k, gamma_};
  }
  Summary combine(const Summary& a, const Summary& b) const {
    const T key_query_decay = ahla_coefficients(form_, b.rho).key_query_age;
    return {key_query_decay * a.key_query + b.key_query,
            b.rho * a.key_value + b.key_value,
            b.rho * a.key_mass + b.key_mass,
            b.rho * a.routed_value + b.routed_value + b.key_query * (b.rho * a.key_value),
            b.rho * a.routed_mass + b.routed_mass + b.key_query * (b.rho * a.key_mass),
            a.rho * b.rho};
  }
  Readout<T> read(const Summary& s, const Vector<T>& q) const {
    return {q.transpose() * s.routed_value, q.dot(s.routed_mass)};
  }

  // The adjoints, as LinearSegments' (docs/gradients.md).
  void read_adjoint(const Summary& s, const Vector<T>& q, const RowVector<T>& d_num, const T& d_den, Summary& d_s,
                    Vector<T>& d_q) const {
    d_s.routed_value += q * d_num;
    d_s.routed_mass += d_den * q;
    d_q += s.routed_value * d_num.transpose() + d_den * s.routed_mass;
  }
  // E_AB = rho_B E_A + E_B + R_B (rho_B P_A), n alike; R_AB = age R_A + R_B; P, m rho_B X_A + X_B.
  void combine_adjoint(const Summary& a, const Summary& b, const Summary& d, Summary& d_a, Summary& d_b) const {
    const T key_query_decay = ahla_coefficients(form_, b.rho).key_query_age;
    d_a.key_query += key_query_decay * d.key_query;
    d_a.key_value += b.rho * (d.key_value + b.key_query.transpose() * d.routed_value);
    d_a.key_mass += b.rho * (d.key_mass + b.key_query.transpose() * d.routed_mass);
    d_a.routed_value += b.rho * d.routed_value;
    d_a.routed_mass += b.rho * d.routed_mass;
    d_b.key_query += d.key_query + b.rho * (d.routed_value * a.key_value.transpose() +
                                            d.routed_mass * a.key_mass.transpose());
    d_b.key_value += d.key_value;
    d_b.key_mass += d.key_mass;
    d_b.routed_value += d.routed_value;
    d_b.routed_mass += d.routed_mass;
  }
  // R = k q^T, P = k v^T, m = k, E = s k v^T, n = s k with s = q . k.
  void token_adjoint(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v, const Summary& d,
                     TokenGradient<T>& g) const {
    const T score = q.dot(k);
    const T d_score = k.dot(d.routed_value * v.transpose()) + k.dot(d.routed_mass);
    g.dk += d.key_query * q + d.key_value * v.transpose() + d.key_mass +
            score * (d.routed_value * v.transpose() + d.routed_mass) + d_score * q;
    g.dq += d.key_query.transpose() * k + d_score * k;
    g.dv += k.transpose() * (d.key_value + score * d.routed_value);
  }

 private:
  Index d_, dv_;
  T gamma_;
  Form form_;
};

}  // namespace hla::fast
