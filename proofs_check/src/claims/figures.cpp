// Figures 1 and 2: the formulas drawn in panels A (recurrent form), B (parallel form) and C
// (chunk-wise parallel form, with the concatenation drawn beside it).

#include "common.hpp"
#include "hla/fast/chunked.hpp"

namespace hla::proofs::claims {
namespace {

// Figure 1: o_t = sum_{j<=t} sum_{i<=j} (q_t^T k_i)(q_j^T k_i) v_j^T.
template <class T>
Matrix<T> hla2_sum(const Case<T>& c) {
  Matrix<T> o = Matrix<T>::Zero(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t)
    for (Index j = 0; j <= t; ++j)
      for (Index i = 0; i <= j; ++i) o.row(t) += q_(c, t).dot(k_(c, i)) * q_(c, j).dot(k_(c, i)) * v_(c, j);
  return o;
}
// Figure 2: o_t = sum_{j<=t} sum_{i=j}^{t} (q_t^T k_i)(q_i^T k_j) v_j^T.
template <class T>
Matrix<T> ahla_sum(const Case<T>& c) {
  Matrix<T> o = Matrix<T>::Zero(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t)
    for (Index j = 0; j <= t; ++j)
      for (Index i = j; i <= t; ++i) o.row(t) += q_(c, t).dot(k_(c, i)) * q_(c, i).dot(k_(c, j)) * v_(c, j);
  return o;
}

// Panel A of Figure 1: S_t = S + k k^T, C_t = C + q v^T, G_t = G + k (k^T C_{t-1}), o_t = q^T (S C - G).
template <class T>
Matrix<T> figure1_recurrence(const Case<T>& c) {
  Matrix<T> s = Matrix<T>::Zero(c.d(), c.d()), cqv = Matrix<T>::Zero(c.d(), c.dv()), g = cqv,
            o(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    g = g + k * (k.transpose() * cqv);
    s = s + k * k.transpose();
    cqv = cqv + q * v_(c, t);
    o.row(t) = q.transpose() * (s * cqv - g);
  }
  return o;
}
// Panel A of Figure 2: P_t = P + k v^T, E_t = E + k (q^T P_t), o_t = q^T E_t.
template <class T>
Matrix<T> figure2_recurrence(const Case<T>& c) {
  Matrix<T> p = Matrix<T>::Zero(c.d(), c.dv()), e = p, o(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    p = p + k * v_(c, t);
    e = e + k * (q.transpose() * p);
    o.row(t) = q.transpose() * e;
  }
  return o;
}

}  // namespace
}  // namespace hla::proofs::claims

namespace hla::proofs {
using namespace claims;

std::vector<Claim> figure_claims() {
  std::vector<Claim> out;
  const Domain plain = second_order();
  out.push_back(
      make("fig-1a", 4,
           "Figure 1(A): the recurrent form (S, C, m, G, h updates, read q_t^T (S_t C_t - G_t)) gives "
           "o_t = sum_{j<=t} sum_{i<=j} (q_t^T k_i)(q_j^T k_i) v_j^T = [((L . QK^T)(L . QK^T)^T . L) V]_t.",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             return Sides<T>{{"recurrence = sum", figure1_recurrence(c), hla2_sum(c)},
                             {"sum = matrix form", hla2_sum(c), defined(Variant::hla2, true, c).num}};
           })));
  out.push_back(
      make("fig-1b", 4,
           "Figure 1(B): O = [(L . QK^T)(L . QK^T)^T . L] V, i.e. o_t = sum_{j<=t} sum_{i<=j} "
           "(q_t^T k_i)(q_j^T k_i) v_j^T.",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             const Matrix<T> w = masked_scores(c);
             const Matrix<T> o = reference::lower(Matrix<T>(w * w.transpose()), T(1)) * c.tokens.v;
             return Sides<T>{{"o", o, hla2_sum(c)}, {"O(N^2 (d + dv)) evaluation", figure_1b(c.tokens), o}};
           })));
  out.push_back(make("fig-1c/oplus", 4,
                     "Figure 1(B-C): the drawn semidirect product (Eq. 4.1) is associative.",
                     identity(segments(plain, 3), Scope::summary_algebra, 0, []<class T>(const Case<T>& c) {
                       return associativity(
                           fast::Hla2Segments<T>(c.d(), c.dv(), T(1), T(0), true, fast::Form::published), c);
                     })));
  const auto chunk_form = [](Variant variant, fast::Form form) {
    return [=]<class T>(const Case<T>& c) {
      const OperatorSpec spec = spec_of(variant, true, c.parameters);
      const Terms<T> lhs = fast::chunked_terms(spec, form, c.tokens, fast::ScanOptions{c.chunk, 1});
      return Sides<T>{{"o", lhs.num, reference::terms(spec, c.tokens).num}};
    };
  };
  out.push_back(
      make("fig-1c", 4,
           "Figure 1(C): O^(k)_t = q_t^T (S^K,(k-1) C^QV,(k-1) - G^(k-1)) + [(L . Q^(k) K^(k)T)(L . Q^(k) "
           "K^(k)T)^T . L]_t V^(k) is the masked output.",
           identity(chunked(plain), Scope::sizes_tried, 0, chunk_form(Variant::hla2, fast::Form::published)),
           {.corrected_by = "fig-1c-corrected"}));
  Domain decay_ridge = second_order({.decay = true});
  decay_ridge.ridge = true;
  decay_ridge.degree = 6;
  out.push_back(make(
      "fig-1c-corrected", 4,
      "Corrected (F5): adding the cross term q_t^T S^K,(k-1) sum_{j in chunk k, j<=t} q_j v_j^T (with "
      "decay and ridge) gives the masked output for any chunk size.",
      identity(chunked(decay_ridge), Scope::sizes_tried, 0, chunk_form(Variant::hla2, fast::Form::corrected)),
      {.corrects = "fig-1c"}));
  out.push_back(make("fig-2a", 11,
                     "Figure 2(A): the recurrent form (P, m, E, n updates, read q_t^T E_t) gives "
                     "o_t = sum_{j<=t} sum_{i=j}^{t} (q_t^T k_i)(q_i^T k_j) v_j^T = [((AA) . L) V]_t.",
                     identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
                       return Sides<T>{
                           {"recurrence = sum", figure2_recurrence(c), ahla_sum(c)},
                           {"sum = matrix form", ahla_sum(c), defined(Variant::ahla, true, c).num}};
                     })));
  out.push_back(
      make("fig-2b", 11,
           "Figure 2(B): O = ((L . QK^T)(L . QK^T) . L) V, i.e. o_t = sum_{j<=t} sum_{i=j}^{t} "
           "(q_t^T k_i)(q_i^T k_j) v_j^T.",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             const Matrix<T> a = masked_scores(c);
             const Matrix<T> o = reference::lower(Matrix<T>(a * a), T(1)) * c.tokens.v;
             return Sides<T>{{"o", o, ahla_sum(c)}, {"O(N^2 (d + dv)) evaluation", figure_2b(c.tokens), o}};
           })));
  out.push_back(make("fig-2c/oplus", 11, "Figure 2(B-C): the drawn AHLA concatenation is associative.",
                     identity(segments(plain, 3), Scope::summary_algebra, 0, []<class T>(const Case<T>& c) {
                       return associativity(fast::AhlaSegments<T>(c.d(), c.dv(), T(1), fast::Form::published),
                                            c);
                     })));
  out.push_back(make(
      "fig-2c", 11,
      "Figure 2(C): O^(k)_t = q_t^T (E^(k-1) + R^KQ,(k)_{<t} P^KV,(k-1)) + [((A^(k) A^(k)) . L)]_t V^(k) is "
      "the masked AHLA output.",
      identity(chunked(plain), Scope::sizes_tried, 0, chunk_form(Variant::ahla, fast::Form::published)),
      {.corrected_by = "fig-2c-corrected"}));
  out.push_back(
      make("fig-2c-corrected", 11,
           "Corrected (F6): with R^KQ,(k)_{<=t} (and decay) the chunk form gives the masked AHLA output.",
           identity(chunked(second_order({.decay = true})), Scope::sizes_tried, 0,
                    chunk_form(Variant::ahla, fast::Form::corrected)),
           {.corrects = "fig-2c"}));
  return out;
}

}  // namespace hla::proofs
