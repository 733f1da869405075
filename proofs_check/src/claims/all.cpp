#include <algorithm>

#include "hla/proofs/claim.hpp"

namespace hla::proofs {

std::vector<Claim> all_claims() {
  std::vector<Claim> out;
  for (auto part :
       {section3_claims, section4_claims, section6_claims, section7_claims, figure_claims, cost_claims}) {
    for (Claim& c : part()) out.push_back(std::move(c));
  }
  std::stable_sort(out.begin(), out.end(), [](const Claim& a, const Claim& b) { return a.page < b.page; });
  return out;
}

}  // namespace hla::proofs
