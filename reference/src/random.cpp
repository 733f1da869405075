#include "hla/reference/random.hpp"

#include <cmath>
#include <numbers>

namespace hla {

double Rng::gaussian() {
  const double u1 = (static_cast<double>(next() >> 11) + 0.5) * 0x1.0p-53;
  const double u2 = static_cast<double>(next() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2.0 * std::numbers::pi * u2);
}

Rational random_entry(Rng& rng, EntryKind kind, int bound) {
  Rational x(rng.uniform(-bound, bound));
  if (kind == EntryKind::dyadic) x /= Rational(1 << rng.uniform(0, 3));
  return x;
}

namespace {
Matrix<Rational> random_matrix(Index rows, Index cols, auto&& entry) {
  Matrix<Rational> m(rows, cols);
  for (Index r = 0; r < rows; ++r) {
    for (Index c = 0; c < cols; ++c) m(r, c) = entry();
  }
  return m;
}
}  // namespace

Sequence<Rational> random_sequence(Rng& rng, Index n, Index d, Index dv, EntryKind kind, int bound) {
  const auto entry = [&] { return random_entry(rng, kind, bound); };
  return {random_matrix(n, d, entry), random_matrix(n, d, entry), random_matrix(n, dv, entry)};
}

Sequence<Rational> gaussian_sequence(Rng& rng, Index n, Index d, Index dv) {
  const double scale = 1.0 / std::sqrt(static_cast<double>(d));
  const auto entry = [&] { return Rational(rng.gaussian() * scale); };
  return {random_matrix(n, d, entry), random_matrix(n, d, entry), random_matrix(n, dv, entry)};
}

Rational random_decay(Rng& rng) {
  const auto b = rng.uniform(1, 8);
  return Rational(rng.uniform(1, b), b);
}

}  // namespace hla
