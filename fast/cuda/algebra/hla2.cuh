#pragma once

#include "common.cuh"

namespace hla::fast::gpu {

// Second-order HLA: S^K, C^QV, m^Q, G, h (Thm 3.1, Sec. 3.1, Alg. 1), rho as segments.

template <class T>
struct Hla2Algebra {
  static constexpr AlgebraId id = AlgebraId::hla2;
  template <class P>
  struct Fields {
    P key_moment, query_value, query_mass, cross_value, cross_mass, rho;
    HLA_HOST_DEVICE Fields(P base, int d, int dv) {
      Carver<P> c{base};
      key_moment = c.take(d * d);
      query_value = c.take(d * dv);
      query_mass = c.take(d);
      cross_value = c.take(d * dv);
      cross_mass = c.take(d);
      rho = c.take(1);
    }
  };
  static constexpr bool has_segments = true;
  static constexpr int summary_size(int d, int dv) { return d * d + 2 * d * dv + 2 * d + 1; }
  static constexpr int scratch_size(int d, int dv) { return d + dv; }

  AlgebraParams<T> p;

  HLA_HOST_DEVICE void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }

  // Streaming (Hla2Stream): G_t = age G + gain k (k^T C_{t-1}) (hla2_coefficients at gamma).
  HLA_HOST_DEVICE void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const Hla2Coefficients<T> c = hla2_coefficients(p.form, p.gamma);
    update(s, scratch, q, k, v, c.age, c.gain);
  }
  // Segments (Hla2Segments, Eq. 4.1 / Sec. 4.2) with B a token (S_B = k k^T, C_B = q v^T,
  // G_B = 0, rho_B = g): G = age G + S_B (g C) = age G + g k (k^T C).
  HLA_HOST_DEVICE void absorb(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    update(s, scratch, q, k, v, hla2_coefficients(p.form, p.gamma).age, p.gamma);
  }
  HLA_HOST_DEVICE void combine(const T* a, const T* b, T* out, T*) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(a, d, dv), y(b, d, dv);
    Fields<T*> o(out, d, dv);
    const T rho = *y.rho;
    const T carried = hla2_coefficients(p.form, rho).age;
    block::each(d * d, [&](int i) { o.key_moment[i] = rho * x.key_moment[i] + y.key_moment[i]; });
    block::each(d * dv, [&](int i) {
      o.query_value[i] = rho * x.query_value[i] + y.query_value[i];
      o.cross_value[i] =
          p.masked ? carried * x.cross_value[i] + y.cross_value[i] +
                         block::product_entry(y.key_moment, x.query_value, d, dv, i / dv, i % dv) * rho
                   : T(0);
    });
    block::each(d, [&](int i) {
      o.query_mass[i] = rho * x.query_mass[i] + y.query_mass[i];
      o.cross_mass[i] = p.masked ? carried * x.cross_mass[i] + y.cross_mass[i] +
                                       block::product_entry(y.key_moment, x.query_mass, d, 1, i, 0) * rho
                                 : T(0);
    });
    block::each(1, [&](int) { *o.rho = *x.rho * rho; });
  }
  // Alg. 1 lines 9-14: u = q^T (S + lambda I), num = u C - q^T G, den = u m - q^T h.
  HLA_HOST_DEVICE void read(const T* s, T* scratch, const T* q, T* num, T* den) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> f(s, d, dv);
    T* u = scratch;
    block::row_times(q, f.key_moment, d, d, u);
    block::sync();
    block::each(d, [&](int i) { u[i] += p.ridge * q[i]; });
    block::sync();
    block::each(dv, [&](int j) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += u[i] * f.query_value[i * dv + j];
      if (p.masked) {
        for (int i = 0; i < d; ++i) sum -= q[i] * f.cross_value[i * dv + j];
      }
      num[j] = sum;
    });
    block::each(1, [&](int) {
      T sum = block::dot(u, f.query_mass, d);
      if (p.masked) sum -= block::dot(q, f.cross_mass, d);
      *den = sum;
    });
  }

 private:
  // G = a G + b k (k^T C), h = a h + b k (k . m), read before C and m take the token.
  HLA_HOST_DEVICE void update(T* s, T* scratch, const T* q, const T* k, const T* v, const T& a,
                              const T& b) const {
    const int d = p.d, dv = p.dv;
    Fields<T*> f(s, d, dv);
    T* w = scratch;  // k^T C (dv)
    T key_mass_dot(0);
    if (p.masked) {
      block::row_times(k, f.query_value, d, dv, w);
      key_mass_dot = block::dot(k, f.query_mass, d);
      block::sync();
    }
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      if (p.masked) f.cross_value[i] = a * f.cross_value[i] + b * k[row] * w[col];
      f.query_value[i] = p.gamma * f.query_value[i] + q[row] * v[col];
    });
    block::each(d, [&](int i) {
      if (p.masked) f.cross_mass[i] = a * f.cross_mass[i] + b * k[i] * key_mass_dot;
      f.query_mass[i] = p.gamma * f.query_mass[i] + q[i];
    });
    block::each(d * d, [&](int i) { f.key_moment[i] = p.gamma * f.key_moment[i] + k[i / d] * k[i % d]; });
    block::each(1, [&](int) { *f.rho = *f.rho * p.gamma; });
    block::sync();
  }
};

}  // namespace hla::fast::gpu
