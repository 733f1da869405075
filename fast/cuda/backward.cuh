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
// sum(c) point at chunk c's carry and summary, adjoint(c) at its stream state of adjoints: A_c on
// entry and, for c >= stop, E_(c-1) on exit, the adjoint of the state before chunk c from every
// readout of chunks c on and from `after`, the adjoint of the state after the last chunk (nullptr:
// zero). Pass 3 starts chunk c from adjoint(c + 1), and the last chunk from `after`. stop = 1 leaves
// adjoint(0) holding A_0, which nothing reads; stop = 0 makes it the adjoint of the first carry (a
// rank's own: docs/ranks.md). `work` holds carry_adjoint_work scalars.
template <class Algebra, class T, class Carry, class Sum, class Adjoint>
HLA_HOST_DEVICE void carry_adjoints(const Algebra& algebra, std::int64_t chunks, const Carry& carry,
                                    const Sum& sum, const Adjoint& adjoint, T* work, const T* after = nullptr,
                                    std::int64_t stop = 1) {
  const int size = streaming_state_size(algebra);
  T *through = work, *scratch = work + size;
  for (std::int64_t c = chunks - 1; c >= stop; --c) {
    const T* next = c + 1 < chunks ? adjoint(c + 1) : after;
    if (!next) continue;
    T* own = adjoint(c);  // A_c, to become E_(c-1)
    algebra.carry_adjoint(carry(c), sum(c), next, through, scratch);
    block::sync();
    block::each(size, [&](int i) { own[i] += through[i]; });
    block::sync();
  }
}

// Scalars of work rank_after_adjoint needs besides the ranks' carries: a combine's scratch or
// carry_adjoints' work.
template <class Algebra>
HLA_HOST_DEVICE constexpr int rank_chain_work(const Algebra& algebra) {
  const int combine = combine_scratch<Algebra>(algebra.p.d, algebra.p.dv),
            chain = carry_adjoint_work(algebra);
  return combine > chain ? combine : chain;
}

// The sequence split across ranks, backward (docs/ranks.md), for one sequence-head: from every rank's
// slice summary summary(c) and the adjoint own(c) of its carry from its own readouts (stream states),
// the adjoint of the state after rank `rank`'s slice from every later rank's readouts, into `out`
// (zero for the last rank). The ranks' carries C_0 = identity, C_(c+1) = C_c (+) S_c are folded into
// `carries` (ranks summaries) as the forward folds a rank's carry; then carry_adjoints runs the chain
// over the ranks from the last down to rank + 1, in place on own(c). `work`: rank_chain_work scalars.
template <class Algebra, class T, class Summary, class Own>
HLA_HOST_DEVICE void rank_after_adjoint(const Algebra& algebra, int ranks, int rank, const Summary& summary,
                                        const Own& own, T* carries, T* work, T* out) {
  const int size = Algebra::summary_size(algebra.p.d, algebra.p.dv), state = streaming_state_size(algebra);
  algebra.identity(carries);
  block::sync();
  for (int c = 1; c < ranks; ++c) {
    algebra.combine(carries + (c - 1) * size, summary(c - 1), carries + c * size, work);
    block::sync();
  }
  carry_adjoints(
      algebra, ranks, [&](std::int64_t c) { return carries + c * size; }, summary, own, work,
      static_cast<const T*>(nullptr), rank + 1);
  if (rank + 1 < ranks) {
    block::copy(own(rank + 1), out, state);
  } else {
    block::fill(out, state, T(0));
  }
}

}  // namespace hla::fast::gpu
