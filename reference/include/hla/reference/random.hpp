#pragma once

#include <cstdint>

#include "hla/reference/hash.hpp"
#include "hla/reference/sequence.hpp"

namespace hla {

// splitmix64: the same stream for the same seed on every platform, unlike std distributions.
class Rng {
 public:
  explicit Rng(std::uint64_t seed) : state_(seed) {}

  std::uint64_t next() {
    const std::uint64_t z = splitmix64(state_);
    state_ += splitmix64_increment;
    return z;
  }
  // Uniform in [lo, hi]. @pre lo <= hi
  std::int64_t uniform(std::int64_t lo, std::int64_t hi) {
    const auto span = static_cast<std::uint64_t>(hi - lo) + 1;
    return lo + static_cast<std::int64_t>(next() % span);
  }
  // Standard normal (Box-Muller on 53-bit uniforms).
  double gaussian();

 private:
  std::uint64_t state_;
};

// Entries are integers in [-bound, bound], or such integers over 2^e with e in [0, 3].
enum class EntryKind { integer, dyadic };

Rational random_entry(Rng& rng, EntryKind kind, int bound);
Sequence<Rational> random_sequence(Rng& rng, Index n, Index d, Index dv, EntryKind kind, int bound);

// Gaussian q, k, v scaled by 1/sqrt(d), each entry rounded to double (so exactly representable).
Sequence<Rational> gaussian_sequence(Rng& rng, Index n, Index d, Index dv);

// gamma = a/b with 1 <= a <= b <= 8, uniformly over the pairs; often 1 (no decay).
Rational random_decay(Rng& rng);

}  // namespace hla
