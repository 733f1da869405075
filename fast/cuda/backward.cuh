#pragma once

// One sequence-head's streaming backward on flat arrays: fast/backward.hpp's stream_gradients with
// the device algebra's backward (algebra/common.cuh, "The backward"). The body of the GPU kernel
// (kernels.cu) and, compiled for the host where a block is one thread, of the host tests, which
// check it against the CPU's backward bit for bit in Z/p on every machine.
//
// A forward pass from the zero state keeps the state before every checkpoint-th token; then each
// segment, from the last, has its states recomputed from its checkpoint, and its tokens are taken
// in reverse by the algebra's backward, which carries the adjoint of the state from after a token
// to before it. Memory: ceil(n / checkpoint) + checkpoint + 1 states and one adjoint.
//
// The scan's backward (p. 7, "Backward for gradients") is built from the same pieces, per chunk of
// the forward scan (kernels.cu): with carry_c the state before chunk c (the forward's exclusive
// scan) and sum_c its summary, carry_(c+1) = carry_c (+) sum_c. Pass 1, every chunk at once: its
// tokens' backward from its carry, the adjoint at the state after it zero, gives A_c, the adjoint
// of carry_c from chunk c's own readouts. Pass 2, per sequence-head from the last chunk back
// (carry_adjoints): E_(c-1) = A_c + (the adjoint of carry_c through (+) sum_c)(E_c), the adjoint
// of the state after chunk c - 1 from every later readout. Pass 3, every chunk at once: its
// tokens' backward again, from its carry and from E_c, which gives their gradients exactly: the
// chain rule through the serial recurrence, the carry and E_c standing in for everything outside
// the chunk. Where the stream and the scan are the same operator (no finding for either), every
// bracketing is the serial recurrence (Thm 4.1) and so is this gradient.

#include <cstdint>

#include "algebra/dispatch.cuh"

namespace hla::fast::gpu {

// Scalars of scratch the backward needs: the push's and the algebra's backward's.
template <class Algebra>
constexpr int backward_scratch(int d, int dv) {
  const int push = Algebra::scratch_size(d, dv), backward = Algebra::backward_scratch_size(d, dv);
  return push > backward ? push : backward;
}

// Where one sequence-head's backward keeps its arrays: the adjoint (streaming_state_size scalars),
// the checkpoints and the segment's states (in global memory on the device), and one token's
// q (d), k (d), v (dv), d_num (dv), d_den (1) with the scratch (in shared memory).
template <class T>
struct BackwardArrays {
  T* adjoint;
  T* checkpoints;  // ceil(n / checkpoint) states
  T* states;       // checkpoint + 1 states: before each token of the segment at hand, and after its last
  T *q, *k, *v, *d_num, *d_den, *scratch;
};

// Gradients of one sequence-head (or one chunk of it) into grad_q, grad_k [n, d] and grad_v
// [n, dv]. load(t, adjoints) puts token t's q, k, v (and, if adjoints, its d_num and d_den) into
// w's token arrays; it is followed by a barrier before they are read. `initial` is the state
// before the first token (its first streaming_state_size scalars; nullptr: the zero state) and
// `after` the adjoint of the state after the last token (nullptr: zero); w.adjoint ends as the
// adjoint of the state before the first token.
template <class Algebra, class T, class Load>
HLA_HOST_DEVICE void stream_backward(const Algebra& algebra, std::int64_t length, std::int64_t checkpoint,
                                     const BackwardArrays<T>& w, const Load& load, T* grad_q, T* grad_k,
                                     T* grad_v, const T* initial = nullptr, const T* after = nullptr) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = streaming_state_size(algebra);
  T* state = w.states;
  if (initial) {
    block::copy(initial, state, size);
  } else {
    block::fill(state, size, T(0));
  }
  for (std::int64_t t = 0; t < length; ++t) {
    if (t % checkpoint == 0) block::copy(state, w.checkpoints + (t / checkpoint) * size, size);
    load(t, false);
    block::sync();
    algebra.push(state, w.scratch, w.q, w.k, w.v);
  }
  if (after) {
    block::copy(after, w.adjoint, size);
  } else {
    block::fill(w.adjoint, size, T(0));
  }
  for (std::int64_t segment = (length + checkpoint - 1) / checkpoint - 1; segment >= 0; --segment) {
    const std::int64_t first = segment * checkpoint,
                       last = length < first + checkpoint ? length : first + checkpoint;
    block::copy(w.checkpoints + segment * size, w.states, size);
    for (std::int64_t t = first; t < last; ++t) {
      T* before = w.states + (t - first) * size;
      block::sync();
      block::copy(before, before + size, size);
      load(t, false);
      block::sync();
      algebra.push(before + size, w.scratch, w.q, w.k, w.v);
    }
    for (std::int64_t t = last - 1; t >= first; --t) {
      const T* before = w.states + (t - first) * size;
      load(t, true);
      block::sync();
      algebra.backward(before + size, before, w.adjoint, w.scratch, w.q, w.k, w.v, w.d_num, *w.d_den,
                       grad_q + t * d, grad_k + t * d, grad_v + t * dv);
    }
  }
}

// Scalars of work carry_adjoints needs: one adjoint and the algebra's carry_adjoint scratch.
template <class Algebra>
HLA_HOST_DEVICE constexpr int carry_adjoint_work(const Algebra& algebra) {
  return streaming_state_size(algebra) + Algebra::carry_adjoint_scratch_size(algebra.p.d, algebra.p.dv);
}

// Pass 2 of the scan's backward for one sequence-head, sequential over its chunks. carry(c) and
// sum(c) point at chunk c's carry and summary; adjoints[c] (streaming_state_size scalars each)
// holds A_c on entry and, for c >= 1, E_(c-1) on exit (adjoints[0] keeps A_0, which nothing reads):
// pass 3 starts chunk c from adjoints[c + 1], and the last chunk from zero. `work` holds
// carry_adjoint_work scalars.
template <class Algebra, class T, class Carry, class Sum>
HLA_HOST_DEVICE void carry_adjoints(const Algebra& algebra, std::int64_t chunks, const Carry& carry,
                                    const Sum& sum, T* adjoints, T* work) {
  const int size = streaming_state_size(algebra);
  T *through = work, *scratch = work + size;
  for (std::int64_t c = chunks - 1; c >= 1; --c) {
    T* own = adjoints + c * size;  // A_c, to become E_(c-1)
    if (c + 1 < chunks) {
      algebra.carry_adjoint(carry(c), sum(c), adjoints + (c + 1) * size, through, scratch);
      block::sync();
      block::each(size, [&](int i) { own[i] += through[i]; });
      block::sync();
    }
  }
}

}  // namespace hla::fast::gpu
