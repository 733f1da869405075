#pragma once

// ahla's chunk-parallel form (Figure 2(C)); chunked.hpp runs it.

#include "hla/fast/algebra/ahla.hpp"
#include "hla/fast/chunked/shape.hpp"

namespace hla::fast {

// ahla (masked, decay), corrected or as printed in Figure 2(C).
template <class T>
class AhlaChunks {
 public:
  using Segments = AhlaSegments<T>;
  using Summary = typename Segments::Summary;

  static constexpr AlgebraId id = AlgebraId::ahla;
  explicit AhlaChunks(const AlgebraParams<T>& p)
      : routes_own_token_(ahla_coefficients(p.form, T(1)).routes_own_token),
        gamma_(p.gamma),
        segments_(p.d, p.dv, gamma_, Form::corrected) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  // R = K^T Q, P = K^T D V, m = K^T D 1, E = K^T D (W_g V), n = K^T D (W_g 1).
  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    return {ch.k.transpose() * ch.q,
            kd.transpose() * ch.v,
            kd.transpose() * Vector<T>::Ones(ch.q.rows()),
            kd.transpose() * (w_decayed * ch.v),
            kd.transpose() * w_decayed.rowwise().sum(),
            ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> a = ch.q * ch.k.transpose();
    const Matrix<T> w_decayed = a.cwiseProduct(ch.decay);
    // intra: [(A A) . L] V = A (A V) with A = L_g . Q K^T lower triangular: no C x C by C x C product.
    const auto lower = w_decayed.template triangularView<Eigen::Lower>();
    const Matrix<T> routed_tokens = lower * ch.v;
    const Vector<T> routed_ones = w_decayed.rowwise().sum();
    // carry: g^tau q_t^T (E + R_{<=t} P); Figure 2(C) prints R_{<t} (F6).
    const Matrix<T> routed = a.cwiseProduct(routes_own_token_ ? ch.causal : ch.strict);
    const Matrix<T> carry_value = ch.q * p.routed_value + routed * (ch.q * p.key_value);
    const Vector<T> carry_mass = ch.q * p.routed_mass + routed * (ch.q * p.key_mass);
    return {Matrix<T>(lower * routed_tokens) + chunked_detail::scale_rows(ch.offset, carry_value),
            Vector<T>(lower * routed_ones) + ch.offset.cwiseProduct(carry_mass)};
  }

  // outputs(), with W = W_g, Y = W V, y = W 1, R = (Q K^T) . mask (the routed pairs), and
  // dN_g = diag(g^tau) dN, dd_g = g^tau . dd (the carry term's):
  //   dY = W^T dN, dy = W^T dd, dV = W^T dY, d(QP) = R^T dN_g, d(Qm) = R^T dd_g,
  //   dA = (dN Y^T + dd y^T + dY V^T + dy 1^T) . L_g + (dN_g (QP)^T + dd_g (Qm)^T) . mask,
  //   dQ = dA K + dN_g E^T + dd_g n^T + d(QP) P^T + d(Qm) m^T, dK = dA^T Q (A = Q K^T);
  // the carry's dE = Q^T dN_g, dn = Q^T dd_g, dP = Q^T d(QP), dm = Q^T d(Qm); its R is not read.
  Summary outputs_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& p,
                          const chunked_detail::ReadoutAdjoints<T>& d,
                          chunked_detail::ChunkGradients<T>& g) const {
    const Matrix<T> a = ch.q * ch.k.transpose();
    const Matrix<T> w_decayed = a.cwiseProduct(ch.decay);
    const Matrix<T>& mask = routes_own_token_ ? ch.causal : ch.strict;
    const Matrix<T> routed = a.cwiseProduct(mask);
    const Matrix<T> routed_tokens = w_decayed * ch.v;  // Y
    const Vector<T> routed_ones = w_decayed.rowwise().sum();
    const Matrix<T> d_routed_tokens = w_decayed.transpose() * d.num;
    const Vector<T> d_routed_ones = w_decayed.transpose() * d.den;
    const Matrix<T> d_num_carry = chunked_detail::scale_rows(ch.offset, Matrix<T>(d.num));
    const Vector<T> d_den_carry = ch.offset.cwiseProduct(d.den);
    const Matrix<T> query_values = ch.q * p.key_value;  // Q P
    const Vector<T> query_masses = ch.q * p.key_mass;
    const Matrix<T> d_query_values = routed.transpose() * d_num_carry;
    const Vector<T> d_query_masses = routed.transpose() * d_den_carry;
    Matrix<T> d_weights = d.num * routed_tokens.transpose() + d.den * routed_ones.transpose() +
                          d_routed_tokens * ch.v.transpose();
    d_weights.colwise() += d_routed_ones;
    const Matrix<T> d_routed =
        d_num_carry * query_values.transpose() + d_den_carry * query_masses.transpose();
    scores_adjoint(ch, Matrix<T>(d_weights.cwiseProduct(ch.decay) + d_routed.cwiseProduct(mask)), g);
    g.dq += d_num_carry * p.routed_value.transpose() + d_den_carry * p.routed_mass.transpose() +
            d_query_values * p.key_value.transpose() + d_query_masses * p.key_mass.transpose();
    g.dv += w_decayed.transpose() * d_routed_tokens;
    Summary d_carry = segments_.identity();
    d_carry.key_value = ch.q.transpose() * d_query_values;
    d_carry.key_mass = ch.q.transpose() * d_query_masses;
    d_carry.routed_value = ch.q.transpose() * d_num_carry;
    d_carry.routed_mass = ch.q.transpose() * d_den_carry;
    return d_carry;
  }

  // summary(), with D = diag(age): dK = Q dR^T + D (V dP^T + 1 dm^T + Y dE^T + y dn^T), dQ = K dR,
  // dV = D K dP + W^T dY, and through Y = W V, y = W 1 with dY = D K dE, dy = D K dn:
  // dA = (dY V^T + dy 1^T) . L_g.
  void summary_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& d,
                       chunked_detail::ChunkGradients<T>& g) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    const Matrix<T> routed_tokens = w_decayed * ch.v;
    const Vector<T> routed_ones = w_decayed.rowwise().sum();
    const Matrix<T> d_routed_tokens = kd * d.routed_value;
    const Vector<T> d_routed_ones = kd * d.routed_mass;
    g.dk +=
        ch.q * d.key_query.transpose() +
        ch.age.asDiagonal() *
            Matrix<T>(ch.v * d.key_value.transpose() + Vector<T>::Ones(ch.q.rows()) * d.key_mass.transpose() +
                      routed_tokens * d.routed_value.transpose() + routed_ones * d.routed_mass.transpose());
    g.dq += ch.k * d.key_query;
    g.dv += kd * d.key_value + w_decayed.transpose() * d_routed_tokens;
    Matrix<T> d_weights = d_routed_tokens * ch.v.transpose();
    d_weights.colwise() += d_routed_ones;
    scores_adjoint(ch, Matrix<T>(d_weights.cwiseProduct(ch.decay)), g);
  }

 private:
  // The adjoint of the scores A = Q K^T given dA.
  static void scores_adjoint(const chunked_detail::Chunk<T>& ch, const Matrix<T>& d_scores,
                             chunked_detail::ChunkGradients<T>& g) {
    g.dq += d_scores * ch.k;
    g.dk += d_scores.transpose() * ch.q;
  }

  bool routes_own_token_;
  T gamma_;
  Segments segments_;
};

}  // namespace hla::fast
