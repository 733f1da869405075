// Section 6: asymmetric HLA (AHLA), its masked identity (Thm 6.1), decay, the scan operator of
// Eq. 6.2 and Algorithm 2 run as printed.

#include "common.hpp"

namespace hla::proofs::claims {
namespace {

template <class T>
Matrix<T> key_value(const Case<T>& c, Index t) {  // P^KV_t = sum_{j<=t} k_j v_j^T
  Matrix<T> p = Matrix<T>::Zero(c.d(), c.dv());
  for (Index j = 0; j <= t; ++j) p += k_(c, j) * v_(c, j);
  return p;
}
template <class T>
Vector<T> key_mass(const Case<T>& c, Index t) {  // m^K_t
  Vector<T> m = Vector<T>::Zero(c.d());
  for (Index j = 0; j <= t; ++j) m += k_(c, j);
  return m;
}
// E_t = sum_{i<=t} k_i (q_i^T P^KV_i), n_t = sum_{i<=t} k_i (q_i^T m^K_i).
template <class T>
Matrix<T> routed_value(const Case<T>& c, Index t) {
  Matrix<T> e = Matrix<T>::Zero(c.d(), c.dv());
  for (Index i = 0; i <= t; ++i) e += k_(c, i) * (q_(c, i).transpose() * key_value(c, i));
  return e;
}
template <class T>
Vector<T> routed_mass(const Case<T>& c, Index t) {
  Vector<T> n = Vector<T>::Zero(c.d());
  for (Index i = 0; i <= t; ++i) n += k_(c, i) * q_(c, i).dot(key_mass(c, i));
  return n;
}

template <class T>
Terms<T> theorem_terms(const Case<T>& c) {
  Terms<T> out{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
  for (Index t = 0; t < c.n(); ++t) {
    out.num.row(t) = q_(c, t).transpose() * routed_value(c, t);
    out.den(t) = q_(c, t).dot(routed_mass(c, t));
  }
  return out;
}

// Eq. 6.1: o_t = sum_{j<=t} sum_{i=j}^{t} (q_t^T k_i)(q_i^T k_j) v_j^T.
template <class T>
Matrix<T> double_sum(const Case<T>& c) {
  Matrix<T> o = Matrix<T>::Zero(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t) {
    for (Index j = 0; j <= t; ++j) {
      for (Index i = j; i <= t; ++i) o.row(t) += q_(c, t).dot(k_(c, i)) * q_(c, i).dot(k_(c, j)) * v_(c, j);
    }
  }
  return o;
}

// Algorithm 2 as printed.
template <class T>
Matrix<T> algorithm2(const Case<T>& c, bool normalize) {
  const T g = gamma_of(c), eps = from_rational<T>(c.parameters.eps);
  Matrix<T> p = Matrix<T>::Zero(c.d(), c.dv()), e = p;  // line 1
  Vector<T> m = Vector<T>::Zero(c.d()), n = m;
  Matrix<T> o(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t) {  // line 2
    const Vector<T> q = q_(c, t), k = k_(c, t);
    p = g * p + k * v_(c, t);  // line 3
    m = g * m + k;
    const RowVector<T> r = q.transpose() * p;  // line 4
    const T s = q.dot(m);                      // line 5
    e = g * e + k * r;                         // line 6
    n = g * n + s * k;
    RowVector<T> out = q.transpose() * e;  // line 7
    if (normalize) {                       // lines 8-9
      const T den = q.dot(n) + eps;
      out = out.unaryExpr([&](const T& x) { return checked_divide(x, den, "Alg. 2 denominator"); });
    }
    o.row(t) = out;
  }
  return o;
}

template <class T>
fast::AhlaSegments<T> ahla_segments(const Case<T>& c, bool corrected) {
  return fast::AhlaSegments<T>(c.d(), c.dv(), gamma_of(c), form_of(corrected));
}

// The serial recurrence of Thm 6.1 (Sec. 6.1 decay) as per-token states; R is the plain sum of
// k_i q_i^T (it is not part of the streaming state and is compared through the read-out only).
template <class T>
Sides<T> ahla_scan_equivalence(const Case<T>& c, bool corrected) {
  const auto seg = ahla_segments(c, corrected);
  const auto scanned = scan_inclusive(seg, c.tokens);
  const T g = gamma_of(c);
  std::vector<Matrix<T>> p_scan, e_scan, p_serial, e_serial;
  std::vector<Matrix<T>> m_scan, n_scan, m_serial, n_serial;
  Matrix<T> p = Matrix<T>::Zero(c.d(), c.dv()), e = p;
  Vector<T> m = Vector<T>::Zero(c.d()), n = m;
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    p = g * p + k * v_(c, t);
    m = g * m + k;
    e = g * e + k * (q.transpose() * p);
    n = g * n + k * q.dot(m);
    p_serial.push_back(p);
    e_serial.push_back(e);
    m_serial.push_back(m);
    n_serial.push_back(n);
    p_scan.push_back(scanned[t].key_value);
    e_scan.push_back(scanned[t].routed_value);
    m_scan.push_back(scanned[t].key_mass);
    n_scan.push_back(scanned[t].routed_mass);
  }
  return {{"P_t", stack(p_scan), stack(p_serial)},
          {"m_t", stack(m_scan), stack(m_serial)},
          {"E_t", stack(e_scan), stack(e_serial)},
          {"n_t", stack(n_scan), stack(n_serial)}};
}

// The decayed serial recurrence of Sec. 6.1 as per-token summaries: P, m, E, n from the
// recurrence; R (not part of the streaming state) and rho from the operator's left fold.
template <class T>
std::vector<fast::AhlaSummary<T>> ahla_serial_states(const Case<T>& c, bool corrected) {
  const auto seg = ahla_segments(c, corrected);
  const T g = gamma_of(c);
  fast::AhlaSummary<T> fold = seg.identity(), x = fold;
  std::vector<fast::AhlaSummary<T>> out;
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    fold = seg.combine(fold, seg.token(q, k, v_(c, t)));
    x.key_value = g * x.key_value + k * v_(c, t);
    x.key_mass = g * x.key_mass + k;
    x.routed_value = g * x.routed_value + k * (q.transpose() * x.key_value);
    x.routed_mass = g * x.routed_mass + k * q.dot(x.key_mass);
    x.key_query = fold.key_query;
    x.rho = fold.rho;
    out.push_back(x);
  }
  return out;
}

}  // namespace
}  // namespace hla::proofs::claims

namespace hla::proofs {
using namespace claims;

std::vector<Claim> section6_claims() {
  std::vector<Claim> out;
  out.push_back(make("sec-6/aav", 10, "AAV = Q (K^T Q)(K^T V) for A = Q K^T (unmasked).",
                     identity(second_order(), Scope::fixed_size, 0, []<class T>(const Case<T>& c) {
                       const auto& q = c.tokens.q;
                       const auto& k = c.tokens.k;
                       const Matrix<T> a = q * k.transpose();
                       return Sides<T>{{"AAV", Matrix<T>(a * a * c.tokens.v),
                                        Matrix<T>(q * ((k.transpose() * q) * (k.transpose() * c.tokens.v)))}};
                     })));
  out.push_back(make(
      "sec-6.1/weights", 10, "(AA)_{t,j} = sum_{i=j}^{t} (q_t^T k_i)(q_i^T k_j) for j <= t, A = L . Q K^T.",
      identity(second_order(), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        const Matrix<T> a = reference::lower(Matrix<T>(c.tokens.q * c.tokens.k.transpose()), T(1));
        const Matrix<T> aa = a * a;
        Matrix<T> lhs = Matrix<T>::Zero(c.n(), c.n()), rhs = lhs;
        for (Index t = 0; t < c.n(); ++t) {
          for (Index j = 0; j <= t; ++j) {
            lhs(t, j) = aa(t, j);
            for (Index i = j; i <= t; ++i) rhs(t, j) += q_(c, t).dot(k_(c, i)) * q_(c, i).dot(k_(c, j));
          }
        }
        return Sides<T>{{"AA", lhs, rhs}};
      })));
  out.push_back(make("eq-6.1", 10,
                     "o_t = sum_{j<=t} sum_{i=j}^{t} (q_t^T k_i)(q_i^T k_j) v_j^T is row t of ((AA) . L) V.",
                     identity(second_order(), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
                       return Sides<T>{{"o", double_sum(c), defined(Variant::ahla, true, c).num}};
                     })));
  out.push_back(make("thm-6.1/num", 12, "o_t = q_t^T E_t with E_t = sum_{i<=t} k_i (q_i^T P^KV_i).",
                     identity(second_order(), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
                       return Sides<T>{{"num", theorem_terms(c).num, defined(Variant::ahla, true, c).num}};
                     })));
  out.push_back(make(
      "thm-6.1/den", 12, "The denominator is q_t^T n_t with n_t = sum_{i<=t} k_i (q_i^T m^K_i).",
      identity(second_order(), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        return Sides<T>{{"den", column(theorem_terms(c).den), column(defined(Variant::ahla, true, c).den)}};
      })));
  out.push_back(make(
      "thm-6.1/normalized", 12, "The normalized output is q_t^T E_t / (q_t^T n_t + eps).",
      identity(second_order({.normalize = true}), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        return Sides<T>{{"o", normalized(theorem_terms(c), c), defined_output(Variant::ahla, true, true, c)}};
      })));
  out.push_back(make(
      "thm-6.1/online", 12,
      "The online updates P_t = P_{t-1} + k_t v_t^T, m_t = m_{t-1} + k_t, E_t = E_{t-1} + k_t (q_t^T P_t), "
      "n_t = n_{t-1} + k_t (q_t^T m_t) produce E_t and n_t of their definitions.",
      identity(second_order(), Scope::order_pattern, 2, []<class T>(const Case<T>& c) {
        std::vector<Matrix<T>> e_online, n_online, e_defined, n_defined;
        Matrix<T> p = Matrix<T>::Zero(c.d(), c.dv()), e = p;
        Vector<T> m = Vector<T>::Zero(c.d()), n = m;
        for (Index t = 0; t < c.n(); ++t) {
          p = p + k_(c, t) * v_(c, t);
          m = m + k_(c, t);
          e = e + k_(c, t) * (q_(c, t).transpose() * p);
          n = n + k_(c, t) * q_(c, t).dot(m);
          e_online.push_back(e);
          n_online.push_back(n);
          e_defined.push_back(routed_value(c, t));
          n_defined.push_back(routed_mass(c, t));
        }
        return Sides<T>{{"E_t", stack(e_online), stack(e_defined)},
                        {"n_t", stack(n_online), stack(n_defined)}};
      })));
  const auto streaming = [](Term term) {
    return [term]<class T>(const Case<T>& c) {
      const OperatorSpec spec = spec_of(Variant::ahla, true, c.parameters);
      const Terms<T> lhs = fast::streaming_terms(spec, fast::Form::published, c.tokens);
      return term_sides(lhs, reference::terms(spec, c.tokens), term);
    };
  };
  out.push_back(
      make("sec-6.1-decay/num", 12,
           "With decay (P = g P + k v^T, m = g m + k, E = g E + k (q^T P)), q_t^T E_t is the masked operator "
           "with weights g^(t-j).",
           identity(second_order({.decay = true}), Scope::sizes_tried, 0, streaming(Term::num))));
  out.push_back(make("sec-6.1-decay/den", 12,
                     "With decay (n = g n + k (q^T m)), q_t^T n_t is the masked decayed denominator.",
                     identity(second_order({.decay = true}), Scope::sizes_tried, 0, streaming(Term::den))));

  // The concatenation's laws: associativity on three segments, the identity on one.
  struct Laws {
    std::string id, what;
    bool decay = false, corrected = false;
    Links links;
  };
  const auto laws = [&out](const Laws& l) {
    out.push_back(make(
        l.id + "/assoc", 12, l.what + " is associative.",
        identity(segments(second_order({.decay = l.decay}), 3), Scope::summary_algebra, 0,
                 [=]<class T>(const Case<T>& c) { return associativity(ahla_segments(c, l.corrected), c); }),
        part_links(l.links, "/assoc")));
    out.push_back(make(
        l.id + "/identity", 12, l.what + " has the empty segment as identity.",
        identity(segments(second_order({.decay = l.decay}), 1), Scope::summary_algebra, 0,
                 [=]<class T>(const Case<T>& c) { return identity_laws(ahla_segments(c, l.corrected), c); }),
        {.corrects = part_links(l.links, "/identity").corrects}));  // the printed identities hold
  };
  laws({.id = "eq-6.2", .what = "The AHLA concatenation of Eq. 6.2"});
  laws({.id = "eq-6.2-decay",
        .what = "The decay-aware AHLA concatenation of Sec. 6.2 (R_AB = rho_B R_A + R_B)",
        .decay = true,
        .links = {.corrected_by = "eq-6.2-decay-corrected"}});
  laws({.id = "eq-6.2-decay-corrected",
        .what = "Corrected (F4): R_AB = R_A + R_B, the rest as printed,",
        .decay = true,
        .corrected = true,
        .links = {.corrects = "eq-6.2-decay"}});
  for (const bool decay : {false, true}) {
    out.push_back(
        make(decay ? "sec-6.2/one-step-decay" : "sec-6.2/one-step", 13,
             std::string("The step of Thm 4.1's proof for AHLA: one serial step of the Sec. 6.1 "
                         "updates equals X (+) Y under Eq. 6.2 for a single-token segment Y") +
                 (decay ? ", with decay and Sec. 6.2's decay-aware concatenation." : "."),
             identity(second_order({.decay = decay}), Scope::sizes_tried, 0, []<class T>(const Case<T>& c) {
               return one_step(ahla_segments(c, false), ahla_serial_states(c, false), c.tokens);
             })));
  }
  out.push_back(
      make("sec-6.2/scan", 13,
           "An exclusive Blelloch scan under Eq. 6.2 followed by local inclusion reproduces the serial "
           "recurrence's states.",
           identity(second_order(), Scope::sizes_tried, 0,
                    []<class T>(const Case<T>& c) { return ahla_scan_equivalence(c, false); })));
  out.push_back(make("sec-6.2/scan-decay", 13,
                     "The same with the decay-aware concatenation and the decayed recurrence.",
                     identity(second_order({.decay = true}), Scope::sizes_tried, 0,
                              []<class T>(const Case<T>& c) { return ahla_scan_equivalence(c, false); }),
                     {.corrected_by = "sec-6.2-corrected/scan-decay"}));
  out.push_back(make("sec-6.2-corrected/scan-decay", 13,
                     "Corrected (F4): the scan reproduces the decayed recurrence.",
                     identity(second_order({.decay = true}), Scope::sizes_tried, 0,
                              []<class T>(const Case<T>& c) { return ahla_scan_equivalence(c, true); }),
                     {.corrects = "sec-6.2/scan-decay"}));
  const auto alg2 = [&out](const std::string& id, const std::string& what, Domain domain) {
    out.push_back(make(id, 13, what,
                       identity(domain, domain.decay ? Scope::sizes_tried : Scope::order_pattern, 3,
                                []<class T>(const Case<T>& c) {
                                  const bool normalize = c.parameters.eps != 0;
                                  return Sides<T>{{"o", algorithm2(c, normalize),
                                                   defined_output(Variant::ahla, true, normalize, c)}};
                                })));
  };
  alg2("alg-2", "Algorithm 2 (no decay, unnormalized) returns the masked AHLA output.", second_order());
  alg2("alg-2/normalized", "Algorithm 2 with normalize returns the masked normalized output.",
       second_order({.normalize = true}));
  alg2("alg-2/decay", "Algorithm 2 with decay returns the masked decayed output.",
       second_order({.decay = true}));
  alg2("alg-2/decay-normalized", "Algorithm 2 with decay and normalize.",
       second_order({.decay = true, .normalize = true}));
  return out;
}

}  // namespace hla::proofs
