#pragma once

// Which algebra evaluates an operator, and the parameters every strategy builds it from: the
// streaming states and segment summaries (algebra/<variant>.hpp), the chunk forms
// (chunked/<variant>.hpp) and the device algebras (fast/cuda/algebra/<variant>.cuh). The choice
// is made once, by catalogue.hpp's algebra_for; each strategy only lists its types. Plain C++,
// shared by host code and kernels.

#include <utility>

#include "hla/fast/implementation.hpp"
#include "hla/reference/error.hpp"

namespace hla::fast {

// One summary structure each; a form that changes only coefficients is a parameter (Form).
enum class AlgebraId {
  linear,
  hla2,
  hla2_moments,  // masked hla2 on F = S C - G: the corrected chunk form
  ahla,
  hla3_published_stream,  // Alg. 3 as printed (F2)
  hla3_published_scan,    // Eqs. 7.6-7.7, with segment maps
  hla3,                   // the corrected compact summary, also the unmasked one
};

template <class T>
struct AlgebraParams {
  AlgebraId id;
  int d, dv;
  T gamma, ridge;
  bool masked;
  Form form;  // the form's coefficients come from algebra/coefficients.hpp
};

// Calls f with the algebra among A, Rest... whose `id` is p.id, built from p.
template <class A, class... Rest, class T, class F>
decltype(auto) with_algebra(const AlgebraParams<T>& p, F&& f) {
  if (A::id == p.id) return f(A{p});
  if constexpr (sizeof...(Rest) > 0) {
    return with_algebra<Rest...>(p, f);
  } else {
    throw Error("this strategy has no form of the requested algebra");
  }
}

}  // namespace hla::fast
