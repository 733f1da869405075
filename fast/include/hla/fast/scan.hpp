#pragma once

// Chunk-parallel evaluation through associative scans (Sec. 4, Alg. 1 and Alg. 4): token
// segments are scanned within each chunk, chunk summaries across chunks, and every token's
// inclusive state is then formed locally and read out.

#include <algorithm>
#include <vector>

#include "hla/fast/algebra/ahla.hpp"
#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/algebra/hla3.hpp"
#include "hla/fast/algebra/linear.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/fast/scan_options.hpp"
#include "hla/reference/definition.hpp"

namespace hla::fast {

// How n tokens split into chunks: `size` tokens each (at most n, at least 1), the last one shorter.
struct ChunkLayout {
  Index size;
  Index count;
};
inline ChunkLayout chunk_layout(Index n, const ScanOptions& options) {
  const Index size = std::min<Index>(options.chunk, std::max<Index>(n, 1));
  return {size, (n + size - 1) / size};
}

// Exclusive scan in place (Blelloch 1990): an up-sweep of partial reductions over a balanced
// tree, then a down-sweep that hands each node its prefix. O(n) combines, O(log n) levels, each
// level's combines spread over `threads`. Any length: the tree is padded with identities.
// @post xs[i] = identity (+) xs_old[0] (+) ... (+) xs_old[i-1]; combine need not commute.
template <class Summary, class Combine>
void exclusive_scan(std::vector<Summary>& xs, const Summary& identity, const Combine& combine, int threads) {
  const std::size_t n = xs.size();
  if (n == 0) return;
  std::size_t size = 1;
  while (size < n) size *= 2;
  xs.resize(size, identity);
  for (std::size_t stride = 1; stride < size; stride *= 2) {
    const auto pairs = static_cast<std::ptrdiff_t>(size / (2 * stride));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && pairs > 1)
    for (std::ptrdiff_t p = 0; p < pairs; ++p) {
      const std::size_t right = (p + 1) * 2 * stride - 1;
      xs[right] = combine(xs[right - stride], xs[right]);
    }
  }
  xs[size - 1] = identity;
  for (std::size_t stride = size / 2; stride >= 1; stride /= 2) {
    const auto pairs = static_cast<std::ptrdiff_t>(size / (2 * stride));
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1 && pairs > 1)
    for (std::ptrdiff_t p = 0; p < pairs; ++p) {
      const std::size_t right = (p + 1) * 2 * stride - 1;
      Summary left_sum = std::move(xs[right - stride]);
      xs[right - stride] = xs[right];            // the left child inherits the prefix
      xs[right] = combine(xs[right], left_sum);  // the right one adds the left subtree
    }
  }
  xs.resize(n);
}

// The two-level scan: within each chunk an exclusive scan of the token segments, across chunks
// an exclusive scan of the chunk summaries, then I_t = carry (+) local prefix (+) T_t, read out.
template <class Segments, class T>
Terms<T> scan_terms_with(const Segments& seg, const Sequence<T>& s, const ScanOptions& options) {
  using Summary = typename Segments::Summary;
  const Index n = s.length();
  const ChunkLayout layout = chunk_layout(n, options);
  const Index chunk = layout.size, chunks = layout.count;
  const int threads = threads_for(options, chunks);
  const Summary identity = seg.identity();
  const auto combine = [&seg](const Summary& a, const Summary& b) { return seg.combine(a, b); };

  std::vector<Summary> tokens(n, identity);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (Index t = 0; t < n; ++t)
    tokens[t] = seg.token(s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t));

  std::vector<std::vector<Summary>> local(chunks);  // exclusive prefixes within each chunk
  std::vector<Summary> carry(chunks, identity);     // chunk summaries, then carry-in prefixes
#pragma omp parallel for num_threads(threads) schedule(dynamic) if (threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    const Index begin = c * chunk, end = std::min(n, begin + chunk);
    local[c].assign(tokens.begin() + begin, tokens.begin() + end);
    exclusive_scan(local[c], identity, combine, 1);
    carry[c] = seg.combine(local[c].back(), tokens[end - 1]);
  }
  exclusive_scan(carry, identity, combine, threads);

  Terms<T> out{Matrix<T>(n, s.value_dim()), Vector<T>(n)};
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (Index t = 0; t < n; ++t) {
    const Index c = t / chunk;
    const Summary inclusive = seg.combine(seg.combine(carry[c], local[c][t - c * chunk]), tokens[t]);
    const Readout<T> r = seg.read(inclusive, s.q.row(t).transpose());
    out.num.row(t) = r.num;
    out.den(t) = r.den;
  }
  return out;
}

// The GPU scan's bracketing, on the CPU (fast/cuda/kernels.cu): each chunk's summary is the left
// fold of its tokens from the identity, the chunk summaries go through exclusive_scan, and each
// token's state is the left fold from its chunk's carry-in, I_t = ((carry (+) T_1) (+) ...) (+) T_t.
// For an associative operator every bracketing gives the same result; for the published
// non-associative ones (F3, F4) this is the twin that the GPU must equal exactly.
template <class Segments, class T>
Terms<T> chunk_fold_terms_with(const Segments& seg, const Sequence<T>& s, Index chunk) {
  using Summary = typename Segments::Summary;
  const Index n = s.length();
  const ChunkLayout layout = chunk_layout(n, ScanOptions{chunk, 1});
  const auto token = [&](Index t) {
    return seg.token(s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t));
  };
  std::vector<Summary> carry(layout.count, seg.identity());
  for (Index c = 0; c < layout.count; ++c) {
    for (Index t = c * layout.size; t < std::min(n, (c + 1) * layout.size); ++t)
      carry[c] = seg.combine(carry[c], token(t));
  }
  exclusive_scan(
      carry, seg.identity(), [&seg](const Summary& a, const Summary& b) { return seg.combine(a, b); }, 1);
  Terms<T> out{Matrix<T>(n, s.value_dim()), Vector<T>(n)};
  for (Index c = 0; c < layout.count; ++c) {
    Summary state = carry[c];
    for (Index t = c * layout.size; t < std::min(n, (c + 1) * layout.size); ++t) {
      state = seg.combine(state, token(t));
      const Readout<T> r = seg.read(state, s.q.row(t).transpose());
      out.num.row(t) = r.num;
      out.den(t) = r.den;
    }
  }
  return out;
}

// Calls f with the segment algebra of `spec` in `form`.
template <class T, class F>
decltype(auto) with_segments(const OperatorSpec& spec, Form form, Index d, Index dv, F&& f) {
  return with_algebra<LinearSegments<T>, Hla2Segments<T>, AhlaSegments<T>, Hla3PublishedSegments<T>,
                      Hla3Segments<T>>(algebra_params<T>(spec, Implementation::scan, form, d, dv), f);
}

template <class T>
Terms<T> scan_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s, const ScanOptions& options) {
  validate(options);
  return with_segments<T>(spec, form, s.key_dim(), s.value_dim(),
                          [&](const auto& seg) { return scan_terms_with(seg, s, options); });
}

template <class T>
Terms<T> chunk_fold_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s, Index chunk) {
  return with_segments<T>(spec, form, s.key_dim(), s.value_dim(),
                          [&](const auto& seg) { return chunk_fold_terms_with(seg, s, chunk); });
}

// Instantiated once per scalar that several units use (fast/src/forward_*.cpp; see backward.hpp).
#define HLA_FAST_SCAN(prefix, T)                                                                             \
  prefix template Terms<T> scan_terms<T>(const OperatorSpec&, Form, const Sequence<T>&, const ScanOptions&); \
  prefix template Terms<T> chunk_fold_terms<T>(const OperatorSpec&, Form, const Sequence<T>&, Index);
HLA_FAST_SCAN(extern, float)
HLA_FAST_SCAN(extern, double)
HLA_FAST_SCAN(extern, Mpfr)
HLA_FAST_SCAN(extern, Rational)
HLA_FAST_SCAN(extern, ModP)

template <class T>
Matrix<T> scan_output(const OperatorSpec& spec, Form form, const Sequence<T>& s, const ScanOptions& options) {
  return reference::finish(spec, scan_terms(spec, form, s, options));
}

}  // namespace hla::fast
