#pragma once

// The GPU backward's kernel bodies (backward.cuh) run on the host, where a thread block is one
// thread, over any scalar: Z/p (fast/tests/device_algebra_test.cpp: equal to the CPU's bit for bit),
// and the instrumented scalars (fast/tests/gpu_test.cpp, and the error report's gpu-scan backward
// rows: the rounding depths and gauges of exactly the kernels' operations, which bound their float
// results). Each array is sized as the kernels size it. Host C++ only: no CUDA headers needed.

#include <algorithm>
#include <cstdint>
#include <vector>

#include "backward.cuh"
#include "hla/fast/scan.hpp"
#include "hla/reference/gradient.hpp"

namespace hla::fast::gpu::host {

// Gradients as the kernels write them: row-major n x d, n x d, n x dv.
template <class T>
Gradients<T> row_major_gradients(Index n, Index d, Index dv) {
  return {Matrix<T>(n, d), Matrix<T>(n, d), Matrix<T>(n, dv), {}};
}

// stream_backward for tokens begin .. begin + count - 1: their gradients into g's rows, from the
// state `initial` before them and the adjoint `after` of the state after them (nullptr: zero);
// returns the adjoint of the state before them.
template <class Algebra, class T>
std::vector<T> device_chunk_backward(const Algebra& algebra, const Sequence<T>& s, const Terms<T>& d_terms,
                                     Index begin, Index count, Index checkpoint, const T* initial,
                                     const T* after, Gradients<T>& g) {
  using Flat = std::vector<T>;
  const Index d = s.key_dim(), dv = s.value_dim();
  const Index size = fast::gpu::streaming_state_size(algebra);
  Flat adjoint(size, T(0)), checkpoints((count + checkpoint - 1) / checkpoint * size, T(0)),
      states((checkpoint + 1) * size, T(0));
  Flat q(d, T(0)), k(d, T(0)), v(dv, T(0)), d_num(dv, T(0)), d_den(1, T(0)),
      work(fast::gpu::backward_scratch<Algebra>(d, dv), T(0));
  const fast::gpu::BackwardArrays<T> arrays{adjoint.data(), checkpoints.data(), states.data(),
                                            q.data(),       k.data(),           v.data(),
                                            d_num.data(),   d_den.data(),       work.data()};
  const auto load = [&](std::int64_t local, bool adjoints) {
    const Index t = begin + local;
    for (Index i = 0; i < d; ++i) q[i] = s.q(t, i), k[i] = s.k(t, i);
    for (Index j = 0; j < dv; ++j) v[j] = s.v(t, j);
    if (!adjoints) return;
    for (Index j = 0; j < dv; ++j) d_num[j] = d_terms.num(t, j);
    d_den[0] = d_terms.den(t);
  };
  fast::gpu::stream_backward(algebra, count, checkpoint, arrays, load, g.dq.data() + begin * d,
                             g.dk.data() + begin * d, g.dv.data() + begin * dv, initial, after);
  return adjoint;
}

// The GPU streaming backward of one sequence-head.
template <class Algebra, class T>
Gradients<T> device_backward(const Algebra& algebra, const Sequence<T>& s, const Terms<T>& d_terms,
                             Index checkpoint) {
  Gradients<T> g = row_major_gradients<T>(s.length(), s.key_dim(), s.value_dim());
  device_chunk_backward(algebra, s, d_terms, 0, s.length(), checkpoint, static_cast<const T*>(nullptr),
                        static_cast<const T*>(nullptr), g);
  return g;
}

// The GPU scan's backward of one sequence-head: the forward's chunk summaries (absorb) and carries
// (the exclusive scan's tree, fast::exclusive_scan, as the kernels bracket it), pass 1 per chunk,
// carry_adjoints, pass 3 per chunk. Algebra must have segments and a carry adjoint.
template <class Algebra, class T>
Gradients<T> device_scan_backward(const Algebra& algebra, const Sequence<T>& s, const Terms<T>& d_terms,
                                  Index chunk, Index checkpoint) {
  using Flat = std::vector<T>;
  const Index n = s.length(), d = s.key_dim(), dv = s.value_dim();
  const Index size = Algebra::summary_size(d, dv), state = fast::gpu::streaming_state_size(algebra);
  const Index chunks = (n + chunk - 1) / chunk;
  Flat work(fast::gpu::combine_scratch<Algebra>(d, dv) + 2 * d + 2 * dv, T(0)), q(d, T(0)), k(d, T(0)),
      v(dv, T(0));
  Flat identity(size, T(0));
  algebra.identity(identity.data());
  std::vector<Flat> sums(chunks, identity);
  for (Index c = 0; c < chunks; ++c) {
    for (Index t = c * chunk; t < std::min(n, (c + 1) * chunk); ++t) {
      for (Index i = 0; i < d; ++i) q[i] = s.q(t, i), k[i] = s.k(t, i);
      for (Index j = 0; j < dv; ++j) v[j] = s.v(t, j);
      algebra.absorb(sums[c].data(), work.data(), q.data(), k.data(), v.data());
    }
  }
  std::vector<Flat> carries = sums;
  fast::exclusive_scan(
      carries, identity,
      [&](const Flat& a, const Flat& b) {
        Flat out(size, T(0));
        algebra.combine(a.data(), b.data(), out.data(), work.data());
        return out;
      },
      1);
  Gradients<T> g = row_major_gradients<T>(n, d, dv);
  Flat adjoints(chunks * state, T(0));
  const auto pass = [&](bool own) {
    for (Index c = 0; c < chunks; ++c) {
      const Index begin = c * chunk, count = std::min(n, begin + chunk) - begin;
      const T* after = !own && c + 1 < chunks ? adjoints.data() + (c + 1) * state : nullptr;
      const Flat a =
          device_chunk_backward(algebra, s, d_terms, begin, count, checkpoint, carries[c].data(), after, g);
      if (own) std::copy(a.begin(), a.end(), adjoints.begin() + c * state);
    }
  };
  pass(true);
  Flat carry_work(fast::gpu::carry_adjoint_work(algebra), T(0));
  fast::gpu::carry_adjoints(
      algebra, chunks, [&](std::int64_t c) { return carries[c].data(); },
      [&](std::int64_t c) { return sums[c].data(); }, adjoints.data(), carry_work.data());
  pass(false);
  return g;
}

}  // namespace hla::fast::gpu::host
