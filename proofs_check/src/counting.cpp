#include "hla/proofs/counting.hpp"

#include <algorithm>
#include <sstream>

#include "hla/reference/error.hpp"

namespace hla::proofs {
namespace {

Rational power_of(Index x, int exponent) {
  Rational r = 1;
  for (int e = 0; e < std::abs(exponent); ++e) r *= x;
  return exponent < 0 ? Rational(1) / r : r;
}

Rational evaluate(const std::vector<Monomial>& polynomial, const std::vector<Index>& point) {
  Rational sum = 0;
  for (const Monomial& m : polynomial) {
    Rational term = m.coefficient;
    for (std::size_t i = 0; i < point.size(); ++i) term *= power_of(point[i], m.exponents[i]);
    sum += term;
  }
  return sum;
}

// Every combination of one value per axis, the first axis slowest.
std::vector<std::vector<int>> grid(const std::vector<int>& lowest, const std::vector<int>& highest) {
  std::vector<std::vector<int>> points{{}};
  for (std::size_t i = 0; i < lowest.size(); ++i) {
    std::vector<std::vector<int>> next;
    for (const auto& p : points) {
      for (int e = lowest[i]; e <= highest[i]; ++e) {
        next.push_back(p);
        next.back().push_back(e);
      }
    }
    points = std::move(next);
  }
  return points;
}

// Solves a x = b exactly (a square and invertible) by Gauss-Jordan elimination.
std::vector<Rational> solve(std::vector<std::vector<Rational>> a, std::vector<Rational> b) {
  const std::size_t n = b.size();
  for (std::size_t col = 0; col < n; ++col) {
    std::size_t pivot = col;
    while (pivot < n && a[pivot][col] == 0) ++pivot;
    if (pivot == n) throw Error("count fit: singular system");
    std::swap(a[pivot], a[col]);
    std::swap(b[pivot], b[col]);
    for (std::size_t row = 0; row < n; ++row) {
      if (row == col || a[row][col] == 0) continue;
      const Rational factor = a[row][col] / a[col][col];
      for (std::size_t c = col; c < n; ++c) a[row][c] -= factor * a[col][c];
      b[row] -= factor * b[col];
    }
  }
  for (std::size_t i = 0; i < n; ++i) b[i] /= a[i][i];
  return b;
}

}  // namespace

std::vector<Monomial> fit_polynomial(const std::function<Rational(const std::vector<Index>&)>& count,
                                     const std::vector<int>& lowest, const std::vector<int>& highest) {
  const std::size_t variables = lowest.size();
  const std::vector<std::vector<int>> exponents = grid(lowest, highest);
  // Sample values 2..k+1 per axis, k = the number of exponents on that axis: a tensor
  // Vandermonde system, invertible because the values are distinct and positive. Size 1 is left
  // out: there a product degenerates into a dot product and the count follows another formula.
  std::vector<int> first(variables, 2), last(variables);
  for (std::size_t i = 0; i < variables; ++i) last[i] = highest[i] - lowest[i] + 2;
  const std::vector<std::vector<int>> points = grid(first, last);
  std::vector<std::vector<Rational>> a;
  std::vector<Rational> b;
  for (const auto& p : points) {
    const std::vector<Index> point(p.begin(), p.end());
    std::vector<Rational> row;
    for (const auto& e : exponents) {
      Rational x = 1;
      for (std::size_t i = 0; i < variables; ++i) x *= power_of(point[i], e[i]);
      row.push_back(x);
    }
    a.push_back(std::move(row));
    b.push_back(count(point));
  }
  const std::vector<Rational> coefficients = solve(std::move(a), std::move(b));
  std::vector<Monomial> polynomial;
  for (std::size_t m = 0; m < exponents.size(); ++m) {
    if (coefficients[m] != 0) polynomial.push_back({exponents[m], coefficients[m]});
  }
  // Off the grid: each axis one and two beyond its last sample, the others at their largest.
  for (std::size_t i = 0; i < variables; ++i) {
    for (int beyond : {1, 2}) {
      std::vector<Index> point(last.begin(), last.end());
      point[i] += beyond;
      if (evaluate(polynomial, point) != count(point)) {
        throw Error("count fit: the count is not a polynomial with exponents in the stated ranges");
      }
    }
  }
  return polynomial;
}

bool within_order(const std::vector<Monomial>& polynomial, const std::vector<Monomial>& stated) {
  const auto below = [](const std::vector<int>& m, const std::vector<int>& s) {
    for (std::size_t i = 0; i < m.size(); ++i) {
      if (m[i] > s[i]) return false;
    }
    return true;
  };
  // m <= lambda s + (1 - lambda) t componentwise for some lambda in [0, 1]: intersect the
  // intervals of lambda that each coordinate allows.
  const auto below_pair = [](const std::vector<int>& m, const std::vector<int>& s,
                             const std::vector<int>& t) {
    Rational lo = 0, hi = 1;
    for (std::size_t i = 0; i < m.size(); ++i) {
      const int slope = s[i] - t[i];  // m_i <= t_i + lambda (s_i - t_i)
      const Rational need = m[i] - t[i];
      if (slope == 0) {
        if (need > 0) return false;
      } else if (slope > 0) {
        lo = std::max(lo, need / slope);
      } else {
        hi = std::min(hi, need / slope);
      }
    }
    return lo <= hi;
  };
  for (const Monomial& m : polynomial) {
    bool dominated = false;
    for (std::size_t a = 0; a < stated.size() && !dominated; ++a) {
      dominated = below(m.exponents, stated[a].exponents);
      for (std::size_t b = a + 1; b < stated.size() && !dominated; ++b)
        dominated = below_pair(m.exponents, stated[a].exponents, stated[b].exponents);
    }
    if (!dominated) return false;
  }
  return true;
}

bool within_order(const std::vector<Monomial>& polynomial, const std::vector<Monomial>& stated, Order where) {
  const auto substitute = [where](std::vector<Monomial> terms) {
    for (Monomial& m : terms) m.exponents[where.smaller] += m.exponents[where.larger];
    return terms;
  };
  return within_order(substitute(polynomial), substitute(stated));
}

std::string format_polynomial(const std::vector<Monomial>& polynomial,
                              const std::vector<std::string>& variables) {
  if (polynomial.empty()) return "0";
  std::ostringstream out;
  // Highest total degree first.
  std::vector<Monomial> terms = polynomial;
  std::stable_sort(terms.begin(), terms.end(), [](const Monomial& a, const Monomial& b) {
    int da = 0, db = 0;
    for (int e : a.exponents) da += e;
    for (int e : b.exponents) db += e;
    return da != db ? da > db : a.exponents > b.exponents;
  });
  for (std::size_t t = 0; t < terms.size(); ++t) {
    Rational c = terms[t].coefficient;
    if (t > 0) {
      out << (c < 0 ? " - " : " + ");
      c = abs(c);
    } else if (c < 0) {
      out << "-";
      c = -c;
    }
    std::string factors;
    for (std::size_t i = 0; i < variables.size(); ++i) {
      const int e = terms[t].exponents[i];
      if (e == 0) continue;
      if (!factors.empty()) factors += " ";
      factors += variables[i];
      if (e != 1) factors += '^' + std::to_string(e);  // a char: GCC 12's -Wrestrict misfires on "^" + string
    }
    if (factors.empty() || c != 1) out << c << (factors.empty() ? "" : " ");
    out << factors;
  }
  return out.str();
}

}  // namespace hla::proofs
