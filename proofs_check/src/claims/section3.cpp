// Section 3: second-order HLA, its normalization, the masked identity (Thm 3.1) and the decayed
// states of Sec. 4.3. Every left-hand side is the printed formula, evaluated from literal sums
// over the token indices; every right-hand side is the reference (the n x n matrix form).

#include "common.hpp"

namespace hla::proofs::claims {
namespace {

// Literal prefix sums (1-based t in the paper; 0-based here): sum_{i<=t} of the term.
template <class T, class F>
auto sum_to(Index t, F term) {
  auto total = term(0);
  for (Index i = 1; i <= t; ++i) total += term(i);
  return total;
}

template <class T>
Matrix<T> key_moment(const Case<T>& c, Index t) {  // S^K_t
  if (t < 0) return Matrix<T>::Zero(c.d(), c.d());
  return sum_to<T>(t, [&](Index i) { return Matrix<T>(k_(c, i) * k_(c, i).transpose()); });
}
template <class T>
Matrix<T> query_value(const Case<T>& c, Index t) {  // C^QV_t
  if (t < 0) return Matrix<T>::Zero(c.d(), c.dv());
  return sum_to<T>(t, [&](Index i) { return Matrix<T>(q_(c, i) * v_(c, i)); });
}
template <class T>
Vector<T> query_mass(const Case<T>& c, Index t) {  // m^Q_t
  if (t < 0) return Vector<T>::Zero(c.d());
  return sum_to<T>(t, [&](Index i) { return Vector<T>(q_(c, i)); });
}
template <class T>
Matrix<T> cross_value(const Case<T>& c, Index t) {  // G_t = sum_{i<=t} (k_i k_i^T) C^QV_{i-1}
  return sum_to<T>(
      t, [&](Index i) { return Matrix<T>(k_(c, i) * k_(c, i).transpose() * query_value(c, i - 1)); });
}
template <class T>
Vector<T> cross_mass(const Case<T>& c, Index t) {  // h_t
  return sum_to<T>(
      t, [&](Index i) { return Vector<T>(k_(c, i) * k_(c, i).transpose() * query_mass(c, i - 1)); });
}

// The unmasked forms of Eqs. 3.1-3.2: num_t = q^T S C, den_t = q^T S m.
template <class T>
Terms<T> unmasked_terms(const Case<T>& c) {
  Terms<T> out{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
  for (Index t = 0; t < c.n(); ++t) {
    out.num.row(t) = q_(c, t).transpose() * key_moment(c, t) * query_value(c, t);
    out.den(t) = q_(c, t).dot(key_moment(c, t) * query_mass(c, t));
  }
  return out;
}

// Thm 3.1: num_t = q^T (S C - G), den_t = q^T (S m - h), with G and h from their definitions.
template <class T>
Terms<T> masked_terms(const Case<T>& c) {
  Terms<T> out{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
  for (Index t = 0; t < c.n(); ++t) {
    out.num.row(t) = q_(c, t).transpose() * (key_moment(c, t) * query_value(c, t) - cross_value(c, t));
    out.den(t) = q_(c, t).dot(key_moment(c, t) * query_mass(c, t) - cross_mass(c, t));
  }
  return out;
}

}  // namespace
}  // namespace hla::proofs::claims

namespace hla::proofs {
using namespace claims;

std::vector<Claim> section3_claims() {
  std::vector<Claim> out;
  Domain plain = second_order();
  out.push_back(make("sec-3/t2", 3, "T2 = (Q K^T)(Q K^T)^T = Q (K^T K) Q^T.",
                     identity(plain, Scope::fixed_size, 0, []<class T>(const Case<T>& c) {
                       const auto& q = c.tokens.q;
                       const auto& k = c.tokens.k;
                       const Matrix<T> a = q * k.transpose();
                       return Sides<T>{{"T2", Matrix<T>(a * a.transpose()),
                                        Matrix<T>(q * (k.transpose() * k) * q.transpose())}};
                     })));
  out.push_back(
      make("eq-3.1", 3,
           "Unnormalized HLA o_t = q_t^T S^K_t C^QV_t is second-order attention with key and query/value "
           "indices each over 1..t.",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             return Sides<T>{{"num", unmasked_terms(c).num, defined(Variant::hla2, false, c).num}};
           })));
  out.push_back(make(
      "eq-3.2/den", 5, "The denominator den_t = q_t^T S^K_t m^Q_t is the numerator with v replaced by 1.",
      identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        return Sides<T>{{"den", column(unmasked_terms(c).den), column(defined(Variant::hla2, false, c).den)}};
      })));
  out.push_back(make(
      "eq-3.2", 5, "Normalized HLA o_t = q_t^T S^K_t C^QV_t / (q_t^T S^K_t m^Q_t + eps).",
      identity(second_order({.normalize = true}), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        return Sides<T>{
            {"o", normalized(unmasked_terms(c), c), defined_output(Variant::hla2, false, true, c)}};
      })));
  out.push_back(make(
      "rem-3-linear/num", 5, "With S^K_t = I the numerator is q_t^T C^QV_t = sum_{i<=t} (q_t^T q_i) v_i^T.",
      identity(plain, Scope::order_pattern, 2, []<class T>(const Case<T>& c) {
        Matrix<T> lhs(c.n(), c.dv()), rhs = Matrix<T>::Zero(c.n(), c.dv());
        for (Index t = 0; t < c.n(); ++t) {
          lhs.row(t) = q_(c, t).transpose() * Matrix<T>::Identity(c.d(), c.d()) * query_value(c, t);
          for (Index i = 0; i <= t; ++i) rhs.row(t) += q_(c, t).dot(q_(c, i)) * v_(c, i);
        }
        return Sides<T>{{"num", lhs, rhs}};
      })));
  out.push_back(make("rem-3-linear/den", 5,
                     "With S^K_t = I the denominator is q_t^T m^Q_t = sum_{i<=t} q_t^T q_i.",
                     identity(plain, Scope::order_pattern, 2, []<class T>(const Case<T>& c) {
                       Vector<T> lhs(c.n()), rhs = Vector<T>::Zero(c.n());
                       for (Index t = 0; t < c.n(); ++t) {
                         lhs(t) = q_(c, t).dot(Matrix<T>::Identity(c.d(), c.d()) * query_mass(c, t));
                         for (Index i = 0; i <= t; ++i) rhs(t) += q_(c, t).dot(q_(c, i));
                       }
                       return Sides<T>{{"den", column(lhs), column(rhs)}};
                     })));
  out.push_back(make(
      "rem-3-linear/tied", 5,
      "With S^K_t = I and tied queries and keys, normalized HLA is linear attention with the "
      "identity feature map.",
      identity(second_order({.normalize = true}), Scope::order_pattern, 2, []<class T>(const Case<T>& c) {
        Terms<T> lhs{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
        for (Index t = 0; t < c.n(); ++t) {
          lhs.num.row(t) = q_(c, t).transpose() * query_value(c, t);
          lhs.den(t) = q_(c, t).dot(query_mass(c, t));
        }
        Case<T> tied = c;
        tied.tokens.k = c.tokens.q;
        return Sides<T>{{"o", normalized(lhs, c), defined_output(Variant::linear, true, true, tied)}};
      })));
  out.push_back(make("sec-3.1/weights", 5,
                     "[(L . Q K^T)(L . Q K^T)^T]_{t,j} = sum_{i<=min(t,j)} (q_t^T k_i)(q_j^T k_i) = q_t^T "
                     "S^K_{min(t,j)} q_j.",
                     identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
                       const Matrix<T> w = masked_scores(c);
                       const Matrix<T> lhs = w * w.transpose();
                       Matrix<T> sum = Matrix<T>::Zero(c.n(), c.n()), moment(c.n(), c.n());
                       for (Index t = 0; t < c.n(); ++t) {
                         for (Index j = 0; j < c.n(); ++j) {
                           for (Index i = 0; i <= std::min(t, j); ++i)
                             sum(t, j) += q_(c, t).dot(k_(c, i)) * q_(c, j).dot(k_(c, i));
                           moment(t, j) = q_(c, t).dot(key_moment(c, std::min(t, j)) * q_(c, j));
                         }
                       }
                       return Sides<T>{{"sum", lhs, sum}, {"moment", lhs, moment}};
                     })));
  out.push_back(
      make("sec-3.1/row-mask", 5, "The strictly causal output is o_t = [((L . Q K^T)(L . Q K^T)^T . L) V]_t.",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             const Matrix<T> w = masked_scores(c);
             const Matrix<T> m = reference::lower(Matrix<T>(w * w.transpose()), T(1));
             return Sides<T>{{"num", Matrix<T>(m * c.tokens.v), defined(Variant::hla2, true, c).num}};
           })));
  out.push_back(make("thm-3.1/num", 6,
                     "num^mask_t = q_t^T (S^K_t C^QV_t - G_t) with G_t = sum_{i<=t} k_i k_i^T C^QV_{i-1}.",
                     identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
                       return Sides<T>{{"num", masked_terms(c).num, defined(Variant::hla2, true, c).num}};
                     })));
  out.push_back(make(
      "thm-3.1/den", 6, "den^mask_t = q_t^T (S^K_t m^Q_t - h_t) with h_t = sum_{i<=t} k_i k_i^T m^Q_{i-1}.",
      identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        return Sides<T>{{"den", column(masked_terms(c).den), column(defined(Variant::hla2, true, c).den)}};
      })));
  out.push_back(
      make("eq-3.3", 6, "The masked unnormalized output is o_t = q_t^T (S^K_t C^QV_t - G_t).",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             return Sides<T>{{"o", masked_terms(c).num, defined_output(Variant::hla2, true, false, c)}};
           })));
  out.push_back(make(
      "eq-3.4", 6, "The masked normalized output is q_t^T (S C - G) / (q_t^T (S m - h) + eps).",
      identity(second_order({.normalize = true}), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        return Sides<T>{{"o", normalized(masked_terms(c), c), defined_output(Variant::hla2, true, true, c)}};
      })));
  out.push_back(
      make("eq-3.5", 6,
           "sum_{j<=t} sum_{i<=j} k_i k_i^T q_j v_j^T = sum_{j<=t} S^K_j q_j v_j^T = S^K_t C^QV_t - I2, "
           "and I2 = sum_{j<=t} sum_{j<i<=t} k_i k_i^T q_j v_j^T = G_t.",
           identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             std::vector<Matrix<T>> nested, moments, difference, i2, g;
             for (Index t = 0; t < c.n(); ++t) {
               Matrix<T> x = Matrix<T>::Zero(c.d(), c.dv()), y = x, z = x;
               for (Index j = 0; j <= t; ++j) {
                 for (Index i = 0; i <= j; ++i) x += k_(c, i) * k_(c, i).transpose() * q_(c, j) * v_(c, j);
                 y += key_moment(c, j) * q_(c, j) * v_(c, j);
                 for (Index i = j + 1; i <= t; ++i)
                   z += k_(c, i) * k_(c, i).transpose() * q_(c, j) * v_(c, j);
               }
               nested.push_back(x);
               moments.push_back(y);
               difference.push_back(key_moment(c, t) * query_value(c, t) - z);
               i2.push_back(z);
               g.push_back(cross_value(c, t));
             }
             return Sides<T>{{"first equality", stack(nested), stack(moments)},
                             {"second equality", stack(moments), stack(difference)},
                             {"I2 = G_t", stack(i2), stack(g)}};
           })));
  out.push_back(
      make("thm-3.1/online", 6,
           "The online updates G_t = G_{t-1} + k_t (k_t^T C^QV_{t-1}), h_t = h_{t-1} + k_t (k_t^T m^Q_{t-1}) "
           "produce G_t and h_t of their definitions.",
           identity(plain, Scope::order_pattern, 2, []<class T>(const Case<T>& c) {
             std::vector<Matrix<T>> g_online, h_online, g_defined, h_defined;
             Matrix<T> g = Matrix<T>::Zero(c.d(), c.dv()), cqv = g;
             Vector<T> h = Vector<T>::Zero(c.d()), m = h;
             for (Index t = 0; t < c.n(); ++t) {
               g = g + k_(c, t) * (k_(c, t).transpose() * cqv);
               h = h + k_(c, t) * k_(c, t).dot(m);
               cqv = cqv + q_(c, t) * v_(c, t);
               m = m + q_(c, t);
               g_online.push_back(g);
               h_online.push_back(h);
               g_defined.push_back(cross_value(c, t));
               h_defined.push_back(cross_mass(c, t));
             }
             return Sides<T>{{"G_t", stack(g_online), stack(g_defined)},
                             {"h_t", stack(h_online), stack(h_defined)}};
           })));

  // Sec. 4.3: the decayed states, through the streaming forms of fast/ (Hla2Stream, published and
  // corrected cross decay).
  const auto streaming = [](Variant variant, bool masked, fast::Form form, Term term) {
    return [=]<class T>(const Case<T>& c) {
      const OperatorSpec spec = spec_of(variant, masked, c.parameters);
      const Terms<T> lhs = fast::streaming_terms(spec, form, c.tokens);
      return term_sides(lhs, reference::terms(spec, c.tokens), term);
    };
  };
  const Domain decayed = second_order({.decay = true});
  out.push_back(make("sec-4.3/unmasked", 8,
                     "With decay, S^K_t = g S^K_{t-1} + k_t k_t^T, C^QV_t = g C^QV_{t-1} + q_t v_t^T give "
                     "o_t = q_t^T S^K_t C^QV_t, the unmasked operator with weights g^((t-i)+(t-j)).",
                     identity(decayed, Scope::sizes_tried, 0,
                              streaming(Variant::hla2, false, fast::Form::published, Term::num))));
  out.push_back(make("sec-4.3/num", 8,
                     "With decay, G_t = g G_{t-1} + k_t k_t^T C^QV_{t-1} gives the masked decayed numerator "
                     "q_t^T (S^K_t C^QV_t - G_t).",
                     identity(decayed, Scope::sizes_tried, 0,
                              streaming(Variant::hla2, true, fast::Form::published, Term::num)),
                     {.corrected_by = "sec-4.3-corrected/num"}));
  out.push_back(make("sec-4.3/den", 8,
                     "With decay, h_t = g h_{t-1} + k_t k_t^T m^Q_{t-1} gives the masked decayed denominator "
                     "q_t^T (S^K_t m^Q_t - h_t).",
                     identity(decayed, Scope::sizes_tried, 0,
                              streaming(Variant::hla2, true, fast::Form::published, Term::den)),
                     {.corrected_by = "sec-4.3-corrected/den"}));
  out.push_back(
      make("sec-4.3-corrected/num", 8,
           "Corrected (F1): G_t = g^2 G_{t-1} + g k_t (k_t^T C^QV_{t-1}) gives the masked decayed numerator.",
           identity(decayed, Scope::sizes_tried, 0,
                    streaming(Variant::hla2, true, fast::Form::corrected, Term::num)),
           {.corrects = "sec-4.3/num"}));
  out.push_back(make(
      "sec-4.3-corrected/den", 8,
      "Corrected (F1): h_t = g^2 h_{t-1} + g k_t (k_t^T m^Q_{t-1}) gives the masked decayed denominator.",
      identity(decayed, Scope::sizes_tried, 0,
               streaming(Variant::hla2, true, fast::Form::corrected, Term::den)),
      {.corrects = "sec-4.3/den"}));
  return out;
}

}  // namespace hla::proofs
