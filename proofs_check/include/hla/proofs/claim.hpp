#pragma once

// A claim of the paper, in a form that a machine can check: code that evaluates both sides of a
// printed identity exactly as printed (an IdentityCheck), or code that counts the scalars and
// operations of the implemented state (a CountCheck).

#include <functional>
#include <optional>
#include <string>
#include <variant>
#include <vector>

#include "hla/proofs/counting.hpp"
#include "hla/reference/operator_spec.hpp"
#include "hla/reference/sequence.hpp"

namespace hla::proofs {

// The scalar parameters of one check, always rationals (in Z/p, their images).
struct Parameters {
  Rational gamma = 1, eps = 0, ridge = 0;
};

// The input of one check: tokens, cut into `segments` (lengths, summing to n) for the laws of a
// scan operator, and the parameters.
template <class T>
struct Case {
  Sequence<T> tokens;
  std::vector<Index> segments;
  Index chunk = 1;  // tokens per chunk, for the chunk-parallel forms
  Parameters parameters;

  Index n() const { return tokens.length(); }
  Index d() const { return tokens.key_dim(); }
  Index dv() const { return tokens.value_dim(); }
};

// One named quantity of the claim, evaluated on both sides.
template <class T>
struct Part {
  std::string name;
  Matrix<T> lhs, rhs;
};
template <class T>
using Sides = std::vector<Part<T>>;

// Where a claim is checked, and how its polynomial degree grows (for Schwartz-Zippel).
struct Domain {
  bool decay = false;      // gamma drawn from (0, 1); else gamma = 1
  bool normalize = false;  // eps drawn > 0
  bool ridge = false;      // ridge drawn != 0
  int segments = 0;        // > 0: the tokens are cut into this many segments
  Index min_n = 1;         // the smallest length on which the claim says something
  Index max_n = 8;         // rational checks: n in [min_n, max_n]
  Index max_d = 4;         // d, dv in [1, max_d]
  Index field_max_n = 32;  // Z/p checks
  Index field_max_d = 8;
  int chunk = 0;  // > 0: the claim also draws a chunk size in [1, n + 1]
  Index search_chunk = 1;  // the chunk size of the exhaustive counterexample search's inputs
  int heads = 1;  // > 1: q holds one [n, d] block of queries per head
  // Degree of (lhs - rhs), denominators cleared, in the token entries and eps, ridge; and the
  // largest power of gamma per token.
  int degree = 5;
  int gamma_degree_per_token = 2;
};

// What the finite checks of an identity imply beyond the sizes tried.
enum class Scope {
  fixed_size,       // a matrix identity with no sequence index: all n at once
  order_pattern,    // coefficients depend only on the relative order of at most `arity` indices
  summary_algebra,  // laws of an operator on summaries of segments: lengths tried only
  sizes_tried,      // nothing beyond the sizes tried
};

struct IdentityCheck {
  Domain domain;
  Scope scope = Scope::sizes_tried;
  int arity = 0;  // order_pattern: the number of distinct sequence indices in a monomial
  std::function<Sides<Rational>(const Case<Rational>&)> exact;
  std::function<Sides<ModP>(const Case<ModP>&)> field;
};

// A claim about a count: the counted quantity is a polynomial in the variables (negative
// exponents allowed), fitted exactly on a grid and confirmed on points off it; the claim holds
// when every term of the polynomial is within the stated order (or, `exact`, when it is the
// stated polynomial). A failing order claim with a `condition` is also checked where the
// condition holds and where it is reversed: the condition under which the stated order holds.
struct CountCheck {
  std::vector<std::string> variables;  // e.g. {"d", "dv"} or {"C", "d", "dv"}
  std::vector<int> lowest, highest;    // exponent range per variable for the fit
  std::vector<Monomial> stated;        // the stated order: a sum of monomials
  std::string unit;                    // "scalars" or "operations per token"
  std::function<Rational(const std::vector<Index>&)> count;
  std::optional<Order> condition = {};
  bool exact = false;
};

struct Claim {
  std::string id;            // the paper's numbering, cases after a slash: thm-3.1/den
  int page = 0;              // page of HLA.pdf
  std::string statement;     // the claim, in one sentence
  std::string corrected_by;  // for a printed claim that fails: the id of the entry that corrects it
  std::string corrects;      // for a derived entry: the printed claim it corrects (docs/findings.md)
  std::variant<IdentityCheck, CountCheck> check;
};

// Builds an identity claim from one generic lambda `sides(const Case<T>&) -> Sides<T>`.
template <class F>
IdentityCheck identity(Domain domain, Scope scope, int arity, F sides) {
  return {domain, scope, arity, [sides](const Case<Rational>& c) { return sides(c); },
          [sides](const Case<ModP>& c) { return sides(c); }};
}

// The claims of each part of the paper (proofs_check/src/claims/).
std::vector<Claim> section3_claims();
std::vector<Claim> section4_claims();
std::vector<Claim> section6_claims();
std::vector<Claim> section7_claims();
std::vector<Claim> figure_claims();
std::vector<Claim> cost_claims();

// All of them, in the order of the paper's pages.
std::vector<Claim> all_claims();

}  // namespace hla::proofs
