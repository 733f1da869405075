#pragma once

#include "hla/fast/algebra/linear.hpp"

namespace hla::fast {

// Third-order HLA as printed: Thm 7.1, Eqs. 7.1-7.3, and Alg. 3 (with its decay).
// masked = false reads q^T S^K S^Q P^KV without the cross-summaries (Sec. 7.1, unmasked).
// The masked read-out does not equal the masked operator: docs/findings.md, F2.
template <class T>
class Hla3PublishedStream {
 public:
  static constexpr AlgebraId id = AlgebraId::hla3_published_stream;
  explicit Hla3PublishedStream(const AlgebraParams<T>& p)
      : Hla3PublishedStream(p.d, p.dv, p.gamma, p.masked) {}
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

  // Scalars held between tokens: S^K, S^Q, P, m, and G1-G3, h1-h3 when masked.
  Index state_size() const {
    const Index moments = key_moment_.size() + query_moment_.size() + key_value_.size() + key_mass_.size();
    return masked_ ? moments + 3 * (g1_.size() + h1_.size()) : moments;
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

  // The backward, as LinearStream's (docs/gradients.md): the read, then lines 11, 10, 9 and the
  // moments' updates in reverse, with the moments before the token from `before`.
  struct Adjoint {
    Matrix<T> key_moment, query_moment, key_value;
    Vector<T> key_mass;
    Matrix<T> g1, g2, g3;
    Vector<T> h1, h2, h3;
  };
  Adjoint zero_adjoint() const {
    const Matrix<T> dd = Matrix<T>::Zero(key_moment_.rows(), key_moment_.cols());
    const Matrix<T> dv = Matrix<T>::Zero(key_value_.rows(), key_value_.cols());
    const Vector<T> d = Vector<T>::Zero(key_mass_.size());
    return {dd, dd, dv, d, dv, dv, dv, d, d, d};
  }
  TokenGradient<T> backward(const Hla3PublishedStream& before, const Vector<T>& q, const Vector<T>& k,
                            const RowVector<T>& v, const RowVector<T>& d_num, const T& d_den, Adjoint& a) const {
    TokenGradient<T> g;
    // read: num = (S^Q (S^K q))^T P - q^T (G1 + G2 + G3), den = q^T S^K (S^Q m) - q^T (h1 + h2 + h3)
    const Vector<T> y = key_moment_ * q, z = query_moment_ * y;
    const Vector<T> w = query_moment_ * key_mass_, x = key_moment_ * w;
    const Vector<T> d_z = key_value_ * d_num.transpose();
    a.key_value += z * d_num;
    a.query_moment += d_z * y.transpose();
    const Vector<T> d_y = query_moment_.transpose() * d_z;
    a.key_moment += d_y * q.transpose();
    g.dq = key_moment_.transpose() * d_y + d_den * x;
    const Vector<T> d_x = d_den * q;
    a.key_moment += d_x * w.transpose();
    const Vector<T> d_w = key_moment_.transpose() * d_x;
    a.query_moment += d_w * key_mass_.transpose();
    a.key_mass += query_moment_.transpose() * d_w;
    g.dk = Vector<T>::Zero(k.size());
    g.dv = RowVector<T>::Zero(v.size());
    // the moments before the token receive what the cross-summaries read of them
    Matrix<T> d_key_prev = Matrix<T>::Zero(key_moment_.rows(), key_moment_.cols());
    Matrix<T> d_query_prev = d_key_prev;
    Matrix<T> d_value_prev = Matrix<T>::Zero(key_value_.rows(), key_value_.cols());
    Vector<T> d_mass_prev = Vector<T>::Zero(key_mass_.size());
    if (masked_) {
      a.g1 -= q * d_num;
      a.g2 -= q * d_num;
      a.g3 -= q * d_num;
      a.h1 -= d_den * q;
      a.h2 -= d_den * q;
      a.h3 -= d_den * q;
      g.dq -= (g1_ + g2_ + g3_) * d_num.transpose() + d_den * (h1_ + h2_ + h3_);
      const Matrix<T>& key_prev = before.key_moment_;
      const Matrix<T>& query_prev = before.query_moment_;
      const Matrix<T>& value_prev = before.key_value_;
      const Vector<T>& mass_prev = before.key_mass_;
      // line 11: a3 = S^K_{t-1} (S^Q_{t-1} k), G3 += a3 v, h3 += a3
      const Vector<T> b = query_prev * k, a3 = key_prev * b;
      const Vector<T> d_a3 = a.g3 * v.transpose() + a.h3;
      g.dv += a3.transpose() * a.g3;
      d_key_prev += d_a3 * b.transpose();
      const Vector<T> d_b = key_prev.transpose() * d_a3;
      d_query_prev += d_b * k.transpose();
      g.dk += query_prev.transpose() * d_b;
      // line 10: a2 = S^K_{t-1} q, G2 += a2 (q^T P_{t-1}), h2 += (q . m_{t-1}) a2
      const RoutedAdjoint<T> second =
          routed_update_adjoint<T>(key_prev * q, q, value_prev, mass_prev, a.g2, a.h2, d_value_prev, d_mass_prev);
      g.dq += second.d_u + key_prev.transpose() * second.d_a;
      d_key_prev += second.d_a * q.transpose();
      // line 9: u1 = S^Q_{t-1} k, G1 += k (u1^T P_{t-1}), h1 += (u1 . m_{t-1}) k
      const RoutedAdjoint<T> first =
          routed_update_adjoint<T>(k, query_prev * k, value_prev, mass_prev, a.g1, a.h1, d_value_prev, d_mass_prev);
      g.dk += first.d_a + query_prev.transpose() * first.d_u;
      d_query_prev += first.d_u * k.transpose();
      for (Matrix<T>* m : {&a.g1, &a.g2, &a.g3}) *m = gamma_ * *m;
      for (Vector<T>* m : {&a.h1, &a.h2, &a.h3}) *m = gamma_ * *m;
    }
    // lines 6-7: the moments
    g.dk += (a.key_moment + a.key_moment.transpose()) * k + a.key_value * v.transpose() + a.key_mass;
    g.dq += (a.query_moment + a.query_moment.transpose()) * q;
    g.dv += k.transpose() * a.key_value;
    a.key_moment = gamma_ * a.key_moment + d_key_prev;
    a.query_moment = gamma_ * a.query_moment + d_query_prev;
    a.key_value = gamma_ * a.key_value + d_value_prev;
    a.key_mass = gamma_ * a.key_mass + d_mass_prev;
    return g;
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
  static constexpr AlgebraId id = AlgebraId::hla3;
  explicit Hla3CorrectedStream(const AlgebraParams<T>& p) : Hla3CorrectedStream(p.d, p.dv, p.gamma) {}
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

  // Scalars held between tokens: S^K, P, m, F, eta.
  Index state_size() const {
    return key_moment_.size() + key_value_.size() + key_mass_.size() + corrected_value_.size() +
           corrected_mass_.size();
  }

  Readout<T> read(const Vector<T>& q) const {
    return {q.transpose() * corrected_value_, q.dot(corrected_mass_)};
  }

  // The backward, as LinearStream's (docs/gradients.md): the read, F and eta's update (z = S^K_t q,
  // r = q^T P_t, sigma = q . m_t), then the moments', with S^K_t, P_t, m_t of this state.
  struct Adjoint {
    Matrix<T> key_moment, key_value;
    Vector<T> key_mass;
    Matrix<T> corrected_value;
    Vector<T> corrected_mass;
  };
  Adjoint zero_adjoint() const {
    return {Matrix<T>::Zero(key_moment_.rows(), key_moment_.cols()),
            Matrix<T>::Zero(key_value_.rows(), key_value_.cols()), Vector<T>::Zero(key_mass_.size()),
            Matrix<T>::Zero(corrected_value_.rows(), corrected_value_.cols()), Vector<T>::Zero(corrected_mass_.size())};
  }
  TokenGradient<T> backward(const Hla3CorrectedStream& /*before*/, const Vector<T>& q, const Vector<T>& k,
                            const RowVector<T>& v, const RowVector<T>& d_num, const T& d_den, Adjoint& a) const {
    TokenGradient<T> g;
    g.dq = corrected_value_ * d_num.transpose() + d_den * corrected_mass_;  // read
    a.corrected_value += q * d_num;
    a.corrected_mass += d_den * q;
    // F += z (q^T P_t), eta += (q . m_t) z with z = S^K_t q
    const RoutedAdjoint<T> routed = routed_update_adjoint<T>(key_moment_ * q, q, key_value_, key_mass_,
                                                             a.corrected_value, a.corrected_mass, a.key_value, a.key_mass);
    g.dq += routed.d_u + key_moment_.transpose() * routed.d_a;
    a.key_moment += routed.d_a * q.transpose();
    g.dk = (a.key_moment + a.key_moment.transpose()) * k + a.key_value * v.transpose() + a.key_mass;
    g.dv = k.transpose() * a.key_value;
    a.key_moment = gamma_ * a.key_moment;
    a.key_value = gamma_ * a.key_value;
    a.key_mass = gamma_ * a.key_mass;
    a.corrected_value = gamma_cubed_ * a.corrected_value;
    a.corrected_mass = gamma_cubed_ * a.corrected_mass;
    return g;
  }

 private:
  T gamma_, gamma_cubed_;
  Matrix<T> key_moment_;       // S^K
  Matrix<T> key_value_;        // P^KV
  Vector<T> key_mass_;         // m^K
  Matrix<T> corrected_value_;  // F
  Vector<T> corrected_mass_;   // eta
};

template <class T>
struct Hla3Summary {
  Matrix<T> key_moment;       // S^K
  Matrix<T> query_moment;     // S^Q
  Matrix<T> key_value;        // P^KV
  Vector<T> key_mass;         // m^K
  Matrix<T> corrected_value;  // F = sum_u gamma^(3(end-u)) S^K_u q_u q_u^T P_u (segment-local moments)
  Vector<T> corrected_mass;   // eta, the same with m^K_u
  Matrix<T> query_value;      // X = sum_u gamma^(2(end-u)) q_u q_u^T P_u
  Vector<T> query_mass;       // x = sum_u gamma^(2(end-u)) q_u q_u^T m_u
  Matrix<T> key_query;        // Y = sum_u gamma^(2(end-u)) S^K_u q_u q_u^T
  T rho;

  friend bool operator==(const Hla3Summary&, const Hla3Summary&) = default;
};

// Segments of the masked third-order operator, corrected (docs/findings.md, F2 and the ledger):
// for u in B, S^K_u = gamma^(u-a) S_A + S_B,u and P_u = gamma^(u-a) P_A + P_B,u (a = end of A), so
//   F_AB = rho^3 F_A + F_B + rho S_A X_B + rho Y_B P_A + rho^2 S_A S^Q_B P_A,
//   X_AB = rho^2 X_A + X_B + rho S^Q_B P_A,   Y_AB = rho^2 Y_A + Y_B + rho S_A S^Q_B,
// with rho = rho_B; eta and x likewise with m^K for P^KV. O(d^2 + d dv) scalars, where the
// published scan (Eqs. 7.6-7.7) needs the O(d^3 dv) maps M^KQP. Unmasked: only the moments are
// used, o_t = q^T S^K S^Q P^KV (Sec. 7.1).
template <class T>
class Hla3Segments {
 public:
  using Summary = Hla3Summary<T>;

  static constexpr AlgebraId id = AlgebraId::hla3;
  explicit Hla3Segments(const AlgebraParams<T>& p) : Hla3Segments(p.d, p.dv, p.gamma, p.masked) {}
  Hla3Segments(Index d, Index dv, const T& gamma, bool masked)
      : d_(d), dv_(dv), gamma_(gamma), masked_(masked) {}

  Summary identity() const {
    return {Matrix<T>::Zero(d_, d_),  Matrix<T>::Zero(d_, d_),
            Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, d_),  T(1)};
  }
  Summary token(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) const {
    Summary s = identity();
    s.key_moment = k * k.transpose();
    s.query_moment = q * q.transpose();
    s.key_value = k * v;
    s.key_mass = k;
    s.rho = gamma_;
    if (masked_) {
      const Vector<T> metric_query = s.key_moment * q;  // S^K q
      s.query_value = q * (q.transpose() * s.key_value);
      s.query_mass = q.dot(k) * q;
      s.key_query = metric_query * q.transpose();
      s.corrected_value = metric_query * (q.transpose() * s.key_value);
      s.corrected_mass = q.dot(k) * metric_query;
    }
    return s;
  }
  Summary combine(const Summary& a, const Summary& b) const {
    const T& r = b.rho;
    Summary s{r * a.key_moment + b.key_moment,
              r * a.query_moment + b.query_moment,
              r * a.key_value + b.key_value,
              r * a.key_mass + b.key_mass,
              Matrix<T>(),
              Vector<T>(),
              Matrix<T>(),
              Vector<T>(),
              Matrix<T>(),
              a.rho * b.rho};
    if (!masked_) return with_zero_cross_terms(std::move(s));
    const T r2 = r * r;
    const Matrix<T> carried_key = r * a.key_moment;                  // rho S_A
    const Matrix<T> key_query_cross = carried_key * b.query_moment;  // rho S_A S^Q_B
    s.corrected_value = r2 * r * a.corrected_value + b.corrected_value + carried_key * b.query_value +
                        b.key_query * (r * a.key_value) + key_query_cross * (r * a.key_value);
    s.corrected_mass = r2 * r * a.corrected_mass + b.corrected_mass + carried_key * b.query_mass +
                       b.key_query * (r * a.key_mass) + key_query_cross * (r * a.key_mass);
    s.query_value = r2 * a.query_value + b.query_value + b.query_moment * (r * a.key_value);
    s.query_mass = r2 * a.query_mass + b.query_mass + b.query_moment * (r * a.key_mass);
    s.key_query = r2 * a.key_query + b.key_query + key_query_cross;
    return s;
  }
  Readout<T> read(const Summary& s, const Vector<T>& q) const {
    if (masked_) return {q.transpose() * s.corrected_value, q.dot(s.corrected_mass)};
    const RowVector<T> z = q.transpose() * s.key_moment * s.query_moment;
    return {z * s.key_value, z.dot(s.key_mass)};
  }

  // The adjoints, as LinearSegments' (docs/gradients.md).
  void read_adjoint(const Summary& s, const Vector<T>& q, const RowVector<T>& d_num, const T& d_den, Summary& d_s,
                    Vector<T>& d_q) const {
    if (masked_) {
      d_s.corrected_value += q * d_num;
      d_s.corrected_mass += d_den * q;
      d_q += s.corrected_value * d_num.transpose() + d_den * s.corrected_mass;
      return;
    }
    const RowVector<T> w = q.transpose() * s.key_moment;  // z = w S^Q
    const RowVector<T> z = w * s.query_moment;
    const RowVector<T> d_z = d_num * s.key_value.transpose() + d_den * s.key_mass.transpose();
    d_s.key_value += z.transpose() * d_num;
    d_s.key_mass += d_den * z.transpose();
    const RowVector<T> d_w = d_z * s.query_moment.transpose();
    d_s.query_moment += w.transpose() * d_z;
    d_s.key_moment += q * d_w;
    d_q += s.key_moment * d_w.transpose();
  }
  // The moments rho X_A + X_B; masked, with K = rho S_A and Z = K S^Q_B (rho = rho_B):
  //   F = rho^3 F_A + F_B + K X_B + (Y_B + Z) (rho P_A),  X = rho^2 X_A + X_B + S^Q_B (rho P_A),
  //   Y = rho^2 Y_A + Y_B + Z,  and eta, x with m^K for P^KV.
  void combine_adjoint(const Summary& a, const Summary& b, const Summary& d, Summary& d_a, Summary& d_b) const {
    const T& r = b.rho;
    d_a.key_moment += r * d.key_moment;
    d_a.query_moment += r * d.query_moment;
    d_a.key_value += r * d.key_value;
    d_a.key_mass += r * d.key_mass;
    d_b.key_moment += d.key_moment;
    d_b.query_moment += d.query_moment;
    d_b.key_value += d.key_value;
    d_b.key_mass += d.key_mass;
    if (!masked_) return;
    const T r2 = r * r;
    const Matrix<T> carried_key = r * a.key_moment;                  // K
    const Matrix<T> key_query_cross = carried_key * b.query_moment;  // Z
    const Matrix<T> carried_value = r * a.key_value;                 // rho P_A
    const Vector<T> carried_mass = r * a.key_mass;                   // rho m_A
    const Matrix<T> routed = b.key_query + key_query_cross;          // Y_B + Z
    d_a.corrected_value += r2 * r * d.corrected_value;
    d_a.corrected_mass += r2 * r * d.corrected_mass;
    d_a.query_value += r2 * d.query_value;
    d_a.query_mass += r2 * d.query_mass;
    d_a.key_query += r2 * d.key_query;
    d_b.corrected_value += d.corrected_value;
    d_b.corrected_mass += d.corrected_mass;
    d_b.query_value += d.query_value + carried_key.transpose() * d.corrected_value;
    d_b.query_mass += d.query_mass + carried_key.transpose() * d.corrected_mass;
    const Matrix<T> d_routed = d.corrected_value * carried_value.transpose() + d.corrected_mass * carried_mass.transpose();
    d_b.key_query += d.key_query + d_routed;
    const Matrix<T> d_cross = d_routed + d.key_query;  // of Z
    d_a.key_value += r * (routed.transpose() * d.corrected_value + b.query_moment.transpose() * d.query_value);
    d_a.key_mass += r * (routed.transpose() * d.corrected_mass + b.query_moment.transpose() * d.query_mass);
    d_b.query_moment += d.query_value * carried_value.transpose() + d.query_mass * carried_mass.transpose() +
                        carried_key.transpose() * d_cross;
    const Matrix<T> d_carried_key = d.corrected_value * b.query_value.transpose() +
                                    d.corrected_mass * b.query_mass.transpose() +
                                    d_cross * b.query_moment.transpose();
    d_a.key_moment += r * d_carried_key;
  }
  // S^K = k k^T, S^Q = q q^T, P = k v^T, m = k; masked, with s = q . k: X = s q v^T, x = s q,
  // Y = s k q^T, F = s^2 k v^T, eta = s^2 k.
  void token_adjoint(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v, const Summary& d,
                     TokenGradient<T>& g) const {
    g.dk += (d.key_moment + d.key_moment.transpose()) * k + d.key_value * v.transpose() + d.key_mass;
    g.dq += (d.query_moment + d.query_moment.transpose()) * q;
    g.dv += k.transpose() * d.key_value;
    if (!masked_) return;
    const T score = q.dot(k);
    const Vector<T> f = d.corrected_value * v.transpose() + d.corrected_mass;  // dF v + d eta
    const Vector<T> x = d.query_value * v.transpose() + d.query_mass;          // dX v + dx
    const T d_score = q.dot(x) + k.dot(d.key_query * q) + 2 * score * k.dot(f);
    g.dq += score * (x + d.key_query.transpose() * k) + d_score * k;
    g.dk += score * (d.key_query * q) + score * score * f + d_score * q;
    g.dv += score * (q.transpose() * d.query_value) + score * score * (k.transpose() * d.corrected_value);
  }

 private:
  Index d_, dv_;
  T gamma_;
  bool masked_;

  Summary with_zero_cross_terms(Summary s) const {
    s.corrected_value = s.query_value = Matrix<T>::Zero(d_, dv_);
    s.corrected_mass = s.query_mass = Vector<T>::Zero(d_);
    s.key_query = Matrix<T>::Zero(d_, d_);
    return s;
  }
};

template <class T>
struct Hla3PublishedSummary {
  Matrix<T> key_moment, query_moment, key_value;  // S^K, S^Q, P^KV
  Vector<T> key_mass;                             // m^K
  Matrix<T> third_value;                          // F (Eq. 7.4)
  Vector<T> third_mass;                           // eta
  Matrix<T> query_product;                        // R^QP
  Vector<T> query_mass;                           // r^Qm
  Matrix<T> key_query;                            // U^KQ
  Matrix<T> map_value;                            // M^KQP as a (d*d) x (d*dv) matrix: vec(M[Z]) = vec(Z) M
  Matrix<T> map_mass;                             // M^KQm as a (d*d) x d matrix

  friend bool operator==(const Hla3PublishedSummary&, const Hla3PublishedSummary&) = default;
};

// The third-order scan state and concatenation exactly as printed: Eqs. 7.6-7.7 with the token
// segment of Alg. 4 line 2, for gamma = 1 (Sec. 7.3 states it so). The linear maps are stored
// densely, O(d^3 dv) scalars per summary. It inherits F2 from Eq. 7.4's F.
template <class T>
class Hla3PublishedSegments {
 public:
  using Summary = Hla3PublishedSummary<T>;

  static constexpr AlgebraId id = AlgebraId::hla3_published_scan;
  explicit Hla3PublishedSegments(const AlgebraParams<T>& p) : Hla3PublishedSegments(p.d, p.dv) {}
  Hla3PublishedSegments(Index d, Index dv) : d_(d), dv_(dv) {}

  Summary identity() const {
    return {Matrix<T>::Zero(d_, d_),     Matrix<T>::Zero(d_, d_),
            Matrix<T>::Zero(d_, dv_),    Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_),    Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_),    Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, d_),     Matrix<T>::Zero(d_ * d_, d_ * dv_),
            Matrix<T>::Zero(d_ * d_, d_)};
  }
  Summary token(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) const {
    const Matrix<T> dk = k * k.transpose(), dq = q * q.transpose(), dp = k * v;  // D^K, D^Q, D^P, d^m = k
    Summary s{dk,
              dq,
              dp,
              k,
              dk * dq * dp,
              dk * dq * k,
              dq * dp,
              dq * k,
              dk * dq,
              Matrix<T>(d_ * d_, d_ * dv_),
              Matrix<T>(d_ * d_, d_)};
    // M[Z] = D^K Z D^P = k (k^T Z k) v^T: coefficient of Z_bc in entry (a, e) is k_b k_c k_a v_e.
    for (Index b = 0; b < d_; ++b) {
      for (Index c = 0; c < d_; ++c) {
        const T kbc = k(b) * k(c);
        for (Index a = 0; a < d_; ++a) {
          for (Index e = 0; e < dv_; ++e) s.map_value(b * d_ + c, a * dv_ + e) = kbc * k(a) * v(e);
          s.map_mass(b * d_ + c, a) = kbc * k(a);
        }
      }
    }
    return s;
  }
  Summary combine(const Summary& a, const Summary& b) const {  // Eqs. 7.6-7.7
    return {a.key_moment + b.key_moment,
            a.query_moment + b.query_moment,
            a.key_value + b.key_value,
            a.key_mass + b.key_mass,
            a.third_value + b.third_value + a.key_moment * b.query_product +
                apply(b.map_value, a.query_moment, dv_) + b.key_query * a.key_value,
            a.third_mass + b.third_mass + a.key_moment * b.query_mass +
                Vector<T>(apply(b.map_mass, a.query_moment, 1)) + b.key_query * a.key_mass,
            a.query_product + b.query_product,
            a.query_mass + b.query_mass,
            a.key_query + b.key_query,
            a.map_value + b.map_value,
            a.map_mass + b.map_mass};
  }
  Readout<T> read(const Summary& s, const Vector<T>& q) const {  // Alg. 4 lines 7-9
    return {q.transpose() * s.third_value, q.dot(s.third_mass)};
  }

 private:
  Index d_, dv_;

  // M[Z] for M stored as vec(Z) -> vec(M[Z]), reshaped to d x cols.
  Matrix<T> apply(const Matrix<T>& map, const Matrix<T>& z, Index cols) const {
    const RowVector<T> flat = Eigen::Map<const RowVector<T>>(z.data(), d_ * d_) * map;
    return Eigen::Map<const Matrix<T>>(flat.data(), d_, cols);
  }
};

}  // namespace hla::fast
