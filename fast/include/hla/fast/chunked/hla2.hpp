#pragma once

// hla2's chunk-parallel forms (Figure 1(C)); chunked.hpp runs them.

#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/chunked/shape.hpp"

namespace hla::fast {

// hla2 unmasked (ridge, decay), and masked as printed in Figure 1(C): carry and intra term only,
// without the cross term (F5). The corrected masked form is Hla2MaskedChunks.
template <class T>
class Hla2Chunks {
 public:
  using Segments = Hla2Segments<T>;
  using Summary = typename Segments::Summary;

  static constexpr AlgebraId id = AlgebraId::hla2;
  explicit Hla2Chunks(const AlgebraParams<T>& p)
      : masked_(p.masked),
        gamma_(p.gamma),
        ridge_(p.ridge),
        segments_(p.d, p.dv, gamma_, ridge_, masked_, Form::corrected) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  // The chunk's own summary, from matrix products: S = K^T D K, C = Q^T D V, m = Q^T D 1, and
  // G = K^T M V, h = K^T M 1 with M_ij = g^((end-i)+(end-j)) (k_i . q_j) for j < i.
  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;  // D K
    const Matrix<T> qd = ch.age.asDiagonal() * ch.q;
    Summary s{ch.k.transpose() * kd, qd.transpose() * ch.v, qd.transpose() * Vector<T>::Ones(ch.q.rows()),
              Matrix<T>(),           Vector<T>(),           ch.rho};
    if (masked_) {
      const Matrix<T> m = Matrix<T>(kd * qd.transpose()).cwiseProduct(ch.strict);
      s.cross_value = ch.k.transpose() * (m * ch.v);
      s.cross_mass = ch.k.transpose() * m.rowwise().sum();
    } else {
      s.cross_value = Matrix<T>::Zero(ch.q.cols(), ch.v.cols());
      s.cross_mass = Vector<T>::Zero(ch.q.cols());
    }
    return s;
  }

  // num (C x dv) and den (C) of the chunk given the carry-in summary p of all earlier tokens.
  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);  // W_g
    // intra: [(W_g W^T) . L_g] without a C x C by C x C product. With U = W_g K (row t:
    // sum_{i<=t} g^(t-i) (q_t . k_i) k_i), the masked weight of (t, j) is g^(2(t-j)) q_t . u_j (the
    // sum over i <= j of row j), the unmasked one g^(t-j) u_t . q_j (the sum over i <= t of row t).
    const Matrix<T> u = w_decayed.template triangularView<Eigen::Lower>() * ch.k;
    Matrix<T> weights =
        masked_ ? Matrix<T>(Matrix<T>(ch.q * u.transpose()).cwiseProduct(ch.decay)).cwiseProduct(ch.decay)
                : Matrix<T>(Matrix<T>(u * ch.q.transpose()).cwiseProduct(ch.decay));
    if (ridge_ != T(0)) weights += ridge_ * Matrix<T>(ch.q * ch.q.transpose()).cwiseProduct(ch.decay);
    const Matrix<T> metric_queries = ch.q * p.key_moment;  // rows q_t^T S
    if (!masked_) {  // cross: g^tau q_t^T S sum_{j<=t} g^(t-j) q_j v_j^T
      weights += chunked_detail::scale_rows(
          ch.offset, Matrix<T>(Matrix<T>(metric_queries * ch.q.transpose()).cwiseProduct(ch.decay)));
    }
    // carry: g^(2 tau) q_t^T (S C - G) (+ ridge: g^tau lambda q_t^T C)
    Matrix<T> carried = metric_queries * p.query_value;
    Vector<T> carried_mass = metric_queries * p.query_mass;
    if (masked_) {
      carried -= ch.q * p.cross_value;
      carried_mass -= ch.q * p.cross_mass;
    }
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    Matrix<T> num = weights * ch.v + chunked_detail::scale_rows(offset2, carried);
    Vector<T> den = weights.rowwise().sum() + offset2.cwiseProduct(carried_mass);
    if (ridge_ != T(0)) {
      num += ridge_ * chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.query_value));
      den += ridge_ * ch.offset.cwiseProduct(ch.q * p.query_mass);
    }
    if (!masked_) {  // unmasked: also the chunk's keys with the earlier queries (U's rows: q_t^T S_loc,t)
      num += chunked_detail::scale_rows(ch.offset, Matrix<T>(u * p.query_value));
      den += ch.offset.cwiseProduct(u * p.query_mass);
    }
    return {num, den};
  }

 private:
  bool masked_;
  T gamma_, ridge_;
  Segments segments_;
};

// Masked hla2, corrected, in the form that needs fewest products. With u_j = S^K_j q_j (the
// inclusive key moment at j), the weight g^((t-i)+(t-j)) over i <= j gives
//   o_t = sum_{j<=t} g^(2(t-j)) (q_t . u_j) v_j,
// and the chunk scan carries F = S C - G, the i <= j part of S C (Hla2MomentSegments), so the carry
// is g^(2 tau) q_t^T F. Within a chunk u_j = g^tau S q_j + (W_g K)_j; W_g K is computed once, in the
// summary pass, and kept for the output pass.
template <class T>
class Hla2MaskedChunks {
 public:
  using Segments = Hla2MomentSegments<T>;
  using Summary = typename Segments::Summary;

  static constexpr AlgebraId id = AlgebraId::hla2_moments;
  explicit Hla2MaskedChunks(const AlgebraParams<T>& p)
      : gamma_(p.gamma), ridge_(p.ridge), segments_(p.d, p.dv, gamma_, ridge_) {}

  // Room for each chunk's W_g K, kept from the summary pass for the output pass.
  void reserve(Index chunks) { local_metric_queries_.resize(chunks); }

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  // S = K^T D K, C = Q^T D V, m = Q^T D 1, F = U^T D^2 V, f = U^T D^2 1 with U = W_g K.
  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    Matrix<T>& u = local_metric_queries_[ch.index];
    u = w_decayed.template triangularView<Eigen::Lower>() * ch.k;  // rows q_j^T S_loc,j
    const Vector<T> age = ch.age.transpose();
    const Vector<T> age2 = age.cwiseProduct(age);
    const Matrix<T> qd = age.asDiagonal() * ch.q;
    const Matrix<T> ud = age2.asDiagonal() * u;
    return {ch.k.transpose() * (age.asDiagonal() * ch.k),  qd.transpose() * ch.v,
            qd.transpose() * Vector<T>::Ones(ch.q.rows()), ud.transpose() * ch.v,
            ud.transpose() * Vector<T>::Ones(ch.q.rows()), ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> metric_queries =  // rows u_j^T = q_j^T S_j
        chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.key_moment)) +
        local_metric_queries_[ch.index];
    Matrix<T> weights =
        Matrix<T>(ch.q * metric_queries.transpose()).cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    if (ridge_ != T(0)) weights += ridge_ * Matrix<T>(ch.q * ch.q.transpose()).cwiseProduct(ch.decay);
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    Matrix<T> num = weights * ch.v + chunked_detail::scale_rows(offset2, Matrix<T>(ch.q * p.masked_value));
    Vector<T> den = weights.rowwise().sum() + offset2.cwiseProduct(ch.q * p.masked_mass);
    if (ridge_ != T(0)) {
      num += ridge_ * chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.query_value));
      den += ridge_ * ch.offset.cwiseProduct(ch.q * p.query_mass);
    }
    return {num, den};
  }

 private:
  T gamma_, ridge_;
  Segments segments_;
  mutable std::vector<Matrix<T>> local_metric_queries_;  // W_g K per chunk; each chunk writes its own
};

}  // namespace hla::fast
