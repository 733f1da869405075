#pragma once

// The GPU tests' random inputs in Z/p (gpu_test.cpp, ranks_nccl_check.cpp).

#include <cstdint>

#include "hla/reference/mod_prime.hpp"
#include "hla/reference/random.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::testing {

// Uniform residues: a random point of Z/p, where Schwartz-Zippel bounds the chance that two
// different polynomials agree by their degree over p.
inline Sequence<ModP> random_field_sequence(std::uint64_t seed, Index n, Index d, Index dv) {
  Rng rng(seed);
  const auto fill = [&](Index rows, Index cols) {
    Matrix<ModP> m(rows, cols);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = ModP::from_residue(rng.next() % ModP::modulus);
    return m;
  };
  Sequence<ModP> s;
  s.q = fill(n, d);
  s.k = fill(n, d);
  s.v = fill(n, dv);
  return s;
}

}  // namespace hla::testing
