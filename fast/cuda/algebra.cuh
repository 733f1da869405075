#pragma once

// The device side of every variant: the streaming states (fast/algebra/*.hpp, the *Stream
// classes) and the segment summaries with their concatenation (the *Segments classes), on flat
// row-major arrays that one thread block updates together. Each function here is the CPU
// class's formula, specialised where one operand is a single token: absorb(s, q, k, v) is
// combine(s, token(q, k, v)) with the token's rank-one summary multiplied out, O(d^2 + d dv)
// instead of O(d^2 dv). In Z/p both are the same polynomial, so the results agree bit for bit.
//
// Conventions: every thread of the block calls every function. push/absorb end with a barrier;
// read and combine do not (the caller synchronizes before the state or scratch changes again).
// `scratch` holds scratch_size(d, dv) scalars of the block's own (combine: combine_scratch_size
// where an algebra defines it).

#include "block.cuh"

namespace hla::fast::gpu {

template <class T>
struct Params {
  int d, dv;
  T gamma, ridge;
  bool masked;
  bool corrected;  // the toolkit's corrected form (docs/findings.md) rather than the printed one
};

// The empty segment: every field zero, rho (the last scalar) one. One write per entry: a fill
// followed by a separate write of rho would race between threads.
template <class T>
__device__ inline void empty_summary(T* s, int size) {
  block::each(size, [&](int i) { s[i] = i == size - 1 ? T(1) : T(0); });
}

// Carves consecutive fields out of a flat summary.
template <class P>
struct Carver {
  P next;
  __device__ P take(int count) {
    P field = next;
    next += count;
    return field;
  }
};

// ---------------------------------------------------------------------------------------------
// Linear attention (Sec. 2.2): P^KV, m^K; as segments also rho.

template <class T>
struct LinearAlgebra {
  template <class P>
  struct Fields {
    P key_value, key_mass, rho;
    __device__ Fields(P base, int d, int dv) {
      Carver<P> c{base};
      key_value = c.take(d * dv);
      key_mass = c.take(d);
      rho = c.take(1);
    }
  };
  static constexpr bool has_segments = true;
  static constexpr int summary_size(int d, int dv) { return d * dv + d + 1; }
  static constexpr int scratch_size(int, int) { return 0; }

  Params<T> p;

  __device__ void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }
  // P = g P + k v^T, m = g m + k.
  __device__ void absorb(T* s, T*, const T*, const T* k, const T* v) const {
    Fields<T*> f(s, p.d, p.dv);
    block::each(p.d * p.dv, [&](int i) { f.key_value[i] = p.gamma * f.key_value[i] + k[i / p.dv] * v[i % p.dv]; });
    block::each(p.d, [&](int i) { f.key_mass[i] = p.gamma * f.key_mass[i] + k[i]; });
    block::each(1, [&](int) { *f.rho = *f.rho * p.gamma; });
    __syncthreads();
  }
  __device__ void combine(const T* a, const T* b, T* out, T*) const {
    Fields<const T*> x(a, p.d, p.dv), y(b, p.d, p.dv);
    Fields<T*> o(out, p.d, p.dv);
    const T r = *y.rho;
    block::each(p.d * p.dv, [&](int i) { o.key_value[i] = r * x.key_value[i] + y.key_value[i]; });
    block::each(p.d, [&](int i) { o.key_mass[i] = r * x.key_mass[i] + y.key_mass[i]; });
    block::each(1, [&](int) { *o.rho = *x.rho * r; });
  }
  __device__ void read(const T* s, T*, const T* q, T* num, T* den) const {
    Fields<const T*> f(s, p.d, p.dv);
    block::row_times(q, f.key_value, p.d, p.dv, num);
    block::each(1, [&](int) { *den = block::dot(q, f.key_mass, p.d); });
  }
  // The stream is the segment summary without rho.
  __device__ void push(T* s, T* scratch, const T* q, const T* k, const T* v) const { absorb(s, scratch, q, k, v); }
};

// ---------------------------------------------------------------------------------------------
// Second-order HLA: S^K, C^QV, m^Q, G, h (Thm 3.1, Sec. 3.1, Alg. 1), rho as segments.

template <class T>
struct Hla2Algebra {
  template <class P>
  struct Fields {
    P key_moment, query_value, query_mass, cross_value, cross_mass, rho;
    __device__ Fields(P base, int d, int dv) {
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

  Params<T> p;

  __device__ void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }

  // Streaming (Hla2Stream): G_t = a G + b k (k^T C_{t-1}), published a = g, b = 1 (Sec. 3.1,
  // Sec. 4.3, Alg. 1 line 6); corrected a = g^2, b = g (F1).
  __device__ void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const T a = p.corrected ? p.gamma * p.gamma : p.gamma;
    const T b = p.corrected ? p.gamma : T(1);
    update(s, scratch, q, k, v, a, b);
  }
  // Segments (Hla2Segments, Eq. 4.1 / Sec. 4.2) with B a token (S_B = k k^T, C_B = q v^T,
  // G_B = 0, rho_B = g): G = c G + S_B (g C) = c G + g k (k^T C), c = g (published) or g^2 (F3).
  __device__ void absorb(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const T c = p.corrected ? p.gamma * p.gamma : p.gamma;
    update(s, scratch, q, k, v, c, p.gamma);
  }
  __device__ void combine(const T* a, const T* b, T* out, T*) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(a, d, dv), y(b, d, dv);
    Fields<T*> o(out, d, dv);
    const T r = *y.rho;
    const T carried = p.corrected ? r * r : r;
    block::each(d * d, [&](int i) { o.key_moment[i] = r * x.key_moment[i] + y.key_moment[i]; });
    block::each(d * dv, [&](int i) {
      o.query_value[i] = r * x.query_value[i] + y.query_value[i];
      o.cross_value[i] = p.masked ? carried * x.cross_value[i] + y.cross_value[i] +
                                        block::product_entry(y.key_moment, x.query_value, d, dv, i / dv, i % dv) * r
                                  : T(0);
    });
    block::each(d, [&](int i) {
      o.query_mass[i] = r * x.query_mass[i] + y.query_mass[i];
      o.cross_mass[i] = p.masked ? carried * x.cross_mass[i] + y.cross_mass[i] +
                                       block::product_entry(y.key_moment, x.query_mass, d, 1, i, 0) * r
                                 : T(0);
    });
    block::each(1, [&](int) { *o.rho = *x.rho * r; });
  }
  // Alg. 1 lines 9-14: u = q^T (S + lambda I), num = u C - q^T G, den = u m - q^T h.
  __device__ void read(const T* s, T* scratch, const T* q, T* num, T* den) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> f(s, d, dv);
    T* u = scratch;
    block::row_times(q, f.key_moment, d, d, u);
    __syncthreads();
    block::each(d, [&](int i) { u[i] += p.ridge * q[i]; });
    __syncthreads();
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
  __device__ void update(T* s, T* scratch, const T* q, const T* k, const T* v, const T& a, const T& b) const {
    const int d = p.d, dv = p.dv;
    Fields<T*> f(s, d, dv);
    T* w = scratch;  // k^T C (dv)
    T key_mass_dot(0);
    if (p.masked) {
      block::row_times(k, f.query_value, d, dv, w);
      key_mass_dot = block::dot(k, f.query_mass, d);
      __syncthreads();
    }
    block::each(d * dv, [&](int i) {
      const int r = i / dv, c = i % dv;
      if (p.masked) f.cross_value[i] = a * f.cross_value[i] + b * k[r] * w[c];
      f.query_value[i] = p.gamma * f.query_value[i] + q[r] * v[c];
    });
    block::each(d, [&](int i) {
      if (p.masked) f.cross_mass[i] = a * f.cross_mass[i] + b * k[i] * key_mass_dot;
      f.query_mass[i] = p.gamma * f.query_mass[i] + q[i];
    });
    block::each(d * d, [&](int i) { f.key_moment[i] = p.gamma * f.key_moment[i] + k[i / d] * k[i % d]; });
    block::each(1, [&](int) { *f.rho = *f.rho * p.gamma; });
    __syncthreads();
  }
};

// ---------------------------------------------------------------------------------------------
// Asymmetric HLA (Thm 6.1, Alg. 2): P^KV, m^K, E, n; as segments also R^KQ and rho (Eq. 6.2).

template <class T>
struct AhlaAlgebra {
  template <class P>
  struct Fields {
    P key_value, key_mass, routed_value, routed_mass, key_query, rho;
    __device__ Fields(P base, int d, int dv) {
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

  Params<T> p;

  __device__ void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }
  // Alg. 2 lines 3-6: P = g P + k v^T, m = g m + k, then E = g E + k (q^T P), n = g n + k (q . m).
  __device__ void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    Fields<T*> f(s, d, dv);
    block::each(d * dv, [&](int i) { f.key_value[i] = p.gamma * f.key_value[i] + k[i / dv] * v[i % dv]; });
    block::each(d, [&](int i) { f.key_mass[i] = p.gamma * f.key_mass[i] + k[i]; });
    __syncthreads();
    T* r = scratch;
    block::row_times(q, f.key_value, d, dv, r);
    const T mass = block::dot(q, f.key_mass, d);
    __syncthreads();
    block::each(d * dv, [&](int i) { f.routed_value[i] = p.gamma * f.routed_value[i] + k[i / dv] * r[i % dv]; });
    block::each(d, [&](int i) { f.routed_mass[i] = p.gamma * f.routed_mass[i] + mass * k[i]; });
    __syncthreads();
  }
  // AhlaSegments with B a token (R_B = k q^T, P_B = k v^T, E_B = (q.k) k v^T, rho_B = g):
  // E = g E + E_B + R_B (g P) = g E + (q.k) k v^T + g k (q^T P); R = c R + k q^T with
  // c = g (printed, Sec. 6.2) or 1 (F4).
  __device__ void absorb(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    Fields<T*> f(s, d, dv);
    T* z = scratch;  // q^T P
    block::row_times(q, f.key_value, d, dv, z);
    const T mass = block::dot(q, f.key_mass, d);
    const T score = block::dot(q, k, d);
    __syncthreads();
    const T key_query_decay = p.corrected ? T(1) : p.gamma;
    block::each(d * dv, [&](int i) {
      const int r = i / dv, c = i % dv;
      f.routed_value[i] = p.gamma * f.routed_value[i] + score * k[r] * v[c] + p.gamma * k[r] * z[c];
      f.key_value[i] = p.gamma * f.key_value[i] + k[r] * v[c];
    });
    block::each(d, [&](int i) {
      f.routed_mass[i] = p.gamma * f.routed_mass[i] + score * k[i] + p.gamma * mass * k[i];
      f.key_mass[i] = p.gamma * f.key_mass[i] + k[i];
    });
    block::each(d * d, [&](int i) { f.key_query[i] = key_query_decay * f.key_query[i] + k[i / d] * q[i % d]; });
    block::each(1, [&](int) { *f.rho = *f.rho * p.gamma; });
    __syncthreads();
  }
  __device__ void combine(const T* a, const T* b, T* out, T*) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(a, d, dv), y(b, d, dv);
    Fields<T*> o(out, d, dv);
    const T r = *y.rho;
    const T key_query_decay = p.corrected ? T(1) : r;
    block::each(d * d, [&](int i) { o.key_query[i] = key_query_decay * x.key_query[i] + y.key_query[i]; });
    block::each(d * dv, [&](int i) {
      o.key_value[i] = r * x.key_value[i] + y.key_value[i];
      o.routed_value[i] = r * x.routed_value[i] + y.routed_value[i] +
                          block::product_entry(y.key_query, x.key_value, d, dv, i / dv, i % dv) * r;
    });
    block::each(d, [&](int i) {
      o.key_mass[i] = r * x.key_mass[i] + y.key_mass[i];
      o.routed_mass[i] = r * x.routed_mass[i] + y.routed_mass[i] +
                         block::product_entry(y.key_query, x.key_mass, d, 1, i, 0) * r;
    });
    block::each(1, [&](int) { *o.rho = *x.rho * r; });
  }
  // Alg. 2 lines 7-9: num = q^T E, den = q^T n.
  __device__ void read(const T* s, T*, const T* q, T* num, T* den) const {
    Fields<const T*> f(s, p.d, p.dv);
    block::row_times(q, f.routed_value, p.d, p.dv, num);
    block::each(1, [&](int) { *den = block::dot(q, f.routed_mass, p.d); });
  }
};

// ---------------------------------------------------------------------------------------------
// Third-order HLA as printed (Alg. 3, Eqs. 7.1-7.3): S^K, S^Q, P^KV, m^K, G1-G3, h1-h3.
// Streaming only: the printed scan (Eqs. 7.6-7.7) keeps O(d^3 dv) maps per summary.

template <class T>
struct Hla3PublishedAlgebra {
  template <class P>
  struct Fields {
    P key_moment, query_moment, key_value, key_mass, g1, g2, g3, h1, h2, h3;
    __device__ Fields(P base, int d, int dv) {
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

  Params<T> p;

  // Alg. 3 lines 4-11: the cross-summaries read the moments before they take token t.
  __device__ void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma;
    Fields<T*> f(s, d, dv);
    T *u1 = scratch, *a2 = scratch + d, *a3 = scratch + 2 * d, *z1 = scratch + 3 * d, *z2 = z1 + dv;
    T mass1(0), mass2(0);
    if (p.masked) {
      block::times_column(f.query_moment, k, d, d, u1);  // u1 = S^Q_{t-1} k
      block::times_column(f.key_moment, q, d, d, a2);    // a2 = S^K_{t-1} q
      __syncthreads();
      block::times_column(f.key_moment, u1, d, d, a3);  // a3 = S^K_{t-1} S^Q_{t-1} k
      block::row_times(u1, f.key_value, d, dv, z1);     // u1^T P_{t-1}
      block::row_times(q, f.key_value, d, dv, z2);      // q^T P_{t-1}
      mass1 = block::dot(u1, f.key_mass, d);
      mass2 = block::dot(q, f.key_mass, d);
      __syncthreads();
    }
    block::each(d * dv, [&](int i) {
      const int r = i / dv, c = i % dv;
      if (p.masked) {
        f.g1[i] = g * f.g1[i] + k[r] * z1[c];
        f.g2[i] = g * f.g2[i] + a2[r] * z2[c];
        f.g3[i] = g * f.g3[i] + a3[r] * v[c];
      }
      f.key_value[i] = g * f.key_value[i] + k[r] * v[c];
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
    __syncthreads();
  }
  // Alg. 3 lines 13-17: num = (S^Q S^K q)^T P - q^T (G1 + G2 + G3), den = q^T S^K S^Q m - q^T (h1 + h2 + h3).
  __device__ void read(const T* s, T* scratch, const T* q, T* num, T* den) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> f(s, d, dv);
    T *x = scratch, *y = scratch + d, *z = scratch + 2 * d, *w = scratch + 3 * d;
    block::times_column(f.key_moment, q, d, d, x);           // S^K q
    block::times_column(f.query_moment, f.key_mass, d, d, y);  // S^Q m
    __syncthreads();
    block::times_column(f.query_moment, x, d, d, z);  // S^Q S^K q
    block::times_column(f.key_moment, y, d, d, w);    // S^K S^Q m
    __syncthreads();
    block::each(dv, [&](int j) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += z[i] * f.key_value[i * dv + j];
      if (p.masked) {
        for (int i = 0; i < d; ++i) sum -= q[i] * f.g1[i * dv + j] + q[i] * f.g2[i * dv + j] + q[i] * f.g3[i * dv + j];
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
  template <class P>
  struct Fields {
    P key_moment, key_value, key_mass, corrected_value, corrected_mass, query_moment, query_value, query_mass,
        key_query, rho;
    __device__ Fields(P base, int d, int dv) {
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

  Params<T> p;

  __device__ void identity(T* s) const { empty_summary(s, summary_size(p.d, p.dv)); }

  // Hla3CorrectedStream: moments first, then F = g^3 F + (S^K q)(q^T P), eta = g^3 eta + (q.m) S^K q.
  __device__ void push(T* s, T* scratch, const T* q, const T* k, const T* v) const {
    const int d = p.d, dv = p.dv;
    const T g = p.gamma, g3 = g * g * g;
    Fields<T*> f(s, d, dv);
    block::each(d * d, [&](int i) { f.key_moment[i] = g * f.key_moment[i] + k[i / d] * k[i % d]; });
    block::each(d * dv, [&](int i) { f.key_value[i] = g * f.key_value[i] + k[i / dv] * v[i % dv]; });
    block::each(d, [&](int i) { f.key_mass[i] = g * f.key_mass[i] + k[i]; });
    __syncthreads();
    T *metric_query = scratch, *z = scratch + d;
    block::times_column(f.key_moment, q, d, d, metric_query);
    block::row_times(q, f.key_value, d, dv, z);
    const T mass = block::dot(q, f.key_mass, d);
    __syncthreads();
    block::each(d * dv, [&](int i) { f.corrected_value[i] = g3 * f.corrected_value[i] + metric_query[i / dv] * z[i % dv]; });
    block::each(d, [&](int i) { f.corrected_mass[i] = g3 * f.corrected_mass[i] + mass * metric_query[i]; });
    __syncthreads();
  }

  // Hla3Segments with B a token (S^K_B = k k^T, S^Q_B = q q^T, P_B = k v^T, s = q.k,
  // X_B = s q v^T, Y_B = s k q^T, F_B = s^2 k v^T, rho_B = g), with w = S_A q, z = q^T P_A:
  //   F = g^3 F + s^2 k v^T + g s w v^T + g s k z^T + g^2 w z^T     (+ the same for eta with m)
  //   X = g^2 X + s q v^T + g q z^T,   Y = g^2 Y + s k q^T + g w q^T.
  __device__ void absorb(T* s, T* scratch, const T* q, const T* k, const T* v) const {
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
      __syncthreads();
    }
    const T score2 = score * score;
    block::each(d * dv, [&](int i) {
      const int r = i / dv, c = i % dv;
      if (p.masked) {
        f.corrected_value[i] = g3 * f.corrected_value[i] + score2 * k[r] * v[c] + g * score * w[r] * v[c] +
                               g * score * k[r] * z[c] + g2 * w[r] * z[c];
        f.query_value[i] = g2 * f.query_value[i] + score * q[r] * v[c] + g * q[r] * z[c];
      }
      f.key_value[i] = g * f.key_value[i] + k[r] * v[c];
    });
    block::each(d, [&](int i) {
      if (p.masked) {
        f.corrected_mass[i] = g3 * f.corrected_mass[i] + score2 * k[i] + g * score * w[i] + g * score * mass * k[i] +
                              g2 * mass * w[i];
        f.query_mass[i] = g2 * f.query_mass[i] + score * q[i] + g * mass * q[i];
      }
      f.key_mass[i] = g * f.key_mass[i] + k[i];
    });
    block::each(d * d, [&](int i) {
      const int r = i / d, c = i % d;
      if (p.masked) f.key_query[i] = g2 * f.key_query[i] + score * k[r] * q[c] + g * w[r] * q[c];
      f.key_moment[i] = g * f.key_moment[i] + k[r] * k[c];
      f.query_moment[i] = g * f.query_moment[i] + q[r] * q[c];
    });
    block::each(1, [&](int) { *f.rho = *f.rho * g; });
    __syncthreads();
  }

  // Hla3Segments::combine with T1 = S^Q_B P_A, t1 = S^Q_B m_A (r = rho_B):
  //   F = r^3 F_A + F_B + r S_A X_B + r Y_B P_A + r^2 S_A T1,   X = r^2 X_A + X_B + r T1,
  //   Y = r^2 Y_A + Y_B + r S_A S^Q_B;  eta and x likewise with m. Unmasked: the moments only.
  __device__ void combine(const T* a, const T* b, T* out, T* scratch) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> x(a, d, dv), y(b, d, dv);
    Fields<T*> o(out, d, dv);
    const T r = *y.rho, r2 = r * r, r3 = r2 * r;
    T *t1 = scratch + 2 * d + 2 * dv, *t1_mass = t1 + d * dv;
    if (p.masked) {
      block::each(d * dv, [&](int i) { t1[i] = block::product_entry(y.query_moment, x.key_value, d, dv, i / dv, i % dv); });
      block::each(d, [&](int i) { t1_mass[i] = block::product_entry(y.query_moment, x.key_mass, d, 1, i, 0); });
      __syncthreads();
    }
    block::each(d * d, [&](int i) {
      const int row = i / d, col = i % d;
      o.key_moment[i] = r * x.key_moment[i] + y.key_moment[i];
      o.query_moment[i] = r * x.query_moment[i] + y.query_moment[i];
      o.key_query[i] = p.masked ? r2 * x.key_query[i] + y.key_query[i] +
                                      r * block::product_entry(x.key_moment, y.query_moment, d, d, row, col)
                                : T(0);
    });
    block::each(d * dv, [&](int i) {
      const int row = i / dv, col = i % dv;
      o.key_value[i] = r * x.key_value[i] + y.key_value[i];
      if (p.masked) {
        o.corrected_value[i] = r3 * x.corrected_value[i] + y.corrected_value[i] +
                               r * block::product_entry(x.key_moment, y.query_value, d, dv, row, col) +
                               r * block::product_entry(y.key_query, x.key_value, d, dv, row, col) +
                               r2 * block::product_entry(x.key_moment, t1, d, dv, row, col);
        o.query_value[i] = r2 * x.query_value[i] + y.query_value[i] + r * t1[i];
      } else {
        o.corrected_value[i] = o.query_value[i] = T(0);
      }
    });
    block::each(d, [&](int i) {
      o.key_mass[i] = r * x.key_mass[i] + y.key_mass[i];
      if (p.masked) {
        o.corrected_mass[i] = r3 * x.corrected_mass[i] + y.corrected_mass[i] +
                              r * block::product_entry(x.key_moment, y.query_mass, d, 1, i, 0) +
                              r * block::product_entry(y.key_query, x.key_mass, d, 1, i, 0) +
                              r2 * block::product_entry(x.key_moment, t1_mass, d, 1, i, 0);
        o.query_mass[i] = r2 * x.query_mass[i] + y.query_mass[i] + r * t1_mass[i];
      } else {
        o.corrected_mass[i] = o.query_mass[i] = T(0);
      }
    });
    block::each(1, [&](int) { *o.rho = *x.rho * r; });
  }

  // Masked: num = q^T F, den = q^T eta. Unmasked (Sec. 7.1): z = q^T S^K S^Q, num = z P, den = z m.
  __device__ void read(const T* s, T* scratch, const T* q, T* num, T* den) const {
    const int d = p.d, dv = p.dv;
    Fields<const T*> f(s, d, dv);
    if (p.masked) {
      block::row_times(q, f.corrected_value, d, dv, num);
      block::each(1, [&](int) { *den = block::dot(q, f.corrected_mass, d); });
      return;
    }
    T *x = scratch, *z = scratch + d;
    block::row_times(q, f.key_moment, d, d, x);
    __syncthreads();
    block::row_times(x, f.query_moment, d, d, z);
    __syncthreads();
    block::row_times(z, f.key_value, d, dv, num);
    block::each(1, [&](int) { *den = block::dot(z, f.key_mass, d); });
  }
};

}  // namespace hla::fast::gpu
