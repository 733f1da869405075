#pragma once

// Masked third-order HLA's chunk-parallel form, corrected (docs/findings.md, F2; the paper draws no
// chunk form for hla3): the algebra a chunk of the fast path would run, and masked hla3's
// `--impl chunked` (chunked.hpp's pass runs it, forward and backward).

#include "hla/fast/algebra/hla3.hpp"
#include "hla/fast/chunked/shape.hpp"

namespace hla::fast {

// From Hla3CorrectedStream's recurrence F_t = g^3 F_{t-1} + z_t r_t^T with z_t = S^K_t q_t and
// r_t = q_t^T P_t: with A = Q K^T, L_g the chunk's decayed causal mask and the carry (S^K, P, m, F,
// eta) of the tokens before the chunk, aged to its start, the chunk's token at tau = 1..C reads
//   Z = diag(g^tau) Q S^K + (A . L_g) K,   R = diag(g^tau) Q P + (A . L_g) V,
//   x = diag(g^tau) Q m + (A . L_g) 1,
//   num = diag(g^(3 tau)) Q F + ((Q Z^T) . L_g^3) R,   den = diag(g^(3 tau)) Q eta + ((Q Z^T) . L_g^3) x
// (L_g^3 entrywise: g^(3 (t - u)) for u <= t). The chunk's own summary in Hla3Segments' fields, with
// Z0, R0, x0 the same from a zero carry and D = diag(g^(C - tau)):
//   S^K = K^T D K, S^Q = Q^T D Q, P = K^T D V, m = K^T D 1,
//   F = Z0^T D^3 R0, eta = Z0^T D^3 x0, X = Q^T D^2 R0, x = Q^T D^2 x0, Y = Z0^T D^2 Q.
// Per chunk eleven products of C x d by d x C or C x C by C x d shapes.
template <class T>
class Hla3MaskedChunks {
 public:
  using Segments = Hla3Segments<T>;
  using Summary = typename Segments::Summary;

  static constexpr AlgebraId id = AlgebraId::hla3;
  explicit Hla3MaskedChunks(const AlgebraParams<T>& p)
      : gamma_(p.gamma), segments_(p.d, p.dv, p.gamma, true) {
    if (!p.masked) throw Error("the third-order chunk form is the masked operator's");
  }

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Local local = local_terms(ch, scores(ch));
    const Vector<T> age = ch.age.transpose();
    const Vector<T> age2 = age.cwiseProduct(age), age3 = age2.cwiseProduct(age);
    const Matrix<T> kd = age.asDiagonal() * ch.k;  // D K
    const Matrix<T> z3 = age3.asDiagonal() * local.z;
    const Matrix<T> q2 = age2.asDiagonal() * ch.q;
    return {ch.k.transpose() * kd,
            ch.q.transpose() * (age.asDiagonal() * ch.q),
            kd.transpose() * ch.v,
            kd.transpose() * Vector<T>::Ones(ch.q.rows()),
            z3.transpose() * local.r,
            z3.transpose() * local.x,
            q2.transpose() * local.r,
            q2.transpose() * local.x,
            Matrix<T>(age2.asDiagonal() * local.z).transpose() * ch.q,
            ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    using chunked_detail::scale_rows;
    const auto [z, r, x] = carried(ch, p, local_terms(ch, scores(ch)));
    const Vector<T> offset3 = ch.offset.cwiseProduct(ch.offset).cwiseProduct(ch.offset);
    const Matrix<T> weights =
        Matrix<T>(ch.q * z.transpose()).cwiseProduct(ch.decay).cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    return {scale_rows(offset3, Matrix<T>(ch.q * p.corrected_value)) + weights * r,
            offset3.cwiseProduct(ch.q * p.corrected_mass) + weights * x};
  }

  // outputs(), with O = diag(g^tau), O3 = diag(g^(3 tau)), M = (Q Z^T) . L_g^3, W = A . L_g:
  //   dF = Q^T O3 dN, deta = Q^T O3 dd, dM = (dN R^T + dd x^T) . L_g^3, dR = M^T dN, dx = M^T dd,
  //   dZ = dM^T Q, dS = dZ^T O Q, dP = Q^T O dR, dm = Q^T O dx,
  //   dW = dZ K^T + dR V^T + dx 1^T, dQ = O3 (dN F^T + dd eta^T) + dM Z + O (dZ S + dR P^T + dx m^T)
  //   + (dW . L_g) K, dK = W^T dZ + (dW . L_g)^T Q, dV = W^T dR.
  Summary outputs_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& p,
                          const chunked_detail::ReadoutAdjoints<T>& d,
                          chunked_detail::ChunkGradients<T>& g) const {
    using chunked_detail::scale_rows;
    const Matrix<T> w = scores(ch);
    const auto [z, r, x] = carried(ch, p, local_terms(ch, w));
    const Vector<T> offset3 = ch.offset.cwiseProduct(ch.offset).cwiseProduct(ch.offset);
    const Matrix<T> decay3 = ch.decay.cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    const Matrix<T> weights = Matrix<T>(ch.q * z.transpose()).cwiseProduct(decay3);
    const Matrix<T> d_num3 = scale_rows(offset3, Matrix<T>(d.num));
    const Vector<T> d_den3 = offset3.cwiseProduct(d.den);
    const Matrix<T> d_weights = Matrix<T>(d.num * r.transpose() + d.den * x.transpose()).cwiseProduct(decay3);
    const Matrix<T> d_r = weights.transpose() * d.num;
    const Vector<T> d_x = weights.transpose() * d.den;
    const Matrix<T> d_z = d_weights.transpose() * ch.q;
    const Matrix<T> d_z_offset = scale_rows(ch.offset, d_z), d_r_offset = scale_rows(ch.offset, d_r);
    const Vector<T> d_x_offset = ch.offset.cwiseProduct(d_x);
    Matrix<T> d_w = d_z * ch.k.transpose() + d_r * ch.v.transpose();
    d_w.colwise() += d_x;
    const Matrix<T> d_scores = d_w.cwiseProduct(ch.decay);
    g.dq += d_num3 * p.corrected_value.transpose() + d_den3 * p.corrected_mass.transpose() + d_weights * z +
            d_z_offset * p.key_moment + d_r_offset * p.key_value.transpose() +
            d_x_offset * p.key_mass.transpose() + d_scores * ch.k;
    g.dk += w.transpose() * d_z + d_scores.transpose() * ch.q;
    g.dv += w.transpose() * d_r;
    Summary d_carry = segments_.identity();
    d_carry.key_moment = d_z_offset.transpose() * ch.q;
    d_carry.key_value = ch.q.transpose() * d_r_offset;
    d_carry.key_mass = ch.q.transpose() * d_x_offset;
    d_carry.corrected_value = ch.q.transpose() * d_num3;
    d_carry.corrected_mass = ch.q.transpose() * d_den3;
    return d_carry;
  }

  // summary(), with D = diag(g^(C - tau)) and the local Z0 = W K, R0 = W V, x0 = W 1:
  //   dK = D K (dS^K + dS^K^T) + D (V dP^T + 1 dm^T) + W^T dZ0 + (dW . L_g)^T Q,
  //   dQ = D Q (dS^Q + dS^Q^T) + D^2 (R0 dX^T + x0 dx^T + Z0 dY) + (dW . L_g) K,
  //   dV = D K dP + W^T dR0, with dZ0 = D^3 (R0 dF^T + x0 deta^T) + D^2 Q dY^T,
  //   dR0 = D^3 Z0 dF + D^2 Q dX, dx0 = D^3 Z0 deta + D^2 Q dx, dW = dZ0 K^T + dR0 V^T + dx0 1^T.
  void summary_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& d,
                       chunked_detail::ChunkGradients<T>& g) const {
    const Matrix<T> w = scores(ch);
    const Local local = local_terms(ch, w);
    const Vector<T> age = ch.age.transpose();
    const Vector<T> age2 = age.cwiseProduct(age), age3 = age2.cwiseProduct(age);
    const Matrix<T> kd = age.asDiagonal() * ch.k;
    const Matrix<T> q2 = age2.asDiagonal() * ch.q;
    const Matrix<T> z3 = age3.asDiagonal() * local.z;
    const Matrix<T> d_z = age3.asDiagonal() * Matrix<T>(local.r * d.corrected_value.transpose() +
                                                        local.x * d.corrected_mass.transpose()) +
                          q2 * d.key_query.transpose();
    const Matrix<T> d_r = z3 * d.corrected_value + q2 * d.query_value;
    const Vector<T> d_x = z3 * d.corrected_mass + q2 * d.query_mass;
    Matrix<T> d_w = d_z * ch.k.transpose() + d_r * ch.v.transpose();
    d_w.colwise() += d_x;
    const Matrix<T> d_scores = d_w.cwiseProduct(ch.decay);
    g.dk += kd * Matrix<T>(d.key_moment + d.key_moment.transpose()) +
            age.asDiagonal() * Matrix<T>(ch.v * d.key_value.transpose() +
                                         Vector<T>::Ones(ch.q.rows()) * d.key_mass.transpose()) +
            w.transpose() * d_z + d_scores.transpose() * ch.q;
    g.dq += age.asDiagonal() * Matrix<T>(ch.q * Matrix<T>(d.query_moment + d.query_moment.transpose())) +
            age2.asDiagonal() * Matrix<T>(local.r * d.query_value.transpose() +
                                          local.x * d.query_mass.transpose() + local.z * d.key_query) +
            d_scores * ch.k;
    g.dv += kd * d.key_value + w.transpose() * d_r;
  }

 private:
  // Rows z_t, r_t, x_t of a chunk; local_terms gives its own shares, from a zero carry:
  // Z0 = (A . L_g) K, R0 = (A . L_g) V, x0 = (A . L_g) 1.
  struct Local {
    Matrix<T> z, r;
    Vector<T> x;
  };
  // W = A . L_g, the chunk's decayed scores.
  static Matrix<T> scores(const chunked_detail::Chunk<T>& ch) {
    return Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
  }
  static Local local_terms(const chunked_detail::Chunk<T>& ch, const Matrix<T>& w) {
    return {w * ch.k, w * ch.v, w.rowwise().sum()};
  }
  // Z, R, x with the carry: the local rows plus diag(g^tau) Q S^K^T (as rows, whatever the carry's
  // symmetry), diag(g^tau) Q P and diag(g^tau) Q m.
  static Local carried(const chunked_detail::Chunk<T>& ch, const Summary& p, const Local& local) {
    using chunked_detail::scale_rows;
    return {scale_rows(ch.offset, Matrix<T>(ch.q * p.key_moment.transpose())) + local.z,
            scale_rows(ch.offset, Matrix<T>(ch.q * p.key_value)) + local.r,
            ch.offset.cwiseProduct(ch.q * p.key_mass) + local.x};
  }

  T gamma_;
  Segments segments_;
};

}  // namespace hla::fast
