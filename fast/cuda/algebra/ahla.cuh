#pragma once

#include "common.cuh"

namespace hla::fast::gpu {

// Asymmetric HLA (Thm 6.1, Alg. 2): P^KV, m^K, E, n; as segments also R^KQ and rho (Eq. 6.2).

template <class T>
struct AhlaAlgebra {
  static constexpr AlgebraId id = AlgebraId::ahla;
  template <class P>
  struct Fields {
    P key_value, key_mass, routed_value, routed_mass, key_query, rho;
    HLA_HOST_DEVICE Fields(P base, int d, int dv) {
      Carver<P> c{base};
      key_value = c.take(d * dv);
      key_mass = c.take(d);
      routed_value = c.take(d * dv);
      routed_mass = c.take(d);
      key_query = c.take(d * d);
      rho = c.take(1);
    }
  };
  static constexpr bool has_segments = true;
  static constexpr int summary_size(int d, int dv) { return 2 * d * dv + 2 * d + d * d + 1; }
  // The stream (P, m, E, n) needs neither R^KQ nor rho.
  static constexpr int stream_size(int d, int dv) { return 2 * d * dv + 2 * d; }
  static constexpr int scratch_size(int, int dv) { return dv; }

  AlgebraParams<T> p;

  HLA_HOST_DEVICE void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }
  // Alg. 2 lines 3-6: P = g P + k v^T, m = g m + k, then E = g E + k (q^T P), n = g n + k (q . m).
  HLA_HOST_DEVICE void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    Fields<T*> f(s, d, dv);
    block::each(d * dv, [&](int i) { f.key_value[i] = p.gamma * f.key_value[i] + k[i / dv] * v[i % dv]; });
    block::each(d, [&](int i) { f.key_mass[i] = p.gamma * f.key_mass[i] + k[i]; });
    block::sync();
    T* routed = scratch;  // q^T P
    block::row_times(q, f.key_value, d, dv, routed);
    const T mass = block::dot(q, f.key_mass, d);
    block::sync();
    block::each(d * dv,
                [&](int i) { f.routed_value[i] = p.gamma * f.routed_value[i] + k[i / dv] * routed[i % dv]; });
    block::each(d, [&](int i) { f.routed_mass[i] = p.gamma * f.routed_mass[i] + mass * k[i]; });
    block::sync();
  }
  // AhlaSegments with B a token (R_B = k q^T, P_B = k v^T, E_B = (q.k) k v^T, rho_B = g):
  // E = g E + E_B + R_B (g P) = g E + (q.k) k v^T + g k (q^T P); R = age R + k q^T with
  // ahla_coefficients' age of R^KQ.
  HLA_HOST_DEVICE void absorb(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    Fields<T*> f(s, d, dv);
    T* z = scratch;  // q^T P
    block::row_times(q, f.key_value, d, dv, z);
    const T mass = block::dot(q, f.key_mass, d);
    const T score = block::dot(q, k, d);
    block::sync();
    const T key_query_decay = ahla_coefficients(p.form, p.gamma).key_query_age;
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      f.routed_value[i] = p.gamma * f.routed_value[i] + score * k[row] * v[col] + p.gamma * k[row] * z[col];
      f.key_value[i] = p.gamma * f.key_value[i] + k[row] * v[col];
    });
    block::each(d, [&](int i) {
      f.routed_mass[i] = p.gamma * f.routed_mass[i] + score * k[i] + p.gamma * mass * k[i];
      f.key_mass[i] = p.gamma * f.key_mass[i] + k[i];
    });
    block::each(d * d,
                [&](int i) { f.key_query[i] = key_query_decay * f.key_query[i] + k[i / d] * q[i % d]; });
    block::each(1, [&](int) { *f.rho = *f.rho * p.gamma; });
    block::sync();
  }
  HLA_HOST_DEVICE void combine(const T* a, const T* b, T* out, T*) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(a, d, dv), y(b, d, dv);
    Fields<T*> o(out, d, dv);
    const T rho = *y.rho;
    const T key_query_decay = ahla_coefficients(p.form, rho).key_query_age;
    block::each(d * d, [&](int i) { o.key_query[i] = key_query_decay * x.key_query[i] + y.key_query[i]; });
    block::each(d * dv, [&](int i) {
      o.key_value[i] = rho * x.key_value[i] + y.key_value[i];
      o.routed_value[i] = rho * x.routed_value[i] + y.routed_value[i] +
                          block::product_entry(y.key_query, x.key_value, d, dv, i / dv, i % dv) * rho;
    });
    block::each(d, [&](int i) {
      o.key_mass[i] = rho * x.key_mass[i] + y.key_mass[i];
      o.routed_mass[i] = rho * x.routed_mass[i] + y.routed_mass[i] +
                         block::product_entry(y.key_query, x.key_mass, d, 1, i, 0) * rho;
    });
    block::each(1, [&](int) { *o.rho = *x.rho * rho; });
  }
  // Alg. 2 lines 7-9: num = q^T E, den = q^T n.
  HLA_HOST_DEVICE void read(const T* s, T*, const T* q, T* num, T* den) const {
    Fields<const T*> f(s, p.d, p.dv);
    block::row_times(q, f.routed_value, p.d, p.dv, num);
    block::each(1, [&](int) { *den = block::dot(q, f.routed_mass, p.d); });
  }

  // AhlaStream::backward (common.cuh, "The backward"): the read, then lines 6, 4-5 and 3 in
  // reverse, with P_t and m_t of `after`.
  static constexpr int backward_scratch_size(int, int dv) { return 2 * dv; }
  HLA_HOST_DEVICE void backward(const T* after, const T*, T* adjoint, T* scratch, const T* q, const T* k,
                                const T* v, const T* d_num, const T& d_den, T* grad_q, T* grad_k,
                                T* grad_v) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> s(after, d, dv);
    Fields<T*> a(adjoint, d, dv);
    T *r = scratch, *d_r = scratch + dv;
    block::each(d, [&](int i) {  // lines 7-9: dq = E d_num^T + d_den n
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += s.routed_value[i * dv + j] * d_num[j];
      grad_q[i] = sum + d_den * s.routed_mass[i];
    });
    block::row_times(q, s.key_value, d, dv, r);  // q^T P_t
    block::each(d * dv, [&](int i) { a.routed_value[i] += q[i / dv] * d_num[i % dv]; });
    block::each(d, [&](int i) { a.routed_mass[i] += d_den * q[i]; });
    block::sync();
    block::row_times(k, a.routed_value, d, dv, d_r);  // k^T a_E
    block::sync();
    // line 6: E += k (q^T P), n += (q . m) k (routed_update_adjoint)
    const T sigma = block::dot(q, s.key_mass, d), d_sigma = block::dot(k, a.routed_mass, d);
    block::each(d * dv, [&](int i) { a.key_value[i] += q[i / dv] * d_r[i % dv]; });
    block::each(d, [&](int i) {
      a.key_mass[i] += d_sigma * q[i];
      T routed(0), carried(0);
      for (int j = 0; j < dv; ++j) routed += a.routed_value[i * dv + j] * r[j];
      for (int j = 0; j < dv; ++j) carried += s.key_value[i * dv + j] * d_r[j];
      grad_k[i] = routed + sigma * a.routed_mass[i];
      grad_q[i] += carried + d_sigma * s.key_mass[i];
    });
    block::sync();
    block::each(d, [&](int i) {  // line 3: dk += a_P v^T + a_m, dv = k^T a_P
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += a.key_value[i * dv + j] * v[j];
      grad_k[i] += sum + a.key_mass[i];
    });
    block::row_times(k, a.key_value, d, dv, grad_v);
    block::sync();
    block::each(d * dv, [&](int i) {
      a.key_value[i] = p.gamma * a.key_value[i];
      a.routed_value[i] = p.gamma * a.routed_value[i];
    });
    block::each(d, [&](int i) {
      a.key_mass[i] = p.gamma * a.key_mass[i];
      a.routed_mass[i] = p.gamma * a.routed_mass[i];
    });
    block::sync();
  }

  // (common.cuh, carry_adjoint) combine's P = rho P_x + P_y, m likewise, E = rho E_x + E_y +
  // rho R_y P_x, n = rho n_x + n_y + rho R_y m_x (R = R^KQ): d P_x = rho (dP + R_y^T dE),
  // d m_x = rho (dm + R_y^T dn), d E_x = rho dE, d n_x = rho dn.
  static constexpr int carry_adjoint_scratch_size(int, int) { return 0; }
  HLA_HOST_DEVICE void carry_adjoint(const T*, const T* b, const T* d_out, T* d_x, T*) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> y(b, d, dv), a(d_out, d, dv);
    Fields<T*> o(d_x, d, dv);
    const T rho = *y.rho;
    block::each(d * dv, [&](int i) {
      o.key_value[i] = rho * (a.key_value[i] + block::transposed_product_entry(y.key_query, a.routed_value, d,
                                                                               d, dv, i / dv, i % dv));
      o.routed_value[i] = rho * a.routed_value[i];
    });
    block::each(d, [&](int i) {
      o.key_mass[i] =
          rho * (a.key_mass[i] + block::transposed_product_entry(y.key_query, a.routed_mass, d, d, 1, i, 0));
      o.routed_mass[i] = rho * a.routed_mass[i];
    });
  }
};

}  // namespace hla::fast::gpu
