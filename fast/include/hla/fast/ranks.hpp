#pragma once

// Sequence parallelism: one sequence split into contiguous slices, one per rank (a GPU, or here a
// thread standing for one). Exact because the scan's operator is associative (Thm 4.1):
//   forward   each rank folds its slice into its summary S_r; the ranks all-gather the summaries
//             (O(d^2 + d dv) scalars a head, whatever n); rank r's carry is the exclusive fold
//             C_r = ((I (+) S_0) (+) S_1) ... (+) S_{r-1}, from which it finishes its slice;
//   backward  each rank carries the adjoints of its readouts back to the adjoint of its carry, the
//             ranks all-gather those; rank r runs the chain C_{c+1} = C_c (+) S_c backwards from the
//             last rank to its own (combine_adjoint), which gives the adjoint of its summary S_r,
//             and finishes its tokens' gradients.
// Every rank runs the chain itself (the all-gather scheme; a ring would pass the prefix along), so
// the exchange is two all-gathers of one summary a rank. The chain is the rank_carry and
// rank_summary_adjoint below, the same whatever evaluates the slices.

#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "hla/fast/backward.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/fast/rank_threads.hpp"
#include "hla/fast/slices.hpp"

namespace hla::fast {

// Rank r's carry: the summaries of the ranks before it folded from the identity, in rank order.
template <class Segments>
typename Segments::Summary rank_carry(const Segments& seg,
                                      std::span<const typename Segments::Summary> summaries, int rank) {
  typename Segments::Summary carry = seg.identity();
  for (int r = 0; r < rank; ++r) carry = seg.combine(carry, summaries[r]);
  return carry;
}

// The adjoint of rank r's summary: the chain C_{c+1} = C_c (+) S_c backwards from the last rank,
// each carry's adjoint from the ranks' own (`carry_adjoints`, from their readouts) plus what the
// chain adds, down to c = rank. The carries are refolded as rank_carry folds them.
template <class Segments>
typename Segments::Summary rank_summary_adjoint(const Segments& seg,
                                                std::span<const typename Segments::Summary> summaries,
                                                std::span<const typename Segments::Summary> carry_adjoints,
                                                int rank) {
  using Summary = typename Segments::Summary;
  const int ranks = static_cast<int>(summaries.size());
  std::vector<Summary> carries{seg.identity()};
  for (int r = 0; r + 1 < ranks; ++r) carries.push_back(seg.combine(carries.back(), summaries[r]));
  Summary d_next = carry_adjoints[ranks - 1], d_summary = seg.identity();  // the identity is the zero adjoint
  for (int c = ranks - 2; c >= rank; --c) {
    Summary d_carry = carry_adjoints[c], d_sum = seg.identity();
    seg.combine_adjoint(carries[c], summaries[c], d_next, d_carry, d_sum);
    d_next = std::move(d_carry);
    if (c == rank) d_summary = std::move(d_sum);
  }
  return d_summary;
}

// The forward of `spec` in `form` with the sequence split as `slices`, one thread a rank, each rank's
// slice by the scan (chunks of options.chunk, options.threads threads a rank): num and den of every
// token, equal to the scan's in exact arithmetic. Throws hla::Error where ranks_unavailable says why.
template <class T>
Terms<T> ranks_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s, const Slices& slices,
                     const ScanOptions& options) {
  if (const auto why = ranks_unavailable(spec, Implementation::scan, form)) throw Error(*why);
  validate(options);
  validate(slices, s.length(), options.threads);
  return with_segments<T>(spec, form, s.key_dim(), s.value_dim(), [&](const auto& seg) {
    using Segments = std::decay_t<decltype(seg)>;
    using Summary = typename Segments::Summary;
    Terms<T> out{Matrix<T>(s.length(), s.value_dim()), Vector<T>(s.length())};
    ThreadExchange<Summary> exchange(slices.ranks());
    run_ranks(
        slices.ranks(),
        [&](int r) {
          const Sequence<T> mine = tokens_of(s, slices.begin(r), slices.length(r));
          ScanSlice<Segments, T> part(seg, mine, options);
          const std::vector<Summary> summaries = exchange.all_gather(r, part.summary());
          part.finish(rank_carry(seg, std::span<const Summary>(summaries), r));
          out.num.middleRows(slices.begin(r), slices.length(r)) = part.terms().num;
          out.den.segment(slices.begin(r), slices.length(r)) = part.terms().den;
        },
        [&] { exchange.abandon(); });
    return out;
  });
}

// The gradients of <dO, O> (or of the readouts' adjoints: Upstream) with the sequence split as
// `slices`, one thread a rank, and O: equal to scan_gradients' in exact arithmetic. Throws hla::Error
// where ranks_unavailable says why.
template <class T>
Gradients<T> ranks_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                             const std::type_identity_t<Upstream<T>>& upstream, const Slices& slices,
                             const ScanOptions& options) {
  if (const auto why = ranks_unavailable(spec, Implementation::scan, form, true)) throw Error(*why);
  validate(options);
  validate(slices, s.length(), options.threads);
  if (upstream.rows() != s.length()) throw Error("gradients: dO must have the shape of O");
  return with_segments<T>(spec, form, s.key_dim(), s.value_dim(), [&](const auto& seg) -> Gradients<T> {
    using Segments = std::decay_t<decltype(seg)>;
    using Summary = typename Segments::Summary;
    if constexpr (!SegmentsWithBackward<Segments, T>) {
      throw Error("the scan of " + describe(spec) + " in the " + std::string(form_name(form)) +
                  " form has no backward");
    } else {
      const Index n = s.length();
      Gradients<T> g{Matrix<T>(n, s.key_dim()),
                     Matrix<T>(n, s.key_dim()),
                     Matrix<T>(n, s.value_dim()),
                     {},
                     {Matrix<T>(n, s.value_dim()), Vector<T>(n)}};
      ThreadExchange<Summary> exchange(slices.ranks());
      run_ranks(
          slices.ranks(),
          [&](int r) {
            const Index begin = slices.begin(r), length = slices.length(r);
            const Sequence<T> mine = tokens_of(s, begin, length);
            ScanSlice<Segments, T> part(seg, mine, options);
            const std::vector<Summary> summaries = exchange.all_gather(r, part.summary());
            part.finish(rank_carry(seg, std::span<const Summary>(summaries), r));
            const std::vector<Summary> carry_adjoints =
                exchange.all_gather(r, part.carry_adjoint(upstream.adjoint_rows(spec, part.terms(), begin)));
            const Summary d_summary = rank_summary_adjoint(seg, std::span<const Summary>(summaries),
                                                           std::span<const Summary>(carry_adjoints), r);
            Gradients<T> mine_g{Matrix<T>(length, s.key_dim()),
                                Matrix<T>(length, s.key_dim()),
                                Matrix<T>(length, s.value_dim()),
                                {},
                                {}};
            part.token_gradients(&d_summary, mine_g);
            g.dq.middleRows(begin, length) = mine_g.dq;
            g.dk.middleRows(begin, length) = mine_g.dk;
            g.dv.middleRows(begin, length) = mine_g.dv;
            g.terms.num.middleRows(begin, length) = part.terms().num;
            g.terms.den.segment(begin, length) = part.terms().den;
          },
          [&] { exchange.abandon(); });
      g.output = reference::backward_output(spec, g.terms);
      return g;
    }
  });
}

#define HLA_FAST_RANKS(prefix, T)                                                                       \
  prefix template Terms<T> ranks_terms<T>(const OperatorSpec&, Form, const Sequence<T>&, const Slices&, \
                                          const ScanOptions&);                                          \
  prefix template Gradients<T> ranks_gradients<T>(const OperatorSpec&, Form, const Sequence<T>&,        \
                                                  const Upstream<T>&, const Slices&, const ScanOptions&);
HLA_FAST_RANKS(extern, float)
HLA_FAST_RANKS(extern, double)
HLA_FAST_RANKS(extern, ModP)

}  // namespace hla::fast
