#include "hla/proofs/ledger.hpp"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <mutex>
#include <ostream>
#include <thread>

#include "hla/checking/counterexample.hpp"
#include "hla/reference/error.hpp"
#include "hla/reference/random.hpp"

namespace hla::proofs {
namespace {

// The set that gamma, eps and ridge are drawn from in Z/p: a / 2^30, a in [1, 2^30).
constexpr std::int64_t parameter_denominator = std::int64_t{1} << 30;

std::uint64_t claim_seed(std::uint64_t seed, const std::string& id) {
  return fnv1a(id, fnv1a("") ^ seed);
}

std::vector<Index> random_segments(Rng& rng, int count, Index longest) {
  std::vector<Index> lengths(count);
  Index total = 0;
  for (Index& l : lengths) total += l = rng.uniform(0, longest);
  if (total == 0) lengths[0] = 1;
  return lengths;
}

Index total(const std::vector<Index>& lengths) {
  Index n = 0;
  for (Index l : lengths) n += l;
  return n;
}

Case<Rational> random_exact_case(Rng& rng, const Domain& domain) {
  Case<Rational> c;
  Index n = rng.uniform(domain.min_n, domain.max_n);
  if (domain.segments > 0) {
    c.segments = random_segments(rng, domain.segments, 3);
    n = total(c.segments);
  }
  const Index d = rng.uniform(1, domain.max_d), dv = rng.uniform(1, domain.max_d);
  const EntryKind kind = rng.uniform(0, 1) == 0 ? EntryKind::integer : EntryKind::dyadic;
  c.tokens = random_sequence(rng, n, d, dv, kind, 3);
  if (domain.heads > 1) c.tokens.q = random_sequence(rng, n, d * domain.heads, 1, kind, 3).q;
  if (domain.decay) {
    const std::int64_t b = rng.uniform(2, 8);
    c.parameters.gamma = Rational(rng.uniform(1, b - 1), b);
  }
  if (domain.normalize) c.parameters.eps = Rational(rng.uniform(1, 8), 8);
  if (domain.ridge) c.parameters.ridge = Rational(rng.uniform(1, 8) * (rng.uniform(0, 1) ? 1 : -1), 4);
  if (domain.chunk > 0) c.chunk = rng.uniform(1, n + 1);
  return c;
}

Rational random_parameter(Rng& rng) {
  return Rational(rng.uniform(1, parameter_denominator - 1), parameter_denominator);
}

Case<ModP> random_field_case(Rng& rng, const Domain& domain) {
  Case<ModP> c;
  Index n = rng.uniform(domain.min_n, std::max(domain.min_n, domain.field_max_n));
  if (domain.segments > 0) {
    c.segments = random_segments(rng, domain.segments, 8);
    n = total(c.segments);
  }
  const Index d = rng.uniform(1, domain.field_max_d), dv = rng.uniform(1, domain.field_max_d);
  const auto uniform = [&rng](Index rows, Index cols) {
    Matrix<ModP> m(rows, cols);
    for (Index i = 0; i < m.size(); ++i) m.data()[i] = ModP::from_residue(rng.next() % ModP::modulus);
    return m;
  };
  c.tokens = {uniform(n, d * domain.heads), uniform(n, d), uniform(n, dv)};
  if (domain.decay) c.parameters.gamma = random_parameter(rng);
  if (domain.normalize) c.parameters.eps = random_parameter(rng);
  if (domain.ridge) c.parameters.ridge = random_parameter(rng);
  if (domain.chunk > 0) c.chunk = rng.uniform(1, n + 1);
  return c;
}

// The first part whose sides differ, or "" when all agree.
template <class T>
std::string first_difference(const Sides<T>& sides) {
  for (const Part<T>& p : sides) {
    if (p.lhs.rows() != p.rhs.rows() || p.lhs.cols() != p.rhs.cols() || p.lhs != p.rhs) return p.name;
  }
  return "";
}

// Evaluates a check; an undefined case (a normalized denominator that is zero in exact
// arithmetic) yields nullopt.
template <class T, class F>
std::optional<std::string> difference(const F& sides, const Case<T>& c) {
  try {
    return first_difference(sides(c));
  } catch (const Error&) {
    return std::nullopt;
  }
}

Counterexample make_counterexample(const IdentityCheck& check, Case<Rational> c, std::string method) {
  const Sides<Rational> sides = check.exact(c);
  const std::string part = first_difference(sides);
  for (const Part<Rational>& p : sides) {
    if (p.name == part) return {std::move(c), part, p.lhs, p.rhs, std::move(method)};
  }
  throw Error("internal: counterexample without a differing part");
}

Case<Rational> tiny_case(const Domain& domain, Index n, Index d, Index dv) {
  Case<Rational> c;
  c.tokens = checking::zero_tokens(n, d, dv);
  if (domain.segments > 0) {
    c.segments.assign(domain.segments, 1);
    c.segments.back() = n - (domain.segments - 1);
  }
  if (domain.decay) c.parameters.gamma = Rational(1, 2);
  if (domain.normalize) c.parameters.eps = 1;
  if (domain.ridge) c.parameters.ridge = 1;
  c.chunk = domain.search_chunk;
  return c;
}

// Whether the two sides differ on a (defined) case.
template <class T>
bool differs(const std::function<Sides<T>(const Case<T>&)>& sides, const Case<T>& c) {
  const auto diff = difference<T>(sides, c);
  return diff && !diff->empty();
}

// The first counterexample in checking::exhaustive_search's order (n up to 4 beyond the least
// meaningful, d, dv <= 2, up to 4 entries 1 or -1), screened in Z/p (a difference there is a
// difference over the rationals) and confirmed in rationals. Each size is searched only if the
// two sides differ at one random point of its tokens in Z/p: with the parameters of the search's
// cases fixed, each side is a polynomial in the tokens, so sides equal there are equal as
// polynomials (Schwartz-Zippel: but with chance degree/p), and no input of that size can fail.
std::optional<Counterexample> exhaustive_search(const IdentityCheck& check) {
  const Domain& domain = check.domain;
  const Index first_n = std::max<Index>(domain.min_n, std::max(domain.segments, 1));
  const auto zeros = [&domain](Index n, Index d, Index dv) { return tiny_case(domain, n, d, dv); };
  const auto fails = [&check](const Case<Rational>& c) {
    return differs<ModP>(check.field, {convert<ModP>(c.tokens), c.segments, c.chunk, c.parameters}) &&
           differs<Rational>(check.exact, c);
  };
  const auto may_fail = [&check, &domain](Index n, Index d, Index dv) {
    const Case<Rational> zero = tiny_case(domain, n, d, dv);
    Rng rng(fnv1a("search screen", static_cast<std::uint64_t>((n * 64 + d) * 64 + dv)));
    const auto uniform = [&rng](const Matrix<Rational>& like) {
      Matrix<ModP> m(like.rows(), like.cols());
      for (Index i = 0; i < m.size(); ++i) m.data()[i] = ModP::from_residue(rng.next() % ModP::modulus);
      return m;
    };
    const Case<ModP> point{{uniform(zero.tokens.q), uniform(zero.tokens.k), uniform(zero.tokens.v)},
                           zero.segments,
                           zero.chunk,
                           zero.parameters};
    const auto diff = difference<ModP>(check.field, point);
    return !diff || !diff->empty();  // undefined there (a zero denominator): searched
  };
  auto found =
      checking::exhaustive_search({.first_n = first_n, .last_n = first_n + 4}, zeros, fails, may_fail);
  if (!found) return std::nullopt;
  const std::string chunks =
      domain.search_chunk > 1 ? ", in chunks of " + std::to_string(domain.search_chunk) + " tokens" : "";
  return make_counterexample(check, std::move(*found),
                             "exhaustive search: no smaller input with entries in {-1, 0, 1} "
                             "(smallest n, then d, dv <= 2, then fewest non-zero entries, <= 4" +
                                 chunks + ")");
}

// Greedy shrinking of a failing case (checking::shrink), keeping the tokens the domain needs.
Case<Rational> shrink(const IdentityCheck& check, Case<Rational> c) {
  const Index min_tokens = std::max<Index>(check.domain.min_n, c.segments.size());
  return checking::shrink(
      std::move(c), [&check](const Case<Rational>& x) { return differs<Rational>(check.exact, x); },
      min_tokens);
}

std::string range(Index lo, Index hi) {
  return lo == hi ? std::to_string(lo) : std::to_string(lo) + "-" + std::to_string(hi);
}

std::string scope_text(const IdentityCheck& check) {
  const Domain& d = check.domain;
  switch (check.scope) {
    case Scope::fixed_size:
      return "an identity of matrix products with no recursion over the sequence: each (n, d, dv) is a "
             "separate polynomial identity, so the checks establish it (up to the Schwartz-Zippel "
             "chance) for the sizes tried; beyond them it rests on the associativity of matrix products";
    case Scope::order_pattern:
      if (!d.decay) {
        // A normalized identity compares num * den' with num' * den: two tuples sharing t.
        const int arity = d.normalize ? 2 * check.arity - 1 : check.arity;
        return "both sides are sums over tuples of at most " + std::to_string(arity) +
               " token indices (<= t) of monomials whose coefficients depend only on the indices' "
               "relative order; distinct tuples give distinct monomials, so a difference at any n "
               "shows at n = " +
               std::to_string(arity) + ", which is checked (n up to " +
               std::to_string(std::max(d.max_n, d.field_max_n)) +
               "): the identity holds for every n, for the d, dv tried";
      }
      [[fallthrough]];
    case Scope::sizes_tried:
      return d.decay ? "nothing beyond the sizes tried (with decay the coefficients depend on the gaps "
                       "between indices, not only on their order)"
                     : "nothing beyond the sizes tried";
    case Scope::summary_algebra:
      return "checked on summaries of segments of 0-3 tokens (rationals) and 0-8 tokens (Z/p), "
             "every component compared; nothing is implied for longer segments";
  }
  return "";
}

Entry entry_of(const Claim& claim) {
  Entry entry;
  entry.id = claim.id;
  entry.page = claim.page;
  entry.statement = claim.statement;
  entry.corrected_by = claim.corrected_by;
  entry.corrects = claim.corrects;
  return entry;
}

Entry check_identity(const Claim& claim, const IdentityCheck& check, const LedgerOptions& options) {
  Entry entry = entry_of(claim);
  const Domain& domain = check.domain;
  Rng rng(claim_seed(options.seed, claim.id));
  std::optional<Case<Rational>> failing;
  for (int attempts = 0; entry.cases < options.cases && attempts < 4 * options.cases; ++attempts) {
    Case<Rational> c = random_exact_case(rng, domain);
    const auto diff = difference<Rational>(check.exact, c);
    if (!diff) continue;  // undefined (zero denominator): draw again
    ++entry.cases;
    if (!diff->empty() && !failing) failing = std::move(c);
  }
  bool field_differs = false;
  for (int attempts = 0; entry.field_cases < options.field_cases && attempts < 4 * options.field_cases;
       ++attempts) {
    const Case<ModP> c = random_field_case(rng, domain);
    const auto diff = difference<ModP>(check.field, c);
    if (!diff) continue;
    ++entry.field_cases;
    field_differs |= !diff->empty();
  }
  // Schwartz-Zippel over the product of the sets that each variable is drawn from: the entries
  // from Z/p, gamma (and eps, ridge) from the 2^30 values a / 2^30.
  const double parameter_degree = (domain.decay ? domain.gamma_degree_per_token * domain.field_max_n : 0) +
                                  (domain.normalize ? 2 : 0) + (domain.ridge ? 2 : 0);
  entry.field_bound = domain.degree / static_cast<double>(ModP::modulus) +
                      parameter_degree / static_cast<double>(parameter_denominator);
  std::string segments = domain.segments > 0 ? ", " + std::to_string(domain.segments) + " segments" : "";
  entry.sizes = "rationals: n " + range(domain.min_n, domain.max_n) + ", d, dv " + range(1, domain.max_d) +
                segments + (domain.decay ? ", gamma a/b (b <= 8)" : "") + "; Z/p: n " +
                range(domain.min_n, std::max(domain.min_n, domain.field_max_n)) + ", d, dv " +
                range(1, domain.field_max_d) + (domain.chunk > 0 ? "; chunk sizes 1..n+1" : "");
  entry.scope = scope_text(check);
  entry.holds = !failing && !field_differs;
  if (entry.holds) {
    char bound[32];
    std::snprintf(bound, sizeof bound, "%.1e", entry.field_bound);
    entry.evidence = std::to_string(entry.cases) + " exact + " + std::to_string(entry.field_cases) +
                     " Z/p cases equal (Z/p miss <= " + bound + " each)";
    return entry;
  }
  entry.counterexample = exhaustive_search(check);
  if (!entry.counterexample && failing) {
    entry.counterexample = make_counterexample(
        check, shrink(check, *failing),
        "greedy shrinking of a random counterexample (the exhaustive search over entries in "
        "{-1, 0, 1}, d, dv <= 2 and up to 4 non-zero entries found none): locally minimal, not proven "
        "smallest");
  }
  if (!entry.counterexample)
    throw Error(claim.id + ": differs in Z/p, but no exact counterexample was found");
  const Counterexample& x = *entry.counterexample;
  entry.evidence = "differs at n = " + std::to_string(x.input.n()) + ", d = " + std::to_string(x.input.d()) +
                   ", dv = " + std::to_string(x.input.dv()) + " (" + x.part + ")";
  return entry;
}

Entry check_count(const Claim& claim, const CountCheck& check) {
  Entry entry = entry_of(claim);
  const std::vector<Monomial> polynomial = fit_polynomial(check.count, check.lowest, check.highest);
  entry.counted = format_polynomial(polynomial, check.variables);
  entry.stated = "O(" + format_polynomial(check.stated, check.variables) + ")";
  entry.unit = check.unit;
  if (check.exact) {
    entry.stated = format_polynomial(check.stated, check.variables);
    entry.holds = entry.counted == entry.stated;
    entry.evidence =
        entry.counted + " " + check.unit + (entry.holds ? ", as stated" : ", stated " + entry.stated);
  } else {
    entry.holds = within_order(polynomial, check.stated);
    entry.evidence =
        entry.counted + " " + check.unit + (entry.holds ? " within " : " not within ") + entry.stated;
  }
  if (check.condition && !entry.holds && !check.exact) {
    const Order when = *check.condition, reversed{when.smaller, when.larger};
    const auto order = [&](Order o) {
      return check.variables[o.larger] + " >= " + check.variables[o.smaller];
    };
    entry.condition = order(when);
    entry.holds_when = within_order(polynomial, check.stated, when);
    entry.holds_reversed = within_order(polynomial, check.stated, reversed);
    entry.evidence += std::string(entry.holds_when ? "; within it when " : "; not within it even when ") +
                      entry.condition + (entry.holds_reversed ? " and when " : ", not when ") +
                      order(reversed);
  }
  entry.sizes = "exact fit on the grid ";
  for (std::size_t i = 0; i < check.variables.size(); ++i) {
    if (i > 0) entry.sizes += ", ";
    entry.sizes += check.variables[i] + " = 2.." + std::to_string(check.highest[i] - check.lowest[i] + 2);
  }
  entry.sizes += ", confirmed one and two beyond each";
  entry.cases = 2 * static_cast<int>(check.variables.size());  // the confirmations
  int grid = 1;
  for (std::size_t i = 0; i < check.variables.size(); ++i) grid *= check.highest[i] - check.lowest[i] + 1;
  entry.cases += grid;  // sizes at which the count was evaluated
  entry.scope = "the count is an exact polynomial in the sizes (>= 2) that it was fitted and confirmed on";
  return entry;
}

}  // namespace

Entry check_claim(const Claim& claim, const LedgerOptions& options) {
  if (const auto* identity = std::get_if<IdentityCheck>(&claim.check))
    return check_identity(claim, *identity, options);
  return check_count(claim, std::get<CountCheck>(claim.check));
}

bool differs_at(const Claim& claim, const Counterexample& counterexample) {
  return differs<Rational>(std::get<IdentityCheck>(claim.check).exact, counterexample.input);
}

std::vector<Entry> run_ledger(const std::vector<Claim>& claims, const LedgerOptions& options,
                              std::ostream& progress) {
  std::vector<Entry> entries(claims.size());
  std::vector<std::string> errors(claims.size());
  std::atomic<std::size_t> next{0};
  std::mutex lock;
  std::size_t done = 0;
  const auto worker = [&] {
    for (std::size_t i; (i = next++) < claims.size();) {
      try {
        entries[i] = check_claim(claims[i], options);
      } catch (const std::exception& e) {
        errors[i] = claims[i].id + ": " + e.what();
      }
      const std::lock_guard<std::mutex> guard(lock);
      progress << "[" << ++done << "/" << claims.size() << "] " << claims[i].id << ": "
               << (errors[i].empty() ? (entries[i].holds ? "holds" : "fails") : "error") << "\n"
               << std::flush;
    }
  };
  std::vector<std::thread> pool;
  for (int t = 0; t < std::max(1, options.threads); ++t) pool.emplace_back(worker);
  for (std::thread& t : pool) t.join();
  for (const std::string& e : errors) {
    if (!e.empty()) throw Error(e);
  }
  return entries;
}

}  // namespace hla::proofs
