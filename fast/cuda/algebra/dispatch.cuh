#pragma once

// The device algebras by AlgebraId, for the kernels and the host tests.

#include "ahla.cuh"
#include "hla2.cuh"
#include "hla3.cuh"
#include "linear.cuh"

namespace hla::fast::gpu {

// Scratch of a combine: more than the absorb's where the algebra says so.
template <class A>
constexpr int combine_scratch(int d, int dv) {
  if constexpr (requires { A::combine_scratch_size(d, dv); }) {
    return A::combine_scratch_size(d, dv);
  } else {
    return A::scratch_size(d, dv);
  }
}

// Scalars a streaming state holds: the segment summary's leading fields, as many as the algebra's
// stream_size says (for its shapes, or for its parameters where the stream depends on the options:
// the unmasked third order's holds S^Q too), else the whole summary.
template <class A>
HLA_HOST_DEVICE constexpr int streaming_state_size(const A& a) {
  const int d = a.p.d, dv = a.p.dv;
  if constexpr (requires { a.stream_size(); }) {
    return a.stream_size();
  } else if constexpr (requires { A::stream_size(d, dv); }) {
    return A::stream_size(d, dv);
  } else {
    return A::summary_size(d, dv);
  }
}

// Calls f with the device algebra that p.id names (catalogue.hpp's algebra_for), built on p.
template <class T, class F>
void with_device_algebra(const AlgebraParams<T>& p, F&& f) {
  with_algebra<LinearAlgebra<T>, Hla2Algebra<T>, AhlaAlgebra<T>, Hla3PublishedAlgebra<T>, Hla3Algebra<T>>(p,
                                                                                                          f);
}

}  // namespace hla::fast::gpu
