#include "hla/fast/slices.hpp"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <string>

#include "hla/reference/error.hpp"

namespace hla::fast {

void validate_ranks(int ranks) {
  if (ranks < 1 || ranks > max_ranks)
    throw Error("--ranks: must be from 1 to " + std::to_string(max_ranks) + ", got " + std::to_string(ranks));
}

Slices even_slices(Index n, int ranks) {
  validate_ranks(ranks);
  const Index each = (n + ranks - 1) / ranks;
  Slices slices{{0}};
  for (int r = 1; r <= ranks; ++r) slices.starts.push_back(std::min(n, r * each));
  return slices;
}

Slices slices_of_lengths(std::span<const Index> lengths) {
  if (lengths.empty() || lengths.size() > static_cast<std::size_t>(max_ranks))
    throw Error("--ranks: from 1 to " + std::to_string(max_ranks) + " slices, got " +
                std::to_string(lengths.size()));
  Slices slices{{0}};
  for (const Index length : lengths) {
    if (length < 0) throw Error("--slices: a slice's length must be >= 0, got " + std::to_string(length));
    if (length > std::numeric_limits<Index>::max() - slices.starts.back())
      throw Error("--slices: the lengths add up past " + std::to_string(std::numeric_limits<Index>::max()));
    slices.starts.push_back(slices.starts.back() + length);
  }
  return slices;
}

void validate(const Slices& slices, Index n, int threads_a_rank) {
  validate(slices, n);
  if (static_cast<std::int64_t>(slices.ranks()) * threads_a_rank > max_ranks)
    throw Error("--ranks, --threads: at most " + std::to_string(max_ranks) + " threads in all, got " +
                std::to_string(slices.ranks()) + " ranks of " + std::to_string(threads_a_rank));
}

void validate(const Slices& slices, Index n) {
  if (slices.ranks() < 1 || slices.ranks() > max_ranks || slices.starts.front() != 0 ||
      slices.starts.back() != n || !std::is_sorted(slices.starts.begin(), slices.starts.end()))
    throw Error("--slices: the slices must cover the " + std::to_string(n) + " tokens in order, from 1 to " +
                std::to_string(max_ranks) + " of them");
}

}  // namespace hla::fast
