#pragma once

// Coverage-guided fuzzing of the scan operators' laws: bytes decode into a token sequence cut
// into segments, and every law (associativity, left and right identity, the homomorphism of the
// serial fold, split at every index) is checked exactly, in Z/p and, for a violation, in
// rationals. Shared by the libFuzzer harness (fuzz/harness) and `hla fuzz --explain`.

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "hla/reference/sequence.hpp"

namespace hla::checking {

// A decoded input: tokens with small integer or dyadic entries, their segments, and gamma.
struct Input {
  Sequence<Rational> tokens;
  std::vector<Index> segments;  // lengths, summing to n; at least three
  Rational gamma = 1;
};

// FuzzedDataProvider's reading of `bytes`: d, dv in [1, 4]; gamma from {1, 1/2, 1/3, 2/3, 3/4}
// (undecayed operators ignore it); 3 or 4 segments of 0 to 2 tokens; each entry an integer in
// [-8, 8] divided by 2^e, e in [0, 3]. Every byte string decodes to some input.
Input decode(const std::uint8_t* data, std::size_t size);

// "d = 1, dv = 1, gamma = 1/2, segments 1 1 1\n  token 1: q = (1), k = (0), v = (0)\n ..."
std::string describe(const Input& input);

struct Operator {
  std::string id;           // the ledger's id, e.g. eq-4.1-decay
  std::string description;  // one line
  bool decayed;             // uses gamma
  std::string finding;      // the catalogue's finding that breaks its laws ("F3"), or "": lawful
};

// Every operator that can be fuzzed, published and corrected.
const std::vector<Operator>& operators();
const Operator* find_operator(const std::string& id);

struct Violation {
  std::string law;    // "associativity", "left identity", "right identity", "homomorphism"
  std::string where;  // which segments or split, and which component differs
  Input input;
};

// The first violated law on this input, checked in Z/p and confirmed in rationals.
// Throws hla::Error for an unknown operator.
std::optional<Violation> check(const std::string& operator_id, const Input& input);

// check(operator_id, decode(data, size)), decoding straight into Z/p: the fuzzers' fast path.
std::optional<Violation> check_bytes(const std::string& operator_id, const std::uint8_t* data,
                                     std::size_t size);

// A smaller input that still violates the same law (fewer tokens, smaller d and dv, fewer
// non-zero entries, entries +-1), by greedy shrinking in rationals.
Violation minimize(const std::string& operator_id, Violation violation);

// The message a violation prints: operator, law, place, and the decoded input.
std::string report(const std::string& operator_id, const Violation& violation);

}  // namespace hla::checking
