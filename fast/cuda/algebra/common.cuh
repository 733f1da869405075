#pragma once

// What every device algebra (fast/cuda/algebra/<variant>.cuh) shares. The device side of every variant: the
// streaming states (fast/algebra/*.hpp, the *Stream classes) and the segment summaries with their
// concatenation (the *Segments classes), on flat row-major arrays that one thread block updates together.
// Each function here is the CPU class's formula, specialised where one operand is a single token: absorb(s,
// q, k, v) is combine(s, token(q, k, v)) with the token's rank-one summary multiplied out, O(d^2 + d dv)
// instead of O(d^2 dv). In Z/p both are the same polynomial, so the results agree bit for bit.
//
// The backward of a stream (the kernel and driver: fast/cuda/backward.cuh): backward(after, before,
// adjoint, scratch, q, k, v, d_num, d_den, grad_q, grad_k, grad_v) is the CPU stream's backward()
// on flat arrays. `after` and `before` are the states after and before token t; `adjoint` (laid
// out as the stream's state) holds the adjoint of the state after t and becomes that of the state
// before it; token t's gradients go to grad_q, grad_k (d) and grad_v (dv), given the adjoints
// d_num (dv) and d_den of its readout. Each entry is computed with the CPU's operations in the
// CPU's grouping (sums aside, whose order a rounding depth does not depend on), so the CPU's
// depths and gauges bound it. `scratch` holds backward_scratch_size(d, dv) scalars. Ends with a
// barrier.
//
// The scan's backward (backward.cuh, carry_adjoints) needs one more function of an algebra whose
// stream and segments are the same operator: carry_adjoint(x, y, d_out, d_x, scratch), the adjoint
// of x through x (+) y at the summaries x and y, over the stream's fields: d_out and d_x are laid
// out as the stream's state (streaming_state_size), d_x is written (it is the adjoint that the
// stream's state before a segment y gets from the one after it), `scratch` holds
// carry_adjoint_scratch_size(d, dv) scalars. A rho among the stream's fields is read by no
// readout: its adjoint is zero. No barrier at the end.
//
// Conventions: every thread of the block calls every function. push/absorb end with a barrier;
// read and combine do not (the caller synchronizes before the state or scratch changes again).
// Everything is __host__ __device__: on the host a "block" is one thread (block.cuh), so the CPU
// tests check these formulas against the CPU algebra bit for bit in Z/p on every machine.
// `scratch` holds scratch_size(d, dv) scalars of the block's own (combine: combine_scratch_size
// where an algebra defines it).

#include "../block.cuh"
#include "hla/fast/algebra/coefficients.hpp"
#include "hla/fast/algebra/select.hpp"

namespace hla::fast::gpu {

// The empty segment: every field zero, rho (the last scalar) one. One write per entry: a fill
// followed by a separate write of rho would race between threads.
template <class T>
HLA_HOST_DEVICE void empty_summary(T* s, int size) {
  block::each(size, [&](int i) { s[i] = i == size - 1 ? T(1) : T(0); });
}

// Carves consecutive fields out of a flat summary.
template <class P>
struct Carver {
  P next;
  HLA_HOST_DEVICE P take(int count) {
    P field = next;
    next += count;
    return field;
  }
};

}  // namespace hla::fast::gpu
