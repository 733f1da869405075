#pragma once

// One map from an AlgebraId to its device algebra type, for the kernels and the host tests.

#include "../launch.hpp"
#include "ahla.cuh"
#include "hla/reference/error.hpp"
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

// Scalars a streaming state holds (the segment summary's leading fields, unless the algebra says).
template <class A>
constexpr int streaming_state_size(int d, int dv) {
  if constexpr (requires { A::stream_size(d, dv); }) {
    return A::stream_size(d, dv);
  } else {
    return A::summary_size(d, dv);
  }
}

// Calls f with the algebra `id` names, built on `p`.
template <class T, class F>
void with_algebra(detail::AlgebraId id, const Params<T>& p, F&& f) {
  switch (id) {
    case detail::AlgebraId::linear:
      return f(LinearAlgebra<T>{p});
    case detail::AlgebraId::hla2:
      return f(Hla2Algebra<T>{p});
    case detail::AlgebraId::ahla:
      return f(AhlaAlgebra<T>{p});
    case detail::AlgebraId::hla3_published:
      return f(Hla3PublishedAlgebra<T>{p});
    case detail::AlgebraId::hla3:
      return f(Hla3Algebra<T>{p});
  }
  throw Error("unknown GPU algebra");
}

}  // namespace hla::fast::gpu
