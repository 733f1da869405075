// The GPU rows of the error report. Extension point: with CUDA, append one Candidate per GPU
// implementation and precision (e.g. {"gpu-scan", "tf32", InputFormat::f32, 11, ...}) when a
// device is present; each supplies its own a-priori depth for its kernels' reduction order.

#include "hla/reports/candidates.hpp"

namespace hla::reports {

std::vector<Candidate> gpu_candidates() {
#if HLA_HAVE_CUDA
  return {};  // no GPU implementation is wired into the report yet
#else
  return {};
#endif
}

std::string gpu_candidates_absent_reason() {
#if HLA_HAVE_CUDA
  return "no GPU implementation is registered in reports/src/gpu_candidates.cpp yet";
#else
  return "this build has no CUDA (CPU-only build), so no GPU rows";
#endif
}

}  // namespace hla::reports
