#pragma once

// The counterexample minimiser: an exhaustive search for the smallest failing input in a fixed
// order, and greedy shrinking of one that fails. An input is a Sequence<Rational> or anything
// holding one as `tokens` (and, for shrinking, segment lengths as `segments`).

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <optional>
#include <vector>

#include "hla/reference/sequence.hpp"

namespace hla::checking {

// The entries of q, k, v, each row-major.
inline std::vector<Rational*> entries(Sequence<Rational>& s) {
  std::vector<Rational*> out;
  for (Matrix<Rational>* m : {&s.q, &s.k, &s.v}) {
    for (Index i = 0; i < m->size(); ++i) out.push_back(m->data() + i);
  }
  return out;
}
template <class Input>
requires requires(Input x) {
  x.tokens;
}
std::vector<Rational*> entries(Input& x) {
  return entries(x.tokens);
}

// The all-zero tokens of these sizes, from which exhaustive_search sets entries.
inline Sequence<Rational> zero_tokens(Index n, Index d, Index dv) {
  return {Matrix<Rational>::Zero(n, d), Matrix<Rational>::Zero(n, d), Matrix<Rational>::Zero(n, dv)};
}

struct SearchBounds {
  Index first_n = 1, last_n = 1;  // lengths tried
  Index max_d = 2;                // d and dv tried: 1..max_d
  Index max_nonzero = 4;          // non-zero entries, each 1 or -1
  long budget = 1'500'000;        // candidates evaluated at most
};

// The first failing input in this order: smallest n, then d, then dv, then fewest non-zero entries,
// then their positions lexicographically (over entries()), then their signs (bit i of a counter
// makes the i-th of them -1). `zeros(n, d, dv)` gives the all-zero input of those sizes. Nothing
// when none fails within the bounds. `may_fail(n, d, dv)` says whether any input of those sizes
// can fail (a polynomial identity tested at one random point, say); sizes it rules out are
// skipped without spending the budget.
template <class Zeros, class Fails, class MayFail>
auto exhaustive_search(const SearchBounds& bounds, const Zeros& zeros, const Fails& fails,
                       const MayFail& may_fail)
    -> std::optional<decltype(zeros(Index(1), Index(1), Index(1)))> {
  long budget = bounds.budget;
  for (Index n = bounds.first_n; n <= bounds.last_n; ++n) {
    for (Index d = 1; d <= bounds.max_d; ++d) {
      for (Index dv = 1; dv <= bounds.max_d; ++dv) {
        if (!may_fail(n, d, dv)) continue;
        const auto base = zeros(n, d, dv);
        const Index size = n * (2 * d + dv);
        for (Index nonzero = 1; nonzero <= std::min(size, bounds.max_nonzero); ++nonzero) {
          std::vector<Index> positions(nonzero);
          std::iota(positions.begin(), positions.end(), Index(0));
          while (true) {
            for (std::uint64_t signs = 0; signs < (std::uint64_t{1} << nonzero); ++signs) {
              if (--budget < 0) return std::nullopt;
              auto c = base;
              const std::vector<Rational*> e = entries(c);
              for (Index i = 0; i < nonzero; ++i) *e[positions[i]] = (signs >> i) & 1 ? -1 : 1;
              if (fails(c)) return c;
            }
            // the next combination of positions
            Index i = nonzero - 1;
            while (i >= 0 && positions[i] == size - nonzero + i) --i;
            if (i < 0) break;
            ++positions[i];
            for (Index j = i + 1; j < nonzero; ++j) positions[j] = positions[j - 1] + 1;
          }
        }
      }
    }
  }
  return std::nullopt;
}

template <class Zeros, class Fails>
auto exhaustive_search(const SearchBounds& bounds, const Zeros& zeros, const Fails& fails) {
  return exhaustive_search(bounds, zeros, fails, [](Index, Index, Index) { return true; });
}

// Greedy shrinking of a failing input: passes, until one changes nothing, that drop each token
// from the last (keeping at least `min_tokens`), each column of q and k, each column of v, and set
// each non-zero entry to 0 or else to its sign, keeping each change after which the input still
// fails. Locally minimal, not smallest.
template <class Input, class Fails>
Input shrink(Input c, const Fails& fails, Index min_tokens) {
  const auto without_row = [](const Matrix<Rational>& m, Index r) {
    Matrix<Rational> out(m.rows() - 1, m.cols());
    out << m.topRows(r), m.bottomRows(m.rows() - r - 1);
    return out;
  };
  const auto without_column = [](const Matrix<Rational>& m, Index col) {
    Matrix<Rational> out(m.rows(), m.cols() - 1);
    out << m.leftCols(col), m.rightCols(m.cols() - col - 1);
    return out;
  };
  for (bool progress = true; progress;) {
    progress = false;
    const auto keep_if_failing = [&](Input&& x) {
      if (!fails(x)) return false;
      c = std::move(x);
      return progress = true;
    };
    for (Index t = c.tokens.length() - 1; t >= 0 && c.tokens.length() > min_tokens; --t) {
      Input x = c;
      for (Matrix<Rational>* m : {&x.tokens.q, &x.tokens.k, &x.tokens.v}) *m = without_row(*m, t);
      for (Index begin = 0; Index & l : x.segments) {
        if (t < begin + l) {
          --l;
          break;
        }
        begin += l;
      }
      keep_if_failing(std::move(x));
    }
    for (Index col = 0; col < c.tokens.key_dim() && c.tokens.key_dim() > 1; ++col) {
      Input x = c;
      x.tokens.q = without_column(c.tokens.q, col);
      x.tokens.k = without_column(c.tokens.k, col);
      keep_if_failing(std::move(x));
    }
    for (Index col = 0; col < c.tokens.value_dim() && c.tokens.value_dim() > 1; ++col) {
      Input x = c;
      x.tokens.v = without_column(c.tokens.v, col);
      keep_if_failing(std::move(x));
    }
    const std::size_t count = entries(c).size();
    for (std::size_t i = 0; i < count; ++i) {  // each change lowers (non-zeros, entries not +-1)
      const Rational e = *entries(c)[i];
      if (e == 0) continue;
      for (const Rational& candidate : {Rational(0), Rational(e > 0 ? 1 : -1)}) {
        if (candidate == e) continue;
        Input x = c;
        *entries(x)[i] = candidate;
        if (keep_if_failing(std::move(x))) break;
      }
    }
  }
  return c;
}

}  // namespace hla::checking
