#pragma once

// The options of hla audit and hla report, apart from the stages that run them, so that the
// command line needs no stage's full header.

#include <cstdint>
#include <string>
#include <vector>

#include "hla/reference/linalg.hpp"

namespace hla::reports {

// The exact equivalence audit: every implementation of every operator against the reference,
// on random inputs, in exact rationals and in Z/p, compared with ==.
struct AuditOptions {
  std::uint64_t seed = 1;
  int cases = 50;  // random inputs per operator, form and scalar
  int max_n = 16;
  int max_d = 4;
};

struct ReportOptions {
  std::uint64_t seed = 1;
  int max_log2_n = 16;  // n = 2^6, 2^8, ..., 2^max_log2_n
  int min_log2_n = 6;
  int log2_n_step = 2;
  int seeds = 2;  // inputs per cell; the worst is reported with its seed
  // The backward rows (dQ, dK, dV) at the report's own head, n = 2^min_log2_n .. 2^this: a
  // gradient is not causal in its prefix, so each length costs a backward pass of its own.
  int backward_max_log2_n = 10;
  Index d = 4, dv = 4;
  std::vector<Index> chunks{16, 64};
  // The head sizes the field uses (d = dv): `wide_operators` at gamma = 15/16 on gaussian inputs,
  // one seed, n = 2^min_log2_n .. 2^max_log2_n (capped by the report's own), every candidate. The
  // 261-bit reference costs O(d^2) per token (d^3 for hla3, left out), so these stop early enough
  // for the main job's 15 minutes; report.md says where.
  struct WideHeads {
    Index d;
    int max_log2_n;
  };
  std::vector<WideHeads> wide_heads{{32, 8}, {64, 8}, {128, 6}};
  std::vector<std::string> wide_operators{"hla2", "hla2/normalized", "ahla"};
  int threads = 0;                     // 0: the hardware's
  std::vector<std::string> operators;  // names of report_specs() to run; empty: all
  // Where report.md links the ledger and docs/ (relative to the report's directory).
  std::string ledger_link = "../ledger.md", docs_link = "../../docs";  // ledger_link "": none written yet
};

}  // namespace hla::reports
