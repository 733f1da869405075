#include "hla/checking/counted.hpp"

namespace hla::checking {

std::uint64_t& operation_count() {
  thread_local std::uint64_t count = 0;
  return count;
}

Matrix<Counted> counting_input(Index rows, Index cols, std::uint64_t salt) {
  Matrix<Counted> m(rows, cols);
  std::uint64_t state = salt * 0x9E3779B97F4A7C15ull + 1;
  for (Index i = 0; i < m.size(); ++i) {
    state = state * 6364136223846793005ull + 1442695040888963407ull;
    m.data()[i] = 1 + static_cast<double>((state >> 11) % 1000 + 1) / 1024;
  }
  return m;
}

}  // namespace hla::checking
