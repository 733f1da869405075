#pragma once

#include "common.cuh"

namespace hla::fast::gpu {

// Third-order HLA as printed (Alg. 3, Eqs. 7.1-7.3): S^K, S^Q, P^KV, m^K, G1-G3, h1-h3.
// Streaming only: the printed scan (Eqs. 7.6-7.7) keeps O(d^3 dv) maps per summary.

template <class T>
struct Hla3PublishedAlgebra {
  static constexpr AlgebraId id = AlgebraId::hla3_published_stream;
  template <class P>
  struct Fields {
    P key_moment, query_moment, key_value, key_mass, g1, g2, g3, h1, h2, h3;
    HLA_HOST_DEVICE Fields(P base, int d, int dv) {
      Carver<P> c{base};
      key_moment = c.take(d * d);
      query_moment = c.take(d * d);
      key_value = c.take(d * dv);
      key_mass = c.take(d);
      g1 = c.take(d * dv);
      g2 = c.take(d * dv);
      g3 = c.take(d * dv);
      h1 = c.take(d);
      h2 = c.take(d);
      h3 = c.take(d);
    }
  };
  static constexpr bool has_segments = false;
  static constexpr int stream_size(int d, int dv) { return 2 * d * d + 4 * d * dv + 4 * d; }
  static constexpr int scratch_size(int d, int dv) { return 4 * d + 2 * dv; }

  AlgebraParams<T> p;

  // Alg. 3 lines 4-11: the cross-summaries read the moments before they take token t.
  HLA_HOST_DEVICE void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma;
    Fields<T*> f(s, d, dv);
    T *u1 = scratch, *a2 = scratch + d, *a3 = scratch + 2 * d, *z1 = scratch + 3 * d, *z2 = z1 + dv;
    T mass1(0), mass2(0);
    if (p.masked) {
      block::times_column(f.query_moment, k, d, d, u1);  // u1 = S^Q_{t-1} k
      block::times_column(f.key_moment, q, d, d, a2);    // a2 = S^K_{t-1} q
      block::sync();
      block::times_column(f.key_moment, u1, d, d, a3);  // a3 = S^K_{t-1} S^Q_{t-1} k
      block::row_times(u1, f.key_value, d, dv, z1);     // u1^T P_{t-1}
      block::row_times(q, f.key_value, d, dv, z2);      // q^T P_{t-1}
      mass1 = block::dot(u1, f.key_mass, d);
      mass2 = block::dot(q, f.key_mass, d);
      block::sync();
    }
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      if (p.masked) {
        f.g1[i] = g * f.g1[i] + k[row] * z1[col];
        f.g2[i] = g * f.g2[i] + a2[row] * z2[col];
        f.g3[i] = g * f.g3[i] + a3[row] * v[col];
      }
      f.key_value[i] = g * f.key_value[i] + k[row] * v[col];
    });
    block::each(d, [&](int i) {
      if (p.masked) {
        f.h1[i] = g * f.h1[i] + mass1 * k[i];
        f.h2[i] = g * f.h2[i] + mass2 * a2[i];
        f.h3[i] = g * f.h3[i] + a3[i];
      }
      f.key_mass[i] = g * f.key_mass[i] + k[i];
    });
    block::each(d * d, [&](int i) {
      f.key_moment[i] = g * f.key_moment[i] + k[i / d] * k[i % d];
      f.query_moment[i] = g * f.query_moment[i] + q[i / d] * q[i % d];
    });
    block::sync();
  }
  // Alg. 3 lines 13-17: num = (S^Q S^K q)^T P - q^T (G1 + G2 + G3), den = q^T S^K S^Q m - q^T (h1 + h2 + h3).
  HLA_HOST_DEVICE void read(const T* s, T* scratch, const T* q, T* num, T* den) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> f(s, d, dv);
    T *x = scratch, *y = scratch + d, *z = scratch + 2 * d, *w = scratch + 3 * d;
    block::times_column(f.key_moment, q, d, d, x);             // S^K q
    block::times_column(f.query_moment, f.key_mass, d, d, y);  // S^Q m
    block::sync();
    block::times_column(f.query_moment, x, d, d, z);  // S^Q S^K q
    block::times_column(f.key_moment, y, d, d, w);    // S^K S^Q m
    block::sync();
    block::each(dv, [&](int j) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += z[i] * f.key_value[i * dv + j];
      if (p.masked) {
        for (int i = 0; i < d; ++i)
          sum -= q[i] * f.g1[i * dv + j] + q[i] * f.g2[i * dv + j] + q[i] * f.g3[i * dv + j];
      }
      num[j] = sum;
    });
    block::each(1, [&](int) {
      T sum = block::dot(q, w, d);
      if (p.masked) sum -= block::dot(q, f.h1, d) + block::dot(q, f.h2, d) + block::dot(q, f.h3, d);
      *den = sum;
    });
  }
  // Hla3PublishedStream::backward (common.cuh, "The backward"): the read, then lines 11, 10, 9 and
  // the moments' updates in reverse, with the moments before the token from `before`.
  static constexpr int backward_scratch_size(int d, int dv) { return 16 * d + 4 * dv; }
  HLA_HOST_DEVICE void backward(const T* after, const T* before, T* adjoint, T* scratch, const T* q,
                                const T* k, const T* v, const T* d_num, const T& d_den, T* grad_q, T* grad_k,
                                T* grad_v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma;
    Fields<const T*> s(after, d, dv), b(before, d, dv);
    Fields<T*> a(adjoint, d, dv);
    T *y = scratch, *z = y + d, *w = z + d, *x = w + d, *d_z = x + d, *d_y = d_z + d, *d_w = d_y + d;
    T *bk = d_w + d, *a2 = bk + d, *a3 = a2 + d, *d_a3 = a3 + d, *d_b = d_a3 + d, *d_a2 = d_b + d;
    T *d_u2 = d_a2 + d, *d_a1 = d_u2 + d, *d_u1 = d_a1 + d;
    T *r2 = d_u1 + d, *r1 = r2 + dv, *d_r2 = r1 + dv, *d_r1 = d_r2 + dv;
    // read: num = (S^Q (S^K q))^T P - q^T (G1 + G2 + G3), den = q^T S^K (S^Q m) - q^T (h1 + h2 + h3)
    block::times_column(s.key_moment, q, d, d, y);
    block::times_column(s.query_moment, s.key_mass, d, d, w);
    block::times_column(s.key_value, d_num, d, dv, d_z);
    block::each(d, [&](int i) {  // d_w = S^K^T d_x with d_x = d_den q
      T sum(0);
      for (int j = 0; j < d; ++j) sum += s.key_moment[j * d + i] * (d_den * q[j]);
      d_w[i] = sum;
    });
    if (p.masked) {
      block::times_column(b.query_moment, k, d, d, bk);  // S^Q_{t-1} k
      block::times_column(b.key_moment, q, d, d, a2);    // S^K_{t-1} q
      block::row_times(q, b.key_value, d, dv, r2);       // q^T P_{t-1}
    }
    block::sync();
    block::times_column(s.query_moment, y, d, d, z);
    block::times_column(s.key_moment, w, d, d, x);
    block::each(d, [&](int i) {  // d_y = S^Q^T d_z
      T sum(0);
      for (int j = 0; j < d; ++j) sum += s.query_moment[j * d + i] * d_z[j];
      d_y[i] = sum;
    });
    if (p.masked) {
      block::times_column(b.key_moment, bk, d, d, a3);  // a3 = S^K_{t-1} S^Q_{t-1} k
      block::row_times(bk, b.key_value, d, dv, r1);     // (S^Q_{t-1} k)^T P_{t-1}
      block::each(d * dv, [&](int i) {
        const T e = q[i / dv] * d_num[i % dv];
        a.g1[i] -= e;
        a.g2[i] -= e;
        a.g3[i] -= e;
      });
      block::each(d, [&](int i) {
        const T e = d_den * q[i];
        a.h1[i] -= e;
        a.h2[i] -= e;
        a.h3[i] -= e;
      });
    }
    block::sync();
    block::each(d * dv, [&](int i) { a.key_value[i] += z[i / dv] * d_num[i % dv]; });
    block::each(d * d, [&](int i) {
      const int row = i / d, col = i % d;
      a.query_moment[i] = a.query_moment[i] + d_z[row] * y[col] + d_w[row] * s.key_mass[col];
      a.key_moment[i] = a.key_moment[i] + d_y[row] * q[col] + (d_den * q[row]) * w[col];
    });
    block::each(d, [&](int i) {
      T mass(0), query(0);
      for (int j = 0; j < d; ++j) mass += s.query_moment[j * d + i] * d_w[j];
      a.key_mass[i] += mass;
      for (int j = 0; j < d; ++j) query += s.key_moment[j * d + i] * d_y[j];
      grad_q[i] = query + d_den * x[i];
    });
    if (p.masked) {
      block::each(d, [&](int i) { d_a3[i] = block::product_entry(a.g3, v, dv, 1, i, 0) + a.h3[i]; });
      block::row_times(a2, a.g2, d, dv, d_r2);
      block::row_times(k, a.g1, d, dv, d_r1);
    }
    block::sync();
    T d_sigma1(0), d_sigma2(0);
    if (p.masked) {
      const T sigma2 = block::dot(q, b.key_mass, d), sigma1 = block::dot(bk, b.key_mass, d);
      d_sigma2 = block::dot(a2, a.h2, d);
      d_sigma1 = block::dot(k, a.h1, d);
      block::each(d, [&](int i) {
        T cross(0);
        for (int j = 0; j < dv; ++j)
          cross += (s.g1[i * dv + j] + s.g2[i * dv + j] + s.g3[i * dv + j]) * d_num[j];
        grad_q[i] -= cross + d_den * (s.h1[i] + s.h2[i] + s.h3[i]);
        T sum(0);  // line 11: d_b = S^K_{t-1}^T d_a3
        for (int j = 0; j < d; ++j) sum += b.key_moment[j * d + i] * d_a3[j];
        d_b[i] = sum;
        T routed2(0), carried2(0), routed1(0), carried1(0);  // lines 10 and 9: routed_update_adjoint
        for (int j = 0; j < dv; ++j) {
          routed2 += a.g2[i * dv + j] * r2[j];
          carried2 += b.key_value[i * dv + j] * d_r2[j];
          routed1 += a.g1[i * dv + j] * r1[j];
          carried1 += b.key_value[i * dv + j] * d_r1[j];
        }
        d_a2[i] = routed2 + sigma2 * a.h2[i];
        d_u2[i] = carried2 + d_sigma2 * b.key_mass[i];
        d_a1[i] = routed1 + sigma1 * a.h1[i];
        d_u1[i] = carried1 + d_sigma1 * b.key_mass[i];
      });
      block::row_times(a3, a.g3, d, dv, grad_v);  // line 11: dv = a3^T a_G3
      block::sync();
      block::each(d, [&](int i) {
        T key(0), first(0), second(0);
        for (int j = 0; j < d; ++j) {
          key += b.query_moment[j * d + i] * d_b[j];
          first += b.query_moment[j * d + i] * d_u1[j];
          second += b.key_moment[j * d + i] * d_a2[j];
        }
        grad_q[i] += d_u2[i] + second;
        grad_k[i] = key + (d_a1[i] + first);
      });
    }
    block::each(d, [&](int i) {  // lines 6-7, the moments
      T key(0), value(0), query(0);
      for (int j = 0; j < d; ++j) key += (a.key_moment[i * d + j] + a.key_moment[j * d + i]) * k[j];
      for (int j = 0; j < dv; ++j) value += a.key_value[i * dv + j] * v[j];
      for (int j = 0; j < d; ++j) query += (a.query_moment[i * d + j] + a.query_moment[j * d + i]) * q[j];
      const T moments = key + value + a.key_mass[i];
      grad_k[i] = p.masked ? grad_k[i] + moments : moments;
      grad_q[i] += query;
    });
    block::each(dv, [&](int j) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += k[i] * a.key_value[i * dv + j];
      grad_v[j] = p.masked ? grad_v[j] + sum : sum;
    });
    block::sync();
    block::each(d * d, [&](int i) {
      const int row = i / d, col = i % d;
      if (p.masked) {
        a.key_moment[i] = g * a.key_moment[i] + (d_a3[row] * bk[col] + d_a2[row] * q[col]);
        a.query_moment[i] = g * a.query_moment[i] + (d_b[row] * k[col] + d_u1[row] * k[col]);
      } else {
        a.key_moment[i] = g * a.key_moment[i];
        a.query_moment[i] = g * a.query_moment[i];
      }
    });
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      if (p.masked) {
        a.key_value[i] = g * a.key_value[i] + (q[row] * d_r2[col] + bk[row] * d_r1[col]);
        a.g1[i] = g * a.g1[i];
        a.g2[i] = g * a.g2[i];
        a.g3[i] = g * a.g3[i];
      } else {
        a.key_value[i] = g * a.key_value[i];
      }
    });
    block::each(d, [&](int i) {
      if (p.masked) {
        a.key_mass[i] = g * a.key_mass[i] + (d_sigma2 * q[i] + d_sigma1 * bk[i]);
        a.h1[i] = g * a.h1[i];
        a.h2[i] = g * a.h2[i];
        a.h3[i] = g * a.h3[i];
      } else {
        a.key_mass[i] = g * a.key_mass[i];
      }
    });
    block::sync();
  }
};

// ---------------------------------------------------------------------------------------------
// Third-order HLA, corrected (F2) and unmasked: the Hla3CorrectedStream state S^K, P^KV, m^K,
// F, eta, and the Hla3Segments summary that adds S^Q, X, x, Y and rho.

template <class T>
struct Hla3Algebra {
  static constexpr AlgebraId id = AlgebraId::hla3;
  template <class P>
  struct Fields {
    P key_moment, key_value, key_mass, corrected_value, corrected_mass, query_moment, query_value, query_mass,
        key_query, rho;
    HLA_HOST_DEVICE Fields(P base, int d, int dv) {
      Carver<P> c{base};
      key_moment = c.take(d * d);
      key_value = c.take(d * dv);
      key_mass = c.take(d);
      corrected_value = c.take(d * dv);
      corrected_mass = c.take(d);
      query_moment = c.take(d * d);
      query_value = c.take(d * dv);
      query_mass = c.take(d);
      key_query = c.take(d * d);
      rho = c.take(1);
    }
  };
  static constexpr bool has_segments = true;
  static constexpr int summary_size(int d, int dv) { return 3 * d * d + 3 * d * dv + 3 * d + 1; }
  // The stream: masked, the first five fields (S^K, P, m, F, eta); unmasked (Sec. 7.1), whose read
  // takes S^Q instead of F and eta, the first six (F and eta stay zero), so that the GPU scan's
  // backward can run each chunk's tokens through it from the chunk's carry.
  HLA_HOST_DEVICE constexpr int stream_size() const {
    const int d = p.d, dv = p.dv;
    return d * d + 2 * d * dv + 2 * d + (p.masked ? 0 : d * d);
  }
  // push, absorb and read need 2 d + 2 dv; combine (in global memory) also T1 and t1.
  static constexpr int scratch_size(int d, int dv) { return 2 * d + 2 * dv; }
  static constexpr int combine_scratch_size(int d, int dv) { return 2 * d + 2 * dv + d * dv + d; }

  AlgebraParams<T> p;

  HLA_HOST_DEVICE void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }

  // Hla3CorrectedStream: moments first, then F = g^3 F + (S^K q)(q^T P), eta = g^3 eta + (q.m) S^K q.
  // Unmasked: the moments S^K, P, m and S^Q = g S^Q + q q^T only.
  HLA_HOST_DEVICE void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma, g3 = g * g * g;
    Fields<T*> f(s, d, dv);
    block::each(d * d, [&](int i) {
      f.key_moment[i] = g * f.key_moment[i] + k[i / d] * k[i % d];
      if (!p.masked) f.query_moment[i] = g * f.query_moment[i] + q[i / d] * q[i % d];
    });
    block::each(d * dv, [&](int i) { f.key_value[i] = g * f.key_value[i] + k[i / dv] * v[i % dv]; });
    block::each(d, [&](int i) { f.key_mass[i] = g * f.key_mass[i] + k[i]; });
    block::sync();
    if (!p.masked) return;
    T *metric_query = scratch, *z = scratch + d;
    block::times_column(f.key_moment, q, d, d, metric_query);
    block::row_times(q, f.key_value, d, dv, z);
    const T mass = block::dot(q, f.key_mass, d);
    block::sync();
    block::each(d * dv, [&](int i) {
      f.corrected_value[i] = g3 * f.corrected_value[i] + metric_query[i / dv] * z[i % dv];
    });
    block::each(d, [&](int i) { f.corrected_mass[i] = g3 * f.corrected_mass[i] + mass * metric_query[i]; });
    block::sync();
  }

  // Hla3CorrectedStream::backward (common.cuh, "The backward"): the read, F and eta's update
  // (z = S^K_t q, r = q^T P_t, sigma = q . m_t), then the moments'; S^K_t, P_t, m_t of `after`.
  // Unmasked: unmasked_backward.
  static constexpr int backward_scratch_size(int d, int dv) {
    return 2 * d + 2 * dv > 4 * d ? 2 * d + 2 * dv : 4 * d;
  }
  HLA_HOST_DEVICE void backward(const T* after, const T* before, T* adjoint, T* scratch, const T* q,
                                const T* k, const T* v, const T* d_num, const T& d_den, T* grad_q, T* grad_k,
                                T* grad_v) const {
    if (!p.masked) {
      unmasked_backward(after, adjoint, scratch, q, k, v, d_num, d_den, grad_q, grad_k, grad_v);
      return;
    }
    (void)before;
    const int d = p.d, dv = p.dv;
    const T g = p.gamma, g3 = g * g * g;
    Fields<const T*> s(after, d, dv);
    Fields<T*> a(adjoint, d, dv);
    T *z = scratch, *d_a = scratch + d, *r = scratch + 2 * d, *d_r = r + dv;
    block::each(d, [&](int i) {  // read: dq = F d_num^T + d_den eta
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += s.corrected_value[i * dv + j] * d_num[j];
      grad_q[i] = sum + d_den * s.corrected_mass[i];
    });
    block::times_column(s.key_moment, q, d, d, z);
    block::row_times(q, s.key_value, d, dv, r);
    block::each(d * dv, [&](int i) { a.corrected_value[i] += q[i / dv] * d_num[i % dv]; });
    block::each(d, [&](int i) { a.corrected_mass[i] += d_den * q[i]; });
    block::sync();
    // F += z (q^T P_t), eta += (q . m_t) z: routed_update_adjoint with a = z, u = q
    block::row_times(z, a.corrected_value, d, dv, d_r);
    const T sigma = block::dot(q, s.key_mass, d), d_sigma = block::dot(z, a.corrected_mass, d);
    block::each(d, [&](int i) {
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += a.corrected_value[i * dv + j] * r[j];
      d_a[i] = sum + sigma * a.corrected_mass[i];
    });
    block::sync();
    block::each(d * dv, [&](int i) { a.key_value[i] += q[i / dv] * d_r[i % dv]; });
    block::each(d, [&](int i) {  // dq += (P d_r + d_sigma m) + S^T d_a
      a.key_mass[i] += d_sigma * q[i];
      T carried(0), metric(0);
      for (int j = 0; j < dv; ++j) carried += s.key_value[i * dv + j] * d_r[j];
      for (int j = 0; j < d; ++j) metric += s.key_moment[j * d + i] * d_a[j];
      grad_q[i] += carried + d_sigma * s.key_mass[i] + metric;
    });
    block::each(d * d, [&](int i) { a.key_moment[i] += d_a[i / d] * q[i % d]; });
    block::sync();
    block::each(d, [&](int i) {  // the moments: dk = (a_S + a_S^T) k + a_P v^T + a_m, dv = k^T a_P
      T moment(0), value(0);
      for (int j = 0; j < d; ++j) moment += (a.key_moment[i * d + j] + a.key_moment[j * d + i]) * k[j];
      for (int j = 0; j < dv; ++j) value += a.key_value[i * dv + j] * v[j];
      grad_k[i] = moment + value + a.key_mass[i];
    });
    block::row_times(k, a.key_value, d, dv, grad_v);
    block::sync();
    block::each(d * d, [&](int i) { a.key_moment[i] = g * a.key_moment[i]; });
    block::each(d * dv, [&](int i) {
      a.key_value[i] = g * a.key_value[i];
      a.corrected_value[i] = g3 * a.corrected_value[i];
    });
    block::each(d, [&](int i) {
      a.key_mass[i] = g * a.key_mass[i];
      a.corrected_mass[i] = g3 * a.corrected_mass[i];
    });
    block::sync();
  }

  // The unmasked stream's backward: the read x = q^T S^K, z = x S^Q, num = z P, den = z . m at the
  // state after token t, then the moments' updates (S^K, S^Q, P, m = g (.) + k k^T, q q^T, k v^T, k).
  HLA_HOST_DEVICE void unmasked_backward(const T* after, T* adjoint, T* scratch, const T* q, const T* k,
                                         const T* v, const T* d_num, const T& d_den, T* grad_q, T* grad_k,
                                         T* grad_v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma;
    Fields<const T*> s(after, d, dv);
    Fields<T*> a(adjoint, d, dv);
    T *x = scratch, *z = x + d, *d_z = z + d, *d_x = d_z + d;
    block::row_times(q, s.key_moment, d, d, x);
    block::each(d, [&](int i) {  // d_z = P d_num + d_den m
      T sum(0);
      for (int j = 0; j < dv; ++j) sum += s.key_value[i * dv + j] * d_num[j];
      d_z[i] = sum + d_den * s.key_mass[i];
    });
    block::sync();
    block::row_times(x, s.query_moment, d, d, z);
    block::times_column(s.query_moment, d_z, d, d, d_x);  // d_x = S^Q d_z
    block::sync();
    block::each(d * dv, [&](int i) { a.key_value[i] += z[i / dv] * d_num[i % dv]; });
    block::each(d, [&](int i) { a.key_mass[i] += d_den * z[i]; });
    block::each(d * d, [&](int i) {
      a.query_moment[i] += x[i / d] * d_z[i % d];
      a.key_moment[i] += q[i / d] * d_x[i % d];
    });
    block::times_column(s.key_moment, d_x, d, d, grad_q);  // dq = S^K d_x
    block::sync();
    block::each(d, [&](int i) {  // the moments: dk = (a_S + a_S^T) k + a_P v + a_m, dq += (a_Q + a_Q^T) q
      T key(0), value(0), query(0);
      for (int j = 0; j < d; ++j) key += (a.key_moment[i * d + j] + a.key_moment[j * d + i]) * k[j];
      for (int j = 0; j < dv; ++j) value += a.key_value[i * dv + j] * v[j];
      for (int j = 0; j < d; ++j) query += (a.query_moment[i * d + j] + a.query_moment[j * d + i]) * q[j];
      grad_k[i] = key + value + a.key_mass[i];
      grad_q[i] += query;
    });
    block::row_times(k, a.key_value, d, dv, grad_v);
    block::sync();
    block::each(d * d, [&](int i) {
      a.key_moment[i] = g * a.key_moment[i];
      a.query_moment[i] = g * a.query_moment[i];
    });
    block::each(d * dv, [&](int i) { a.key_value[i] = g * a.key_value[i]; });
    block::each(d, [&](int i) { a.key_mass[i] = g * a.key_mass[i]; });
    block::sync();
  }

  // (common.cuh, carry_adjoint) Unmasked: combine's moments S, S^Q, P, m = rho (.)_x + (.)_y are
  // linear in the carry, so d(.)_x = rho d(.) (F and eta's adjoints, which no unmasked readout
  // reaches, zero). Masked:
  // combine's S, P, m = rho (S, P, m)_x + (S, P, m)_y, F = rho^3 F_x + F_y + rho S_x X_y + rho Y_y P_x
  // + rho^2 S_x T1 with T1 = S^Q_y P_x, eta likewise with m, x_y and t1 = S^Q_y m_x: quadratic in
  // the carry, so its adjoint is taken at it. With U = S_x^T dF, u = S_x^T d_eta:
  //   d S_x = rho dS + rho (dF X_y^T + d_eta x_y^T) + rho^2 (dF T1^T + d_eta t1^T),
  //   d P_x = rho dP + rho Y_y^T dF + rho^2 S^Q_y^T U,  d m_x likewise with d_eta and u,
  //   d F_x = rho^3 dF,  d eta_x = rho^3 d_eta.
  static constexpr int carry_adjoint_scratch_size(int d, int dv) { return 2 * d * dv + 2 * d; }
  HLA_HOST_DEVICE void carry_adjoint(const T* x_base, const T* b, const T* d_out, T* d_x, T* scratch) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(x_base, d, dv), y(b, d, dv), a(d_out, d, dv);
    Fields<T*> o(d_x, d, dv);
    const T rho = *y.rho, rho2 = rho * rho, rho3 = rho2 * rho;
    if (!p.masked) {
      block::each(d * d, [&](int i) {
        o.key_moment[i] = rho * a.key_moment[i];
        o.query_moment[i] = rho * a.query_moment[i];
      });
      block::each(d * dv, [&](int i) {
        o.key_value[i] = rho * a.key_value[i];
        o.corrected_value[i] = T(0);
      });
      block::each(d, [&](int i) {
        o.key_mass[i] = rho * a.key_mass[i];
        o.corrected_mass[i] = T(0);
      });
      return;
    }
    T *t1 = scratch, *t1_mass = t1 + d * dv, *u = t1_mass + d, *u_mass = u + d * dv;
    block::each(d * dv, [&](int i) {
      t1[i] = block::product_entry(y.query_moment, x.key_value, d, dv, i / dv, i % dv);
      u[i] = block::transposed_product_entry(x.key_moment, a.corrected_value, d, d, dv, i / dv, i % dv);
    });
    block::each(d, [&](int i) {
      t1_mass[i] = block::product_entry(y.query_moment, x.key_mass, d, 1, i, 0);
      u_mass[i] = block::transposed_product_entry(x.key_moment, a.corrected_mass, d, d, 1, i, 0);
    });
    block::sync();
    block::each(d * d, [&](int i) {
      const int row = i / d, col = i % d;
      T first(0), second(0);
      for (int j = 0; j < dv; ++j) {
        first += a.corrected_value[row * dv + j] * y.query_value[col * dv + j];
        second += a.corrected_value[row * dv + j] * t1[col * dv + j];
      }
      first += a.corrected_mass[row] * y.query_mass[col];
      second += a.corrected_mass[row] * t1_mass[col];
      o.key_moment[i] = rho * a.key_moment[i] + rho * first + rho2 * second;
    });
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      o.key_value[i] =
          rho * a.key_value[i] +
          rho * block::transposed_product_entry(y.key_query, a.corrected_value, d, d, dv, row, col) +
          rho2 * block::transposed_product_entry(y.query_moment, u, d, d, dv, row, col);
      o.corrected_value[i] = rho3 * a.corrected_value[i];
    });
    block::each(d, [&](int i) {
      o.key_mass[i] = rho * a.key_mass[i] +
                      rho * block::transposed_product_entry(y.key_query, a.corrected_mass, d, d, 1, i, 0) +
                      rho2 * block::transposed_product_entry(y.query_moment, u_mass, d, d, 1, i, 0);
      o.corrected_mass[i] = rho3 * a.corrected_mass[i];
    });
  }

  // Hla3Segments with B a token (S^K_B = k k^T, S^Q_B = q q^T, P_B = k v^T, s = q.k,
  // X_B = s q v^T, Y_B = s k q^T, F_B = s^2 k v^T, rho_B = g), with w = S_A q, z = q^T P_A:
  //   F = g^3 F + s^2 k v^T + g s w v^T + g s k z^T + g^2 w z^T     (+ the same for eta with m)
  //   X = g^2 X + s q v^T + g q z^T,   Y = g^2 Y + s k q^T + g w q^T.
  HLA_HOST_DEVICE void absorb(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma, g2 = g * g, g3 = g2 * g;
    Fields<T*> f(s, d, dv);
    T *w = scratch, *z = scratch + d;
    const T score = block::dot(q, k, d);
    T mass(0);
    if (p.masked) {
      block::times_column(f.key_moment, q, d, d, w);
      block::row_times(q, f.key_value, d, dv, z);
      mass = block::dot(q, f.key_mass, d);
      block::sync();
    }
    const T score2 = score * score;
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      if (p.masked) {
        f.corrected_value[i] = g3 * f.corrected_value[i] + score2 * k[row] * v[col] +
                               g * score * w[row] * v[col] + g * score * k[row] * z[col] +
                               g2 * w[row] * z[col];
        f.query_value[i] = g2 * f.query_value[i] + score * q[row] * v[col] + g * q[row] * z[col];
      }
      f.key_value[i] = g * f.key_value[i] + k[row] * v[col];
    });
    block::each(d, [&](int i) {
      if (p.masked) {
        f.corrected_mass[i] = g3 * f.corrected_mass[i] + score2 * k[i] + g * score * w[i] +
                              g * score * mass * k[i] + g2 * mass * w[i];
        f.query_mass[i] = g2 * f.query_mass[i] + score * q[i] + g * mass * q[i];
      }
      f.key_mass[i] = g * f.key_mass[i] + k[i];
    });
    block::each(d * d, [&](int i) {
      const int row = i / d, col = i % d;
      if (p.masked) f.key_query[i] = g2 * f.key_query[i] + score * k[row] * q[col] + g * w[row] * q[col];
      f.key_moment[i] = g * f.key_moment[i] + k[row] * k[col];
      f.query_moment[i] = g * f.query_moment[i] + q[row] * q[col];
    });
    block::each(1, [&](int) { *f.rho = *f.rho * g; });
    block::sync();
  }

  // Hla3Segments::combine with T1 = S^Q_B P_A, t1 = S^Q_B m_A (rho = rho_B):
  //   F = rho^3 F_A + F_B + rho S_A X_B + rho Y_B P_A + rho^2 S_A T1,   X = rho^2 X_A + X_B + rho T1,
  //   Y = rho^2 Y_A + Y_B + rho S_A S^Q_B;  eta and x likewise with m. Unmasked: the moments only.
  HLA_HOST_DEVICE void combine(const T* a, const T* b, T* out, T* scratch) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(a, d, dv), y(b, d, dv);
    Fields<T*> o(out, d, dv);
    const T rho = *y.rho, rho2 = rho * rho, rho3 = rho2 * rho;
    T *t1 = scratch + 2 * d + 2 * dv, *t1_mass = t1 + d * dv;
    if (p.masked) {
      block::each(d * dv, [&](int i) {
        t1[i] = block::product_entry(y.query_moment, x.key_value, d, dv, i / dv, i % dv);
      });
      block::each(d,
                  [&](int i) { t1_mass[i] = block::product_entry(y.query_moment, x.key_mass, d, 1, i, 0); });
      block::sync();
    }
    block::each(d * d, [&](int i) {
      const int row = i / d, col = i % d;
      o.key_moment[i] = rho * x.key_moment[i] + y.key_moment[i];
      o.query_moment[i] = rho * x.query_moment[i] + y.query_moment[i];
      o.key_query[i] = p.masked ? rho2 * x.key_query[i] + y.key_query[i] +
                                      rho * block::product_entry(x.key_moment, y.query_moment, d, d, row, col)
                                : T(0);
    });
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      o.key_value[i] = rho * x.key_value[i] + y.key_value[i];
      if (p.masked) {
        o.corrected_value[i] = rho3 * x.corrected_value[i] + y.corrected_value[i] +
                               rho * block::product_entry(x.key_moment, y.query_value, d, dv, row, col) +
                               rho * block::product_entry(y.key_query, x.key_value, d, dv, row, col) +
                               rho2 * block::product_entry(x.key_moment, t1, d, dv, row, col);
        o.query_value[i] = rho2 * x.query_value[i] + y.query_value[i] + rho * t1[i];
      } else {
        o.corrected_value[i] = o.query_value[i] = T(0);
      }
    });
    block::each(d, [&](int i) {
      o.key_mass[i] = rho * x.key_mass[i] + y.key_mass[i];
      if (p.masked) {
        o.corrected_mass[i] = rho3 * x.corrected_mass[i] + y.corrected_mass[i] +
                              rho * block::product_entry(x.key_moment, y.query_mass, d, 1, i, 0) +
                              rho * block::product_entry(y.key_query, x.key_mass, d, 1, i, 0) +
                              rho2 * block::product_entry(x.key_moment, t1_mass, d, 1, i, 0);
        o.query_mass[i] = rho2 * x.query_mass[i] + y.query_mass[i] + rho * t1_mass[i];
      } else {
        o.corrected_mass[i] = o.query_mass[i] = T(0);
      }
    });
    block::each(1, [&](int) { *o.rho = *x.rho * rho; });
  }

  // Masked: num = q^T F, den = q^T eta. Unmasked (Sec. 7.1): z = q^T S^K S^Q, num = z P, den = z m.
  HLA_HOST_DEVICE void read(const T* s, T* scratch, const T* q, T* num, T* den) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> f(s, d, dv);
    if (p.masked) {
      block::row_times(q, f.corrected_value, d, dv, num);
      block::each(1, [&](int) { *den = block::dot(q, f.corrected_mass, d); });
      return;
    }
    T *x = scratch, *z = scratch + d;
    block::row_times(q, f.key_moment, d, d, x);
    block::sync();
    block::row_times(x, f.query_moment, d, d, z);
    block::sync();
    block::row_times(z, f.key_value, d, dv, num);
    block::each(1, [&](int) { *den = block::dot(z, f.key_mass, d); });
  }
};

}  // namespace hla::fast::gpu
