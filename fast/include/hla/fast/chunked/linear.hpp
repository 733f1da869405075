#pragma once

// Linear attention's chunk-parallel form; chunked.hpp runs it.

#include "hla/fast/algebra/linear.hpp"
#include "hla/fast/chunked/shape.hpp"

namespace hla::fast {

// linear: g^tau q_t^T P + W_g V.
template <class T>
class LinearChunks {
 public:
  using Segments = LinearSegments<T>;
  using Summary = typename Segments::Summary;

  static constexpr AlgebraId id = AlgebraId::linear;
  explicit LinearChunks(const AlgebraParams<T>& p) : gamma_(p.gamma), segments_(p) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;
    return {kd.transpose() * ch.v, kd.transpose() * Vector<T>::Ones(ch.q.rows()), ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> weights = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    return {weights * ch.v + chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.key_value)),
            weights.rowwise().sum() + ch.offset.cwiseProduct(ch.q * p.key_mass)};
  }

  // outputs(): with dW = (dN V^T + dd 1^T) . L_g, dQ = dW K + diag(g^tau) (dN P^T + dd m^T),
  // dK = dW^T Q, dV = W_g^T dN; the carry's dP = (diag(g^tau) Q)^T dN, dm = (diag(g^tau) Q)^T dd.
  Summary outputs_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& p,
                          const chunked_detail::ReadoutAdjoints<T>& d,
                          chunked_detail::ChunkGradients<T>& g) const {
    const Matrix<T> weights = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    Matrix<T> d_weights = d.num * ch.v.transpose();
    d_weights.colwise() += d.den;
    d_weights = d_weights.cwiseProduct(ch.decay);
    const Matrix<T> offset_q = chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q));
    g.dq += d_weights * ch.k +
            chunked_detail::scale_rows(
                ch.offset, Matrix<T>(d.num * p.key_value.transpose() + d.den * p.key_mass.transpose()));
    g.dk += d_weights.transpose() * ch.q;
    g.dv += weights.transpose() * d.num;
    Summary d_carry = segments_.identity();
    d_carry.key_value = offset_q.transpose() * d.num;
    d_carry.key_mass = offset_q.transpose() * d.den;
    return d_carry;
  }

  // summary(): P = (D K)^T V, m = (D K)^T 1 with D = diag(age).
  void summary_adjoint(const chunked_detail::Chunk<T>& ch, const Summary& d,
                       chunked_detail::ChunkGradients<T>& g) const {
    g.dk += ch.age.asDiagonal() *
            Matrix<T>(ch.v * d.key_value.transpose() + Vector<T>::Ones(ch.q.rows()) * d.key_mass.transpose());
    g.dv += ch.age.asDiagonal() * Matrix<T>(ch.k * d.key_value);
  }

 private:
  T gamma_;
  Segments segments_;
};

}  // namespace hla::fast
