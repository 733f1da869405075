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

  // Hla2Stream::backward (common.cuh, "The backward"): hla2_read_adjoint, then the push, last
  // update first; C_{t-1}, m_{t-1} from `before`.
  static constexpr int backward_scratch_size(int d, int dv) { return 3 * d + 2 * dv; }
  HLA_HOST_DEVICE void backward(const T* after, const T* before, T* adjoint, T* scratch, const T* q,
                                const T* k, const T* v, const T* d_num, const T& d_den, T* grad_q, T* grad_k,
                                T* grad_v) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> s(after, d, dv), b(before, d, dv);
    Fields<T*> a(adjoint, d, dv);
    const Hla2Coefficients<T> cross = hla2_coefficients(p.form, p.gamma);
    T *u = scratch, *d_u = u + d, *gain_k = d_u + d, *r = gain_k + d, *d_r = r + dv;
    // read: u = q^T S + ridge q^T, d_u = d_num C^T + d_den m^T
    block::each(d, [&](int j) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += q[i] * s.key_moment[i * d + j];
      u[j] = sum + p.ridge * q[j];
    });
    block::each(d, [&](int i) {
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += d_num[j] * s.query_value[i * dv + j];
      d_u[i] = sum + d_den * s.query_mass[i];
    });
    if (p.masked) {
      block::each(d, [&](int i) { gain_k[i] = cross.gain * k[i]; });
      block::row_times(k, b.query_value, d, dv, r);  // k^T C_{t-1}
    }
    block::sync();
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      a.query_value[i] += u[row] * d_num[col];
      if (p.masked) a.cross_value[i] -= q[row] * d_num[col];
    });
    block::each(d, [&](int i) {
      a.query_mass[i] += d_den * u[i];
      if (p.masked) a.cross_mass[i] -= d_den * q[i];
    });
    block::each(d * d, [&](int i) { a.key_moment[i] += q[i / d] * d_u[i % d]; });
    block::each(d, [&](int i) {  // dq = S d_u + ridge d_u - (G d_num + d_den h)
      T sum(0);
      for (int j = 0; j < d; ++j) sum += s.key_moment[i * d + j] * d_u[j];
      T value = sum + p.ridge * d_u[i];
      if (p.masked) {
        T cross_sum(0);
        for (int j = 0; j < dv; ++j) cross_sum += s.cross_value[i * dv + j] * d_num[j];
        value -= cross_sum + d_den * s.cross_mass[i];
      }
      grad_q[i] = value;
    });
    block::sync();
    // push: dq += a_C v^T + a_m, dv = q^T a_C, dk = (a_S + a_S^T) k
    block::each(d, [&](int i) {
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += a.query_value[i * dv + j] * v[j];
      grad_q[i] += sum + a.query_mass[i];
    });
    block::row_times(q, a.query_value, d, dv, grad_v);
    block::each(d, [&](int i) {
      T sum(0);
      for (int j = 0; j < d; ++j) sum += (a.key_moment[i * d + j] + a.key_moment[j * d + i]) * k[j];
      grad_k[i] = sum;
    });
    if (p.masked) block::row_times(gain_k, a.cross_value, d, dv, d_r);  // (gain k)^T a_G
    block::sync();
    // G += (gain k)(k^T C_{t-1}), h += (k . m_{t-1})(gain k): routed_update_adjoint
    T d_sigma(0);
    if (p.masked) {
      const T sigma = block::dot(k, b.query_mass, d);
      d_sigma = block::dot(gain_k, a.cross_mass, d);
      block::each(d, [&](int i) {
        T routed(0), carried(0);
        for (int j = 0; j < dv; ++j) routed += a.cross_value[i * dv + j] * r[j];
        for (int j = 0; j < dv; ++j) carried += b.query_value[i * dv + j] * d_r[j];
        grad_k[i] += cross.gain * (routed + sigma * a.cross_mass[i]) + (carried + d_sigma * b.query_mass[i]);
      });
      block::sync();
    }
    block::each(d * dv, [&](int i) {
      if (p.masked) {
        a.query_value[i] = p.gamma * a.query_value[i] + k[i / dv] * d_r[i % dv];
        a.cross_value[i] = cross.age * a.cross_value[i];
      } else {
        a.query_value[i] = p.gamma * a.query_value[i];
      }
    });
    block::each(d, [&](int i) {
      if (p.masked) {
        a.query_mass[i] = p.gamma * a.query_mass[i] + d_sigma * k[i];
        a.cross_mass[i] = cross.age * a.cross_mass[i];
      } else {
        a.query_mass[i] = p.gamma * a.query_mass[i];
      }
    });
    block::each(d * d, [&](int i) { a.key_moment[i] = p.gamma * a.key_moment[i]; });
    block::sync();
  }

  // (common.cuh, carry_adjoint) combine's S = rho S_x + S_y, C = rho C_x + C_y, m likewise,
  // G = age(rho) G_x + G_y + rho S_y C_x, h = age(rho) h_x + h_y + rho S_y m_x: d S_x = rho dS,
  // d C_x = rho (dC + S_y^T dG), d m_x = rho (dm + S_y^T dh), d G_x = age(rho) dG, d h_x = age(rho) dh.
  static constexpr int carry_adjoint_scratch_size(int, int) { return 0; }
  HLA_HOST_DEVICE void carry_adjoint(const T*, const T* b, const T* d_out, T* d_x, T*) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> y(b, d, dv), a(d_out, d, dv);
    Fields<T*> o(d_x, d, dv);
    const T rho = *y.rho;
    const T carried = hla2_coefficients(p.form, rho).age;
    block::each(d * d, [&](int i) { o.key_moment[i] = rho * a.key_moment[i]; });
    block::each(d * dv, [&](int i) {
      T value = a.query_value[i];
      if (p.masked)
        value += block::transposed_product_entry(y.key_moment, a.cross_value, d, d, dv, i / dv, i % dv);
      o.query_value[i] = rho * value;
      o.cross_value[i] = p.masked ? carried * a.cross_value[i] : T(0);
    });
    block::each(d, [&](int i) {
      T value = a.query_mass[i];
      if (p.masked) value += block::transposed_product_entry(y.key_moment, a.cross_mass, d, d, 1, i, 0);
      o.query_mass[i] = rho * value;
      o.cross_mass[i] = p.masked ? carried * a.cross_mass[i] : T(0);
    });
    block::each(1, [&](int) { *o.rho = T(0); });
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
