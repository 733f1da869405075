// The costs and state sizes stated in Sections 3, 5, 6, 7 and in Figures 1 and 2, counted on the
// implementations: scalars held by a streaming state or a segment summary, and arithmetic
// operations per token counted by running the code on the Counted scalar.

#include "common.hpp"
#include "hla/checking/counted.hpp"
#include "hla/fast/chunked.hpp"
#include "hla/fast/scan.hpp"

namespace hla::proofs::claims {
namespace {

using checking::Counted;
using checking::counting_input;
using checking::operation_count;
using Point = std::vector<Index>;

Monomial term(std::vector<int> exponents) {
  return {std::move(exponents), 1};
}

Sequence<Counted> inputs(Index n, Index d, Index dv) {
  return {counting_input(n, d, 1), counting_input(n, d, 2), counting_input(n, dv, 3)};
}

OperatorSpec spec(Variant variant, bool masked) {
  OperatorSpec s;
  s.variant = variant;
  s.masked = masked;
  return s;
}

// Operations of one token's push and read, after a first token.
Rational token_operations(const OperatorSpec& s, fast::Form form, Index d, Index dv, bool read) {
  return fast::with_stream<Counted>(s, form, d, dv, [&](auto stream) {
    const Vector<Counted> q = counting_input(d, 1, 1), k = counting_input(d, 1, 2);
    const RowVector<Counted> v = counting_input(1, dv, 3);
    stream.push(q, k, v);
    const std::uint64_t before = operation_count();
    stream.push(q, k, v);
    if (read) stream.read(q);
    return Rational(operation_count() - before);
  });
}

Rational state_scalars(const OperatorSpec& s, fast::Form form, Index d, Index dv) {
  return fast::with_stream<Counted>(s, form, d, dv,
                                    [](auto stream) { return Rational(stream.state_size()); });
}

// Operations per token of the chunk form: the work of one more chunk (its summary, two combines of
// the Blelloch scan, its outputs), from 4 chunks minus 2 chunks, over the chunk size C.
Rational chunk_operations(const OperatorSpec& s, fast::Form form, Index chunk, Index d, Index dv) {
  const auto run = [&](Index chunks) {
    const Sequence<Counted> tokens = inputs(chunks * chunk, d, dv);
    const std::uint64_t before = operation_count();
    fast::chunked_terms(s, form, tokens, fast::ScanOptions{chunk, 1});
    return operation_count() - before;
  };
  return Rational(run(4) - run(2), 2 * chunk);
}

// Operations of a whole evaluation on N tokens.
template <class F>
Rational operations(Index n, Index d, Index dv, F&& evaluate) {
  const Sequence<Counted> tokens = inputs(n, d, dv);
  const std::uint64_t before = operation_count();
  evaluate(tokens);
  return Rational(operation_count() - before);
}

template <class Summary>
Rational summary_scalars(const Summary& s) {
  Rational total = 0;
  for (const auto& [name, m] : components(s)) total += m.size();
  return total;
}

// Over (d, dv); a failing one with a `condition` is also checked where it holds and where it is reversed.
const Order d_at_least_dv{0, 1}, dv_at_least_d{1, 0};
CountCheck per_token(std::vector<Monomial> stated, std::function<Rational(const Point&)> count,
                     std::optional<Order> condition = {}) {
  return {{"d", "dv"},      {0, 0},   {2, 1}, std::move(stated), "operations per token",
          std::move(count), condition};
}
CountCheck scalars(std::vector<Monomial> stated, std::function<Rational(const Point&)> count, int max_d = 2,
                   std::optional<Order> condition = {}) {
  return {{"d", "dv"}, {0, 0}, {max_d, 1}, std::move(stated), "scalars", std::move(count), condition};
}
// O(N^2 (d + dv)) in all, for Figures 1(B) and 2(B).
CountCheck quadratic_in_n(std::function<Rational(const Point&)> count) {
  return {{"N", "d", "dv"}, {0, 0, 0},       {2, 1, 1}, {term({2, 1, 0}), term({2, 0, 1})},
          "operations",     std::move(count)};
}
CountCheck chunk_cost(std::function<Rational(const Point&)> count) {
  // O(N C (d + dv) + M (d^2 + d dv)) over N = M C tokens: per token C d + C dv + d^2/C + d dv/C;
  // where it fails, also checked where C >= d.
  return {{"C", "d", "dv"},
          {-1, 0, 0},
          {2, 2, 1},
          {term({1, 1, 0}), term({1, 0, 1}), term({-1, 2, 0}), term({-1, 1, 1})},
          "operations per token",
          std::move(count),
          Order{0, 1}};
}
// The corrected chunk forms, counted: O(N (C (d + dv) + d^2 + d dv) + M d^2 dv).
CountCheck derived_chunk_cost(std::function<Rational(const Point&)> count) {
  return {{"C", "d", "dv"},
          {-1, 0, 0},
          {2, 2, 1},
          {term({1, 1, 0}), term({1, 0, 1}), term({0, 2, 0}), term({0, 1, 1}), term({-1, 2, 1})},
          "operations per token",
          std::move(count)};
}

// A segment summary for measuring a scan: the longest chain of combines behind it, and how many
// summaries exist at once in this thread (the scan within a chunk runs in its caller's thread).
struct Tracked {
  int depth = 0;
  static inline thread_local long live = 0, peak = 0;

  explicit Tracked(int d = 0) : depth(d) { note(); }
  Tracked(const Tracked& other) : depth(other.depth) { note(); }
  Tracked& operator=(const Tracked&) = default;
  ~Tracked() { --live; }
  static void note() { peak = std::max(peak, ++live); }
};
struct ScanMeasure {
  int depth = 0;       // longest chain of combines to any output
  long auxiliary = 0;  // summaries alive at once beyond the w inputs and the identity
};
// The within-chunk scan as implemented (fast::exclusive_scan, one thread), on w token summaries.
ScanMeasure measure_scan(Index w) {
  std::vector<Tracked> xs(static_cast<std::size_t>(w));
  const Tracked identity;
  const long before = Tracked::live;
  Tracked::peak = before;
  fast::exclusive_scan(
      xs, identity,
      [](const Tracked& a, const Tracked& b) { return Tracked(std::max(a.depth, b.depth) + 1); }, 1);
  ScanMeasure m{0, Tracked::peak - before};
  for (const Tracked& x : xs) m.depth = std::max(m.depth, x.depth);
  return m;
}
Index power_of_two(Index k) {
  return Index(1) << k;
}

}  // namespace
}  // namespace hla::proofs::claims

namespace hla::proofs {
using namespace claims;

std::vector<Claim> cost_claims() {
  std::vector<Claim> out;
  const std::vector<Monomial> quadratic{term({2, 0}), term({1, 1})};  // d^2 + d dv
  const OperatorSpec hla2 = spec(Variant::hla2, true), ahla = spec(Variant::ahla, true),
                     hla3 = spec(Variant::hla3, true);
  const auto published = fast::Form::published, corrected = fast::Form::corrected;
  out.push_back(make("sec-3/update-cost", 3,
                     "The updates of S^K_t and C^QV_t cost O(d^2) and O(d dv) per token.",
                     per_token(quadratic, [=](const Point& p) {
                       return token_operations(spec(Variant::hla2, false), published, p[0], p[1], false);
                     })));
  out.push_back(
      make("thm-3.1/cost", 6, "With the masked online updates the per-token cost is O(d^2 + d dv) in total.",
           per_token(quadratic,
                     [=](const Point& p) { return token_operations(hla2, published, p[0], p[1], true); })));
  out.push_back(make("fig-1a/time", 4, "Figure 1(A): O(N (d^2 + d dv)) time, i.e. O(d^2 + d dv) per token.",
                     per_token(quadratic, [=](const Point& p) {
                       return token_operations(hla2, published, p[0], p[1], true);
                     })));
  out.push_back(
      make("fig-1a/state", 4, "Figure 1(A): O(d^2 + d dv) state at inference.",
           scalars(quadratic, [=](const Point& p) { return state_scalars(hla2, published, p[0], p[1]); })));
  out.push_back(make(
      "sec-5/state", 9,
      "Per token and head the state is S^K (d x d), C^QV (d x dv), m^Q (d), and masked G (d x dv), h (d).",
      scalars({term({2, 0}), term({1, 1}), term({1, 0})},
              [=](const Point& p) { return state_scalars(hla2, published, p[0], p[1]); })));
  out.push_back(make(
      "sec-5.2/multi-query-state", 10,
      "With K, V shared across h heads, S^K is stored once: O(d^2 + h d dv) instead of O(h d^2 + h d dv).",
      CountCheck{{"d", "dv", "h"},
                 {0, 0, 0},
                 {2, 1, 1},
                 {term({2, 0, 0}), term({1, 1, 1})},
                 "scalars",
                 [=](const Point& p) {
                   const Rational per_head = state_scalars(hla2, published, p[0], p[1]) - p[0] * p[0];
                   return Rational(p[0] * p[0]) + p[2] * per_head;
                 }}));
  out.push_back(
      make("fig-1b/time", 4,
           "Figure 1(B): the masked form [(W W^T) . L] V, W = L . Q K^T, takes O(N^2 (d + dv)) time, "
           "fully parallel over t (counted: [L . (Q U^T)] V with U = W K, figure_1b).",
           quadratic_in_n([](const Point& p) {
             return operations(p[0], p[1], p[2], [](const auto& s) { return figure_1b(s); });
           })));
  out.push_back(make(
      "fig-1c/time", 4,
      "Figure 1(C): O(N C (d + dv) + M (d^2 + d dv)) time for N = M C tokens in M chunks (counted: the form "
      "as drawn in its cheapest evaluation found, intra-chunk [L . (Q U^T)] V with U = W K).",
      chunk_cost([=](const Point& p) { return chunk_operations(hla2, published, p[0], p[1], p[2]); }),
      {.corrected_by = "fig-1c-corrected/time"}));
  out.push_back(make(
      "fig-1c-corrected/time", 4,
      "Derived (F7): the corrected hla2 chunk form costs O(N (C (d + dv) + d^2 + d dv) + M d^2 dv): "
      "q_t^T S per token and the d x d by d x dv product of the scan per chunk; no C x C x C product. "
      "Within the printed order when C >= d.",
      derived_chunk_cost([=](const Point& p) { return chunk_operations(hla2, corrected, p[0], p[1], p[2]); }),
      {.corrects = "fig-1c/time"}));
  out.push_back(
      make("sec-6/time", 10, "AHLA admits strictly causal streaming with O(d^2 + d dv) per-token cost.",
           per_token(quadratic,
                     [=](const Point& p) { return token_operations(ahla, published, p[0], p[1], true); })));
  out.push_back(make("sec-6.1/time", 12, "AHLA streaming costs O(d dv) time per token.",
                     per_token({term({1, 1})}, [=](const Point& p) {
                       return token_operations(ahla, published, p[0], p[1], true);
                     })));
  out.push_back(make("sec-6.1/state", 12, "AHLA streaming holds O(d dv + d) state per head (P, E, m, n).",
                     scalars({term({1, 1}), term({1, 0})},
                             [=](const Point& p) { return state_scalars(ahla, published, p[0], p[1]); })));
  out.push_back(
      make("sec-6.2/summary", 12,
           "The AHLA chunk summary adds R^KQ, O(d^2) memory, to the streaming state: O(d^2 + d dv) in all.",
           scalars(quadratic, [](const Point& p) {
             return summary_scalars(
                 fast::AhlaSegments<Counted>(p[0], p[1], Counted(1), fast::Form::corrected).identity());
           })));
  out.push_back(make("fig-2a/time", 11, "Figure 2(A): O(N d dv) time, i.e. O(d dv) per token.",
                     per_token({term({1, 1})}, [=](const Point& p) {
                       return token_operations(ahla, published, p[0], p[1], true);
                     })));
  out.push_back(make(
      "fig-2a/state", 11, "Figure 2(A): O(d dv) state at inference.",
      scalars({term({1, 1})}, [=](const Point& p) { return state_scalars(ahla, published, p[0], p[1]); })));
  out.push_back(
      make("fig-2b/time", 11,
           "Figure 2(B): the AHLA form [(A A) . L] V, A = L . Q K^T, takes O(N^2 (d + dv)) time, fully "
           "parallel over t (counted: A (A V), figure_2b).",
           quadratic_in_n([](const Point& p) {
             return operations(p[0], p[1], p[2], [](const auto& s) { return figure_2b(s); });
           })));
  out.push_back(make(
      "fig-2c/time", 11,
      "Figure 2(C): O(N C (d + dv) + M (d^2 + d dv)) time for N = M C tokens in M chunks (counted: the form "
      "as drawn in its cheapest evaluation found, intra-chunk A (A V)).",
      chunk_cost([=](const Point& p) { return chunk_operations(ahla, published, p[0], p[1], p[2]); }),
      {.corrected_by = "fig-2c-corrected/time"}));
  out.push_back(make(
      "fig-2c-corrected/time", 11,
      "Derived (F7): the AHLA chunk form, intra-chunk A (A V), costs O(N (C (d + dv) + d^2 + d dv) + M d^2 "
      "dv): "
      "q_t^T E, R^(k) and the routed carry per token, the d x d by d x dv product of the scan per chunk. "
      "Within the printed order when C >= d.",
      derived_chunk_cost([=](const Point& p) { return chunk_operations(ahla, corrected, p[0], p[1], p[2]); }),
      {.corrects = "fig-2c/time"}));
  out.push_back(
      make("sec-7.3/maps", 17,
           "Stored densely, the segment maps M^KQP and M^KQm of the third-order scan take O(d^3 dv) and "
           "O(d^3) entries per segment summary.",
           scalars(
               {term({3, 1}), term({3, 0})},
               [](const Point& p) {
                 const auto s = fast::Hla3PublishedSegments<Counted>(p[0], p[1]).identity();
                 return Rational(s.map_value.size() + s.map_mass.size());
               },
               3)));
  out.push_back(make(
      "sec-7.3-corrected/summary", 17,
      "Derived (F2): the corrected masked third-order segment summary (S^K, S^Q, Y, P, F, X, m, eta, x, "
      "rho) has O(d^2 + d dv) scalars; the printed one adds the O(d^3 dv) maps.",
      scalars(quadratic,
              [](const Point& p) {
                return summary_scalars(fast::Hla3Segments<Counted>(p[0], p[1], Counted(1), true).identity());
              }),
      {.corrects = "sec-7.3/maps"}));
  out.push_back(
      make("sec-7.3/summary", 17,
           "The printed third-order scan state (Sec. 7.3): S^K, S^Q, P, m, F, eta, R^QP, r^Qm, U^KQ and the "
           "maps, counted densely.",
           scalars(
               {term({3, 1}), term({3, 0})},
               [](const Point& p) {
                 return summary_scalars(fast::Hla3PublishedSegments<Counted>(p[0], p[1]).identity());
               },
               3)));
  out.push_back(
      make("thm-7.1-corrected/cost", 14,
           "Derived (F2): the corrected third-order streaming update and read cost O(d^2 + d dv) per token.",
           per_token(quadratic,
                     [=](const Point& p) { return token_operations(hla3, corrected, p[0], p[1], true); }),
           {.corrects = "thm-7.1/num"}));
  out.push_back(
      make("thm-7.1-corrected/state", 14,
           "Derived (F2): the corrected third-order streaming state (S^K, P, m, F, eta) has O(d^2 + d dv) "
           "scalars.",
           scalars(quadratic, [=](const Point& p) { return state_scalars(hla3, corrected, p[0], p[1]); }),
           {.corrects = "thm-7.1/num"}));

  // Statements that drop dv (F8): they hold when dv and d are tied, as in the usual d = dv.
  const auto hla2_columns = [](const Point& p) {
    const Sequence<Rational> s{Matrix<Rational>::Ones(1, p[0]), Matrix<Rational>::Ones(1, p[0]),
                               Matrix<Rational>::Ones(1, p[1])};
    return Rational(reference::output(spec(Variant::hla2, false), s).cols());
  };
  out.push_back(
      make("sec-3.1/shape", 3,
           "HLA_2(Q, K, V) = T_2 V is in R^(n x d), for V in R^(n x dv) (counted: the columns of "
           "the reference's output).",
           CountCheck{{"d", "dv"}, {0, 0}, {1, 1}, {term({1, 0})}, "columns", hla2_columns, {}, true},
           {.corrected_by = "sec-3.1-corrected/shape"}));
  out.push_back(
      make("sec-3.1-corrected/shape", 3, "Derived (F8): HLA_2(Q, K, V) = T_2 V is in R^(n x dv).",
           CountCheck{{"d", "dv"}, {0, 0}, {1, 1}, {term({0, 1})}, "columns", hla2_columns, {}, true},
           {.corrects = "sec-3.1/shape"}));
  const auto hla2_token = [=](const Point& p) { return token_operations(hla2, published, p[0], p[1], true); };
  out.push_back(make("sec-6.3/relation-costs", 13,
                     "AHLA and the symmetric A A^T V (hla2) stream with identical asymptotic costs (counted: "
                     "hla2's masked streaming per token against AHLA's O(d dv), sec-6.1/time).",
                     per_token({term({1, 1})}, hla2_token, dv_at_least_d), {.corrected_by = "thm-3.1/cost"}));
  out.push_back(
      make("conclusion/state", 19,
           "At second order, HLA maintains O(d^2) state per head (counted: the masked streaming "
           "state).",
           scalars(
               {term({2, 0})}, [=](const Point& p) { return state_scalars(hla2, published, p[0], p[1]); }, 2,
               d_at_least_dv),
           {.corrected_by = "fig-1a/state"}));
  out.push_back(make("conclusion/time", 19,
                     "At second order, HLA computes each token in O(d^2) time (counted: the masked streaming "
                     "update and read).",
                     per_token({term({2, 0})}, hla2_token, d_at_least_dv), {.corrected_by = "thm-3.1/cost"}));

  // Sec. 4.2's within-chunk scan, measured on fast::exclusive_scan at widths w = 2^k.
  out.push_back(
      make("sec-4.2/span", 8,
           "Within a chunk of width w, the exclusive Blelloch scan yields every prefix in O(log w) "
           "span (counted: the longest chain of combines, at w = 2^k; other widths are padded to "
           "the next power of two).",
           CountCheck{{"log2 w"}, {0}, {1}, {term({1})}, "combines on the longest chain", [](const Point& p) {
                        return Rational(measure_scan(power_of_two(p[0])).depth);
                      }}));
  out.push_back(
      make("sec-4.2/memory", 8,
           "The within-chunk scan takes O(1) auxiliary memory per position (counted: summaries "
           "alive at once beyond the w inputs, at w = 2^k; at other widths the padding adds fewer "
           "than w identity summaries, under one per position).",
           CountCheck{{"log2 w"}, {0}, {1}, {term({0})}, "auxiliary summaries in all", [](const Point& p) {
                        return Rational(measure_scan(power_of_two(p[0])).auxiliary);
                      }}));
  return out;
}

}  // namespace hla::proofs
