// One rank of a sequence split across processes, one GPU each, exchanging through NCCL (gpu::NcclRanks;
// docs/ranks.md): for every variant (corrected, normalized, with decay; hla2 with its ridge instead), the
// rank's slice by gpu::rank_terms equals, in Z/p and bit for bit, the same rows of the unsplit GPU scan
// of the whole sequence on this rank's GPU (which the gpu tests prove equal to the reference).
//
// Started by scripts/ranks.sh (HLA_RANK, HLA_RANKS, HLA_RANK_ID set, one GPU visible a process), or
// alone as rank 0 of 1. Exit status: 0 every variant equal, 1 a difference (the first printed), 2 bad
// environment, 77 no usable GPU or no NCCL (skipped, with the reason).

#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include "field_sequence.hpp"
#include "hla/fast/gpu.hpp"
#include "hla/fast/gpu_status.hpp"

using namespace hla;

namespace {

int environment_int(const char* name, int fallback) {
  const char* text = std::getenv(name);
  if (!text) return fallback;
  try {
    return std::stoi(text);
  } catch (const std::exception&) {
    throw Error(std::string(name) + ": not an integer: " + text);
  }
}

template <class T>
T* to_device(const std::vector<T>& host) {
  T* p = nullptr;
  fast::gpu::check(
      cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(host.size(), 1) * sizeof(T)),
      "cudaMalloc");
  fast::gpu::check(cudaMemcpy(p, host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "cudaMemcpy");
  return p;
}

// Rows [begin, begin + length) of every head, head after head.
std::vector<ModP> rows_of(const std::vector<Matrix<ModP>>& heads, Index begin, Index length) {
  std::vector<ModP> out;
  for (const Matrix<ModP>& m : heads)
    for (Index t = begin; t < begin + length; ++t)
      for (Index j = 0; j < m.cols(); ++j) out.push_back(m(t, j));
  return out;
}

}  // namespace

int main() {
  int rank = 0, ranks = 1;
  std::string id_file;
  try {
    rank = environment_int("HLA_RANK", 0);
    ranks = environment_int("HLA_RANKS", 1);
    const char* id = std::getenv("HLA_RANK_ID");
    id_file =
        id ? id
           : (std::filesystem::temp_directory_path() / ("hla_ranks_" + std::to_string(::getpid()) + ".id"))
                 .string();
  } catch (const Error& e) {
    std::cerr << e.what() << "\n";
    return 2;
  }
  if (const auto why = fast::gpu::unavailable_reason()) {
    std::cout << "skipped: " << *why << "\n";
    return 77;
  }
  if (const auto why = fast::gpu::nccl_unavailable()) {
    std::cout << "skipped: " << *why << "\n";
    return 77;
  }
  try {
    fast::gpu::NcclRanks exchange(rank, ranks, id_file);
    constexpr Index n = 3001, d = 16, dv = 8, heads = 3, chunk = 64;
    const fast::Slices slices = fast::even_slices(n, ranks);
    const Index begin = slices.begin(rank), length = slices.length(rank);
    bool all_equal = true;
    for (const Variant variant : all_variants) {
      OperatorSpec spec{.variant = variant, .normalize = true, .eps = Rational(1, 3)};
      if (variant == Variant::hla2)
        spec.ridge = Rational(1, 2);
      else
        spec.decay = Rational(7, 8);
      const fast::Form used = fast::default_form(spec, fast::Implementation::gpu_scan);
      std::vector<Sequence<ModP>> whole;
      std::vector<Matrix<ModP>> q, k, v;
      for (Index h = 0; h < heads; ++h) {
        whole.push_back(testing::random_field_sequence(100 + h, n, d, dv));
        q.push_back(whole.back().q);
        k.push_back(whole.back().k);
        v.push_back(whole.back().v);
      }
      const std::vector<Terms<ModP>> unsplit =
          fast::gpu::terms(spec, used, fast::Implementation::gpu_scan, whole, chunk);
      ModP *dq = to_device(rows_of(q, begin, length)), *dk = to_device(rows_of(k, begin, length)),
           *dv_ = to_device(rows_of(v, begin, length));
      ModP *num = nullptr, *den = nullptr;
      fast::gpu::check(
          cudaMalloc(reinterpret_cast<void**>(&num), std::max<Index>(heads * length * dv, 1) * sizeof(ModP)),
          "cudaMalloc");
      fast::gpu::check(
          cudaMalloc(reinterpret_cast<void**>(&den), std::max<Index>(heads * length, 1) * sizeof(ModP)),
          "cudaMalloc");
      const fast::gpu::Problem slice{1, heads, length, static_cast<int>(d), static_cast<int>(dv)};
      fast::gpu::rank_terms(spec, used, slice, chunk, dq, dk, dv_, num, den, exchange);
      fast::gpu::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      std::vector<ModP> got_num(heads * length * dv), got_den(heads * length);
      fast::gpu::check(cudaMemcpy(got_num.data(), num, got_num.size() * sizeof(ModP), cudaMemcpyDeviceToHost),
                       "cudaMemcpy");
      fast::gpu::check(cudaMemcpy(got_den.data(), den, got_den.size() * sizeof(ModP), cudaMemcpyDeviceToHost),
                       "cudaMemcpy");
      for (ModP* p : {dq, dk, dv_, num, den}) cudaFree(p);
      std::vector<Matrix<ModP>> nums;
      std::vector<Matrix<ModP>> dens;
      for (const Terms<ModP>& t : unsplit) {
        nums.push_back(t.num);
        dens.push_back(Matrix<ModP>(t.den));
      }
      const bool equal = got_num == rows_of(nums, begin, length) && got_den == rows_of(dens, begin, length);
      std::cout << "rank " << rank << " of " << ranks << " (tokens " << begin << " to " << begin + length
                << "), " << describe(spec) << ": " << (equal ? "equal" : "DIFFERENT") << "\n";
      all_equal = all_equal && equal;
    }
    return all_equal ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}
