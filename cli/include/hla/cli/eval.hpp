#pragma once

#include <optional>
#include <string>
#include <vector>

#include "hla/fast/implementation.hpp"
#include "hla/fast/scan_options.hpp"
#include "hla/fast/slices.hpp"
#include "hla/reference/operator_spec.hpp"

namespace hla::cli {

struct EvalRequest {
  OperatorSpec spec;
  std::optional<fast::Form> form;  // default: the form that equals the reference
  fast::Implementation impl = fast::Implementation::reference;
  fast::ScanOptions scan;
  // --ranks P or --slices L,L,...: the sequence split across ranks (one thread each), each slice by
  // --impl scan (fast/ranks.hpp); 0 and empty: not split.
  int ranks = 0;
  std::vector<Index> slices;
  ScalarKind scalar = ScalarKind::exact;
  // --bf16-out: --impl gpu-fast's outputs in bf16, as its kernels write them (the file holds their
  // float64 values); else in float32.
  bool bf16_out = false;
  std::string q_path, k_path, v_path, out_path;
  // --grad dO.npy: also the gradients of <dO, O> into dq_path, dk_path, dv_path (docs/gradients.md).
  std::string grad_path, dq_path, dk_path, dv_path;
};

// Reads q, k, v, evaluates, writes O.npy (float64 [n, dv], or uint64 residues for modp), and with
// grad_path dQ, dK, dV by the implementation's backward (the reference or the streaming form).
// Throws hla::Error with a one-line message on bad input; writes nothing then.
void run_eval(const EvalRequest& request);

}  // namespace hla::cli
