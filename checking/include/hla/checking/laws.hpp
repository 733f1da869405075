#pragma once

// The laws of a scan operator on the summaries of token segments: left and right identity,
// associativity, and the homomorphism of the serial fold; and the named components of every
// summary, by which two summaries are compared.

#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "hla/fast/algebra/ahla.hpp"
#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/algebra/hla3.hpp"
#include "hla/fast/algebra/linear.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::checking {

template <class T>
using Named = std::vector<std::pair<std::string, Matrix<T>>>;

template <class T>
Matrix<T> column(const Vector<T>& v) {
  return Matrix<T>(v);
}
template <class T>
Matrix<T> scalar(const T& x) {
  return Matrix<T>::Constant(1, 1, x);
}

template <class T>
Named<T> components(const fast::LinearSummary<T>& s) {
  return {{"P", s.key_value}, {"m", column(s.key_mass)}, {"rho", scalar(s.rho)}};
}
template <class T>
Named<T> components(const fast::Hla2Summary<T>& s) {
  return {{"S", s.key_moment},  {"C", s.query_value},        {"m", column(s.query_mass)},
          {"G", s.cross_value}, {"h", column(s.cross_mass)}, {"rho", scalar(s.rho)}};
}
template <class T>
Named<T> components(const fast::Hla2MomentSummary<T>& s) {
  return {{"S", s.key_moment},   {"C", s.query_value},         {"m", column(s.query_mass)},
          {"F", s.masked_value}, {"f", column(s.masked_mass)}, {"rho", scalar(s.rho)}};
}
template <class T>
Named<T> components(const fast::AhlaSummary<T>& s) {
  return {{"R", s.key_query},    {"P", s.key_value},           {"m", column(s.key_mass)},
          {"E", s.routed_value}, {"n", column(s.routed_mass)}, {"rho", scalar(s.rho)}};
}
template <class T>
Named<T> components(const fast::Hla3Summary<T>& s) {
  return {{"SK", s.key_moment},      {"SQ", s.query_moment},      {"P", s.key_value},
          {"m", column(s.key_mass)}, {"F", s.corrected_value},    {"eta", column(s.corrected_mass)},
          {"X", s.query_value},      {"x", column(s.query_mass)}, {"Y", s.key_query},
          {"rho", scalar(s.rho)}};
}
template <class T>
Named<T> components(const fast::Hla3PublishedSummary<T>& s) {
  return {{"SK", s.key_moment},      {"SQ", s.query_moment},        {"P", s.key_value},
          {"m", column(s.key_mass)}, {"F", s.third_value},          {"eta", column(s.third_mass)},
          {"RQP", s.query_product},  {"rQm", column(s.query_mass)}, {"UKQ", s.key_query},
          {"MKQP", s.map_value},     {"MKQm", s.map_mass}};
}

// The single-token segments of s.
template <class Segments, class T>
std::vector<typename Segments::Summary> token_summaries(const Segments& seg, const Sequence<T>& s) {
  std::vector<typename Segments::Summary> out;
  for (Index t = 0; t < s.length(); ++t)
    out.push_back(seg.token(s.q.row(t).transpose(), s.k.row(t).transpose(), s.v.row(t)));
  return out;
}

// The summary of tokens [begin, end): their token segments folded left to right.
template <class Segments, class Summary>
Summary fold(const Segments& seg, const std::vector<Summary>& tokens, Index begin, Index end) {
  Summary acc = seg.identity();
  for (Index t = begin; t < end; ++t) acc = seg.combine(acc, tokens[t]);
  return acc;
}

// The summaries of consecutive segments with these lengths, from the token segments.
template <class Segments, class Summary>
std::vector<Summary> segment_summaries(const Segments& seg, const std::vector<Summary>& tokens,
                                       const std::vector<Index>& lengths) {
  std::vector<Summary> out;
  for (Index begin = 0; Index l : lengths) {
    out.push_back(fold(seg, tokens, begin, begin + l));
    begin += l;
  }
  return out;
}

// Each law as the two summaries that it equates.
template <class Segments, class Summary>
std::pair<Summary, Summary> left_identity(const Segments& seg, const Summary& a) {
  return {seg.combine(seg.identity(), a), a};
}
template <class Segments, class Summary>
std::pair<Summary, Summary> right_identity(const Segments& seg, const Summary& a) {
  return {seg.combine(a, seg.identity()), a};
}
template <class Segments, class Summary>
std::pair<Summary, Summary> associativity(const Segments& seg, const Summary& a, const Summary& b,
                                          const Summary& c) {
  return {seg.combine(seg.combine(a, b), c), seg.combine(a, seg.combine(b, c))};
}

// A law that does not hold: its name, and where (segments or split, and a differing component).
struct Broken {
  std::string law, where;
};

// The first law broken on s cut into segments of `lengths`: the identities of each segment, the
// associativity of each three consecutive ones, and the homomorphism of the serial fold at every
// split: the whole sequence's summary against its two parts combined, the suffix folded from the
// right, a grouping that the serial fold never uses.
template <class Segments, class T>
std::optional<Broken> first_broken_law(const Segments& seg, const Sequence<T>& s,
                                       const std::vector<Index>& lengths) {
  using Summary = typename Segments::Summary;
  const auto broken = [](const std::string& law, const std::string& where,
                         const std::pair<Summary, Summary>& sides) -> std::optional<Broken> {
    if (sides.first == sides.second) return std::nullopt;
    const Named<T> x = components(sides.first), y = components(sides.second);
    std::string component = "?";
    for (std::size_t i = 0; i < x.size() && component == "?"; ++i) {
      if (x[i].second != y[i].second) component = x[i].first;
    }
    return Broken{law, where + ", component " + component};
  };
  const std::vector<Summary> tokens = token_summaries(seg, s);
  const std::vector<Summary> parts = segment_summaries(seg, tokens, lengths);
  for (std::size_t i = 0; i < parts.size(); ++i) {
    const std::string at = "segment " + std::to_string(i + 1);
    if (auto b = broken("left identity", at, left_identity(seg, parts[i]))) return b;
    if (auto b = broken("right identity", at, right_identity(seg, parts[i]))) return b;
  }
  for (std::size_t i = 0; i + 2 < parts.size(); ++i) {
    const std::string at = "segments " + std::to_string(i + 1) + "-" + std::to_string(i + 3);
    if (auto b = broken("associativity", at, associativity(seg, parts[i], parts[i + 1], parts[i + 2])))
      return b;
  }
  const Index n = s.length();
  std::vector<Summary> prefix(n + 1, seg.identity()), suffix(n + 1, seg.identity());
  for (Index t = 0; t < n; ++t) prefix[t + 1] = seg.combine(prefix[t], tokens[t]);
  for (Index t = n - 1; t >= 0; --t) suffix[t] = seg.combine(tokens[t], suffix[t + 1]);
  for (Index split = 0; split <= n; ++split) {
    const std::string at = "split after token " + std::to_string(split);
    if (auto b = broken("homomorphism", at, {seg.combine(prefix[split], suffix[split]), prefix[n]})) return b;
  }
  return std::nullopt;
}

}  // namespace hla::checking
