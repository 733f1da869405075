// The catalogue's findings against the ledger: each finding names printed claims that the ledger
// records as failing (they carry the entry that corrects them), and every such claim belongs to
// exactly one finding, so the table and the ledger cannot drift apart.

#include "hla/fast/catalogue.hpp"

#include <catch2/catch.hpp>
#include <map>
#include <set>

#include "hla/proofs/ledger.hpp"

using namespace hla;

TEST_CASE("catalogue/the findings name exactly the ledger's failing printed claims", "[proofs][catalogue]") {
  std::set<std::string> failing;
  for (const proofs::Claim& c : proofs::all_claims()) {
    if (!c.corrected_by.empty()) failing.insert(c.id);
  }
  std::map<std::string, std::string> finding_of;
  for (const fast::Finding& f : fast::findings()) {
    for (const std::string_view id : f.ledger_ids) {
      INFO(f.id << " lists " << id);
      CHECK(failing.count(std::string(id)) == 1);
      CHECK(finding_of.emplace(std::string(id), std::string(f.id)).second);  // one finding per claim
    }
  }
  for (const std::string& id : failing) {
    INFO(id << " fails in the ledger");
    CHECK(finding_of.count(id) == 1);
  }
}
