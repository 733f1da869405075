#pragma once

// The backward of the streaming and the scan forms: the gradients of <dO, O> (docs/gradients.md).
// Each starts from an Upstream (reference/gradient.hpp): dO, or the adjoints of the readouts num and
// den themselves; each returns O and the readouts of its own forward pass beside the gradients.
//
// Streaming: through the recurrence, the adjoint of its state carried from the last token to the
// first (each stream's Adjoint and backward(), algebra/<variant>.hpp). The forward states are not
// stored per token: one forward pass keeps a copy of the state every `checkpoint` tokens, then each segment,
// from the last, has its states recomputed from its checkpoint. Memory: ceil(n / checkpoint)
// checkpoints plus `checkpoint` + 1 states of the segment at hand (2 sqrt(n) + 1 by default),
// O(d^2 + d dv) each; time: two forward passes and one backward pass, O(d^2 + d dv) per token.

#include <cmath>
#include <concepts>
#include <tuple>
#include <type_traits>
#include <vector>

#include "hla/fast/chunked.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/gradient.hpp"

namespace hla::fast {

template <class Stream, class T>
concept StreamWithBackward = requires(const Stream& s, typename Stream::Adjoint& a, const Vector<T>& x,
                                      const RowVector<T>& y, const T& z) {
  { s.zero_adjoint() } -> std::same_as<typename Stream::Adjoint>;
  { s.backward(s, x, x, y, y, z, a) } -> std::same_as<TokenGradient<T>>;
};

// The default checkpoint interval: ceil(sqrt(n)).
inline Index default_checkpoint(Index n) {
  Index c = static_cast<Index>(std::sqrt(static_cast<double>(n)));
  while (c * c < n) ++c;
  return c > 0 ? c : 1;
}

// One token's backward step: the stream's own backward() (a variant of it is hla check's diagnosis
// of a kernel's backward: reports/src/check_grad.cpp).
struct OwnBackward {
  template <class Stream, class T>
  TokenGradient<T> operator()(const Stream& after, const Stream& before, const Vector<T>& q,
                              const Vector<T>& k, const RowVector<T>& v, const RowVector<T>& d_num,
                              const T& d_den, typename Stream::Adjoint& a) const {
    return after.backward(before, q, k, v, d_num, d_den, a);
  }
};

template <class T, class Stream, class Step = OwnBackward>
Gradients<T> stream_gradients(const Stream& initial, const OperatorSpec& spec, const Sequence<T>& s,
                              const std::type_identity_t<Upstream<T>>& upstream, Index checkpoint,
                              const Step& step = {}) {
  const Index n = s.length();
  if (checkpoint <= 0) checkpoint = default_checkpoint(n);
  const auto token = [&s](Index t) {
    return std::tuple<Vector<T>, Vector<T>, RowVector<T>>{s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t)};
  };
  // Forward: the readouts, and the state before every checkpoint-th token.
  Terms<T> terms{Matrix<T>(n, s.value_dim()), Vector<T>(n)};
  std::vector<Stream> checkpoints;
  Stream state = initial;
  for (Index t = 0; t < n; ++t) {
    if (t % checkpoint == 0) checkpoints.push_back(state);
    const auto [q, k, v] = token(t);
    state.push(q, k, v);
    const Readout<T> r = state.read(q);
    terms.num.row(t) = r.num;
    terms.den(t) = r.den;
  }
  const Terms<T> d_terms = upstream.adjoint(spec, terms);

  Gradients<T> g{Matrix<T>(n, s.key_dim()), Matrix<T>(n, s.key_dim()), Matrix<T>(n, s.value_dim()),
                 reference::backward_output(spec, terms), terms};
  typename Stream::Adjoint adjoint = initial.zero_adjoint();
  std::vector<Stream> states;  // states[i]: before token first + i
  for (Index segment = static_cast<Index>(checkpoints.size()) - 1; segment >= 0; --segment) {
    const Index first = segment * checkpoint, last = std::min(n, first + checkpoint);
    states.assign(1, checkpoints[static_cast<std::size_t>(segment)]);
    for (Index t = first; t < last; ++t) {
      const auto [q, k, v] = token(t);
      states.push_back(states.back());
      states.back().push(q, k, v);
    }
    for (Index t = last - 1; t >= first; --t) {
      const auto [q, k, v] = token(t);
      const std::size_t i = static_cast<std::size_t>(t - first);
      const TokenGradient<T> tg =
          step(states[i + 1], states[i], q, k, v, RowVector<T>(d_terms.num.row(t)), d_terms.den(t), adjoint);
      g.dq.row(t) = tg.dq.transpose();
      g.dk.row(t) = tg.dk.transpose();
      g.dv.row(t) = tg.dv;
    }
  }
  return g;
}

// d<dO, O>/dQ, dK, dV through the streaming form of spec in `form`, and O: the corrected form's equal
// reference::gradients; a published form's are those of its own recurrence. Throws hla::Error
// where the catalogue's backward_unavailable says why.
template <class T>
Gradients<T> streaming_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                                 const std::type_identity_t<Upstream<T>>& upstream, Index checkpoint = 0) {
  if (const auto why = backward_unavailable(spec, Implementation::streaming, form)) throw Error(*why);
  return with_stream<T>(spec, form, s.key_dim(), s.value_dim(), [&](auto stream) -> Gradients<T> {
    static_assert(StreamWithBackward<decltype(stream), T>, "every stream of with_stream has a backward");
    return stream_gradients<T>(stream, spec, s, upstream, checkpoint);
  });
}

template <class Segments, class T>
concept SegmentsWithBackward = requires(const Segments& seg, const typename Segments::Summary& x, typename Segments::Summary& y,
                                        const Vector<T>& q, Vector<T>& dq, const RowVector<T>& v, const T& z,
                                        TokenGradient<T>& g) {
  seg.read_adjoint(x, q, v, z, y, dq);
  seg.combine_adjoint(x, x, x, y, y);
  seg.token_adjoint(q, q, v, x, g);
};

// The scan's backward (p. 7, "Backward for gradients": the adjoint of (+) at the forward states,
// in reverse, checkpointed at chunk boundaries), over one slice of a sequence: the whole sequence
// (segment_gradients) or one rank's slice (ranks.hpp), whose state before its first token is
// `carry_in`. The forward it differentiates: each chunk's summary folded from the identity, the
// carries chunk after chunk (carry_0 = carry_in, carry_{c+1} = carry_c (+) sum_c, where the forward
// scan runs a Blelloch scan), each token's state folded from its chunk's carry; and the slice's
// summary, the chunk summaries folded from the identity, which later slices read. Backward:
//   1. per chunk, in parallel: its states recomputed from its carry, the adjoints of its readouts
//      carried back through them to the adjoint of its carry from its own tokens;
//   2. chunk after chunk, from the last: the adjoint of each carry and of each chunk's summary
//      through carry_{c+1} = carry_c (+) sum_c (combine_adjoint, at the forward's summaries), down
//      to the adjoint of carry_in; and, given the adjoint of the slice's summary, its fold backwards;
//   3. per chunk, in parallel: both folds again, every token's adjoint from its state's and its
//      summary's, then its gradients (token_adjoint).
// For an associative (+) every bracketing is the serial recurrence (Thm 4.1), and so is the gradient.
// Memory: 3 summaries per chunk and 2 (chunk + 1) per thread; time: three forward folds and two
// backward ones per chunk, plus a sequential pass over the chunks.
template <class Segments, class T>
class ScanSlice {
 public:
  using Summary = typename Segments::Summary;

  // The chunk summaries: all that later slices need of this one (summary()).
  ScanSlice(const Segments& seg, const Sequence<T>& s, const ScanOptions& options)
      : seg_(seg),
        s_(s),
        layout_(chunk_layout(s.length(), options)),
        threads_(threads_for(options, layout_.count)),
        zero_(seg.identity()),  // also the zero adjoint: rho is not read from an adjoint
        sums_(layout_.count, zero_),
        carry_(layout_.count, zero_) {
    const Index chunks = layout_.count;
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
    for (Index c = 0; c < chunks; ++c)
      for (Index t = first(c); t < last(c); ++t) sums_[c] = seg_.combine(sums_[c], token(t));
  }

  // The slice's summary, which later slices read: its chunk summaries folded from the identity.
  Summary summary() const {
    Summary folded = zero_;
    for (const Summary& sum : sums_) folded = seg_.combine(folded, sum);
    return folded;
  }

  // The rest of the forward pass, from the state before the slice: the carries and the readouts.
  void finish(Summary carry_in) {
    const Index chunks = layout_.count;
    terms_ = {Matrix<T>(s_.length(), s_.value_dim()), Vector<T>(s_.length())};
    if (chunks > 0) carry_[0] = std::move(carry_in);
    for (Index c = 1; c < chunks; ++c) carry_[c] = seg_.combine(carry_[c - 1], sums_[c - 1]);
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
    for (Index c = 0; c < chunks; ++c) {
      Summary state = carry_[c];
      for (Index t = first(c); t < last(c); ++t) {
        state = seg_.combine(state, token(t));
        const Readout<T> r = seg_.read(state, s_.q.row(t).transpose());
        terms_.num.row(t) = r.num;
        terms_.den(t) = r.den;
      }
    }
  }

  // After finish().
  const Terms<T>& terms() const {
    return terms_;
  }

  // Passes 1 and 2, after finish(), from the adjoints of the slice's readouts: the adjoint of
  // carry_in from them.
  Summary carry_adjoint(Terms<T> d_terms) {
    d_terms_ = std::move(d_terms);
    const Index chunks = layout_.count;
    d_sums_.assign(chunks, zero_);
    std::vector<Summary> d_carry(chunks, zero_);
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
    for (Index c = 0; c < chunks; ++c) d_carry[c] = chunk_backward(c, nullptr, nullptr);
    for (Index c = chunks - 2; c >= 0; --c)
      seg_.combine_adjoint(carry_[c], sums_[c], d_carry[c + 1], d_carry[c], d_sums_[c]);
    return chunks > 0 ? d_carry[0] : zero_;
  }

  // Pass 3, after carry_adjoint: every token's gradients into g's rows, from the adjoint of the
  // slice's summary (d_summary; none when nothing reads it) and of its readouts.
  void token_gradients(const Summary* d_summary, Gradients<T>& g) {
    const Index chunks = layout_.count;
    if (d_summary && chunks > 0) {  // summary() backwards: folded_c = folded_{c-1} (+) sum_c
      std::vector<Summary> folded{zero_};
      for (Index c = 0; c + 1 < chunks; ++c) folded.push_back(seg_.combine(folded.back(), sums_[c]));
      Summary d_folded = *d_summary;
      for (Index c = chunks - 1; c >= 0; --c) {
        Summary d_before = zero_;
        seg_.combine_adjoint(folded[c], sums_[c], d_folded, d_before, d_sums_[c]);
        d_folded = std::move(d_before);
      }
    }
#pragma omp parallel for num_threads(threads_) schedule(static) if (threads_ > 1)
    for (Index c = 0; c < chunks; ++c) chunk_backward(c, &d_sums_[c], &g);
  }

 private:
  Index first(Index c) const {
    return c * layout_.size;
  }
  Index last(Index c) const {
    return std::min(s_.length(), (c + 1) * layout_.size);
  }
  Summary token(Index t) const {
    return seg_.token(s_.q.row(t).transpose(), s_.k.row(t).transpose(), s_.v.row(t));
  }

  // Chunk c backward from the adjoints of its readouts and, when given, of its summary: returns
  // the adjoint of its carry from its own readouts, and writes its tokens' gradients to g if given.
  Summary chunk_backward(Index c, const Summary* d_sum, Gradients<T>* g) const {
    std::vector<Summary> states{carry_[c]}, partial{zero_};  // before each token of the chunk
    for (Index t = first(c); t < last(c); ++t) {
      const Summary x = token(t);
      states.push_back(seg_.combine(states.back(), x));
      if (d_sum) partial.push_back(seg_.combine(partial.back(), x));
    }
    Summary d_state = zero_, d_partial = d_sum ? *d_sum : zero_;
    for (Index t = last(c) - 1; t >= first(c); --t) {
      const std::size_t j = static_cast<std::size_t>(t - first(c));
      const Vector<T> q = s_.q.row(t).transpose(), k = s_.k.row(t).transpose();
      const RowVector<T> v = s_.v.row(t);
      const Summary x = seg_.token(q, k, v);
      TokenGradient<T> tg{Vector<T>::Zero(q.size()), Vector<T>::Zero(k.size()), RowVector<T>::Zero(v.size())};
      seg_.read_adjoint(states[j + 1], q, d_terms_.num.row(t), d_terms_.den(t), d_state, tg.dq);
      Summary d_token = zero_, d_before = zero_;
      seg_.combine_adjoint(states[j], x, d_state, d_before, d_token);
      d_state = std::move(d_before);
      if (d_sum) {
        Summary d_partial_before = zero_;
        seg_.combine_adjoint(partial[j], x, d_partial, d_partial_before, d_token);
        d_partial = std::move(d_partial_before);
      }
      if (!g) continue;
      seg_.token_adjoint(q, k, v, d_token, tg);
      g->dq.row(t) = tg.dq.transpose();
      g->dk.row(t) = tg.dk.transpose();
      g->dv.row(t) = tg.dv;
    }
    return d_state;
  }

  const Segments& seg_;
  const Sequence<T>& s_;
  ChunkLayout layout_;
  int threads_;
  Summary zero_;
  std::vector<Summary> sums_, carry_, d_sums_;
  Terms<T> terms_, d_terms_;
};

// The scan's backward over a whole sequence (ScanSlice from the identity; nothing reads its summary).
template <class Segments, class T>
Gradients<T> segment_gradients(const Segments& seg, const OperatorSpec& spec, const Sequence<T>& s,
                               const Upstream<T>& upstream, const ScanOptions& options) {
  ScanSlice<Segments, T> slice(seg, s, options);
  slice.finish(seg.identity());
  Terms<T> d_terms = upstream.adjoint(spec, slice.terms());
  Gradients<T> g{Matrix<T>(s.length(), s.key_dim()), Matrix<T>(s.length(), s.key_dim()),
                 Matrix<T>(s.length(), s.value_dim()), reference::backward_output(spec, slice.terms()),
                 slice.terms()};
  slice.carry_adjoint(std::move(d_terms));
  slice.token_gradients(nullptr, g);
  return g;
}

// segment_gradients for the scan of spec in `form`, whether or not its operator is associative
// (a printed one that is not still has the gradient of this bracketing: the ledger and the tests
// compare it with the serial recurrence's). Throws hla::Error for an algebra without adjoints.
template <class T>
Gradients<T> bracketed_scan_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                                      const std::type_identity_t<Upstream<T>>& upstream,
                                      const ScanOptions& options) {
  validate(options);
  return with_segments<T>(spec, form, s.key_dim(), s.value_dim(), [&](const auto& seg) -> Gradients<T> {
    using Segments = std::decay_t<decltype(seg)>;
    if constexpr (SegmentsWithBackward<Segments, T>) {
      return segment_gradients<Segments, T>(seg, spec, s, upstream, options);
    } else {
      throw Error("the scan of " + describe(spec) + " in the " + std::string(form_name(form)) +
                  " form has no backward");
    }
  });
}

// d<dO, O>/dQ, dK, dV through the scan of spec in `form` (segment_gradients), and O. Throws
// hla::Error where the catalogue's backward_unavailable says why.
template <class T>
Gradients<T> scan_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                            const std::type_identity_t<Upstream<T>>& upstream, const ScanOptions& options) {
  if (const auto why = backward_unavailable(spec, Implementation::scan, form)) throw Error(*why);
  return bracketed_scan_gradients<T>(spec, form, s, upstream, options);
}

template <class Chunks, class T>
concept ChunksWithBackward = requires(const Chunks& form, const chunked_detail::Chunk<T>& ch,
                                      const typename Chunks::Summary& x, typename Chunks::Summary& y,
                                      const chunked_detail::ReadoutAdjoints<T>& d,
                                      chunked_detail::ChunkGradients<T>& g) {
  { form.outputs_adjoint(ch, x, d, g) } -> std::same_as<typename Chunks::Summary>;
  form.summary_adjoint(ch, x, g);
  form.segments().combine_adjoint(x, x, x, y, y);
};

// The chunk-parallel form's backward: the reverse mode of chunked_terms_with's pass, each chunk's
// part by matrix products (its form's outputs_adjoint and summary_adjoint, chunked/<variant>.hpp),
// the chunks' carries by the paper's reverse scan (p. 7) over the chunk summaries:
//   1. per chunk, in parallel: the adjoint of its readouts through outputs(), to its tokens' rows
//      of dQ, dK, dV and to its carry;
//   2. chunk after chunk, from the last: carry_{c+1} = carry_c (+) sum_c backwards (combine_adjoint
//      at the forward's carries and summaries), the adjoint of each carry and each chunk's summary;
//   3. per chunk, in parallel: the adjoint of its summary through summary(), to its tokens' rows.
// For the associative operator the Blelloch scan's carries are carry_c (+) sum_c exactly, so this
// is the gradient of the forward pass. Memory: the inputs' size for dQ, dK, dV, 4 summaries per
// chunk (summary, carry and their adjoints: O(chunks (d^2 + d dv))) and each thread's C x C and
// C x d temporaries; time: one forward pass plus about four times its matrix products.
template <class Chunks, class T>
Gradients<T> chunked_gradients_with(Chunks form, const OperatorSpec& spec, const Sequence<T>& s,
                                    const Upstream<T>& upstream, const ScanOptions& options) {
  using Summary = typename Chunks::Summary;
  const ChunkedPass<Chunks, T> pass(form, s, options);
  const std::vector<Summary> sums = pass.summaries();
  const std::vector<Summary> carry = pass.carries(sums);
  const Terms<T> terms = pass.outputs(carry);
  const Terms<T> d_terms = upstream.adjoint(spec, terms);
  const Index n = s.length(), chunks = pass.count();
  const int threads = pass.threads();
  Gradients<T> g{Matrix<T>::Zero(n, s.key_dim()), Matrix<T>::Zero(n, s.key_dim()),
                 Matrix<T>::Zero(n, s.value_dim()), reference::backward_output(spec, terms), terms};
  const auto rows = [&](Index c) {
    const Index b = pass.begin(c), l = pass.length(c);
    return chunked_detail::ChunkGradients<T>{g.dq.middleRows(b, l), g.dk.middleRows(b, l),
                                             g.dv.middleRows(b, l)};
  };
  const auto& seg = form.segments();
  std::vector<Summary> d_carry(chunks, seg.identity()), d_sums(chunks, seg.identity());
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    const Index b = pass.begin(c), l = pass.length(c);
    chunked_detail::ChunkGradients<T> chunk_rows = rows(c);
    d_carry[c] = form.outputs_adjoint(pass.chunk(c), carry[c],
                                      {d_terms.num.middleRows(b, l), d_terms.den.segment(b, l)}, chunk_rows);
  }
  for (Index c = chunks - 2; c >= 0; --c)
    seg.combine_adjoint(carry[c], sums[c], d_carry[c + 1], d_carry[c], d_sums[c]);
#pragma omp parallel for num_threads(threads) schedule(static) if (threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    chunked_detail::ChunkGradients<T> chunk_rows = rows(c);
    form.summary_adjoint(pass.chunk(c), d_sums[c], chunk_rows);
  }
  return g;
}

// d<dO, O>/dQ, dK, dV through the chunk-parallel form of spec in `form` (chunked_gradients_with),
// and O: the corrected forms' equal reference::gradients; a published one's are those of its own
// forward pass. Throws hla::Error where the catalogue's backward_unavailable says why.
template <class T>
Gradients<T> chunked_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                               const std::type_identity_t<Upstream<T>>& upstream,
                               const ScanOptions& options) {
  if (const auto why = backward_unavailable(spec, Implementation::chunked, form)) throw Error(*why);
  validate(options);
  return with_chunks<T>(spec, form, s.key_dim(), s.value_dim(), [&](auto chunks) -> Gradients<T> {
    static_assert(ChunksWithBackward<decltype(chunks), T>, "every chunk form has a backward");
    return chunked_gradients_with<decltype(chunks), T>(std::move(chunks), spec, s, upstream, options);
  });
}

// The drivers, forward (streaming.hpp, scan.hpp, chunked.hpp: HLA_FAST_FORWARD) and backward, are
// instantiated once per scalar that several units use (fast/src/forward_*.cpp, backward_*.cpp; the
// instrumented scalars' in checking/src, declared in hla/checking/instances.hpp), not in every unit
// that calls them: the instantiations of every algebra dominated those units' compile time
// (docs/perf.md, "CI's time").
#define HLA_FAST_FORWARD(prefix, T) \
  HLA_FAST_STREAMING(prefix, T)     \
  HLA_FAST_SCAN(prefix, T)          \
  HLA_FAST_CHUNKED(prefix, T)
#define HLA_FAST_BACKWARD(prefix, T)                                                                      \
  prefix template Gradients<T> streaming_gradients<T>(const OperatorSpec&, Form, const Sequence<T>&,      \
                                                      const Upstream<T>&, Index);                         \
  prefix template Gradients<T> bracketed_scan_gradients<T>(const OperatorSpec&, Form, const Sequence<T>&, \
                                                           const Upstream<T>&, const ScanOptions&);       \
  prefix template Gradients<T> scan_gradients<T>(const OperatorSpec&, Form, const Sequence<T>&,           \
                                                 const Upstream<T>&, const ScanOptions&);                 \
  prefix template Gradients<T> chunked_gradients<T>(const OperatorSpec&, Form, const Sequence<T>&,        \
                                                    const Upstream<T>&, const ScanOptions&);
HLA_FAST_BACKWARD(extern, float)
HLA_FAST_BACKWARD(extern, double)
HLA_FAST_BACKWARD(extern, Mpfr)
HLA_FAST_BACKWARD(extern, Rational)
HLA_FAST_BACKWARD(extern, ModP)

}  // namespace hla::fast
