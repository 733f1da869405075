#pragma once

// A kernel author's recurrent masked hla2, written once for any scalar T (only +, -, * and T(0) on
// values), on plain row-major arrays: q, k [n, d], v [n, dv], the output [n, dv].
//   S = S + k k^T,  G = G + k (k^T C),  C = C + q v^T,  o_t = q_t^T (S C - G)
// (Sec. 3.1's masked second-order recurrence without decay.) Its broken twin drops G, the masked
// form's correction: the unmasked prefix form that a wrong mask gives.

#include <vector>

template <class T>
std::vector<T> my_hla2(const std::vector<T>& q, const std::vector<T>& k, const std::vector<T>& v, int n, int d,
                       int dv, bool broken) {
  std::vector<T> S(d * d, T(0)), C(d * dv, T(0)), G(d * dv, T(0)), o(n * dv, T(0)), kC(dv), qS(d);
  for (int t = 0; t < n; ++t) {
    const T* qt = &q[t * d];
    const T* kt = &k[t * d];
    const T* vt = &v[t * dv];
    if (!broken) {  // G reads C_{t-1}
      for (int j = 0; j < dv; ++j) {
        kC[j] = T(0);
        for (int i = 0; i < d; ++i) kC[j] += kt[i] * C[i * dv + j];
      }
      for (int i = 0; i < d; ++i)
        for (int j = 0; j < dv; ++j) G[i * dv + j] += kt[i] * kC[j];
    }
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < d; ++j) S[i * d + j] += kt[i] * kt[j];
    for (int i = 0; i < d; ++i)
      for (int j = 0; j < dv; ++j) C[i * dv + j] += qt[i] * vt[j];
    for (int j = 0; j < d; ++j) {
      qS[j] = T(0);
      for (int i = 0; i < d; ++i) qS[j] += qt[i] * S[i * d + j];
    }
    for (int j = 0; j < dv; ++j) {
      T sum(0);
      for (int i = 0; i < d; ++i) sum += qS[i] * C[i * dv + j] - qt[i] * G[i * dv + j];
      o[t * dv + j] = sum;
    }
  }
  return o;
}
