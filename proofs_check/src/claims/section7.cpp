// Section 7: third-order HLA. The unmasked factorization, Thm 7.1 with its cross-summaries and
// online updates, Algorithm 3, the corrected state of Eqs. 7.4-7.5, the scan operator of
// Eqs. 7.6-7.7 (Thm 7.2) and Algorithm 4, and the corrected forms (F2).

#include "common.hpp"

namespace hla::proofs::claims {
namespace {

// Literal prefix moments at t (t = -1: empty).
template <class T>
struct Moments {
  Matrix<T> sk, sq, p;
  Vector<T> m;
};
template <class T>
Moments<T> moments(const Case<T>& c, Index t) {
  Moments<T> x{Matrix<T>::Zero(c.d(), c.d()), Matrix<T>::Zero(c.d(), c.d()), Matrix<T>::Zero(c.d(), c.dv()),
               Vector<T>::Zero(c.d())};
  for (Index i = 0; i <= t; ++i) {
    x.sk += k_(c, i) * k_(c, i).transpose();
    x.sq += q_(c, i) * q_(c, i).transpose();
    x.p += k_(c, i) * v_(c, i);
    x.m += k_(c, i);
  }
  return x;
}

// The cross-summaries of Sec. 7.1 from their definitions (sums over i <= t).
template <class T>
struct Cross {
  Matrix<T> g1, g2, g3;
  Vector<T> h1, h2, h3;
};
template <class T>
Cross<T> cross(const Case<T>& c, Index t) {
  Cross<T> x{Matrix<T>::Zero(c.d(), c.dv()), Matrix<T>::Zero(c.d(), c.dv()), Matrix<T>::Zero(c.d(), c.dv()),
             Vector<T>::Zero(c.d()),         Vector<T>::Zero(c.d()),         Vector<T>::Zero(c.d())};
  for (Index i = 0; i <= t; ++i) {
    const Moments<T> before = moments(c, i - 1);
    const Vector<T> q = q_(c, i), k = k_(c, i);
    const Matrix<T> kk = k * k.transpose(), qq = q * q.transpose();
    x.g1 += kk * before.sq * before.p;
    x.h1 += kk * before.sq * before.m;
    x.g2 += before.sk * qq * before.p;
    x.h2 += before.sk * qq * before.m;
    x.g3 += before.sk * before.sq * (k * v_(c, i));
    x.h3 += before.sk * before.sq * k;
  }
  return x;
}

// Eq. 7.4 (and Thm 7.1): F_t = S^K S^Q P - G1 - G2 - G3, eta_t likewise.
template <class T>
std::pair<Matrix<T>, Vector<T>> corrected_state(const Case<T>& c, Index t) {
  const Moments<T> x = moments(c, t);
  const Cross<T> g = cross(c, t);
  return {x.sk * x.sq * x.p - g.g1 - g.g2 - g.g3, x.sk * x.sq * x.m - g.h1 - g.h2 - g.h3};
}

// Thm 7.1's masked num and den.
template <class T>
Terms<T> theorem_terms(const Case<T>& c) {
  Terms<T> out{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
  for (Index t = 0; t < c.n(); ++t) {
    const Moments<T> x = moments(c, t);
    const Cross<T> g = cross(c, t);
    out.num.row(t) = q_(c, t).transpose() * (x.sk * x.sq * x.p - g.g1 - g.g2 - g.g3);
    out.den(t) = q_(c, t).dot(x.sk * x.sq * x.m - g.h1 - g.h2 - g.h3);
  }
  return out;
}

// Algorithm 3 as printed (lines 1-19).
template <class T>
Terms<T> algorithm3(const Case<T>& c) {
  const T g = gamma_of(c);
  const Index d = c.d(), dv = c.dv();
  Matrix<T> sk = Matrix<T>::Zero(d, d), sq = sk, p = Matrix<T>::Zero(d, dv);  // lines 1-2
  Vector<T> m = Vector<T>::Zero(d);
  Matrix<T> g1 = Matrix<T>::Zero(d, dv), g2 = g1, g3 = g1;
  Vector<T> h1 = Vector<T>::Zero(d), h2 = h1, h3 = h1;
  Terms<T> out{Matrix<T>(c.n(), dv), Vector<T>(c.n())};
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    const RowVector<T> v = v_(c, t);
    const Matrix<T> sk_prev = sk, sq_prev = sq, p_prev = p;  // line 4
    const Vector<T> m_prev = m;
    sk = g * sk_prev + k * k.transpose();  // line 6
    sq = g * sq_prev + q * q.transpose();
    p = g * p_prev + k * v;  // line 7
    m = g * m_prev + k;
    const Vector<T> u1 = sq_prev * k;  // line 9
    g1 = g * g1 + k * (u1.transpose() * p_prev);
    h1 = g * h1 + k * u1.dot(m_prev);
    const Vector<T> a2 = sk_prev * q;  // line 10
    g2 = g * g2 + a2 * (q.transpose() * p_prev);
    h2 = g * h2 + a2 * q.dot(m_prev);
    const Vector<T> u3 = sq_prev * k, a3 = sk_prev * u3;  // line 11
    g3 = g * g3 + a3 * v;
    h3 = g * h3 + a3;
    const Vector<T> y = sk * q, z = sq * y;  // line 13
    out.num.row(t) =
        z.transpose() * p - q.transpose() * g1 - q.transpose() * g2 - q.transpose() * g3;  // line 14
    out.den(t) = q.dot(sk * (sq * m) - h1 - h2 - h3);  // line 16 (before + eps)
  }
  return out;
}

// Eq. 7.5's recurrence for (F, eta), from zero.
template <class T>
std::pair<std::vector<Matrix<T>>, std::vector<Matrix<T>>> recurrence75(const Case<T>& c) {
  const Index d = c.d(), dv = c.dv();
  Matrix<T> sk = Matrix<T>::Zero(d, d), sq = sk, p = Matrix<T>::Zero(d, dv), f = p;
  Vector<T> m = Vector<T>::Zero(d), eta = m;
  std::vector<Matrix<T>> fs, etas;
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    const Matrix<T> dk = k * k.transpose(), dq = q * q.transpose(), dp = k * v_(c, t);
    const Vector<T>& dm = k;
    f = f + sk * dq * dp + dk * sq * dp + dk * dq * p + dk * dq * dp;
    eta = eta + sk * dq * dm + dk * sq * dm + dk * dq * m + dk * dq * dm;
    sk += dk;
    sq += dq;
    p += dp;
    m += dm;
    fs.push_back(f);
    etas.push_back(column(eta));
  }
  return {fs, etas};
}

template <class T>
fast::Hla3PublishedSegments<T> published_segments(const Case<T>& c) {
  return fast::Hla3PublishedSegments<T>(c.d(), c.dv());
}
template <class T>
fast::Hla3Segments<T> corrected_segments(const Case<T>& c) {
  return fast::Hla3Segments<T>(c.d(), c.dv(), gamma_of(c), true);
}

// Sec. 7.3's sentence on decay in its natural reading: Eqs. 7.6-7.7 with the segment attenuation
// rho = gamma^l adjoined and the carry-scaling convention of the second-order decayed scan
// (Sec. 4.2: every summary of the earlier segment A enters scaled by rho_B, S_AB = rho_B S_A + S_B,
// G_AB = rho_B G_A + G_B + S_B (rho_B C_A)). Every term of Eqs. 7.6-7.7 is linear in A's summary,
// so this is the printed concatenation applied to rho_B A.
template <class T>
class DecayedPublishedSegments {
 public:
  struct Summary {
    fast::Hla3PublishedSummary<T> x;
    T rho;
  };
  DecayedPublishedSegments(Index d, Index dv, const T& gamma) : base_(d, dv), gamma_(gamma) {}

  Summary identity() const { return {base_.identity(), T(1)}; }
  Summary token(const Vector<T>& q, const Vector<T>& k, const RowVector<T>& v) const {
    return {base_.token(q, k, v), gamma_};
  }
  Summary combine(const Summary& a, const Summary& b) const {
    fast::Hla3PublishedSummary<T> carried = a.x;
    const T& r = b.rho;
    for (Matrix<T>* m : {&carried.key_moment, &carried.query_moment, &carried.key_value, &carried.third_value,
                         &carried.query_product, &carried.key_query, &carried.map_value, &carried.map_mass})
      *m *= r;
    for (Vector<T>* x : {&carried.key_mass, &carried.third_mass, &carried.query_mass}) *x *= r;
    return {base_.combine(carried, b.x), a.rho * b.rho};
  }
  fast::Readout<T> read(const Summary& s, const Vector<T>& q) const { return base_.read(s.x, q); }

 private:
  fast::Hla3PublishedSegments<T> base_;
  T gamma_;
};

}  // namespace
}  // namespace hla::proofs::claims

namespace hla::proofs {
using namespace claims;

std::vector<Claim> section7_claims() {
  std::vector<Claim> out;
  const Domain plain = third_order();
  out.push_back(make("sec-7.1/weights", 13,
                     "[(A A^T A)]_{t,j} = sum_u sum_i (q_t^T k_i)(q_u^T k_i)(q_u^T k_j) = q_t^T (K^T "
                     "K)(sum_u q_u q_u^T) k_j "
                     "for A = Q K^T.",
                     identity(plain, Scope::fixed_size, 0, []<class T>(const Case<T>& c) {
                       const auto& q = c.tokens.q;
                       const auto& k = c.tokens.k;
                       const Matrix<T> a = q * k.transpose();
                       Matrix<T> sum = Matrix<T>::Zero(c.n(), c.n());
                       for (Index t = 0; t < c.n(); ++t)
                         for (Index j = 0; j < c.n(); ++j)
                           for (Index u = 0; u < c.n(); ++u)
                             for (Index i = 0; i < c.n(); ++i) sum(t, j) += a(t, i) * a(u, i) * a(u, j);
                       const Matrix<T> moment = q * (k.transpose() * k) * (q.transpose() * q) * k.transpose();
                       const Matrix<T> product = a * a.transpose() * a;
                       return Sides<T>{{"sum", product, sum}, {"moment", product, moment}};
                     })));
  const auto unmasked = [](Term term) {
    return [term]<class T>(const Case<T>& c) {
      Terms<T> lhs{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
      for (Index t = 0; t < c.n(); ++t) {
        const Moments<T> x = moments(c, t);
        lhs.num.row(t) = q_(c, t).transpose() * x.sk * x.sq * x.p;
        lhs.den(t) = q_(c, t).dot(x.sk * x.sq * x.m);
      }
      return term_sides(lhs, defined(Variant::hla3, false, c), term);
    };
  };
  out.push_back(make("sec-7.1/num", 14, "Unmasked third order: o_t = q_t^T S^K_t S^Q_t P^KV_t.",
                     identity(plain, Scope::order_pattern, 4, unmasked(Term::num))));
  out.push_back(make("sec-7.1/den", 14, "Unmasked third order: den_t = q_t^T S^K_t S^Q_t m^K_t.",
                     identity(plain, Scope::order_pattern, 4, unmasked(Term::den))));
  const auto theorem = [](Term term) {
    return [term]<class T>(const Case<T>& c) {
      return term_sides(theorem_terms(c), defined(Variant::hla3, true, c), term);
    };
  };
  out.push_back(
      make("thm-7.1/num", 14,
           "The masked third-order output is q_t^T (S^K_t S^Q_t P^KV_t - G1_t - G2_t - G3_t), i.e. row t of "
           "(W W^T W) V with W = L . Q K^T.",
           identity(plain, Scope::order_pattern, 4, theorem(Term::num)),
           {.corrected_by = "thm-7.1-corrected/num"}));
  out.push_back(make("thm-7.1/den", 14,
                     "The masked third-order denominator is q_t^T (S^K S^Q m^K - h1 - h2 - h3).",
                     identity(plain, Scope::order_pattern, 4, theorem(Term::den)),
                     {.corrected_by = "thm-7.1-corrected/den"}));
  out.push_back(make("thm-7.1/normalized", 14,
                     "The normalized masked third-order output is num^mask / (den^mask + eps).",
                     identity(third_order({.normalize = true}), Scope::order_pattern, 4,
                              []<class T>(const Case<T>& c) {
                                return Sides<T>{{"o", normalized(theorem_terms(c), c),
                                                 defined_output(Variant::hla3, true, true, c)}};
                              }),
                     {.corrected_by = "thm-7.1-corrected/normalized"}));
  out.push_back(make(
      "eq-7.2", 14, "The online updates of Eq. 7.2 produce G1_t, G2_t, G3_t of their definitions.",
      identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        std::vector<Matrix<T>> o1, o2, o3, d1, d2, d3;
        Matrix<T> g1 = Matrix<T>::Zero(c.d(), c.dv()), g2 = g1, g3 = g1;
        for (Index t = 0; t < c.n(); ++t) {
          const Moments<T> before = moments(c, t - 1);
          const Vector<T> q = q_(c, t), k = k_(c, t);
          g1 = g1 + (k * k.transpose()) * before.sq * before.p;
          g2 = g2 + before.sk * (q * q.transpose()) * before.p;
          g3 = g3 + before.sk * before.sq * (k * v_(c, t));
          const Cross<T> x = cross(c, t);
          o1.push_back(g1), o2.push_back(g2), o3.push_back(g3);
          d1.push_back(x.g1), d2.push_back(x.g2), d3.push_back(x.g3);
        }
        return Sides<T>{
            {"G1_t", stack(o1), stack(d1)}, {"G2_t", stack(o2), stack(d2)}, {"G3_t", stack(o3), stack(d3)}};
      })));
  out.push_back(make(
      "eq-7.3", 15, "The online updates of Eq. 7.3 produce h1_t, h2_t, h3_t of their definitions.",
      identity(plain, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        std::vector<Matrix<T>> o1, o2, o3, d1, d2, d3;
        Vector<T> h1 = Vector<T>::Zero(c.d()), h2 = h1, h3 = h1;
        for (Index t = 0; t < c.n(); ++t) {
          const Moments<T> before = moments(c, t - 1);
          const Vector<T> q = q_(c, t), k = k_(c, t);
          h1 = h1 + (k * k.transpose()) * before.sq * before.m;
          h2 = h2 + before.sk * (q * q.transpose()) * before.m;
          h3 = h3 + before.sk * before.sq * k;
          const Cross<T> x = cross(c, t);
          o1.push_back(column(h1)), o2.push_back(column(h2)), o3.push_back(column(h3));
          d1.push_back(column(x.h1)), d2.push_back(column(x.h2)), d3.push_back(column(x.h3));
        }
        return Sides<T>{
            {"h1_t", stack(o1), stack(d1)}, {"h2_t", stack(o2), stack(d2)}, {"h3_t", stack(o3), stack(d3)}};
      })));
  const auto alg3 = [&out](const std::string& id, const std::string& what, Domain domain, Links links) {
    out.push_back(make(id, 15, what,
                       identity(domain, domain.decay ? Scope::sizes_tried : Scope::order_pattern, 4,
                                []<class T>(const Case<T>& c) {
                                  const bool normalize = c.parameters.eps != 0;
                                  const Terms<T> terms = algorithm3(c);
                                  return Sides<T>{{"o", normalize ? normalized(terms, c) : terms.num,
                                                   defined_output(Variant::hla3, true, normalize, c)}};
                                }),
                       std::move(links)));
  };
  alg3("alg-3", "Algorithm 3 (no decay, unnormalized) returns the masked third-order output.", plain,
       {.corrected_by = "thm-7.1-corrected/num"});
  alg3("alg-3/normalized", "Algorithm 3 with normalize returns the masked normalized output.",
       third_order({.normalize = true}), {.corrected_by = "thm-7.1-corrected/normalized"});
  alg3("alg-3/decay", "Algorithm 3 with decay returns the masked decayed output.",
       third_order({.decay = true}), {.corrected_by = "thm-7.1-corrected/decay"});

  // The corrected streaming form (F2), with and without decay.
  const auto corrected = [](Term term) {
    return [term]<class T>(const Case<T>& c) {
      const bool normalize = term == Term::normalized;
      const OperatorSpec spec = spec_of(Variant::hla3, true, c.parameters, normalize);
      const Terms<T> lhs = fast::streaming_terms(spec, fast::Form::corrected, c.tokens);
      if (normalize) return Sides<T>{{"o", normalized(lhs, c), reference::output(spec, c.tokens)}};
      return term_sides(lhs, reference::terms(spec, c.tokens), term);
    };
  };
  out.push_back(make("thm-7.1-corrected/num", 14,
                     "Corrected (F2): o_t = q_t^T F_t with F_t = F_{t-1} + (S^K_t q_t)(q_t^T P^KV_t).",
                     identity(plain, Scope::order_pattern, 4, corrected(Term::num)),
                     {.corrects = "thm-7.1/num"}));
  out.push_back(make("thm-7.1-corrected/den", 14,
                     "Corrected (F2): den_t = q_t^T eta_t with eta_t = eta_{t-1} + (S^K_t q_t)(q_t^T m^K_t).",
                     identity(plain, Scope::order_pattern, 4, corrected(Term::den)),
                     {.corrects = "thm-7.1/den"}));
  out.push_back(
      make("thm-7.1-corrected/normalized", 14,
           "Corrected (F2): the normalized output q_t^T F_t / (q_t^T eta_t + eps).",
           identity(third_order({.normalize = true}), Scope::order_pattern, 4, corrected(Term::normalized)),
           {.corrects = "thm-7.1/normalized"}));
  out.push_back(make("thm-7.1-corrected/decay", 15,
                     "Corrected (F2) with Alg. 3's decay: F_t = g^3 F_{t-1} + (S^K_t q_t)(q_t^T P^KV_t), "
                     "moments decayed by g.",
                     identity(third_order({.decay = true}), Scope::sizes_tried, 0, corrected(Term::num)),
                     {.corrects = "alg-3/decay"}));

  out.push_back(make("eq-7.4", 16,
                     "With F_t and eta_t of Eq. 7.4, num^mask_t = q_t^T F_t and den^mask_t = q_t^T eta_t.",
                     identity(plain, Scope::order_pattern, 4, []<class T>(const Case<T>& c) {
                       Terms<T> lhs{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
                       for (Index t = 0; t < c.n(); ++t) {
                         const auto [f, eta] = corrected_state(c, t);
                         lhs.num.row(t) = q_(c, t).transpose() * f;
                         lhs.den(t) = q_(c, t).dot(eta);
                       }
                       return terms_sides(lhs, theorem_terms(c));
                     })));
  out.push_back(
      make("eq-7.5", 16, "The recurrence of Eq. 7.5 reproduces F_t and eta_t of Eq. 7.4.",
           identity(plain, Scope::order_pattern, 4, []<class T>(const Case<T>& c) {
             const auto [fs, etas] = recurrence75(c);
             std::vector<Matrix<T>> f_def, eta_def;
             for (Index t = 0; t < c.n(); ++t) {
               const auto [f, eta] = corrected_state(c, t);
               f_def.push_back(f);
               eta_def.push_back(column(eta));
             }
             return Sides<T>{{"F_t", stack(fs), stack(f_def)}, {"eta_t", stack(etas), stack(eta_def)}};
           })));
  out.push_back(
      make("eq-7.6/assoc", 16, "The third-order concatenation of Eqs. 7.6-7.7 is associative (Thm 7.2).",
           identity(segments(plain, 3), Scope::summary_algebra, 0,
                    []<class T>(const Case<T>& c) { return associativity(published_segments(c), c); })));
  out.push_back(
      make("eq-7.6/identity", 16, "The all-zero segment with zero maps is the identity of Eqs. 7.6-7.7.",
           identity(segments(plain, 1), Scope::summary_algebra, 0,
                    []<class T>(const Case<T>& c) { return identity_laws(published_segments(c), c); })));
  out.push_back(
      make("thm-7.2/scan", 17,
           "An exclusive scan under Eqs. 7.6-7.7 followed by local inclusion gives the (F_t, eta_t) of "
           "Eq. 7.5's serial recurrence.",
           identity(plain, Scope::sizes_tried, 0, []<class T>(const Case<T>& c) {
             const auto scanned = scan_inclusive(published_segments(c), c.tokens);
             const auto [fs, etas] = recurrence75(c);
             std::vector<Matrix<T>> f_scan, eta_scan;
             for (const auto& s : scanned) {
               f_scan.push_back(s.third_value);
               eta_scan.push_back(column(s.third_mass));
             }
             return Sides<T>{{"F_t", stack(f_scan), stack(fs)}, {"eta_t", stack(eta_scan), stack(etas)}};
           })));
  out.push_back(
      make("thm-7.2/alg-3", 17, "The outputs of the third-order scan match Algorithm 3 for gamma = 1.",
           identity(plain, Scope::sizes_tried, 0, []<class T>(const Case<T>& c) {
             const auto seg = published_segments(c);
             return terms_sides(read_states(seg, scan_inclusive(seg, c.tokens), c.tokens), algorithm3(c));
           })));
  // Algorithm 4 against the masked output, or against Algorithm 3's num and den.
  struct Alg4 {
    std::string id, what;
    bool normalize = false, against_alg3 = false;
    Links links;
  };
  const auto alg4 = [&out](const Alg4& a) {
    out.push_back(make(a.id, 17, a.what,
                       identity(chunked(third_order({.normalize = a.normalize})), Scope::sizes_tried, 0,
                                [=]<class T>(const Case<T>& c) {
                                  const auto seg = published_segments(c);
                                  const Terms<T> terms =
                                      read_states(seg, two_level_inclusive(seg, c.tokens, c.chunk), c.tokens);
                                  if (a.against_alg3) return terms_sides(terms, algorithm3(c));
                                  return Sides<T>{{"o", a.normalize ? normalized(terms, c) : terms.num,
                                                   defined_output(Variant::hla3, true, a.normalize, c)}};
                                }),
                       a.links));
  };
  alg4({.id = "alg-4",
        .what = "Algorithm 4 (chunks, scans within and across them, I_t = carry (x) local prefix (x) T_t) "
                "returns the masked third-order output.",
        .links = {.corrected_by = "sec-7.3-corrected/scan"}});
  alg4({.id = "alg-4/normalized",
        .what = "Algorithm 4 with normalize returns the masked normalized output.",
        .normalize = true,
        .links = {.corrected_by = "sec-7.3-corrected/scan-normalized"}});
  alg4({.id = "alg-4/alg-3",
        .what = "Algorithm 4 returns Algorithm 3's num and den (gamma = 1), for any chunk size.",
        .against_alg3 = true});

  out.push_back(make(
      "alg-3/state", 17,
      "The streaming kernel of Algorithm 3 uses only the compact state of Eq. 7.4 with the prefix moments. "
      "As printed it keeps G1-G3 and h1-h3 (3 d dv + 3 d scalars) where Eq. 7.4 has F, eta (d dv + d); read "
      "as 'its outputs need only that state' (gamma = 1): Alg. 3's num and den against q_t^T F_t and "
      "q_t^T eta_t of Eq. 7.5's recurrence on (S^K, S^Q, P, m, F, eta).",
      identity(plain, Scope::order_pattern, 4, []<class T>(const Case<T>& c) {
        const auto [fs, etas] = recurrence75(c);
        Terms<T> compact{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
        for (Index t = 0; t < c.n(); ++t) {
          compact.num.row(t) = q_(c, t).transpose() * fs[t];
          compact.den(t) = (q_(c, t).transpose() * etas[t])(0, 0);
        }
        return terms_sides(algorithm3(c), compact);
      })));
  // Sec. 7.3's last sentence: decay for the third-order scan by rho = gamma^l and Sec. 4.2's
  // carry-scaling, against Algorithm 3 with decay and against the masked decayed operator.
  for (const bool masked : {false, true}) {
    out.push_back(make(
        masked ? "sec-7.3/decay-masked" : "sec-7.3/decay", 17,
        std::string("With decay incorporated by adjoining rho = gamma^l and Sec. 4.2's carry-scaling (every "
                    "summary of the earlier segment scaled by rho_B), Algorithm 4 returns ") +
            (masked ? "the masked decayed third-order output." : "Algorithm 3's decayed num and den."),
        identity(chunked(third_order({.decay = true})), Scope::sizes_tried, 0,
                 [masked]<class T>(const Case<T>& c) {
                   const DecayedPublishedSegments<T> seg(c.d(), c.dv(), gamma_of(c));
                   const Terms<T> scanned =
                       read_states(seg, two_level_inclusive(seg, c.tokens, c.chunk), c.tokens);
                   if (!masked) return terms_sides(scanned, algorithm3(c));
                   return terms_sides(scanned, defined(Variant::hla3, true, c));
                 }),
        {.corrected_by = "sec-7.3-corrected/scan"}));
  }

  // The corrected segment summary (F2): O(d^2 + d dv) scalars, any gamma.
  out.push_back(
      make("sec-7.3-corrected/assoc", 17,
           "Corrected (F2): the segment summary (S^K, S^Q, P, m, F, eta, X, x, Y, rho) with its "
           "concatenation is associative for every gamma.",
           identity(segments(third_order({.decay = true}), 3), Scope::summary_algebra, 0,
                    []<class T>(const Case<T>& c) { return associativity(corrected_segments(c), c); }),
           {.corrects = "eq-7.6/assoc"}));
  out.push_back(
      make("sec-7.3-corrected/identity", 17, "Corrected (F2): the empty segment is its identity.",
           identity(segments(third_order({.decay = true}), 1), Scope::summary_algebra, 0,
                    []<class T>(const Case<T>& c) { return identity_laws(corrected_segments(c), c); }),
           {.corrects = "eq-7.6/identity"}));
  const auto corrected_scan = [](bool normalize) {
    return [normalize]<class T>(const Case<T>& c) {
      const auto seg = corrected_segments(c);
      const Terms<T> terms = read_states(seg, two_level_inclusive(seg, c.tokens, c.chunk), c.tokens);
      return Sides<T>{{"o", normalize ? normalized(terms, c) : terms.num,
                       defined_output(Variant::hla3, true, normalize, c)}};
    };
  };
  out.push_back(
      make("sec-7.3-corrected/scan", 17,
           "Corrected (F2): Algorithm 4's two-level scan over the corrected summary returns the masked "
           "(decayed) third-order output, for any chunk size.",
           identity(chunked(third_order({.decay = true})), Scope::sizes_tried, 0, corrected_scan(false)),
           {.corrects = "alg-4"}));
  out.push_back(make("sec-7.3-corrected/scan-normalized", 17, "Corrected (F2): the same, normalized.",
                     identity(chunked(third_order({.decay = true, .normalize = true})), Scope::sizes_tried, 0,
                              corrected_scan(true)),
                     {.corrects = "alg-4/normalized"}));
  return out;
}

}  // namespace hla::proofs
