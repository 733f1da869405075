#pragma once

// Masked third-order HLA's chunk-parallel form, corrected (docs/findings.md, F2; the paper draws no
// chunk form for hla3): the algebra a chunk of the fast path would run. chunked.hpp's pass runs it;
// the catalogue does not offer it yet (`--impl chunked` refuses hla3 until its backward and its
// rounding depth exist).

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
    const Local local = local_terms(ch);
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
    const Local local = local_terms(ch);
    // (S^K q_t)^T as rows: Q S^K^T, whatever the carry's symmetry.
    const Matrix<T> z = scale_rows(ch.offset, Matrix<T>(ch.q * p.key_moment.transpose())) + local.z;
    const Matrix<T> r = scale_rows(ch.offset, Matrix<T>(ch.q * p.key_value)) + local.r;
    const Vector<T> x = ch.offset.cwiseProduct(ch.q * p.key_mass) + local.x;
    const Vector<T> offset3 = ch.offset.cwiseProduct(ch.offset).cwiseProduct(ch.offset);
    const Matrix<T> weights =
        Matrix<T>(ch.q * z.transpose()).cwiseProduct(ch.decay).cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    return {scale_rows(offset3, Matrix<T>(ch.q * p.corrected_value)) + weights * r,
            offset3.cwiseProduct(ch.q * p.corrected_mass) + weights * x};
  }

 private:
  // The chunk's own shares, from a zero carry: Z0 = (A . L_g) K, R0 = (A . L_g) V, x0 = (A . L_g) 1.
  struct Local {
    Matrix<T> z, r;
    Vector<T> x;
  };
  static Local local_terms(const chunked_detail::Chunk<T>& ch) {
    const Matrix<T> w = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    return {w * ch.k, w * ch.v, w.rowwise().sum()};
  }

  T gamma_;
  Segments segments_;
};

}  // namespace hla::fast
