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

 private:
  bool routes_own_token_;
  T gamma_;
  Segments segments_;
};

}  // namespace hla::fast
