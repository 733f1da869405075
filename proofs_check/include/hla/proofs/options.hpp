#pragma once

// The ledger's options, apart from the ledger, so that the command line needs only this.

#include <cstdint>

namespace hla::proofs {

struct LedgerOptions {
  int cases = 1000;       // random cases in exact rationals per identity
  int field_cases = 100;  // random cases in Z/p per identity
  std::uint64_t seed = 1;
  int threads = 2;  // claims checked concurrently
};

}  // namespace hla::proofs
