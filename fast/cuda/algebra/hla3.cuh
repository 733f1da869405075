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
  // The stream needs the first five fields only.
  static constexpr int stream_size(int d, int dv) { return d * d + 2 * d * dv + 2 * d; }
  // push, absorb and read need 2 d + 2 dv; combine (in global memory) also T1 and t1.
  static constexpr int scratch_size(int d, int dv) { return 2 * d + 2 * dv; }
  static constexpr int combine_scratch_size(int d, int dv) { return 2 * d + 2 * dv + d * dv + d; }

  AlgebraParams<T> p;

  HLA_HOST_DEVICE void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }

  // Hla3CorrectedStream: moments first, then F = g^3 F + (S^K q)(q^T P), eta = g^3 eta + (q.m) S^K q.
  HLA_HOST_DEVICE void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma, g3 = g * g * g;
    Fields<T*> f(s, d, dv);
    block::each(d * d, [&](int i) { f.key_moment[i] = g * f.key_moment[i] + k[i / d] * k[i % d]; });
    block::each(d * dv, [&](int i) { f.key_value[i] = g * f.key_value[i] + k[i / dv] * v[i % dv]; });
    block::each(d, [&](int i) { f.key_mass[i] = g * f.key_mass[i] + k[i]; });
    block::sync();
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
