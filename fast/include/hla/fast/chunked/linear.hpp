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

 private:
  T gamma_;
  Segments segments_;
};

}  // namespace hla::fast
