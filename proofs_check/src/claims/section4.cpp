// Sections 4 and 5: the scan operators of second-order HLA and their laws, Thm 4.1's scan
// equivalence, the two-level form, the backward of p. 7, Algorithm 1 run as printed, and the
// remarks of Sec. 5.

#include "common.hpp"
#include "hla/fast/backward.hpp"
#include "hla/reference/hash.hpp"

namespace hla::proofs::claims {
namespace {

template <class T>
fast::Hla2Segments<T> hla2_segments(const Case<T>& c, bool masked, bool corrected) {
  return fast::Hla2Segments<T>(c.d(), c.dv(), gamma_of(c), T(0), masked, form_of(corrected));
}

// The serial recurrence of Sec. 3.1's online updates with Sec. 4.3's decay (published:
// G_t = g G_{t-1} + k_t k_t^T C_{t-1}; corrected, F1: g^2 and g), as per-token states.
template <class T>
std::vector<fast::Hla2Summary<T>> serial_states(const Case<T>& c, bool masked, bool corrected) {
  const T g = gamma_of(c);
  const auto [previous, incoming] = fast::hla2_coefficients(form_of(corrected), g);
  fast::Hla2Summary<T> x = hla2_segments(c, masked, corrected).identity();
  std::vector<fast::Hla2Summary<T>> out;
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> q = q_(c, t), k = k_(c, t);
    if (masked) {
      x.cross_value = previous * x.cross_value + incoming * k * (k.transpose() * x.query_value);
      x.cross_mass = previous * x.cross_mass + incoming * k * k.dot(x.query_mass);
    }
    x.key_moment = g * x.key_moment + k * k.transpose();
    x.query_value = g * x.query_value + q * v_(c, t);
    x.query_mass = g * x.query_mass + q;
    x.rho = x.rho * g;
    out.push_back(x);
  }
  return out;
}

// Thm 4.1: the exclusive Blelloch scan with local inclusion against the serial recurrence, state
// by state, and the read-outs.
template <class T>
Sides<T> scan_equivalence(const Case<T>& c, bool masked, bool corrected, bool two_level) {
  const auto seg = hla2_segments(c, masked, corrected);
  const auto scanned =
      two_level ? two_level_inclusive(seg, c.tokens, c.chunk) : scan_inclusive(seg, c.tokens);
  const auto serial = serial_states(c, masked, corrected);
  Sides<T> sides;
  compare_states(sides, scanned, serial);
  for (Part<T>& p : terms_sides(read_states(seg, scanned, c.tokens), read_states(seg, serial, c.tokens)))
    sides.push_back(std::move(p));
  return sides;
}

// Algorithm 1 as printed, on one chunk of width w = n: an exclusive scan of the token segments
// under Eq. 4.1's operator (Sec. 4.2's decay-aware one when decayed), then lines 4-16.
// corrected: the operator of F3 and line 6 with F1's weights.
template <class T>
Matrix<T> algorithm1(const Case<T>& c, bool normalize, bool corrected) {
  const T g = gamma_of(c), lambda = from_rational<T>(c.parameters.ridge),
          eps = from_rational<T>(c.parameters.eps);
  const auto seg = hla2_segments(c, true, corrected);
  auto prefixes = token_summaries(seg, c.tokens);  // line 1: (dS, dC, dm, 0, 0)
  fast::exclusive_scan(
      prefixes, seg.identity(), [&seg](const auto& a, const auto& b) { return seg.combine(a, b); },
      1);  // line 2
  Matrix<T> o(c.n(), c.dv());
  for (Index t = 0; t < c.n(); ++t) {  // line 3
    const auto& p = prefixes[t];
    const Vector<T> q = q_(c, t), k = k_(c, t);
    const Matrix<T> ds = k * k.transpose();
    const Matrix<T> s = g * p.key_moment + ds;  // line 5
    const Matrix<T> cv = g * p.query_value + q * v_(c, t);
    const Vector<T> m = g * p.query_mass + q;
    const auto [previous, incoming] = fast::hla2_coefficients(form_of(corrected), g);
    const Matrix<T> gt = previous * p.cross_value + incoming * ds * p.query_value;  // line 6
    const Vector<T> h = previous * p.cross_mass + incoming * ds * p.query_mass;
    const Matrix<T> s_eff = s + lambda * Matrix<T>::Identity(c.d(), c.d());  // line 7
    const RowVector<T> u = q.transpose() * s_eff;                            // line 9
    RowVector<T> out = u * cv - q.transpose() * gt;                          // lines 10-11
    if (normalize) {                                                         // lines 13-15
      const T den = u.dot(m) - q.dot(h) + eps;
      out = out.unaryExpr([&](const T& x) { return checked_divide(x, den, "Alg. 1 denominator"); });
    }
    o.row(t) = out;
  }
  return o;
}

// P. 7, "Backward for gradients": the reverse pass of the scan operator's adjoint, checkpointed at
// chunk boundaries (fast::bracketed_scan_gradients, in `form`, chunks of c.chunk tokens), against
// the gradients of the serial recurrence (the stream of the same form: for hla2 Sec. 3.1's
// updates with Sec. 4.3's decay, for AHLA Alg. 2) and, `defined`, those of the definition. The
// gradient of <dO, O> is linear in dO, so the claim holds for every dO exactly when it holds for
// every unit dO = e_t e_j^T: over the rationals the parts stack the gradients of all n dv of them
// (the Jacobian). In Z/p one cotangent does the work of the n dv: the difference of two gradients
// is sum_(t,j) dO_tj D_tj, a polynomial of the same degree as the output's in (tokens, dO), so a
// dO drawn at random in Z/p misses a non-zero D with the Schwartz-Zippel chance the ledger states.
// It is drawn by hashing the case (the same case, the same dO), which the exhaustive counterexample
// search screens in Z/p: n dv times fewer backward passes there.
Matrix<ModP> hashed_cotangent(const Case<ModP>& c) {
  std::uint64_t h = splitmix64(static_cast<std::uint64_t>(c.n() * 1000003 + c.chunk));
  const auto absorb = [&h](const Matrix<ModP>& m) {
    for (Index i = 0; i < m.rows(); ++i)
      for (Index j = 0; j < m.cols(); ++j) h = splitmix64(h ^ m(i, j).residue());
  };
  absorb(c.tokens.q);
  absorb(c.tokens.k);
  absorb(c.tokens.v);
  h = splitmix64(h ^ gamma_of(c).residue());
  Matrix<ModP> dO(c.n(), c.dv());
  for (Index i = 0; i < c.n(); ++i)
    for (Index j = 0; j < c.dv(); ++j) dO(i, j) = ModP::from_residue(h = splitmix64(h));
  return dO;
}

template <class T>
Sides<T> backward_sides(const Case<T>& c, Variant variant, bool masked, fast::Form form, bool defined) {
  const OperatorSpec spec = spec_of(variant, masked, c.parameters);
  const fast::Form stream_form =
      fast::unavailable(spec, fast::Implementation::streaming, form) ? fast::default_form(spec, fast::Implementation::streaming) : form;
  const Index n = c.n(), dv = c.dv();
  std::vector<Matrix<T>> cotangents;
  if constexpr (std::is_same_v<T, ModP>) {
    cotangents.push_back(hashed_cotangent(c));
  } else {
    for (Index t = 0; t < n; ++t)
      for (Index j = 0; j < dv; ++j) {
        cotangents.push_back(Matrix<T>::Zero(n, dv));
        cotangents.back()(t, j) = T(1);
      }
  }
  std::vector<Matrix<T>> scan[3], serial[3], exact[3];
  for (const Matrix<T>& dO : cotangents) {
    const Gradients<T> a = fast::bracketed_scan_gradients(spec, form, c.tokens, dO, fast::ScanOptions{c.chunk, 1});
    const Gradients<T> b = fast::streaming_gradients(spec, stream_form, c.tokens, dO);
    for (const auto& [to, g] : {std::pair{&scan, &a}, std::pair{&serial, &b}}) {
      (*to)[0].push_back(g->dq);
      (*to)[1].push_back(g->dk);
      (*to)[2].push_back(g->dv);
    }
    if (!defined) continue;
    const Gradients<T> e = reference::gradients(spec, c.tokens, dO);
    exact[0].push_back(e.dq);
    exact[1].push_back(e.dk);
    exact[2].push_back(e.dv);
  }
  const char* names[3] = {"dQ", "dK", "dV"};
  Sides<T> sides;
  for (int i = 0; i < 3; ++i) sides.push_back({std::string(names[i]) + ", scan against serial", stack(scan[i]), stack(serial[i])});
  if (defined)
    for (int i = 0; i < 3; ++i)
      sides.push_back({std::string(names[i]) + ", scan against the definition", stack(scan[i]), stack(exact[i])});
  return sides;
}

// Multi-query (Sec. 5.2): K and V shared by the heads, whose queries are the column blocks of q.
// One S^K per layer; C^QV, m^Q, G, h per head.
template <class T>
Matrix<T> shared_key_moment_outputs(const Case<T>& c, Index heads) {
  const Index d = c.tokens.k.cols(), dv = c.dv();
  Matrix<T> s = Matrix<T>::Zero(d, d), out(c.n(), heads * dv);
  std::vector<Matrix<T>> cqv(heads, Matrix<T>::Zero(d, dv)), g(heads, Matrix<T>::Zero(d, dv));
  for (Index t = 0; t < c.n(); ++t) {
    const Vector<T> k = k_(c, t);
    for (Index h = 0; h < heads; ++h) {
      const Vector<T> q = c.tokens.q.row(t).segment(h * d, d).transpose();
      g[h] = g[h] + k * (k.transpose() * cqv[h]);
      cqv[h] = cqv[h] + q * v_(c, t);
    }
    s = s + k * k.transpose();  // stored once
    for (Index h = 0; h < heads; ++h) {
      const Vector<T> q = c.tokens.q.row(t).segment(h * d, d).transpose();
      out.row(t).segment(h * dv, dv) = q.transpose() * (s * cqv[h] - g[h]);
    }
  }
  return out;
}

}  // namespace
}  // namespace hla::proofs::claims

namespace hla::proofs {
using namespace claims;

std::vector<Claim> section4_claims() {
  std::vector<Claim> out;
  // An operator's laws: associativity on three segments, the identity on one.
  struct Laws {
    std::string id, what;
    Domain domain;
    bool masked = false, corrected = false;
    Links links;
  };
  const auto laws = [&out](const Laws& l) {
    out.push_back(make(l.id + "/assoc", 7, l.what + " is associative.",
                       identity(segments(l.domain, 3), Scope::summary_algebra, 0,
                                [=]<class T>(const Case<T>& c) {
                                  return associativity(hla2_segments(c, l.masked, l.corrected), c);
                                }),
                       part_links(l.links, "/assoc")));
    out.push_back(
        make(l.id + "/identity", 7, l.what + " has the empty segment (zero summaries, rho = 1) as identity.",
             identity(segments(l.domain, 1), Scope::summary_algebra, 0,
                      [=]<class T>(const Case<T>& c) {
                        return identity_laws(hla2_segments(c, l.masked, l.corrected), c);
                      }),
             {.corrects = part_links(l.links, "/identity").corrects}));  // the printed identities hold
  };
  laws({.id = "sec-4.1",
        .what = "The unmasked monoid (S, C, m) with componentwise addition",
        .domain = second_order()});
  laws({.id = "eq-4.1",
        .what = "The masked semidirect product of Eq. 4.1",
        .domain = second_order(),
        .masked = true});
  laws({.id = "sec-4.2-decay",
        .what = "The decay-aware unmasked monoid (rho_B S_A + S_B, ..., rho_A rho_B)",
        .domain = second_order({.decay = true})});
  laws({.id = "eq-4.1-decay",
        .what = "The decay-aware masked operator of Sec. 4.2 (G_AB = rho_B G_A + G_B + S_B (rho_B C_A))",
        .domain = second_order({.decay = true}),
        .masked = true,
        .links = {.corrected_by = "eq-4.1-decay-corrected"}});
  laws({.id = "eq-4.1-decay-corrected",
        .what = "Corrected (F3): G_AB = rho_B^2 G_A + G_B + rho_B S_B C_A, h likewise,",
        .domain = second_order({.decay = true}),
        .masked = true,
        .corrected = true,
        .links = {.corrects = "eq-4.1-decay"}});

  // Thm 4.1 and Rem. 4.2: a scan's states against the serial recurrence's.
  struct Theorem {
    std::string id, what;
    bool decay = false, masked = false, corrected = false, two_level = false;
    Links links;
  };
  const auto theorem = [&out](const Theorem& t) {
    Domain domain = second_order({.decay = t.decay});
    if (t.two_level) domain = chunked(domain);
    out.push_back(make(t.id, t.two_level ? 8 : 7, t.what,
                       identity(domain, Scope::sizes_tried, 0,
                                [=]<class T>(const Case<T>& c) {
                                  return scan_equivalence(c, t.masked, t.corrected, t.two_level);
                                }),
                       t.links));
  };
  const std::string thm =
      "Thm 4.1: an exclusive Blelloch scan followed by local inclusion gives, at every t, the state "
      "of the serial recurrence (Sec. 3.1 updates";
  theorem({.id = "thm-4.1/unmasked", .what = thm + "), unmasked, and hence its outputs."});
  theorem({.id = "thm-4.1/masked", .what = thm + "), masked, and hence its outputs.", .masked = true});
  theorem({.id = "thm-4.1/unmasked-decay",
           .what = thm + " with Sec. 4.3 decay), unmasked, and hence its outputs.",
           .decay = true});
  theorem({.id = "thm-4.1/masked-decay",
           .what = thm + " with Sec. 4.3 decay), masked, and hence its outputs.",
           .decay = true,
           .masked = true,
           .links = {.corrected_by = "thm-4.1-corrected/masked-decay"}});
  theorem({.id = "thm-4.1-corrected/masked-decay",
           .what =
               "Corrected (F1, F3): the scan under the corrected operator gives the states of the corrected "
               "recurrence.",
           .decay = true,
           .masked = true,
           .corrected = true,
           .links = {.corrects = "thm-4.1/masked-decay"}});
  // The step of Thm 4.1's proof (p. 8): Phi_gamma, one serial step, is X (+)_gamma Y for a
  // single-token Y. Where it fails, the scan cannot give the serial states: thm-4.1/masked-decay.
  struct Step {
    std::string id, what;
    bool decay = false, masked = false, corrected = false;
    Links links;
  };
  const auto step = [&out](const Step& s) {
    out.push_back(make(s.id, 8, s.what,
                       identity(second_order({.decay = s.decay}), Scope::sizes_tried, 0,
                                [=]<class T>(const Case<T>& c) {
                                  return one_step(hla2_segments(c, s.masked, s.corrected),
                                                  serial_states(c, s.masked, s.corrected), c.tokens);
                                }),
                       s.links));
  };
  const std::string phi =
      "Proof of Thm 4.1: one serial step of the Sec. 3.1 updates (Phi) equals X (+) Y for a single-token "
      "segment Y";
  step({.id = "thm-4.1/one-step", .what = phi + ", unmasked."});
  step({.id = "thm-4.1/one-step-masked", .what = phi + ", masked (Eq. 4.1).", .masked = true});
  step({.id = "thm-4.1/one-step-decay",
        .what = phi + ", unmasked, with the Sec. 4.3 decayed updates (Phi_gamma, (+)_gamma).",
        .decay = true});
  step({.id = "thm-4.1/one-step-masked-decay",
        .what = phi + ", masked, with the Sec. 4.3 decayed updates G_t = g G_{t-1} + k_t (k_t^T C_{t-1}) "
                      "and Sec. 4.2's operator: the step on which thm-4.1/masked-decay rests.",
        .decay = true,
        .masked = true,
        .links = {.corrected_by = "thm-4.1-corrected/one-step-masked-decay"}});
  step({.id = "thm-4.1-corrected/one-step-masked-decay",
        .what =
            "Corrected (F1, F3): the corrected decayed step is X (+)_gamma Y under the corrected operator.",
        .decay = true,
        .masked = true,
        .corrected = true,
        .links = {.corrects = "thm-4.1/one-step-masked-decay"}});
  theorem({.id = "rem-4.2/two-level",
           .what =
               "Inter-chunk scan (Sec. 4.2): carry (+) local prefix (+) T_t gives the serial state, for any "
               "chunk size.",
           .masked = true,
           .two_level = true});
  theorem({.id = "rem-4.2/two-level-decay",
           .what = "The two-level scan with the decay-aware operator gives the serial decayed state.",
           .decay = true,
           .masked = true,
           .two_level = true,
           .links = {.corrected_by = "rem-4.2-corrected/two-level-decay"}});
  theorem({.id = "rem-4.2-corrected/two-level-decay",
           .what = "Corrected (F1, F3): the two-level scan gives the corrected serial state.",
           .decay = true,
           .masked = true,
           .corrected = true,
           .two_level = true,
           .links = {.corrects = "rem-4.2/two-level-decay"}});

  // P. 7: the reverse scan's gradients against the serial recurrence's, per variant and case.
  struct Backward {
    std::string id, what;
    Variant variant = Variant::hla2;
    bool decay = false, masked = false, corrected = false;
    Links links;
  };
  const auto backward = [&out](const Backward& b) {
    Domain domain = chunked(second_order({.decay = b.decay}));
    domain.max_n = 6;  // n dv backward runs per case: the Jacobian
    domain.max_d = 3;
    domain.field_max_n = 12;
    domain.field_max_d = 3;
    // A scan in chunks of 2 brackets differently from the serial fold from n = 5 on (token 5 reads
    // (T_1 T_2)(T_3 T_4) T_5); in chunks of 1 it is the serial fold.
    domain.search_chunk = 2;
    out.push_back(make(b.id, 7, b.what,
                       identity(domain, Scope::sizes_tried, 0,
                                [=]<class T>(const Case<T>& c) {
                                  return backward_sides(c, b.variant, b.masked,
                                                        b.corrected ? fast::Form::corrected : fast::Form::published,
                                                        b.corrected || !b.decay);
                                }),
                       b.links));
  };
  const std::string reverse =
      "P. 7: a reverse scan applying the adjoint of (+), checkpointed at tile boundaries, yields the gradients "
      "of the serial recurrence";
  backward({.id = "sec-4.2-backward/unmasked", .what = reverse + " (hla2, unmasked), and so the operator's."});
  backward({.id = "sec-4.2-backward/masked", .what = reverse + " (hla2, masked, Eq. 4.1), and so the operator's.",
            .masked = true});
  backward({.id = "sec-4.2-backward/unmasked-decay",
            .what = reverse + " (hla2, unmasked, with decay), and so the operator's.",
            .decay = true});
  backward({.id = "sec-4.2-backward/masked-decay",
            .what = reverse + " (hla2, masked, Sec. 4.2's decay-aware operator against Sec. 4.3's updates).",
            .decay = true,
            .masked = true,
            .links = {.corrected_by = "sec-4.2-backward-corrected/masked-decay"}});
  backward({.id = "sec-4.2-backward-corrected/masked-decay",
            .what = "Corrected (F1, F3): the reverse scan of the corrected operator yields the gradients of the "
                    "corrected recurrence and of the masked decayed operator.",
            .decay = true,
            .masked = true,
            .corrected = true,
            .links = {.corrects = "sec-4.2-backward/masked-decay"}});
  backward({.id = "sec-4.2-backward/ahla",
            .what = reverse + " (AHLA, Sec. 6.2's operator against Alg. 2), and so the operator's.",
            .variant = Variant::ahla,
            .masked = true});
  backward({.id = "sec-4.2-backward/ahla-decay",
            .what = reverse + " (AHLA with decay, Sec. 6.2's decay-aware operator against Alg. 2).",
            .variant = Variant::ahla,
            .decay = true,
            .masked = true,
            .links = {.corrected_by = "sec-4.2-backward-corrected/ahla-decay"}});
  backward({.id = "sec-4.2-backward-corrected/ahla-decay",
            .what = "Corrected (F4): the reverse scan of the corrected AHLA operator yields the gradients of "
                    "Alg. 2 and of the decayed AHLA operator.",
            .variant = Variant::ahla,
            .decay = true,
            .masked = true,
            .corrected = true,
            .links = {.corrects = "sec-4.2-backward/ahla-decay"}});

  // Algorithm 1, run as printed, against the reference.
  const auto alg1 = [&out](const std::string& id, const std::string& what, Domain domain, bool corrected,
                           Links links) {
    out.push_back(make(id, 9, what,
                       identity(domain, domain.decay ? Scope::sizes_tried : Scope::order_pattern, 3,
                                [=]<class T>(const Case<T>& c) {
                                  const bool normalize = c.parameters.eps != 0;
                                  return Sides<T>{{"o", algorithm1(c, normalize, corrected),
                                                   defined_output(Variant::hla2, true, normalize, c)}};
                                }),
                       std::move(links)));
  };
  Domain ridge = second_order();
  ridge.ridge = true;
  ridge.degree = 6;
  Domain ridge_normalized = second_order({.normalize = true});
  ridge_normalized.ridge = true;
  ridge_normalized.degree = 13;
  const bool as_printed = false, corrected = true;  // Algorithm 1's operator and line 6
  alg1("alg-1", "Algorithm 1 (no decay, no ridge, unnormalized) returns the masked output.", second_order(),
       as_printed, {});
  alg1("alg-1/normalized", "Algorithm 1 with normalize returns the masked normalized output.",
       second_order({.normalize = true}), as_printed, {});
  alg1("alg-1/ridge", "Algorithm 1 with ridge lambda returns q_t^T (S^K_t + lambda I) C_t - q_t^T G_t.",
       ridge, as_printed, {});
  alg1("alg-1/ridge-normalized", "Algorithm 1 with ridge and normalize.", ridge_normalized, as_printed, {});
  alg1("alg-1/decay", "Algorithm 1 with decay returns the masked decayed output.",
       second_order({.decay = true}), as_printed, {.corrected_by = "alg-1-corrected/decay"});
  alg1("alg-1-corrected/decay",
       "Algorithm 1 with F3's operator and F1's line 6 returns the masked decayed output.",
       second_order({.decay = true}), corrected, {.corrects = "alg-1/decay"});

  // Section 5.
  out.push_back(make(
      "rem-5.1-ridge", 9,
      "Adding lambda I gives a stabilized variant that is not the masked bilinear form: it adds "
      "lambda q_t^T C^QV_t to the numerator and lambda q_t^T m^Q_t to the denominator.",
      identity(ridge, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        const T lambda = from_rational<T>(c.parameters.ridge);
        Case<T> plain = c;
        plain.parameters.ridge = 0;
        const Terms<T> with = defined(Variant::hla2, true, c), without = defined(Variant::hla2, true, plain);
        Terms<T> extra{Matrix<T>(c.n(), c.dv()), Vector<T>(c.n())};
        Matrix<T> cqv = Matrix<T>::Zero(c.d(), c.dv());
        Vector<T> m = Vector<T>::Zero(c.d());
        for (Index t = 0; t < c.n(); ++t) {
          cqv += q_(c, t) * v_(c, t);
          m += q_(c, t);
          extra.num.row(t) = lambda * (q_(c, t).transpose() * cqv);
          extra.den(t) = lambda * q_(c, t).dot(m);
        }
        return Sides<T>{{"num", Matrix<T>(with.num - without.num), extra.num},
                        {"den", column(Vector<T>(with.den - without.den)), column(extra.den)}};
      })));
  Domain two_heads = second_order();
  two_heads.heads = 2;
  out.push_back(make(
      "sec-5.2/multi-query", 10,
      "With K and V shared across heads, one S^K_t per layer serves every head; C, m, G, h stay per head.",
      identity(two_heads, Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
        const Index heads = 2, d = c.tokens.k.cols(), dv = c.dv();
        Matrix<T> rhs(c.n(), heads * dv);
        for (Index h = 0; h < heads; ++h) {
          Case<T> head = c;
          head.tokens.q = c.tokens.q.middleCols(h * d, d);
          rhs.middleCols(h * dv, dv) = defined(Variant::hla2, true, head).num;
        }
        return Sides<T>{{"o", shared_key_moment_outputs(c, heads), rhs}};
      })));
  out.push_back(
      make("sec-5.2/packed", 10,
           "S^K_t is symmetric, so its upper triangle (d(d+1)/2 entries) determines it without changing "
           "the algebra.",
           identity(second_order(), Scope::order_pattern, 3, []<class T>(const Case<T>& c) {
             const Index d = c.d();
             Vector<T> packed = Vector<T>::Zero(d * (d + 1) / 2);
             Matrix<T> full = Matrix<T>::Zero(d, d), cqv = Matrix<T>::Zero(d, c.dv()), g = cqv;
             std::vector<Matrix<T>> s_t, s_t_transposed;
             Matrix<T> o(c.n(), c.dv());
             for (Index t = 0; t < c.n(); ++t) {
               const Vector<T> k = k_(c, t), q = q_(c, t);
               full += k * k.transpose();
               s_t.push_back(full);
               s_t_transposed.push_back(full.transpose());
               g += k * (k.transpose() * cqv);
               cqv += q * v_(c, t);
               Matrix<T> unpacked(d, d);
               for (Index a = 0, e = 0; a < d; ++a) {
                 for (Index b = a; b < d; ++b, ++e) {
                   packed(e) += k(a) * k(b);
                   unpacked(a, b) = unpacked(b, a) = packed(e);
                 }
               }
               o.row(t) = q.transpose() * (unpacked * cqv - g);
             }
             return Sides<T>{{"S^K_t = (S^K_t)^T", stack(s_t), stack(s_t_transposed)},
                             {"o from the packed S^K", o, defined(Variant::hla2, true, c).num}};
           })));
  return out;
}

}  // namespace hla::proofs
