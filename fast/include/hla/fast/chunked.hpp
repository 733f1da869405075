#pragma once

// The chunk-parallel output form of Figures 1(C) and 2(C): each chunk's outputs are its
// intra-chunk masked matrix products plus the carry from the preceding chunks, whose summaries
// are combined by an exclusive Blelloch scan. Work per chunk is matrix-matrix (Eigen products).
//
// Within a chunk, token t sits at offset tau = 1..C after the chunk's carry-in state, which
// holds the moments of all earlier tokens aged to the chunk start. For hla2 (weights
// g^((t-i)+(t-j)), i <= j) the index pairs split into: both earlier (carry,
// g^(2 tau) q_t^T (S C - G)), both in the chunk (intra), and key earlier with query in the chunk,
// g^tau q_t^T S sum_{j<=t in chunk} g^(t-j) q_j v_j^T (cross). Figure 1(C) prints the carry and the
// intra term only: finding F5. For ahla (weights g^(t-j), j <= i) the pairs are: both earlier
// (g^tau q_t^T E), both in the chunk (intra), and i in the chunk with j earlier,
// g^tau sum_{i<=t in chunk} (q_t.k_i) q_i^T P; Figure 2(C) prints that sum over i < t: finding F6.

#include <vector>

#include "hla/fast/chunked/ahla.hpp"
#include "hla/fast/chunked/hla2.hpp"
#include "hla/fast/chunked/linear.hpp"
#include "hla/fast/scan.hpp"

namespace hla::fast {

// Chunk summaries in parallel, an exclusive scan across chunks, then each chunk's outputs.
template <class Chunks, class T>
Terms<T> chunked_terms_with(Chunks form, const Sequence<T>& s, const ScanOptions& options) {
  using Summary = typename Chunks::Summary;
  const Index n = s.length();
  const ChunkLayout layout = chunk_layout(n, options);
  const Index chunk = layout.size, chunks = layout.count;
  if constexpr (requires { form.reserve(chunks); }) form.reserve(chunks);
  const int threads = threads_for(options, chunks);
  const auto& seg = form.segments();
  const chunked_detail::ChunkShape<T> full(chunk, form.gamma());
  const chunked_detail::ChunkShape<T> tail(n - (chunks - 1) * chunk, form.gamma());
  const auto chunk_of = [&](Index c) {
    const Index begin = c * chunk, length = std::min(n, begin + chunk) - begin;
    return chunked_detail::Chunk<T>{s.q.middleRows(begin, length), s.k.middleRows(begin, length),
                                    s.v.middleRows(begin, length), length == chunk ? full : tail, c};
  };
  std::vector<Summary> carry(chunks, seg.identity());
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    carry[c] = form.summary(chunk_of(c));
  }
  exclusive_scan(
      carry, seg.identity(), [&seg](const Summary& a, const Summary& b) { return seg.combine(a, b); },
      threads);
  Terms<T> out{Matrix<T>(n, s.value_dim()), Vector<T>(n)};
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    const Terms<T> part = form.outputs(chunk_of(c), carry[c]);
    out.num.middleRows(c * chunk, part.num.rows()) = part.num;
    out.den.segment(c * chunk, part.den.size()) = part.den;
  }
  return out;
}

template <class T>
Terms<T> chunked_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                       const ScanOptions& options) {
  validate(options);
  const auto params = algebra_params<T>(spec, Implementation::chunked, form, s.key_dim(), s.value_dim());
  return with_algebra<LinearChunks<T>, Hla2Chunks<T>, Hla2MaskedChunks<T>, AhlaChunks<T>>(
      params, [&](auto chunks) { return chunked_terms_with(std::move(chunks), s, options); });
}

template <class T>
Matrix<T> chunked_output(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                         const ScanOptions& options) {
  return reference::finish(spec, chunked_terms(spec, form, s, options));
}

}  // namespace hla::fast
