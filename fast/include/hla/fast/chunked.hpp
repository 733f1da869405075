#pragma once

// The chunk-parallel output form of Figures 1(C) and 2(C): each chunk's outputs are its
// intra-chunk masked matrix products plus the carry from the preceding chunks, whose summaries
// are combined by an exclusive Blelloch scan. Work per chunk is matrix-matrix (Eigen products).
//
// Within a chunk, token t sits at offset tau = 1..C after the chunk's carry-in state, which
// holds the moments of all earlier tokens aged to the chunk start. For hla2 (weights
// g^((t-i)+(t-j)), i <= j) the index pairs split into: both earlier (carry,
// g^(2 tau) q_t^T (S C - G)), both in the chunk (intra), and key earlier with query in the chunk,
// g^tau q_t^T S sum_{j<=t in chunk} g^(t-j) q_j v_j^T (cross). Figure 1(C) prints the carry and the
// intra term only: finding F5. For ahla (weights g^(t-j), j <= i) the pairs are: both earlier
// (g^tau q_t^T E), both in the chunk (intra), and i in the chunk with j earlier,
// g^tau sum_{i<=t in chunk} (q_t.k_i) q_i^T P; Figure 2(C) prints that sum over i < t: finding F6.

#include <vector>

#include "hla/fast/algebra/ahla.hpp"
#include "hla/fast/algebra/hla2.hpp"
#include "hla/fast/algebra/linear.hpp"
#include "hla/fast/scan.hpp"
#include "hla/reference/definition.hpp"

namespace hla::fast {

namespace chunked_detail {

// The masks and powers of gamma for a chunk of a given length, built once per length.
template <class T>
struct ChunkShape {
  RowVector<T> age;  // g^(end - j): the age of each token at the chunk's end
  Vector<T> offset;  // g^tau, tau = 1..C: the age of the carry-in state at each token
  Matrix<T> decay;   // L_g on the chunk (g^(t-j), j <= t; 0 above)
  Matrix<T> causal;  // L
  Matrix<T> strict;  // L without its diagonal
  T rho;             // g^C

  ChunkShape(Index c, const T& gamma)
      : age(reference::ages(c, gamma)),
        offset(c),
        decay(reference::lower(Matrix<T>(Matrix<T>::Ones(c, c)), gamma)),
        causal(reference::lower(Matrix<T>(Matrix<T>::Ones(c, c)), T(1))),
        strict(causal - Matrix<T>::Identity(c, c)),
        rho(1) {
    for (Index t = 0; t < c; ++t) offset(t) = rho = rho * gamma;
  }
};

// One chunk: views of its tokens (no copies), its shape, and its position in the sequence.
template <class T>
struct Chunk {
  Eigen::Ref<const Matrix<T>> q, k, v;
  const ChunkShape<T>& shape;
  Index index;
  const RowVector<T>& age = shape.age;
  const Vector<T>& offset = shape.offset;
  const Matrix<T>& decay = shape.decay;
  const Matrix<T>& causal = shape.causal;
  const Matrix<T>& strict = shape.strict;
  const T& rho = shape.rho;
};

// Row-scales m by w: diag(w) m.
template <class T>
Matrix<T> scale_rows(const Vector<T>& w, const Matrix<T>& m) {
  return w.asDiagonal() * m;
}

}  // namespace chunked_detail

// hla2 unmasked (ridge, decay), and masked as printed in Figure 1(C): carry and intra term only,
// without the cross term (F5). The corrected masked form is Hla2MaskedChunks.
template <class T>
class Hla2Chunks {
 public:
  using Segments = Hla2Segments<T>;
  using Summary = typename Segments::Summary;

  Hla2Chunks(const OperatorSpec& spec, Index d, Index dv)
      : spec_(spec),
        gamma_(from_rational<T>(spec.decay)),
        ridge_(from_rational<T>(spec.ridge)),
        segments_(d, dv, gamma_, ridge_, spec.masked, Form::corrected) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  // The chunk's own summary, from matrix products: S = K^T D K, C = Q^T D V, m = Q^T D 1, and
  // G = K^T M V, h = K^T M 1 with M_ij = g^((end-i)+(end-j)) (k_i . q_j) for j < i.
  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;  // D K
    const Matrix<T> qd = ch.age.asDiagonal() * ch.q;
    Summary s{ch.k.transpose() * kd, qd.transpose() * ch.v, qd.transpose() * Vector<T>::Ones(ch.q.rows()),
              Matrix<T>(),           Vector<T>(),           ch.rho};
    if (spec_.masked) {
      const Matrix<T> m = Matrix<T>(kd * qd.transpose()).cwiseProduct(ch.strict);
      s.cross_value = ch.k.transpose() * (m * ch.v);
      s.cross_mass = ch.k.transpose() * m.rowwise().sum();
    } else {
      s.cross_value = Matrix<T>::Zero(ch.q.cols(), ch.v.cols());
      s.cross_mass = Vector<T>::Zero(ch.q.cols());
    }
    return s;
  }

  // num (C x dv) and den (C) of the chunk given the carry-in summary p of all earlier tokens.
  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> a = ch.q * ch.k.transpose();
    const Matrix<T> w_decayed = a.cwiseProduct(ch.decay);  // W_g
    const Matrix<T> second = spec_.masked ? Matrix<T>(a.cwiseProduct(ch.causal)) : a;
    // intra: [(W_g W^T) . L_g]; W_g is lower triangular, so half the product suffices.
    Matrix<T> weights = Matrix<T>(w_decayed.template triangularView<Eigen::Lower>() * second.transpose())
                            .cwiseProduct(ch.decay);
    if (ridge_ != T(0)) weights += ridge_ * Matrix<T>(ch.q * ch.q.transpose()).cwiseProduct(ch.decay);
    const Matrix<T> metric_queries = ch.q * p.key_moment;  // rows q_t^T S
    if (!spec_.masked) {  // cross: g^tau q_t^T S sum_{j<=t} g^(t-j) q_j v_j^T
      weights += chunked_detail::scale_rows(
          ch.offset, Matrix<T>(Matrix<T>(metric_queries * ch.q.transpose()).cwiseProduct(ch.decay)));
    }
    // carry: g^(2 tau) q_t^T (S C - G) (+ ridge: g^tau lambda q_t^T C)
    Matrix<T> carried = metric_queries * p.query_value;
    Vector<T> carried_mass = metric_queries * p.query_mass;
    if (spec_.masked) {
      carried -= ch.q * p.cross_value;
      carried_mass -= ch.q * p.cross_mass;
    }
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    Matrix<T> num = weights * ch.v + chunked_detail::scale_rows(offset2, carried);
    Vector<T> den = weights.rowwise().sum() + offset2.cwiseProduct(carried_mass);
    if (ridge_ != T(0)) {
      num += ridge_ * chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.query_value));
      den += ridge_ * ch.offset.cwiseProduct(ch.q * p.query_mass);
    }
    if (!spec_.masked) {  // unmasked: also the keys of the chunk with the earlier queries
      const Matrix<T> local_keys = w_decayed * ch.k;  // rows: q_t^T S_loc,t
      num += chunked_detail::scale_rows(ch.offset, Matrix<T>(local_keys * p.query_value));
      den += ch.offset.cwiseProduct(local_keys * p.query_mass);
    }
    return {num, den};
  }

 private:
  OperatorSpec spec_;
  T gamma_, ridge_;
  Segments segments_;
};

// Masked hla2, corrected, in the form that needs fewest products. With u_j = S^K_j q_j (the
// inclusive key moment at j), the weight g^((t-i)+(t-j)) over i <= j gives
//   o_t = sum_{j<=t} g^(2(t-j)) (q_t . u_j) v_j,
// and the chunk scan carries F = S C - G, the i <= j part of S C (Hla2MomentSegments), so the carry
// is g^(2 tau) q_t^T F. Within a chunk u_j = g^tau S q_j + (W_g K)_j; W_g K is computed once, in the
// summary pass, and kept for the output pass.
template <class T>
class Hla2MaskedChunks {
 public:
  using Segments = Hla2MomentSegments<T>;
  using Summary = typename Segments::Summary;

  Hla2MaskedChunks(const OperatorSpec& spec, Index d, Index dv, Index chunks)
      : gamma_(from_rational<T>(spec.decay)),
        ridge_(from_rational<T>(spec.ridge)),
        segments_(d, dv, gamma_, ridge_),
        local_metric_queries_(chunks) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  // S = K^T D K, C = Q^T D V, m = Q^T D 1, F = U^T D^2 V, f = U^T D^2 1 with U = W_g K.
  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    Matrix<T>& u = local_metric_queries_[ch.index];
    u = w_decayed.template triangularView<Eigen::Lower>() * ch.k;  // rows q_j^T S_loc,j
    const Vector<T> age = ch.age.transpose();
    const Vector<T> age2 = age.cwiseProduct(age);
    const Matrix<T> qd = age.asDiagonal() * ch.q;
    const Matrix<T> ud = age2.asDiagonal() * u;
    return {ch.k.transpose() * (age.asDiagonal() * ch.k),  qd.transpose() * ch.v,
            qd.transpose() * Vector<T>::Ones(ch.q.rows()), ud.transpose() * ch.v,
            ud.transpose() * Vector<T>::Ones(ch.q.rows()), ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> metric_queries =  // rows u_j^T = q_j^T S_j
        chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.key_moment)) +
        local_metric_queries_[ch.index];
    Matrix<T> weights =
        Matrix<T>(ch.q * metric_queries.transpose()).cwiseProduct(ch.decay).cwiseProduct(ch.decay);
    if (ridge_ != T(0)) weights += ridge_ * Matrix<T>(ch.q * ch.q.transpose()).cwiseProduct(ch.decay);
    const Vector<T> offset2 = ch.offset.cwiseProduct(ch.offset);
    Matrix<T> num = weights * ch.v + chunked_detail::scale_rows(offset2, Matrix<T>(ch.q * p.masked_value));
    Vector<T> den = weights.rowwise().sum() + offset2.cwiseProduct(ch.q * p.masked_mass);
    if (ridge_ != T(0)) {
      num += ridge_ * chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.query_value));
      den += ridge_ * ch.offset.cwiseProduct(ch.q * p.query_mass);
    }
    return {num, den};
  }

 private:
  T gamma_, ridge_;
  Segments segments_;
  mutable std::vector<Matrix<T>> local_metric_queries_;  // W_g K per chunk; each chunk writes its own
};

// ahla (masked, decay), corrected or as printed in Figure 2(C).
template <class T>
class AhlaChunks {
 public:
  using Segments = AhlaSegments<T>;
  using Summary = typename Segments::Summary;

  AhlaChunks(const OperatorSpec& spec, Form form, Index d, Index dv)
      : routes_own_token_(ahla_coefficients(form, T(1)).routes_own_token),
        gamma_(from_rational<T>(spec.decay)),
        segments_(d, dv, gamma_, Form::corrected) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  // R = K^T Q, P = K^T D V, m = K^T D 1, E = K^T D (W_g V), n = K^T D (W_g 1).
  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;
    const Matrix<T> w_decayed = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    return {ch.k.transpose() * ch.q,
            kd.transpose() * ch.v,
            kd.transpose() * Vector<T>::Ones(ch.q.rows()),
            kd.transpose() * (w_decayed * ch.v),
            kd.transpose() * w_decayed.rowwise().sum(),
            ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> a = ch.q * ch.k.transpose();
    const Matrix<T> w_decayed = a.cwiseProduct(ch.decay);
    const Matrix<T> weights = w_decayed * w_decayed;  // intra: [(A A) . L] V, A = L_g . Q K^T
    // carry: g^tau q_t^T (E + R_{<=t} P); Figure 2(C) prints R_{<t} (F6).
    const Matrix<T> routed = a.cwiseProduct(routes_own_token_ ? ch.causal : ch.strict);
    const Matrix<T> carry_value = ch.q * p.routed_value + routed * (ch.q * p.key_value);
    const Vector<T> carry_mass = ch.q * p.routed_mass + routed * (ch.q * p.key_mass);
    return {weights * ch.v + chunked_detail::scale_rows(ch.offset, carry_value),
            weights.rowwise().sum() + ch.offset.cwiseProduct(carry_mass)};
  }

 private:
  bool routes_own_token_;
  T gamma_;
  Segments segments_;
};

// linear: g^tau q_t^T P + W_g V.
template <class T>
class LinearChunks {
 public:
  using Segments = LinearSegments<T>;
  using Summary = typename Segments::Summary;

  LinearChunks(const OperatorSpec& spec, Index d, Index dv)
      : gamma_(from_rational<T>(spec.decay)), segments_(d, dv, gamma_) {}

  const Segments& segments() const { return segments_; }
  const T& gamma() const { return gamma_; }

  Summary summary(const chunked_detail::Chunk<T>& ch) const {
    const Matrix<T> kd = ch.age.asDiagonal() * ch.k;
    return {kd.transpose() * ch.v, kd.transpose() * Vector<T>::Ones(ch.q.rows()), ch.rho};
  }

  Terms<T> outputs(const chunked_detail::Chunk<T>& ch, const Summary& p) const {
    const Matrix<T> weights = Matrix<T>(ch.q * ch.k.transpose()).cwiseProduct(ch.decay);
    return {weights * ch.v + chunked_detail::scale_rows(ch.offset, Matrix<T>(ch.q * p.key_value)),
            weights.rowwise().sum() + ch.offset.cwiseProduct(ch.q * p.key_mass)};
  }

 private:
  T gamma_;
  Segments segments_;
};

// Chunk summaries in parallel, an exclusive scan across chunks, then each chunk's outputs.
template <class Chunks, class T>
Terms<T> chunked_terms_with(const Chunks& form, const Sequence<T>& s, const ScanOptions& options) {
  using Summary = typename Chunks::Summary;
  const Index n = s.length();
  const ChunkLayout layout = chunk_layout(n, options);
  const Index chunk = layout.size, chunks = layout.count;
  const auto& seg = form.segments();
  const chunked_detail::ChunkShape<T> full(chunk, form.gamma());
  const chunked_detail::ChunkShape<T> tail(n - (chunks - 1) * chunk, form.gamma());
  const auto chunk_of = [&](Index c) {
    const Index begin = c * chunk, length = std::min(n, begin + chunk) - begin;
    return chunked_detail::Chunk<T>{s.q.middleRows(begin, length), s.k.middleRows(begin, length),
                                    s.v.middleRows(begin, length), length == chunk ? full : tail, c};
  };
  std::vector<Summary> carry(chunks, seg.identity());
#pragma omp parallel for num_threads(options.threads) schedule(static) if (options.threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    carry[c] = form.summary(chunk_of(c));
  }
  exclusive_scan(
      carry, seg.identity(), [&seg](const Summary& a, const Summary& b) { return seg.combine(a, b); },
      options.threads);
  Terms<T> out{Matrix<T>(n, s.value_dim()), Vector<T>(n)};
#pragma omp parallel for num_threads(options.threads) schedule(static) if (options.threads > 1)
  for (Index c = 0; c < chunks; ++c) {
    const Terms<T> part = form.outputs(chunk_of(c), carry[c]);
    out.num.middleRows(c * chunk, part.num.rows()) = part.num;
    out.den.segment(c * chunk, part.den.size()) = part.den;
  }
  return out;
}

template <class T>
Terms<T> chunked_terms(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                       const ScanOptions& options) {
  require_available(spec, Implementation::chunked, form);
  validate(options);
  const Index d = s.key_dim(), dv = s.value_dim();
  switch (spec.variant) {
    case Variant::linear:
      return chunked_terms_with(LinearChunks<T>(spec, d, dv), s, options);
    case Variant::hla2:
      if (spec.masked && form == Form::corrected) {
        const Index chunks = chunk_layout(s.length(), options).count;
        return chunked_terms_with(Hla2MaskedChunks<T>(spec, d, dv, chunks), s, options);
      }
      return chunked_terms_with(Hla2Chunks<T>(spec, d, dv), s, options);
    case Variant::ahla:
      return chunked_terms_with(AhlaChunks<T>(spec, form, d, dv), s, options);
    case Variant::hla3:
      break;
  }
  throw Error("--impl chunked: no chunk-parallel matrix form for " + describe(spec) + " (use --impl scan)");
}

template <class T>
Matrix<T> chunked_output(const OperatorSpec& spec, Form form, const Sequence<T>& s,
                         const ScanOptions& options) {
  return reference::finish(spec, chunked_terms(spec, form, s, options));
}

}  // namespace hla::fast
