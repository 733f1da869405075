#pragma once

#include "hla/fast/algebra/ahla.hpp"
#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/algebra/hla3.hpp"
#include "hla/fast/algebra/linear.hpp"
#include "hla/fast/catalogue.hpp"
#include "hla/reference/definition.hpp"

namespace hla::fast {

// The decoding loop: one token at a time, absorb it into the state, then read the output.
template <class Stream, class T>
Terms<T> run_stream(Stream stream, const Sequence<T>& s) {
  const Index n = s.length();
  Terms<T> out{Matrix<T>(n, s.value_dim()), Vector<T>(n)};
  for (Index t = 0; t < n; ++t) {
    const Vector<T> q = s.q.row(t).transpose();
    stream.push(q, s.k.row(t).transpose(), s.v.row(t));
    Readout<T> r = stream.read(q);
    out.num.row(t) = r.num;
    out.den(t) = r.den;
  }
  return out;
}

// Calls f with the streaming state of `spec` in `form`, constructed for s's dimensions.
template <class T, class F>
decltype(auto) with_stream(const OperatorSpec& spec, Form form, Index d, Index dv, F&& f) {
  return with_algebra<LinearStream<T>, Hla2Stream<T>, AhlaStream<T>, Hla3PublishedStream<T>,
                      Hla3CorrectedStream<T>>(algebra_params<T>(spec, Implementation::streaming, form, d, dv),
                                              f);
}

template <class T>
Terms<T> streaming_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s) {
  return with_stream<T>(spec, form, s.key_dim(), s.value_dim(),
                        [&](auto stream) { return run_stream(std::move(stream), s); });
}

// Instantiated once per scalar that several units use (fast/src/forward_*.cpp; see backward.hpp).
#define HLA_FAST_STREAMING(prefix, T) \
  prefix template Terms<T> streaming_terms<T>(const OperatorSpec&, Form, const Sequence<T>&);
HLA_FAST_STREAMING(extern, float)
HLA_FAST_STREAMING(extern, double)
HLA_FAST_STREAMING(extern, Mpfr)
HLA_FAST_STREAMING(extern, Rational)
HLA_FAST_STREAMING(extern, ModP)

template <class T>
Matrix<T> streaming_output(const OperatorSpec& spec, Form form, const Sequence<T>& s) {
  return reference::finish(spec, streaming_terms(spec, form, s));
}

}  // namespace hla::fast
