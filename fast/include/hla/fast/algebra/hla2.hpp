#pragma once

#include "hla/fast/algebra/coefficients.hpp"
#include "hla/fast/algebra/linear.hpp"

namespace hla::fast {

// Alg. 1 lines 9-14: u = q^T (S^K + lambda I), num = u C^QV - q^T G, den = u m^Q - q^T h
// (without G and h when unmasked).
template <class T>
Readout<T> hla2_read(const Vector<T>& q, const T& ridge, bool masked, const Matrix<T>& key_moment,
                     const Matrix<T>& query_value, const Vector<T>& query_mass, const Matrix<T>& cross_value,
                     const Vector<T>& cross_mass) {
  const RowVector<T> u = q.transpose() * key_moment + ridge * q.transpose();
  Readout<T> r{u * query_value, u.dot(query_mass)};
  if (masked) {
    r.num -= q.transpose() * cross_value;
    r.den -= q.dot(cross_mass);
  }
  return r;
}

// The adjoint of hla2_read: adds the adjoints of S, C, m, G, h (d_state's fields, named as
// Hla2Summary's) and of q (d_q), given those of num and den. Shared by the stream's backward and
// the segments' read_adjoint.
template <class T, class State>
void hla2_read_adjoint(const Vector<T>& q, const T& ridge, bool masked, const Matrix<T>& key_moment,
                       const Matrix<T>& query_value, const Vector<T>& query_mass, const Matrix<T>& cross_value,
                       const Vector<T>& cross_mass, const RowVector<T>& d_num, const T& d_den, State& d_state,
                       Vector<T>& d_q) {
  const RowVector<T> u = q.transpose() * key_moment + ridge * q.transpose();
  const RowVector<T> d_u = d_num * query_value.transpose() + d_den * query_mass.transpose();
  d_state.query_value += u.transpose() * d_num;
  d_state.query_mass += d_den * u.transpose();
  d_state.key_moment += q * d_u;
  d_q += key_moment * d_u.transpose() + ridge * d_u.transpose();
  if (masked) {
    d_state.cross_value -= q * d_num;
    d_state.cross_mass -= d_den * q;
    d_q -= cross_value * d_num.transpose() + d_den * cross_mass;
  }
}

// Second-order HLA: prefix moments S^K, C^QV, m^Q (Sec. 3), the cross-summaries G, h that make
// it strictly causal (Thm 3.1), an optional ridge S^K + lambda I (Alg. 1) and decay (Sec. 4.3).
//
// The cross-summaries follow G_t = age G_{t-1} + gain k_t (k_t^T C^QV_{t-1}), likewise h_t, with
// the form's coefficients (hla2_coefficients: published Sec. 3.1, Sec. 4.3, Alg. 1 line 6; F1).
template <class T>
class Hla2Stream {
 public:
  // masked = false drops (G, h): the unmasked prefix form of Eq. 3.1 (Sec. 5.1).
  static constexpr AlgebraId id = AlgebraId::hla2;
  explicit Hla2Stream(const AlgebraParams<T>& p)
      : Hla2Stream(p.d, p.dv, p.gamma, p.ridge, p.masked, p.form) {}
  Hla2Stream(Index d, Index dv, const T& gamma, const T& ridge, bool masked, Form form)
      : Hla2Stream(d, dv, gamma, ridge, masked, hla2_coefficients(form, gamma)) {}
  // Any coefficients of the cross-summaries' update: hla check's diagnosis tries ones that no
  // form has (a decay misplaced by a kernel author).
  Hla2Stream(Index d, Index dv, const T& gamma, const T& ridge, bool masked, Hla2Coefficients<T> cross)
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
      cross_value_ = cross_.age * cross_value_ + cross_.gain * k * (k.transpose() * query_value_);
      cross_mass_ = cross_.age * cross_mass_ + cross_.gain * k * k.dot(query_mass_);
    }
    key_moment_ = gamma_ * key_moment_ + k * k.transpose();
    query_value_ = gamma_ * query_value_ + q * v;
    query_mass_ = gamma_ * query_mass_ + q;
  }

  // Scalars held between tokens (besides gamma and ridge): S, C, m, and G, h when masked.
  Index state_size() const {
    const Index moments = key_moment_.size() + query_value_.size() + query_mass_.size();
    return masked_ ? moments + cross_value_.size() + cross_mass_.size() : moments;
  }

  Readout<T> read(const Vector<T>& q) const {
    return hla2_read(q, ridge_, masked_, key_moment_, query_value_, query_mass_, cross_value_, cross_mass_);
  }

  // The backward, as LinearStream's (docs/gradients.md). With u = q^T S + ridge q^T, the read
  // num = u C - q^T G, den = u m - q^T h and the push's G_t = age G + gain k (k^T C_{t-1}) (h alike)
  // give their adjoints in reverse order; C_{t-1} and m_{t-1} come from `before`.
  struct Adjoint {
    Matrix<T> key_moment, query_value;
    Vector<T> query_mass;
    Matrix<T> cross_value;
    Vector<T> cross_mass;
  };
  Adjoint zero_adjoint() const {
    return {Matrix<T>::Zero(key_moment_.rows(), key_moment_.cols()),
            Matrix<T>::Zero(query_value_.rows(), query_value_.cols()), Vector<T>::Zero(query_mass_.size()),
            Matrix<T>::Zero(cross_value_.rows(), cross_value_.cols()), Vector<T>::Zero(cross_mass_.size())};
  }
  TokenGradient<T> backward(const Hla2Stream& before, const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v,
                            const RowVector<T>& d_num, const T& d_den, Adjoint& a) const {
    TokenGradient<T> g;
    g.dq = Vector<T>::Zero(q.size());
    hla2_read_adjoint(q, ridge_, masked_, key_moment_, query_value_, query_mass_, cross_value_, cross_mass_, d_num,
                      d_den, a, g.dq);
    // push, last update first
    Matrix<T> d_query_value_before = gamma_ * a.query_value;
    Vector<T> d_query_mass_before = gamma_ * a.query_mass;
    g.dq += a.query_value * v.transpose() + a.query_mass;
    g.dv = q.transpose() * a.query_value;
    g.dk = (a.key_moment + a.key_moment.transpose()) * k;
    if (masked_) {
      // G += (gain k) (k^T C_{t-1}), h += (k . m_{t-1}) (gain k)
      const RoutedAdjoint<T> routed =
          routed_update_adjoint<T>(cross_.gain * k, k, before.query_value_, before.query_mass_, a.cross_value,
                                   a.cross_mass, d_query_value_before, d_query_mass_before);
      g.dk += cross_.gain * routed.d_a + routed.d_u;
      a.cross_value = cross_.age * a.cross_value;
      a.cross_mass = cross_.age * a.cross_mass;
    }
    a.key_moment = gamma_ * a.key_moment;
    a.query_value = std::move(d_query_value_before);
    a.query_mass = std::move(d_query_mass_before);
    return g;
  }

  // The summaries, for readers other than read() (hla check's diagnosis reads them transposed).
  const Matrix<T>& key_moment() const { return key_moment_; }
  const Matrix<T>& query_value() const { return query_value_; }
  const Vector<T>& query_mass() const { return query_mass_; }
  const Matrix<T>& cross_value() const { return cross_value_; }
  const Vector<T>& cross_mass() const { return cross_mass_; }

 private:
  T gamma_, ridge_;
  bool masked_;
  Hla2Coefficients<T> cross_;
  Matrix<T> key_moment_;   // S^K
  Matrix<T> query_value_;  // C^QV
  Vector<T> query_mass_;   // m^Q
  Matrix<T> cross_value_;  // G
  Vector<T> cross_mass_;   // h
};

template <class T>
struct Hla2Summary {
  Matrix<T> key_moment;   // S^K
  Matrix<T> query_value;  // C^QV
  Vector<T> query_mass;   // m^Q
  Matrix<T> cross_value;  // G
  Vector<T> cross_mass;   // h
  T rho;

  friend bool operator==(const Hla2Summary&, const Hla2Summary&) = default;
};

// Segments of second-order HLA. Unmasked: the monoid of Sec. 4.1 (decay-aware: Sec. 4.2).
// Masked: the semidirect product of Eq. 4.1, whose decay-aware form Sec. 4.2 prints as
//   G_AB = rho_B G_A + G_B + S_B (rho_B C_A)   (published),
// which is not associative for gamma < 1 (docs/findings.md, F3); corrected:
//   G_AB = rho_B^2 G_A + G_B + rho_B S_B C_A,
// since S_AB C_AB = (rho_B S_A + S_B)(rho_B C_A + C_B) ages A's own pairs by rho_B^2. Same for h.
// The age of G_A is hla2_coefficients(form, rho_B).age.
template <class T>
class Hla2Segments {
 public:
  using Summary = Hla2Summary<T>;

  static constexpr AlgebraId id = AlgebraId::hla2;
  explicit Hla2Segments(const AlgebraParams<T>& p)
      : Hla2Segments(p.d, p.dv, p.gamma, p.ridge, p.masked, p.form) {}
  Hla2Segments(Index d, Index dv, const T& gamma, const T& ridge, bool masked, Form form)
      : d_(d), dv_(dv), gamma_(gamma), ridge_(ridge), masked_(masked), form_(form) {}

  Summary identity() const {
    return {Matrix<T>::Zero(d_, d_),  Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),      T(1)};
  }
  // A single token: G = h = 0 (Sec. 4.2).
  Summary token(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) const {
    return {k * k.transpose(), q * v, q, Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_), gamma_};
  }
  Summary combine(const Summary& a, const Summary& b) const {
    Summary r{b.rho * a.key_moment + b.key_moment,
              b.rho * a.query_value + b.query_value,
              b.rho * a.query_mass + b.query_mass,
              Matrix<T>(),
              Vector<T>(),
              a.rho * b.rho};
    if (masked_) {
      const T carried = hla2_coefficients(form_, b.rho).age;
      r.cross_value = carried * a.cross_value + b.cross_value + b.key_moment * (b.rho * a.query_value);
      r.cross_mass = carried * a.cross_mass + b.cross_mass + b.key_moment * (b.rho * a.query_mass);
    } else {
      r.cross_value = Matrix<T>::Zero(d_, dv_);
      r.cross_mass = Vector<T>::Zero(d_);
    }
    return r;
  }
  Readout<T> read(const Summary& s, const Vector<T>& q) const {
    return hla2_read(q, ridge_, masked_, s.key_moment, s.query_value, s.query_mass, s.cross_value,
                     s.cross_mass);
  }

  // The adjoints, as LinearSegments' (docs/gradients.md).
  void read_adjoint(const Summary& s, const Vector<T>& q, const RowVector<T>& d_num, const T& d_den, Summary& d_s,
                    Vector<T>& d_q) const {
    hla2_read_adjoint(q, ridge_, masked_, s.key_moment, s.query_value, s.query_mass, s.cross_value, s.cross_mass,
                      d_num, d_den, d_s, d_q);
  }
  // G_AB = age G_A + G_B + S_B (rho_B C_A), h alike; the moments rho_B X_A + X_B.
  void combine_adjoint(const Summary& a, const Summary& b, const Summary& d, Summary& d_a, Summary& d_b) const {
    d_a.key_moment += b.rho * d.key_moment;
    d_a.query_value += b.rho * d.query_value;
    d_a.query_mass += b.rho * d.query_mass;
    d_b.key_moment += d.key_moment;
    d_b.query_value += d.query_value;
    d_b.query_mass += d.query_mass;
    if (!masked_) return;
    const T carried = hla2_coefficients(form_, b.rho).age;
    d_a.cross_value += carried * d.cross_value;
    d_a.cross_mass += carried * d.cross_mass;
    d_b.cross_value += d.cross_value;
    d_b.cross_mass += d.cross_mass;
    d_a.query_value += b.rho * (b.key_moment.transpose() * d.cross_value);
    d_a.query_mass += b.rho * (b.key_moment.transpose() * d.cross_mass);
    d_b.key_moment += b.rho * (d.cross_value * a.query_value.transpose() + d.cross_mass * a.query_mass.transpose());
  }
  // S = k k^T, C = q v^T, m = q.
  void token_adjoint(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v, const Summary& d,
                     TokenGradient<T>& g) const {
    g.dk += (d.key_moment + d.key_moment.transpose()) * k;
    g.dq += d.query_value * v.transpose() + d.query_mass;
    g.dv += q.transpose() * d.query_value;
  }

 private:
  Index d_, dv_;
  T gamma_, ridge_;
  bool masked_;
  Form form_;
};

template <class T>
struct Hla2MomentSummary {
  Matrix<T> key_moment;    // S^K
  Matrix<T> query_value;   // C^QV
  Vector<T> query_mass;    // m^Q
  Matrix<T> masked_value;  // F = S^K C^QV - G: the pairs with the key no later than the query
  Vector<T> masked_mass;   // f = S^K m^Q - h
  T rho;

  friend bool operator==(const Hla2MomentSummary&, const Hla2MomentSummary&) = default;
};

// Masked hla2 segments carrying F = S C - G in place of G (the read-out needs only q^T F):
//   F_AB = rho_B^2 F_A + F_B + rho_B S_A C_B,
// the pairs of A aged twice, those of B, and the new ones with the key in A and the query in B.
// Equivalent to Hla2Segments (corrected) and cheaper for the chunk-parallel form.
template <class T>
class Hla2MomentSegments {
 public:
  using Summary = Hla2MomentSummary<T>;

  Hla2MomentSegments(Index d, Index dv, const T& gamma, const T& ridge)
      : d_(d), dv_(dv), gamma_(gamma), ridge_(ridge) {}

  Summary identity() const {
    return {Matrix<T>::Zero(d_, d_),  Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),
            Matrix<T>::Zero(d_, dv_), Vector<T>::Zero(d_),      T(1)};
  }
  // A single token: F = (k k^T) q v^T, f = (k k^T) q.
  Summary token(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) const {
    const T score = k.dot(q);
    return {k * k.transpose(), q * v, q, score * (k * v), score * k, gamma_};
  }
  Summary combine(const Summary& a, const Summary& b) const {
    const Matrix<T> carried_key = b.rho * a.key_moment;  // rho_B S_A
    return {carried_key + b.key_moment,
            b.rho * a.query_value + b.query_value,
            b.rho * a.query_mass + b.query_mass,
            b.rho * b.rho * a.masked_value + b.masked_value + carried_key * b.query_value,
            b.rho * b.rho * a.masked_mass + b.masked_mass + carried_key * b.query_mass,
            a.rho * b.rho};
  }
  // num = q^T F + lambda q^T C, den = q^T f + lambda q^T m (Alg. 1's ridge).
  Readout<T> read(const Summary& s, const Vector<T>& q) const {
    return {q.transpose() * s.masked_value + ridge_ * (q.transpose() * s.query_value),
            q.dot(s.masked_mass) + ridge_ * q.dot(s.query_mass)};
  }

  // The adjoint for the chunk-parallel form's backward (chunked_gradients):
  // F_AB = rho_B^2 F_A + F_B + rho_B S_A C_B, f alike; the moments rho_B X_A + X_B.
  void combine_adjoint(const Summary& a, const Summary& b, const Summary& d, Summary& d_a,
                       Summary& d_b) const {
    const T rho2 = b.rho * b.rho;
    d_a.key_moment += b.rho * (d.key_moment + d.masked_value * b.query_value.transpose() +
                               d.masked_mass * b.query_mass.transpose());
    d_a.query_value += b.rho * d.query_value;
    d_a.query_mass += b.rho * d.query_mass;
    d_a.masked_value += rho2 * d.masked_value;
    d_a.masked_mass += rho2 * d.masked_mass;
    d_b.key_moment += d.key_moment;
    d_b.query_value += d.query_value + b.rho * (a.key_moment.transpose() * d.masked_value);
    d_b.query_mass += d.query_mass + b.rho * (a.key_moment.transpose() * d.masked_mass);
    d_b.masked_value += d.masked_value;
    d_b.masked_mass += d.masked_mass;
  }

 private:
  Index d_, dv_;
  T gamma_, ridge_;
};

}  // namespace hla::fast
