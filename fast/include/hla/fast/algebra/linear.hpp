#pragma once

#include "hla/fast/algebra/select.hpp"
#include "hla/reference/linalg.hpp"

namespace hla::fast {

// The value read out at one token: num_t (1 x dv) and den_t (num with v replaced by ones).
template <class T>
struct Readout {
  RowVector<T> num;
  T den;
};

// One token's share of the gradients of <dO, O> (the backward of a stream, backward.hpp).
template <class T>
struct TokenGradient {
  Vector<T> dq, dk;
  RowVector<T> dv;
};

// The adjoint of the routed update X += a (u^T P), x += (u . m) a, the shape of every
// cross-summary's update (hla2's G, h; AHLA's E, n; third order's G1, G2, F, eta): given the
// adjoints d_x, d_x_mass of X and x, adds those of P and m to d_p, d_m and returns those of a and u.
template <class T>
struct RoutedAdjoint {
  Vector<T> d_a, d_u;
};
template <class T>
RoutedAdjoint<T> routed_update_adjoint(const Vector<T>& a, const Vector<T>& u, const Matrix<T>& p, const Vector<T>& m,
                                       const Matrix<T>& d_x, const Vector<T>& d_x_mass, Matrix<T>& d_p,
                                       Vector<T>& d_m) {
  const RowVector<T> r = u.transpose() * p;  // u^T P
  const T sigma = u.dot(m);
  const RowVector<T> d_r = a.transpose() * d_x;
  const T d_sigma = a.dot(d_x_mass);
  d_p += u * d_r;
  d_m += d_sigma * u;
  return {d_x * r.transpose() + sigma * d_x_mass, p * d_r.transpose() + d_sigma * m};
}

// First-order linear attention (Sec. 2.2, identity feature map), the baseline:
// P_t = gamma P_{t-1} + k_t v_t^T,  m_t = gamma m_{t-1} + k_t,  o_t = q_t^T P_t.
template <class T>
class LinearStream {
 public:
  static constexpr AlgebraId id = AlgebraId::linear;
  explicit LinearStream(const AlgebraParams<T>& p) : LinearStream(p.d, p.dv, p.gamma) {}
  LinearStream(Index d, Index dv, const T& gamma)
      : gamma_(gamma), key_value_(Matrix<T>::Zero(d, dv)), key_mass_(Vector<T>::Zero(d)) {}

  void push(const Vector<T>& /*q*/, const Vector<T>& k, const RowVector<T>& v) {
    key_value_ = gamma_ * key_value_ + k * v;
    key_mass_ = gamma_ * key_mass_ + k;
  }

  // Scalars held between tokens (besides gamma).
  Index state_size() const { return key_value_.size() + key_mass_.size(); }
  Readout<T> read(const Vector<T>& q) const { return {q.transpose() * key_value_, q.dot(key_mass_)}; }

  // The backward (docs/gradients.md): the adjoint of the state, carried from the last token to the
  // first. backward() is called on the state after token t (push then read), with the state
  // before it; it turns the adjoint of the state after t into that of the state before t and
  // returns token t's gradients, given the adjoints d_num, d_den of its readout.
  struct Adjoint {
    Matrix<T> key_value;
    Vector<T> key_mass;
  };
  Adjoint zero_adjoint() const { return {Matrix<T>::Zero(key_value_.rows(), key_value_.cols()), Vector<T>::Zero(key_mass_.size())}; }
  TokenGradient<T> backward(const LinearStream& /*before*/, const Vector<T>& q, const Vector<T>& k,
                            const RowVector<T>& v, const RowVector<T>& d_num, const T& d_den, Adjoint& a) const {
    TokenGradient<T> g;
    g.dq = key_value_ * d_num.transpose() + d_den * key_mass_;  // read
    a.key_value += q * d_num;
    a.key_mass += d_den * q;
    g.dk = a.key_value * v.transpose() + a.key_mass;  // push
    g.dv = k.transpose() * a.key_value;
    a.key_value = gamma_ * a.key_value;
    a.key_mass = gamma_ * a.key_mass;
    return g;
  }

 private:
  T gamma_;
  Matrix<T> key_value_;  // P^KV
  Vector<T> key_mass_;   // m^K
};

}  // namespace hla::fast

namespace hla::fast {

// A contiguous segment's summary under decay gamma: the prefix moments it contributes at its end
// and its attenuation rho = gamma^length. The segment algebras below all carry rho the same way.
template <class T>
struct LinearSummary {
  Matrix<T> key_value;  // P^KV
  Vector<T> key_mass;   // m^K
  T rho;

  friend bool operator==(const LinearSummary&, const LinearSummary&) = default;
};

// Linear attention as a monoid of decayed segments: A then B is (rho_B P_A + P_B, rho_B m_A + m_B,
// rho_A rho_B), the identity the empty segment.
template <class T>
class LinearSegments {
 public:
  using Summary = LinearSummary<T>;

  static constexpr AlgebraId id = AlgebraId::linear;
  explicit LinearSegments(const AlgebraParams<T>& p) : LinearSegments(p.d, p.dv, p.gamma) {}
  LinearSegments(Index d, Index dv, const T& gamma) : d_(d), dv_(dv), gamma_(gamma) {}

  Summary identity() const { return {Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_), T(1)}; }
  Summary token(const Vector<T>& /*q*/, const Vector<T>& k, const RowVector<T>& v) const {
    return {k * v, k, gamma_};
  }
  Summary combine(const Summary& a, const Summary& b) const {
    return {b.rho * a.key_value + b.key_value, b.rho * a.key_mass + b.key_mass, a.rho * b.rho};
  }
  // @pre s summarizes tokens 1..t and q = q_t
  Readout<T> read(const Summary& s, const Vector<T>& q) const {
    return {q.transpose() * s.key_value, q.dot(s.key_mass)};
  }

  // The adjoints of read, combine and token (the scan's backward, backward.hpp): an adjoint is a
  // Summary of the same shape whose rho is unused (rho depends on lengths only). Each adds into
  // its outputs, so the adjoints of every use of a summary sum up.
  void read_adjoint(const Summary& s, const Vector<T>& q, const RowVector<T>& d_num, const T& d_den, Summary& d_s,
                    Vector<T>& d_q) const {
    d_s.key_value += q * d_num;
    d_s.key_mass += d_den * q;
    d_q += s.key_value * d_num.transpose() + d_den * s.key_mass;
  }
  void combine_adjoint(const Summary& /*a*/, const Summary& b, const Summary& d, Summary& d_a, Summary& d_b) const {
    d_a.key_value += b.rho * d.key_value;
    d_a.key_mass += b.rho * d.key_mass;
    d_b.key_value += d.key_value;
    d_b.key_mass += d.key_mass;
  }
  void token_adjoint(const Vector<T>& /*q*/, const Vector<T>& k, const RowVector<T>& v, const Summary& d,
                     TokenGradient<T>& g) const {
    g.dk += d.key_value * v.transpose() + d.key_mass;
    g.dv += k.transpose() * d.key_value;
  }

 private:
  Index d_, dv_;
  T gamma_;
};

}  // namespace hla::fast
