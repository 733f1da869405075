#pragma once

#include "common.cuh"

namespace hla::fast::gpu {

// Linear attention (Sec. 2.2): P^KV, m^K; as segments also rho.

template <class T>
struct LinearAlgebra {
  static constexpr AlgebraId id = AlgebraId::linear;
  template <class P>
  struct Fields {
    P key_value, key_mass, rho;
    HLA_HOST_DEVICE Fields(P base, int d, int dv) {
      Carver<P> c{base};
      key_value = c.take(d * dv);
      key_mass = c.take(d);
      rho = c.take(1);
    }
  };
  static constexpr bool has_segments = true;
  static constexpr int summary_size(int d, int dv) { return d * dv + d + 1; }
  static constexpr int scratch_size(int, int) { return 0; }

  AlgebraParams<T> p;

  HLA_HOST_DEVICE void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }
  // P = g P + k v^T, m = g m + k.
  HLA_HOST_DEVICE void absorb(T* s, T*, const T*, const T* k, const T* v) const {
    Fields<T*> f(s, p.d, p.dv);
    block::each(p.d * p.dv,
                [&](int i) { f.key_value[i] = p.gamma * f.key_value[i] + k[i / p.dv] * v[i % p.dv]; });
    block::each(p.d, [&](int i) { f.key_mass[i] = p.gamma * f.key_mass[i] + k[i]; });
    block::each(1, [&](int) { *f.rho = *f.rho * p.gamma; });
    block::sync();
  }
  HLA_HOST_DEVICE void combine(const T* a, const T* b, T* out, T*) const {
    Fields<const T*> x(a, p.d, p.dv), y(b, p.d, p.dv);
    Fields<T*> o(out, p.d, p.dv);
    const T rho = *y.rho;
    block::each(p.d * p.dv, [&](int i) { o.key_value[i] = rho * x.key_value[i] + y.key_value[i]; });
    block::each(p.d, [&](int i) { o.key_mass[i] = rho * x.key_mass[i] + y.key_mass[i]; });
    block::each(1, [&](int) { *o.rho = *x.rho * rho; });
  }
  HLA_HOST_DEVICE void read(const T* s, T*, const T* q, T* num, T* den) const {
    Fields<const T*> f(s, p.d, p.dv);
    block::row_times(q, f.key_value, p.d, p.dv, num);
    block::each(1, [&](int) { *den = block::dot(q, f.key_mass, p.d); });
  }
  // The stream is the segment summary without rho.
  HLA_HOST_DEVICE void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    absorb(s, scratch, q, k, v);
  }

  // LinearStream::backward (common.cuh, "The backward"): the read, then the push.
  static constexpr int backward_scratch_size(int, int) { return 0; }
  HLA_HOST_DEVICE void backward(const T* after, const T*, T* adjoint, T*, const T* q, const T* k, const T* v,
                                const T* d_num, const T& d_den, T* grad_q, T* grad_k, T* grad_v) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> s(after, d, dv);
    Fields<T*> a(adjoint, d, dv);
    block::each(d, [&](int i) {  // dq = P d_num^T + d_den m
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += s.key_value[i * dv + j] * d_num[j];
      grad_q[i] = sum + d_den * s.key_mass[i];
    });
    block::each(d * dv, [&](int i) { a.key_value[i] += q[i / dv] * d_num[i % dv]; });
    block::each(d, [&](int i) { a.key_mass[i] += d_den * q[i]; });
    block::sync();
    block::each(d, [&](int i) {  // dk = a_P v^T + a_m, dv = k^T a_P
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += a.key_value[i * dv + j] * v[j];
      grad_k[i] = sum + a.key_mass[i];
    });
    block::row_times(k, a.key_value, d, dv, grad_v);
    block::sync();
    block::each(d * dv, [&](int i) { a.key_value[i] = p.gamma * a.key_value[i]; });
    block::each(d, [&](int i) { a.key_mass[i] = p.gamma * a.key_mass[i]; });
    block::sync();
  }

  // (common.cuh, carry_adjoint) P = rho P_x + P_y, m = rho m_x + m_y: d P_x = rho dP, d m_x = rho dm.
  static constexpr int carry_adjoint_scratch_size(int, int) { return 0; }
  HLA_HOST_DEVICE void carry_adjoint(const T*, const T* b, const T* d_out, T* d_x, T*) const {
    Fields<const T*> y(b, p.d, p.dv), a(d_out, p.d, p.dv);
    Fields<T*> o(d_x, p.d, p.dv);
    const T rho = *y.rho;
    block::each(p.d * p.dv, [&](int i) { o.key_value[i] = rho * a.key_value[i]; });
    block::each(p.d, [&](int i) { o.key_mass[i] = rho * a.key_mass[i]; });
    block::each(1, [&](int) { *o.rho = T(0); });
  }
};

}  // namespace hla::fast::gpu
