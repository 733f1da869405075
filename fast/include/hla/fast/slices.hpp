#pragma once

// How a sequence splits across ranks (fast/ranks.hpp), apart from the drivers so that the command
// line's parser includes none.

#include <span>
#include <vector>

#include "hla/reference/linalg.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::fast {

// Where the slices start: slice r holds tokens [starts[r], starts[r + 1]) with starts[ranks] = n.
// Slices may differ in length and be empty.
struct Slices {
  std::vector<Index> starts;  // ranks + 1 entries, non-decreasing, from 0 to n

  int ranks() const { return static_cast<int>(starts.size()) - 1; }
  Index begin(int r) const { return starts[r]; }
  Index length(int r) const { return starts[r + 1] - starts[r]; }
};

// The most ranks a split takes (threads on the CPU, processes on GPUs).
inline constexpr int max_ranks = 1024;

// Throws hla::Error naming --ranks unless 1 <= ranks <= max_ranks.
void validate_ranks(int ranks);

// Tokens [begin, begin + length) of s: a rank's slice.
template <class T>
Sequence<T> tokens_of(const Sequence<T>& s, Index begin, Index length) {
  return {s.q.middleRows(begin, length), s.k.middleRows(begin, length), s.v.middleRows(begin, length)};
}

// n tokens over `ranks` ranks, ceil(n / ranks) tokens each, the last slices shorter (or empty).
// Throws hla::Error naming --ranks for ranks outside 1 .. max_ranks.
Slices even_slices(Index n, int ranks);

// Slices of the given lengths, in rank order. Throws hla::Error for a negative length or more than
// max_ranks of them.
Slices slices_of_lengths(std::span<const Index> lengths);

// Throws hla::Error unless `slices` covers tokens 0 .. n in order.
void validate(const Slices& slices, Index n);
// The same, and at most max_ranks threads in all when each rank runs threads_a_rank of them.
void validate(const Slices& slices, Index n, int threads_a_rank);

}  // namespace hla::fast
