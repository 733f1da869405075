#pragma once

// hla2's chunk-parallel forms (Figure 1(C)); chunked.hpp runs them.

#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/chunked/shape.hpp"

namespace hla::fast {

namespace chunked_detail {

// The adjoint of the local metric queries U = W_g K, W_g = (Q K^T) . L_g, given dU:
// dW = (dU K^T) . L_g, dQ = dW K, dK = W_g^T dU + dW^T Q.
template <class T>
void local_adjoint(const Chunk<T>& ch, const Matrix<T>& d_local, ChunkGradients<T>& g) {
  const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
  const Matrix<T> d_w = Matrix<T>(d_local * ch.k.transpose()).cwiseProduct(ch.decay);
  g.dq += d_w * ch.k;
  g.dk += w_decayed.transpose() * d_local + d_w.transpose() * ch.q;
}

// The ridge's share of an hla2 chunk's readout, the same in both chunk forms: lambda ((Q Q^T) . L_g)
// in the weights and lambda diag(g^tau) Q (C, m) from the carry C, m of the earlier queries.
template <class T>
Matrix<T> ridge_weights(const Chunk<T>& ch, const T& ridge) {
  return ridge * Matrix<T>(ch.q * ch.q.transpose()).cwiseProduct(ch.decay);
}
template <class T>
void add_ridge_carry(const Chunk<T>& ch, const T& ridge, const Matrix<T>& query_value, const Vector<T>& query_mass,
                     Matrix<T>& num, Vector<T>& den) {
  num += ridge * scale_rows(ch.offset, Matrix<T>(ch.q * query_value));
  den += ridge * ch.offset.cwiseProduct(ch.q * query_mass);
}

// The adjoint of that share, given dA = dN V^T + dd 1^T of the weights: dQ += (dA_r + dA_r^T) Q +
// lambda diag(g^tau) (dN C^T + dd m^T) with dA_r = lambda dA . L_g; the carry's dC, dm are added
// to d_query_value, d_query_mass.
template <class T>
void ridge_adjoint(const Chunk<T>& ch, const T& ridge, const Matrix<T>& query_value, const Vector<T>& query_mass,
                   const ReadoutAdjoints<T>& d, const Matrix<T>& d_weights, Matrix<T>& dq, Matrix<T>& d_query_value,
                   Vector<T>& d_query_mass) {
  const Matrix<T> d_ridge = ridge * d_weights.cwiseProduct(ch.decay);
  const Matrix<T> offset_q = scale_rows(ch.offset, Matrix<T>(ch.q));
  dq += Matrix<T>(d_ridge + d_ridge.transpose()) * ch.q +
        ridge * scale_rows(ch.offset, Matrix<T>(d.num * query_value.transpose() + d.den * query_mass.transpose()));
  d_query_value += ridge * (offset_q.transpose() * d.num);
  d_query_mass += ridge * (offset_q.transpose() * d.den);
}

}  // namespace chunked_detail

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
    if (ridge_ != T(0)) weights += chunked_detail::ridge_weights(ch, ridge_);
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
    if (ridge_ != T(0)) chunked_detail::add_ridge_carry(ch, ridge_, p.query_value, p.query_mass, num, den);
    if (!masked_) {  // unmasked: also the chunk's keys with the earlier queries (U's rows: q_t^T S_loc,t)
      num += chunked_detail::scale_rows(ch.offset, Matrix<T>(u * p.query_value));
      den += ch.offset.cwiseProduct(u * p.query_mass);
    }
    return {num, den};
  }

  // outputs(), with A the weights, dA = dN V^T + dd 1^T, U = W_g K, and the carried terms'
  // dN_c = diag(g^(2 tau)) dN, dd_c = g^(2 tau) . dd: dV = A^T dN; d(Q S) = dN_c C^T + dd_c m^T,
  // dC = (Q S)^T dN_c, dm = (Q S)^T dd_c. Masked (A = (Q U^T) . L_g . L_g, carried - Q G):
  // B = dA . L_g . L_g, dQ = B U - dN_c G^T - dd_c h^T, dU = B^T Q, dG = -Q^T dN_c, dh = -Q^T dd_c.
  // Unmasked (A = (U Q^T) . L_g + diag(g^tau) ((Q S) Q^T) . L_g, + diag(g^tau) U (C, m)):
  // B = dA . L_g, dU = B Q + diag(g^tau) (dN C^T + dd m^T), dQ = B^T U + B_g^T (Q S),
  // d(Q S) += B_g Q with B_g = diag(g^tau) B, dC, dm += (diag(g^tau) U)^T (dN, dd). Ridge as
  // Hla2MaskedChunks'. Then dQ += d(Q S) S^T, dS = Q^T d(Q S), and W_g K's adjoint of dU.
  Summary outputs_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& p,
                          const chunked_detail::ReadoutAdjoints<T>& d,
                          chunked_detail::ChunkGradients<T>& g) const {
    using chunked_detail::scale_rows;
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    const Matrix<T> u = w_decayed.template triangularView<Eigen::Lower>() * ch.k;
    const Matrix<T> metric_queries = ch.q * p.key_moment;
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    const Matrix<T> d_num_carried = scale_rows(offset2, Matrix<T>(d.num));
    const Vector<T> d_den_carried = offset2.cwiseProduct(d.den);
    Matrix<T> d_weights = d.num * ch.v.transpose();
    d_weights.colwise() += d.den;
    Matrix<T> weights, dq, d_u,
        d_metric_queries =
            d_num_carried * p.query_value.transpose() + d_den_carried * p.query_mass.transpose();
    Summary d_carry{Matrix<T>(),
                    metric_queries.transpose() * d_num_carried,
                    metric_queries.transpose() * d_den_carried,
                    Matrix<T>::Zero(p.cross_value.rows(), p.cross_value.cols()),
                    Vector<T>::Zero(p.cross_mass.size()),
                    T(1)};
    if (masked_) {
      weights = Matrix<T>(ch.q * u.transpose()).cwiseProduct(ch.decay).cwiseProduct(ch.decay);
      const Matrix<T> b = d_weights.cwiseProduct(ch.decay).cwiseProduct(ch.decay);
      dq = b * u - d_num_carried * p.cross_value.transpose() - d_den_carried * p.cross_mass.transpose();
      d_u = b.transpose() * ch.q;
      d_carry.cross_value = -(ch.q.transpose() * d_num_carried);
      d_carry.cross_mass = -(ch.q.transpose() * d_den_carried);
    } else {
      const Matrix<T> offset_u = scale_rows(ch.offset, u);
      const Matrix<T> cross = Matrix<T>(metric_queries * ch.q.transpose()).cwiseProduct(ch.decay);
      weights = Matrix<T>(u * ch.q.transpose()).cwiseProduct(ch.decay) + scale_rows(ch.offset, cross);
      const Matrix<T> b = d_weights.cwiseProduct(ch.decay);
      const Matrix<T> b_offset = scale_rows(ch.offset, b);
      dq = b.transpose() * u + b_offset.transpose() * metric_queries;
      d_metric_queries += b_offset * ch.q;
      d_u = b * ch.q + scale_rows(ch.offset, Matrix<T>(d.num * p.query_value.transpose() +
                                                       d.den * p.query_mass.transpose()));
      d_carry.query_value += offset_u.transpose() * d.num;
      d_carry.query_mass += offset_u.transpose() * d.den;
    }
    if (ridge_ != T(0)) {
      weights += chunked_detail::ridge_weights(ch, ridge_);
      chunked_detail::ridge_adjoint(ch, ridge_, p.query_value, p.query_mass, d, d_weights, dq, d_carry.query_value,
                                    d_carry.query_mass);
    }
    dq += d_metric_queries * p.key_moment.transpose();
    d_carry.key_moment = ch.q.transpose() * d_metric_queries;
    g.dq += dq;
    g.dv += weights.transpose() * d.num;
    chunked_detail::local_adjoint(ch, d_u, g);
    return d_carry;
  }

  // summary(), with D = diag(age): dK = D K (dS + dS^T), dQ = D (V dC^T + 1 dm^T), dV = D Q dC;
  // masked, with M = (D K (D Q)^T) . strict: dK += (M V) dG^T + (M 1) dh^T, dV += M^T K dG, and
  // dM = (K dG V^T + K dh 1^T) . strict gives dK += D dM (D Q), dQ += D dM^T (D K).
  void summary_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& d,
                       chunked_detail::ChunkGradients<T>& g) const {
    const Vector<T> age = ch.age.transpose();
    const Matrix<T> kd = age.asDiagonal() * ch.k;
    const Matrix<T> qd = age.asDiagonal() * ch.q;
    g.dk += kd * Matrix<T>(d.key_moment + d.key_moment.transpose());
    g.dq += age.asDiagonal() * Matrix<T>(ch.v * d.query_value.transpose() +
                                         Vector<T>::Ones(ch.q.rows()) * d.query_mass.transpose());
    g.dv += qd * d.query_value;
    if (!masked_) return;
    const Matrix<T> m = Matrix<T>(kd * qd.transpose()).cwiseProduct(ch.strict);
    const Matrix<T> d_cross_tokens = ch.k * d.cross_value;  // d(M V)
    const Vector<T> d_cross_ones = ch.k * d.cross_mass;
    g.dk += Matrix<T>(m * ch.v) * d.cross_value.transpose() +
            Vector<T>(m.rowwise().sum()) * d.cross_mass.transpose();
    g.dv += m.transpose() * d_cross_tokens;
    Matrix<T> d_m = d_cross_tokens * ch.v.transpose();
    d_m.colwise() += d_cross_ones;
    d_m = d_m.cwiseProduct(ch.strict);
    g.dk += age.asDiagonal() * Matrix<T>(d_m * qd);
    g.dq += age.asDiagonal() * Matrix<T>(d_m.transpose() * kd);
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
    if (ridge_ != T(0)) weights += chunked_detail::ridge_weights(ch, ridge_);
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    Matrix<T> num = weights * ch.v + chunked_detail::scale_rows(offset2, Matrix<T>(ch.q * p.masked_value));
    Vector<T> den = weights.rowwise().sum() + offset2.cwiseProduct(ch.q * p.masked_mass);
    if (ridge_ != T(0)) chunked_detail::add_ridge_carry(ch, ridge_, p.query_value, p.query_mass, num, den);
    return {num, den};
  }

  // outputs(), with U = diag(g^tau) Q S + W_g K (the metric queries), A its weights and
  // dA = dN V^T + dd 1^T: dV = A^T dN; dQ = (dA . L_g . L_g) U + diag(g^(2 tau)) (dN F^T + dd f^T)
  // + diag(g^tau) dU S^T (+ ridge: (dA_r + dA_r^T) Q + lambda diag(g^tau) (dN C^T + dd m^T) with
  // dA_r = lambda dA . L_g), dU = (dA . L_g . L_g)^T Q, then W_g K's adjoint. The carry's:
  // dS = (diag(g^tau) Q)^T dU, dF, df = (diag(g^(2 tau)) Q)^T (dN, dd), dC, dm = lambda (diag(g^tau) Q)^T
  // (dN, dd).
  Summary outputs_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& p,
                          const chunked_detail::ReadoutAdjoints<T>& d,
                          chunked_detail::ChunkGradients<T>& g) const {
    const Matrix<T> offset_q = chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q));
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    const Matrix<T> offset2_q = chunked_detail::scale_rows(offset2, Matrix<T>(ch.q));
    const Matrix<T> metric_queries = offset_q * p.key_moment + local_metric_queries_[ch.index];
    Matrix<T> d_weights = d.num * ch.v.transpose();
    d_weights.colwise() += d.den;
    const Matrix<T> d_second = d_weights.cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    Matrix<T> weights =
        Matrix<T>(ch.q * metric_queries.transpose()).cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    const Matrix<T> d_metric_queries = d_second.transpose() * ch.q;
    Matrix<T> dq =
        d_second * metric_queries +
        chunked_detail::scale_rows(
            offset2, Matrix<T>(d.num * p.masked_value.transpose() + d.den * p.masked_mass.transpose())) +
        chunked_detail::scale_rows(ch.offset, Matrix<T>(d_metric_queries * p.key_moment.transpose()));
    Summary d_carry{offset_q.transpose() * d_metric_queries,
                    Matrix<T>::Zero(p.query_value.rows(), p.query_value.cols()),
                    Vector<T>::Zero(p.query_mass.size()),
                    offset2_q.transpose() * d.num,
                    offset2_q.transpose() * d.den,
                    T(1)};
    if (ridge_ != T(0)) {
      weights += chunked_detail::ridge_weights(ch, ridge_);
      chunked_detail::ridge_adjoint(ch, ridge_, p.query_value, p.query_mass, d, d_weights, dq, d_carry.query_value,
                                    d_carry.query_mass);
    }
    g.dq += dq;
    g.dv += weights.transpose() * d.num;
    chunked_detail::local_adjoint(ch, d_metric_queries, g);
    return d_carry;
  }

  // summary(), with D = diag(age): dK = D K (dS + dS^T), dQ = D (V dC^T + 1 dm^T),
  // dV = D Q dC + D^2 U dF, and U = W_g K's adjoint D^2 (V dF^T + 1 df^T).
  void summary_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& d,
                       chunked_detail::ChunkGradients<T>& g) const {
    const Vector<T> age = ch.age.transpose();
    const Vector<T> age2 = age.cwiseProduct(age);
    const Vector<T> ones = Vector<T>::Ones(ch.q.rows());
    g.dk += age.asDiagonal() * Matrix<T>(ch.k * Matrix<T>(d.key_moment + d.key_moment.transpose()));
    g.dq += age.asDiagonal() * Matrix<T>(ch.v * d.query_value.transpose() + ones * d.query_mass.transpose());
    g.dv += age.asDiagonal() * Matrix<T>(ch.q * d.query_value) +
            age2.asDiagonal() * Matrix<T>(local_metric_queries_[ch.index] * d.masked_value);
    chunked_detail::local_adjoint(ch,
                                  Matrix<T>(age2.asDiagonal() * Matrix<T>(ch.v * d.masked_value.transpose() +
                                                                          ones * d.masked_mass.transpose())),
                                  g);
  }

 private:
  T gamma_, ridge_;
  Segments segments_;
  mutable std::vector<Matrix<T>> local_metric_queries_;  // W_g K per chunk; each chunk writes its own
};

}  // namespace hla::fast
