#pragma once

// The backward of the streaming forms: the gradients of <dO, O> through the recurrence, the
// adjoint of its state carried from the last token to the first (each stream's Adjoint and
// backward(), algebra/<variant>.hpp; docs/gradients.md). The forward states are not stored per
// token: one forward pass keeps a copy of the state every `checkpoint` tokens, then each segment,
// from the last, has its states recomputed from its checkpoint. Memory: ceil(n / checkpoint)
// checkpoints plus `checkpoint` + 1 states of the segment at hand (2 sqrt(n) + 1 by default),
// O(d^2 + d dv) each; time: two forward passes and one backward pass, O(d^2 + d dv) per token.

#include <cmath>
#include <concepts>
#include <tuple>
#include <vector>

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

template <class T, class Stream>
Gradients<T> stream_gradients(const Stream& initial, const OperatorSpec& spec, const Sequence<T>& s,
                              const Matrix<T>& d_out, Index checkpoint) {
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
  const Terms<T> d_terms = reference::finish_adjoint(spec, terms, d_out);

  Gradients<T> g{Matrix<T>(n, s.key_dim()), Matrix<T>(n, s.key_dim()), Matrix<T>(n, s.value_dim()),
                 reference::finish(spec, terms)};
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
          states[i + 1].backward(states[i], q, k, v, d_terms.num.row(t), d_terms.den(t), adjoint);
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
Gradients<T> streaming_gradients(const OperatorSpec& spec, Form form, const Sequence<T>& s, const Matrix<T>& d_out,
                                 Index checkpoint = 0) {
  if (const auto why = backward_unavailable(spec, Implementation::streaming, form)) throw Error(*why);
  return with_stream<T>(spec, form, s.key_dim(), s.value_dim(), [&](auto stream) -> Gradients<T> {
    static_assert(StreamWithBackward<decltype(stream), T>, "every stream of with_stream has a backward");
    return stream_gradients<T>(stream, spec, s, d_out, checkpoint);
  });
}

}  // namespace hla::fast
