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

// Gradients of one sequence-head into grad_q, grad_k [n, d] and grad_v [n, dv]. load(t, adjoints)
// puts token t's q, k, v (and, if adjoints, its d_num and d_den) into w's token arrays; it is
// followed by a barrier before they are read.
template <class Algebra, class T, class Load>
HLA_HOST_DEVICE void stream_backward(const Algebra& algebra, std::int64_t length, std::int64_t checkpoint,
                                     const BackwardArrays<T>& w, const Load& load, T* grad_q, T* grad_k,
                                     T* grad_v) {
  const int d = algebra.p.d, dv = algebra.p.dv;
  const std::int64_t size = streaming_state_size<Algebra>(d, dv);
  T* state = w.states;
  block::fill(state, size, T(0));
  for (std::int64_t t = 0; t < length; ++t) {
    if (t % checkpoint == 0) block::copy(state, w.checkpoints + (t / checkpoint) * size, size);
    load(t, false);
    block::sync();
    algebra.push(state, w.scratch, w.q, w.k, w.v);
  }
  block::fill(w.adjoint, size, T(0));
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

}  // namespace hla::fast::gpu
