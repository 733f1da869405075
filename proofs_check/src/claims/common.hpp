#pragma once

// Shared by the claim files: operators of the reference built from a case's parameters, literal
// prefix sums, and domain presets.

#include <string>
#include <vector>

#include "hla/fast/streaming.hpp"
#include "hla/proofs/laws.hpp"

namespace hla::proofs::claims {

inline OperatorSpec spec_of(Variant variant, bool masked, const Parameters& p, bool normalize = false) {
  OperatorSpec spec;
  spec.variant = variant;
  spec.masked = masked;
  spec.normalize = normalize;
  spec.eps = p.eps;
  spec.ridge = variant == Variant::hla2 ? p.ridge : Rational(0);
  spec.decay = p.gamma;
  return spec;
}

template <class T>
T gamma_of(const Case<T>& c) {
  return from_rational<T>(c.parameters.gamma);
}

inline fast::Form form_of(bool corrected) {
  return corrected ? fast::Form::corrected : fast::Form::published;
}

// The reference's num and den.
template <class T>
Terms<T> defined(Variant variant, bool masked, const Case<T>& c) {
  return reference::terms(spec_of(variant, masked, c.parameters), c.tokens);
}
// The reference's output (normalized when asked).
template <class T>
Matrix<T> defined_output(Variant variant, bool masked, bool normalize, const Case<T>& c) {
  return reference::output(spec_of(variant, masked, c.parameters, normalize), c.tokens);
}

template <class T>
Vector<T> q_(const Case<T>& c, Index t) {
  return c.tokens.q.row(t).transpose();
}
template <class T>
Vector<T> k_(const Case<T>& c, Index t) {
  return c.tokens.k.row(t).transpose();
}
template <class T>
RowVector<T> v_(const Case<T>& c, Index t) {
  return c.tokens.v.row(t);
}

// W = L . Q K^T, the causally masked scores.
template <class T>
Matrix<T> masked_scores(const Case<T>& c) {
  return reference::lower(Matrix<T>(c.tokens.q * c.tokens.k.transpose()), T(1));
}

// Rows t = 1..n of per-token matrices, each flattened row-major.
template <class T>
Matrix<T> stack(const std::vector<Matrix<T>>& xs) {
  if (xs.empty()) return Matrix<T>(0, 0);
  Matrix<T> out(static_cast<Index>(xs.size()), xs[0].size());
  for (std::size_t t = 0; t < xs.size(); ++t)
    out.row(static_cast<Index>(t)) = Eigen::Map<const RowVector<T>>(xs[t].data(), xs[t].size());
  return out;
}

// Row t of num from per-token row vectors.
template <class T>
Matrix<T> rows(const std::vector<RowVector<T>>& xs, Index cols) {
  Matrix<T> out(static_cast<Index>(xs.size()), cols);
  for (std::size_t t = 0; t < xs.size(); ++t) out.row(static_cast<Index>(t)) = xs[t];
  return out;
}

// Figure 1(B) evaluated in O(N^2 (d + dv)), the evaluation that fig-1b/time counts: W = L . Q K^T is
// lower triangular, so [(W W^T) . L]_tj = sum_{i<=j} (q_t.k_i)(q_j.k_i) = q_t . u_j with U = W K,
// and O = [L . (Q U^T)] V. (The reference's O(N^3) product W W^T is one evaluation, not the only one.)
template <class T>
Matrix<T> figure_1b(const Sequence<T>& s) {
  const Index n = s.length();
  Matrix<T> w = Matrix<T>::Zero(n, n), u = Matrix<T>::Zero(n, s.key_dim()),
            o = Matrix<T>::Zero(n, s.value_dim());
  for (Index t = 0; t < n; ++t)
    for (Index i = 0; i <= t; ++i) w(t, i) = s.q.row(t).dot(s.k.row(i));
  for (Index j = 0; j < n; ++j)
    for (Index i = 0; i <= j; ++i) u.row(j) += w(j, i) * s.k.row(i);
  for (Index t = 0; t < n; ++t)
    for (Index j = 0; j <= t; ++j) o.row(t) += s.q.row(t).dot(u.row(j)) * s.v.row(j);
  return o;
}
// Figure 2(B) evaluated in O(N^2 (d + dv)), the evaluation that fig-2b/time counts: A = L . Q K^T is
// lower triangular, so (A A) . L = A A, and (A A) V = A (A V).
template <class T>
Matrix<T> figure_2b(const Sequence<T>& s) {
  const Index n = s.length();
  Matrix<T> a = Matrix<T>::Zero(n, n), av = Matrix<T>::Zero(n, s.value_dim()), o = av;
  for (Index t = 0; t < n; ++t)
    for (Index i = 0; i <= t; ++i) a(t, i) = s.q.row(t).dot(s.k.row(i));
  for (Index t = 0; t < n; ++t)
    for (Index j = 0; j <= t; ++j) av.row(t) += a(t, j) * s.v.row(j);
  for (Index t = 0; t < n; ++t)
    for (Index i = 0; i <= t; ++i) o.row(t) += a(t, i) * av.row(i);
  return o;
}

// What a claim compares: the numerator, the denominator or the normalized output.
enum class Term { num, den, normalized };
// The parts comparing num ("num") or den ("den", as a column).
template <class T>
Sides<T> term_sides(const Terms<T>& lhs, const Terms<T>& rhs, Term term) {
  if (term == Term::den) return {{"den", column(lhs.den), column(rhs.den)}};
  return {{"num", lhs.num, rhs.num}};
}

// num / (den + eps), row by row.
template <class T>
Matrix<T> normalized(const Terms<T>& terms, const Case<T>& c) {
  OperatorSpec spec;
  spec.normalize = true;
  spec.eps = c.parameters.eps;
  return reference::finish(spec, terms);
}

// An entry's links to docs/findings.md: `corrected_by` names the entry that corrects a failing
// printed claim, `corrects` the printed claim that a derived entry corrects.
struct Links {
  std::string corrected_by, corrects;
};
// The links of one part of a claim (e.g. "/assoc"): each named entry's same part.
inline Links part_links(const Links& links, const std::string& part) {
  const auto of = [&part](const std::string& id) { return id.empty() ? id : id + part; };
  return {of(links.corrected_by), of(links.corrects)};
}

inline Claim make(std::string id, int page, std::string statement,
                  std::variant<IdentityCheck, CountCheck> check, Links links = {}) {
  return {
      std::move(id),   page, std::move(statement), std::move(links.corrected_by), std::move(links.corrects),
      std::move(check)};
}

// Domains. Degrees: hla2 and ahla numerators have degree 5 in the entries (q k k q v and
// q k q k v), hla3 7; normalized identities compared after division: twice that, plus eps.
struct Drawn {
  bool decay = false;      // gamma < 1 drawn
  bool normalize = false;  // eps > 0 drawn
};
inline Domain second_order(Drawn drawn = {}) {
  Domain d;
  d.decay = drawn.decay;
  d.normalize = drawn.normalize;
  d.degree = drawn.normalize ? 11 : 5;
  d.gamma_degree_per_token = 2;
  return d;
}
inline Domain third_order(Drawn drawn = {}) {
  Domain d = second_order(drawn);
  d.degree = drawn.normalize ? 15 : 7;
  d.gamma_degree_per_token = 3;
  d.max_n = 7;
  d.field_max_n = 24;
  d.field_max_d = 6;
  return d;
}
inline Domain segments(Domain d, int count) {
  d.segments = count;
  d.min_n = 1;
  return d;
}
inline Domain chunked(Domain d) {
  d.chunk = 1;
  return d;
}

}  // namespace hla::proofs::claims
