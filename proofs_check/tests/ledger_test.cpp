// The ledger (docs/ledger.json) re-checked: every "fails" entry's counterexample still differs
// in exact arithmetic, and the entry that corrects it agrees there; every "holds" entry holds on
// fresh random cases; the ledger lists exactly the claims that the code checks.

#include "hla/proofs/ledger.hpp"

#include <boost/property_tree/json_parser.hpp>
#include <boost/property_tree/ptree.hpp>
#include <catch2/catch.hpp>
#include <cstdlib>
#include <map>
#include <random>
#include <sstream>

using namespace hla;
using namespace hla::proofs;
using boost::property_tree::ptree;

namespace {

const ptree& ledger() {
  static const ptree tree = [] {
    ptree t;
    boost::property_tree::read_json(HLA_LEDGER_JSON, t);
    return t;
  }();
  return tree;
}

std::map<std::string, Claim> claims_by_id() {
  std::map<std::string, Claim> out;
  for (Claim& c : all_claims()) out.emplace(c.id, std::move(c));
  return out;
}

Matrix<Rational> matrix(const ptree& rows) {
  std::vector<std::vector<Rational>> values;
  for (const auto& [key, row] : rows) {
    values.emplace_back();
    for (const auto& [k, x] : row) values.back().push_back(parse_rational(x.data(), "ledger entry"));
  }
  const Index r = static_cast<Index>(values.size()),
              c = values.empty() ? 0 : static_cast<Index>(values[0].size());
  Matrix<Rational> m(r, c);
  for (Index i = 0; i < r; ++i)
    for (Index j = 0; j < c; ++j) m(i, j) = values[i][j];
  return m;
}

Case<Rational> recorded_case(const ptree& x) {
  Case<Rational> c;
  c.tokens = {matrix(x.get_child("q")), matrix(x.get_child("k")), matrix(x.get_child("v"))};
  c.parameters.gamma = parse_rational(x.get<std::string>("gamma"), "gamma");
  c.parameters.eps = parse_rational(x.get<std::string>("eps"), "eps");
  c.parameters.ridge = parse_rational(x.get<std::string>("ridge"), "ridge");
  c.chunk = x.get<Index>("chunk");
  if (const auto segments = x.get_child_optional("segments")) {
    for (const auto& [k, l] : *segments) c.segments.push_back(l.get_value<Index>());
  }
  return c;
}

std::uint64_t fresh_seed() {
  if (const char* s = std::getenv("HLA_LEDGER_SEED")) return std::strtoull(s, nullptr, 10);
  return std::random_device{}();
}

}  // namespace

TEST_CASE("ledger/lists every claim once", "[proofs]") {
  const auto claims = claims_by_id();
  std::map<std::string, int> listed;
  for (const auto& [key, e] : ledger().get_child("entries")) ++listed[e.get<std::string>("id")];
  CHECK(listed.size() == claims.size());
  for (const auto& [id, count] : listed) {
    INFO(id);
    CHECK(count == 1);
    CHECK(claims.count(id) == 1);
  }
}

TEST_CASE("ledger/every failing identity's counterexample differs exactly", "[proofs]") {
  const auto claims = claims_by_id();
  int failing = 0;
  for (const auto& [key, e] : ledger().get_child("entries")) {
    if (e.get<std::string>("verdict") != "fails" || !e.get_child_optional("counterexample")) continue;
    const std::string id = e.get<std::string>("id");
    INFO(id);
    ++failing;
    const Claim& claim = claims.at(id);
    const ptree& x = e.get_child("counterexample");
    Counterexample recorded{recorded_case(x), x.get<std::string>("part"), matrix(x.get_child("lhs")),
                            matrix(x.get_child("rhs")), ""};
    CHECK(differs_at(claim, recorded));
    // Both sides of the differing part, recomputed, are the recorded values.
    const Sides<Rational> sides = std::get<IdentityCheck>(claim.check).exact(recorded.input);
    bool found = false;
    for (const Part<Rational>& p : sides) {
      if (p.name != recorded.part) continue;
      found = true;
      CHECK(p.lhs == recorded.lhs);
      CHECK(p.rhs == recorded.rhs);
    }
    CHECK(found);
    // The entry that corrects the claim agrees on the same input.
    const std::string fix = e.get<std::string>("corrected_by", "");
    REQUIRE_FALSE(fix.empty());
    const Claim& corrected = claims.at(fix);
    if (std::holds_alternative<IdentityCheck>(corrected.check)) {
      Counterexample at_fix = recorded;
      CHECK_FALSE(differs_at(corrected, at_fix));
    }
  }
  CHECK(failing >= 15);
}

TEST_CASE("ledger/every failing count still exceeds its stated order", "[proofs]") {
  const auto claims = claims_by_id();
  for (const auto& [key, e] : ledger().get_child("entries")) {
    if (e.get<std::string>("verdict") != "fails" || e.get_child_optional("counterexample")) continue;
    const std::string id = e.get<std::string>("id");
    INFO(id);
    const Entry recheck = check_claim(claims.at(id), LedgerOptions{});
    CHECK_FALSE(recheck.holds);
    CHECK(recheck.counted == e.get<std::string>("counted"));
    CHECK(recheck.condition == e.get<std::string>("condition", ""));
    if (!recheck.condition.empty()) {
      CHECK(recheck.holds_when == e.get<bool>("holds_when_condition"));
      CHECK(recheck.holds_reversed == e.get<bool>("holds_when_reversed"));
    }
  }
}

TEST_CASE("ledger/every holding entry holds on fresh random cases", "[proofs]") {
  const std::uint64_t seed = fresh_seed();
  INFO("seed " << seed << "; rerun: HLA_LEDGER_SEED=" << seed << " proofs_tests \""
               << Catch::getResultCapture().getCurrentTestName() << "\"");
  const auto claims = claims_by_id();
  LedgerOptions options;
  options.cases = 25;
  options.field_cases = 4;
  options.seed = seed;
  int holding = 0;
  for (const auto& [key, e] : ledger().get_child("entries")) {
    if (e.get<std::string>("verdict") != "holds") continue;
    const std::string id = e.get<std::string>("id");
    INFO(id);
    ++holding;
    const Entry recheck = check_claim(claims.at(id), options);
    CHECK(recheck.holds);
  }
  CHECK(holding >= 100);
}

TEST_CASE("ledger/the same seed gives the same ledger", "[proofs]") {
  std::vector<Claim> some;
  for (Claim& c : all_claims()) {
    if (c.id.rfind("thm-", 0) == 0 || c.id.rfind("fig-1", 0) == 0) some.push_back(std::move(c));
  }
  LedgerOptions options;
  options.cases = 10;
  options.field_cases = 2;
  options.seed = 12345;
  std::ostringstream log, first, second;
  write_json(run_ledger(some, options, log), options, first);
  options.threads = 1;
  write_json(run_ledger(some, options, log), options, second);
  CHECK(first.str() == second.str());
}
