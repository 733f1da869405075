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
#include "hla/fast/slices.hpp"
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

// The GPU scan's backward of tokens begin .. begin + count - 1 of one sequence-head, as the kernels run
// it: the chunk summaries (absorb), the carries (the exclusive scan's tree, fast::exclusive_scan, as
// the kernels bracket it, each preceded by the slice's carry where it has one: precede_kernel), pass 1
// per chunk, then carry_adjoints and pass 3 per chunk. Algebra must have segments and a carry adjoint.
template <class Algebra, class T>
class DeviceScanSlice {
 public:
  using Flat = std::vector<T>;

  DeviceScanSlice(const Algebra& algebra, const Sequence<T>& s, const Terms<T>& d_terms, Index begin,
                  Index count, Index chunk, Index checkpoint)
      : algebra_(algebra),
        s_(s),
        d_terms_(d_terms),
        begin_(begin),
        count_(count),
        chunk_(chunk),
        checkpoint_(checkpoint),
        chunks_((count + chunk - 1) / chunk),
        size_(Algebra::summary_size(s.key_dim(), s.value_dim())),
        state_(fast::gpu::streaming_state_size(algebra)),
        work_(fast::gpu::combine_scratch<Algebra>(s.key_dim(), s.value_dim()) + 2 * s.key_dim() +
                  2 * s.value_dim(),
              T(0)),
        identity_(size_, T(0)),
        sums_(chunks_, Flat()),
        adjoints_(chunks_ * state_, T(0)) {
    const Index d = s.key_dim(), dv = s.value_dim();
    algebra.identity(identity_.data());
    Flat q(d, T(0)), k(d, T(0)), v(dv, T(0));
    for (Index c = 0; c < chunks_; ++c) {
      sums_[c] = identity_;
      for (Index t = begin + c * chunk; t < begin + std::min(count, (c + 1) * chunk); ++t) {
        for (Index i = 0; i < d; ++i) q[i] = s.q(t, i), k[i] = s.k(t, i);
        for (Index j = 0; j < dv; ++j) v[j] = s.v(t, j);
        algebra.absorb(sums_[c].data(), work_.data(), q.data(), k.data(), v.data());
      }
    }
  }

  // The slice's summary, its chunk summaries folded from the identity (fold_kernel).
  Flat summary() const {
    return fold(sums_.size(), [&](std::size_t c) { return sums_[c].data(); });
  }

  // fold_kernel's fold of count summaries from the identity, item(i) the i-th.
  template <class Item>
  Flat fold(std::size_t count, const Item& item) const {
    Flat folded = identity_, next(size_);
    for (std::size_t i = 0; i < count; ++i) {
      algebra_.combine(folded.data(), item(i), next.data(), work_.data());
      folded = next;
    }
    return folded;
  }

  // The carries from `carry_in` (nullptr: none, the unsplit scan), then pass 1 into g's rows.
  void forward(const T* carry_in, Gradients<T>& g) {
    carries_ = sums_;
    fast::exclusive_scan(
        carries_, identity_, [&](const Flat& a, const Flat& b) { return combine(a, b); }, 1);
    if (carry_in) {
      const Flat carry(carry_in, carry_in + size_);
      for (Flat& c : carries_) c = combine(carry, c);
    }
    pass(true, nullptr, g);
  }

  // After forward(): the adjoint of the slice's carry from its own readouts (carry_adjoints to chunk 0
  // on a copy of pass 1's adjoints).
  Flat carry_adjoint() const {
    Flat own = adjoints_, work(fast::gpu::carry_adjoint_work(algebra_), T(0));
    chain(own, nullptr, 0, work);
    return chunks_ > 0 ? Flat(own.begin(), own.begin() + state_) : Flat(state_, T(0));
  }

  // After forward(): carry_adjoints from `after` (the adjoint of the state after the slice; nullptr:
  // zero), then pass 3: the gradients into g's rows.
  void finish(const T* after, Gradients<T>& g) {
    Flat work(fast::gpu::carry_adjoint_work(algebra_), T(0));
    chain(adjoints_, after, 1, work);
    pass(false, after, g);
  }

 private:
  Flat combine(const Flat& a, const Flat& b) const {
    Flat out(size_, T(0));
    algebra_.combine(a.data(), b.data(), out.data(), work_.data());
    return out;
  }
  void chain(Flat& adjoints, const T* after, Index stop, Flat& work) const {
    fast::gpu::carry_adjoints(
        algebra_, chunks_, [&](std::int64_t c) { return carries_[c].data(); },
        [&](std::int64_t c) { return sums_[c].data(); },
        [&](std::int64_t c) { return adjoints.data() + c * state_; }, work.data(), after, stop);
  }
  void pass(bool own, const T* after_slice, Gradients<T>& g) {
    for (Index c = 0; c < chunks_; ++c) {
      const Index first = c * chunk_, count = std::min(count_, first + chunk_) - first;
      const T* after = own ? nullptr : c + 1 < chunks_ ? adjoints_.data() + (c + 1) * state_ : after_slice;
      const Flat a = device_chunk_backward(algebra_, s_, d_terms_, begin_ + first, count, checkpoint_,
                                           carries_[c].data(), after, g);
      if (own) std::copy(a.begin(), a.end(), adjoints_.begin() + c * state_);
    }
  }

  const Algebra& algebra_;
  const Sequence<T>& s_;
  const Terms<T>& d_terms_;
  Index begin_, count_, chunk_, checkpoint_, chunks_, size_, state_;
  mutable Flat work_;
  Flat identity_;
  std::vector<Flat> sums_, carries_;
  Flat adjoints_;
};

// The GPU scan's backward of one sequence-head.
template <class Algebra, class T>
Gradients<T> device_scan_backward(const Algebra& algebra, const Sequence<T>& s, const Terms<T>& d_terms,
                                  Index chunk, Index checkpoint) {
  Gradients<T> g = row_major_gradients<T>(s.length(), s.key_dim(), s.value_dim());
  DeviceScanSlice<Algebra, T> slice(algebra, s, d_terms, 0, s.length(), chunk, checkpoint);
  slice.forward(nullptr, g);
  slice.finish(nullptr, g);
  return g;
}

// The same with the sequence split as `slices` (docs/ranks.md), as the GPU ranks run it: each rank's
// summary; its carry folded from those before it; pass 1 and the adjoint of its carry; the ranks'
// chain (rank_after_adjoint, on each rank's own copy of the gathered adjoints); pass 2 and 3 from it.
template <class Algebra, class T>
Gradients<T> device_ranks_backward(const Algebra& algebra, const Sequence<T>& s, const Terms<T>& d_terms,
                                   const Slices& slices, Index chunk, Index checkpoint) {
  using Flat = std::vector<T>;
  const int ranks = slices.ranks();
  const Index size = Algebra::summary_size(s.key_dim(), s.value_dim());
  Gradients<T> g = row_major_gradients<T>(s.length(), s.key_dim(), s.value_dim());
  std::vector<DeviceScanSlice<Algebra, T>> parts;
  std::vector<Flat> summaries, own;
  for (int r = 0; r < ranks; ++r) {
    parts.emplace_back(algebra, s, d_terms, slices.begin(r), slices.length(r), chunk, checkpoint);
    summaries.push_back(parts.back().summary());
  }
  for (int r = 0; r < ranks; ++r) {
    const Flat carry = parts[r].fold(r, [&](std::size_t i) { return summaries[i].data(); });
    parts[r].forward(carry.data(), g);
    own.push_back(parts[r].carry_adjoint());
  }
  Flat carries(ranks * size, T(0)), work(fast::gpu::rank_chain_work(algebra), T(0)),
      after(fast::gpu::streaming_state_size(algebra), T(0));
  for (int r = 0; r < ranks; ++r) {
    std::vector<Flat> gathered = own;
    fast::gpu::rank_after_adjoint(
        algebra, ranks, r, [&](std::int64_t c) { return static_cast<const T*>(summaries[c].data()); },
        [&](std::int64_t c) { return gathered[c].data(); }, carries.data(), work.data(), after.data());
    parts[r].finish(after.data(), g);
  }
  return g;
}

}  // namespace hla::fast::gpu::host
