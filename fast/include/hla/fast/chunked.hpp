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

#include <algorithm>
#include <utility>
#include <vector>

#include "hla/fast/chunked/ahla.hpp"
#include "hla/fast/chunked/hla2.hpp"
#include "hla/fast/chunked/hla3.hpp"
#include "hla/fast/chunked/linear.hpp"
#include "hla/fast/scan.hpp"

namespace hla::fast {

// One chunk-parallel pass over a sequence with a chunk form: the layout, each chunk's view, the
// chunk summaries and the outputs given the carries. The forward (chunked_terms_with) and the
// backward (chunked_gradients_with, backward.hpp) run the same pass.
template <class Chunks, class T>
class ChunkedPass {
 public:
  using Summary = typename Chunks::Summary;

  ChunkedPass(Chunks& form, const Sequence<T>& s, const ScanOptions& options)
      : form_(form),
        s_(s),
        layout_(chunk_layout(s.length(), options)),
        threads_(threads_for(options, layout_.count)),
        full_(layout_.size, form.gamma()),
        tail_(s.length() - (layout_.count - 1) * layout_.size, form.gamma()) {
    if constexpr (requires { form.reserve(layout_.count); }) form.reserve(layout_.count);
  }
  ChunkedPass(const ChunkedPass&) = delete;  // its chunks refer to its shapes
  ChunkedPass& operator=(const ChunkedPass&) = delete;

  Index count() const { return layout_.count; }
  int threads() const { return threads_; }
  Index begin(Index c) const { return c * layout_.size; }
  Index length(Index c) const { return std::min(s_.length(), begin(c) + layout_.size) - begin(c); }
  chunked_detail::Chunk<T> chunk(Index c) const {
    const Index b = begin(c), l = length(c);
    return {s_.q.middleRows(b, l), s_.k.middleRows(b, l), s_.v.middleRows(b, l),
            l == layout_.size ? full_ : tail_, c};
  }

  // Each chunk's own summary, in parallel.
  std::vector<Summary> summaries() const {
    std::vector<Summary> sums(layout_.count, form_.segments().identity());
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
    for (Index c = 0; c < layout_.count; ++c) sums[c] = form_.summary(chunk(c));
    return sums;
  }

  // The exclusive scan of the summaries: carry[c], the summary of every token before chunk c.
  std::vector<Summary> carries(std::vector<Summary> sums) const {
    const auto& seg = form_.segments();
    exclusive_scan(
        sums, seg.identity(), [&seg](const Summary& a, const Summary& b) { return seg.combine(a, b); },
        threads_);
    return sums;
  }

  // Each chunk's outputs given its carry, in parallel.
  Terms<T> outputs(const std::vector<Summary>& carry) const {
    Terms<T> out{Matrix<T>(s_.length(), s_.value_dim()), Vector<T>(s_.length())};
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
    for (Index c = 0; c < layout_.count; ++c) {
      const Terms<T> part = form_.outputs(chunk(c), carry[c]);
      out.num.middleRows(begin(c), part.num.rows()) = part.num;
      out.den.segment(begin(c), part.den.size()) = part.den;
    }
    return out;
  }

 private:
  Chunks& form_;
  const Sequence<T>& s_;
  ChunkLayout layout_;
  int threads_;
  chunked_detail::ChunkShape<T> full_, tail_;
};

// Chunk summaries in parallel, an exclusive scan across chunks, then each chunk's outputs.
template <class Chunks, class T>
Terms<T> chunked_terms_with(Chunks form, const Sequence<T>& s, const ScanOptions& options) {
  const ChunkedPass<Chunks, T> pass(form, s, options);
  return pass.outputs(pass.carries(pass.summaries()));
}

// Calls f with the chunk form of spec in `form` (the catalogue's algebra for the chunked strategy).
template <class T, class F>
decltype(auto) with_chunks(const OperatorSpec& spec, Form form, Index d, Index dv, F&& f) {
  const auto params = algebra_params<T>(spec, Implementation::chunked, form, d, dv);
  return with_algebra<LinearChunks<T>, Hla2Chunks<T>, Hla2MaskedChunks<T>, AhlaChunks<T>,
                      Hla3MaskedChunks<T>>(params, std::forward<F>(f));
}

template <class T>
Terms<T> chunked_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                       const ScanOptions& options) {
  validate(options);
  return with_chunks<T>(spec, form, s.key_dim(), s.value_dim(),
                        [&](auto chunks) { return chunked_terms_with(std::move(chunks), s, options); });
}

// Instantiated once per scalar that several units use (fast/src/forward_*.cpp; see backward.hpp).
#define HLA_FAST_CHUNKED(prefix, T)                                                        \
  prefix template Terms<T> chunked_terms<T>(const OperatorSpec&, Form, const Sequence<T>&, \
                                            const ScanOptions&);
HLA_FAST_CHUNKED(extern, float)
HLA_FAST_CHUNKED(extern, double)
HLA_FAST_CHUNKED(extern, Mpfr)
HLA_FAST_CHUNKED(extern, Rational)
HLA_FAST_CHUNKED(extern, ModP)

template <class T>
Matrix<T> chunked_output(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                         const ScanOptions& options) {
  return reference::finish(spec, chunked_terms(spec, form, s, options));
}

}  // namespace hla::fast
