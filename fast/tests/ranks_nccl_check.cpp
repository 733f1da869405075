// One rank of a sequence split across processes, one GPU each, exchanging through NCCL (gpu::NcclRanks;
// docs/ranks.md): for every variant (corrected, normalized, with decay; hla2 with its ridge instead), the
// rank's slice by gpu::rank_terms, and its gradients of <dO, O> by gpu::rank_gradients, equal, in Z/p and
// bit for bit, the same rows of the unsplit GPU scan and its backward over the whole sequence on this
// rank's GPU (which the gpu tests prove equal to the reference); and the fast path's forward across the
// ranks (gpu::rank_fast_forward) equals the unsplit fast path's outputs bit for bit, its backward
// (gpu::rank_fast_backward, hla2 and ahla) the unsplit fast backward's gradients.
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
#include "hla/reference/random.hpp"

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

// A rank's inputs uploaded and its outputs allocated on the device, freed at the end of its scope.
template <class In, class Out = In>
class Slice {
 public:
  Slice(const std::vector<std::vector<In>>& inputs, const std::vector<Index>& output_sizes) {
    for (const std::vector<In>& host : inputs) {
      in.push_back(allocate<In>(host.size()));
      fast::gpu::check(cudaMemcpy(in.back(), host.data(), host.size() * sizeof(In), cudaMemcpyHostToDevice),
                       "cudaMemcpy");
    }
    for (const Index size : output_sizes) {
      out.push_back(allocate<Out>(size));
      out_sizes.push_back(size);
    }
  }
  ~Slice() {
    for (In* p : in) cudaFree(p);
    for (Out* p : out) cudaFree(p);
  }
  Slice(const Slice&) = delete;
  Slice& operator=(const Slice&) = delete;
  std::vector<Out> download(int i) const {
    std::vector<Out> host(out_sizes[i]);
    fast::gpu::check(cudaMemcpy(host.data(), out[i], host.size() * sizeof(Out), cudaMemcpyDeviceToHost),
                     "cudaMemcpy");
    return host;
  }
  std::vector<In*> in;
  std::vector<Out*> out;

 private:
  template <class T>
  static T* allocate(std::size_t count) {
    T* p = nullptr;  // 16-byte aligned, as the fast path needs
    fast::gpu::check(cudaMalloc(reinterpret_cast<void**>(&p), std::max<std::size_t>(count, 8) * sizeof(T)),
                     "cudaMalloc");
    return p;
  }
  std::vector<Index> out_sizes;
};

// Rows [begin, begin + length) of every head, head after head.
template <class T>
std::vector<T> rows_of(const std::vector<Matrix<T>>& heads, Index begin, Index length) {
  std::vector<T> out;
  for (const Matrix<T>& m : heads)
    for (Index t = begin; t < begin + length; ++t)
      for (Index j = 0; j < m.cols(); ++j) out.push_back(m(t, j));
  return out;
}

// Each value rounded to bf16 (exact for the bf16 values this check draws).
std::vector<fast::gpu::BFloat16> bf16_of(const std::vector<float>& values) {
  std::vector<fast::gpu::BFloat16> out;
  for (const float x : values) out.push_back(fast::gpu::to_bfloat16(x));
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
      std::vector<Matrix<ModP>> d_outs;
      for (Index h = 0; h < heads; ++h) d_outs.push_back(testing::random_field_sequence(200 + h, n, 1, dv).v);
      const fast::gpu::BackwardOptions options{fast::Implementation::gpu_scan, 0, chunk};
      const std::vector<Terms<ModP>> unsplit =
          fast::gpu::terms(spec, used, fast::Implementation::gpu_scan, whole, chunk);
      const std::vector<Gradients<ModP>> unsplit_gradients =
          fast::gpu::gradients(spec, used, whole, d_outs, options);
      std::vector<Matrix<ModP>> nums, dens, d_nums, d_dens, dqs, dks, dvs;
      for (Index h = 0; h < heads; ++h) {
        nums.push_back(unsplit[h].num);
        dens.push_back(Matrix<ModP>(unsplit[h].den));
        const Terms<ModP> adjoint = reference::finish_adjoint(spec, unsplit[h], d_outs[h]);
        d_nums.push_back(adjoint.num);
        d_dens.push_back(Matrix<ModP>(adjoint.den));
        dqs.push_back(unsplit_gradients[h].dq);
        dks.push_back(unsplit_gradients[h].dk);
        dvs.push_back(unsplit_gradients[h].dv);
      }
      const Slice<ModP> on_device(
          {rows_of(q, begin, length), rows_of(k, begin, length), rows_of(v, begin, length),
           rows_of(d_nums, begin, length), rows_of(d_dens, begin, length)},
          {heads * length * dv, heads * length, heads * length * d, heads * length * d, heads * length * dv});
      const fast::gpu::Problem slice{1, heads, length, static_cast<int>(d), static_cast<int>(dv)};
      ModP *const *in = on_device.in.data(), *const *out = on_device.out.data();
      fast::gpu::rank_terms(spec, used, slice, chunk, in[0], in[1], in[2], out[0], out[1], exchange);
      fast::gpu::rank_gradients(spec, used, slice, options, in[0], in[1], in[2], in[3], in[4], out[2], out[3],
                                out[4], exchange);
      fast::gpu::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const std::vector<ModP> want[] = {rows_of(nums, begin, length), rows_of(dens, begin, length),
                                        rows_of(dqs, begin, length), rows_of(dks, begin, length),
                                        rows_of(dvs, begin, length)};
      const char* names[] = {"num", "den", "dQ", "dK", "dV"};
      std::string verdict = "equal";
      for (int i = 0; i < 5; ++i) {
        if (on_device.download(i) != want[i]) verdict = std::string("DIFFERENT (") + names[i] + ")";
      }
      std::cout << "rank " << rank << " of " << ranks << " (tokens " << begin << " to " << begin + length
                << "), " << describe(spec) << ", forward and backward: " << verdict << "\n";
      all_equal = all_equal && verdict == "equal";
    }
    // The fast path (bf16 inputs): 2 heads of 33 chunks a rank, where the unsplit run on one GPU puts
    // its segments (two heads leave the SMs idle), so each rank's outputs equal the unsplit ones bit for
    // bit (gpu_test.cpp, "gpu/fast/split across simulated ranks equals the unsplit fast path bit for bit").
    const Index fast_n = 33 * 64 * ranks, fast_heads = 2, width = 64;
    const fast::Slices fast_slices = fast::even_slices(fast_n, ranks);
    const Index fast_begin = fast_slices.begin(rank), fast_length = fast_slices.length(rank);
    for (const Variant variant : {Variant::hla2, Variant::ahla, Variant::hla3}) {
      OperatorSpec spec{.variant = variant, .normalize = true, .eps = Rational(1, 4)};
      if (variant == Variant::hla2)
        spec.ridge = Rational(1, 3);
      else
        spec.decay = Rational(1023, 1024);
      std::vector<Sequence<float>> whole;
      std::vector<Matrix<float>> q, k, v;
      Rng rng(300 + static_cast<int>(variant));
      for (Index h = 0; h < fast_heads; ++h) {
        Sequence<float> s{Matrix<float>(fast_n, width), Matrix<float>(fast_n, width),
                          Matrix<float>(fast_n, width)};
        for (Matrix<float>* m : {&s.q, &s.k, &s.v}) {  // bf16 values in [0, 1): positive denominators
          for (Index i = 0; i < m->size(); ++i)
            m->data()[i] =
                fast::gpu::to_float(fast::gpu::to_bfloat16(float(rng.next() >> 40) * 0x1p-24f / 8));
        }
        q.push_back(s.q);
        k.push_back(s.k);
        v.push_back(s.v);
        whole.push_back(std::move(s));
      }
      const std::vector<Matrix<float>> unsplit = fast::gpu::fast_outputs(spec, whole, false);
      const Slice<fast::gpu::BFloat16, float> on_device(
          {bf16_of(rows_of(q, fast_begin, fast_length)), bf16_of(rows_of(k, fast_begin, fast_length)),
           bf16_of(rows_of(v, fast_begin, fast_length))},
          {fast_heads * fast_length * width});
      const fast::gpu::Problem slice{1, fast_heads, fast_length, static_cast<int>(width),
                                     static_cast<int>(width)};
      fast::gpu::rank_fast_forward(spec, slice, fast_slices, on_device.in[0], on_device.in[1],
                                   on_device.in[2], {on_device.out[0], false}, exchange);
      fast::gpu::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const bool equal = on_device.download(0) == rows_of(unsplit, fast_begin, fast_length);
      std::cout << "rank " << rank << " of " << ranks << " (tokens " << fast_begin << " to "
                << fast_begin + fast_length << "), " << describe(spec)
                << ", the fast forward: " << (equal ? "equal" : "DIFFERENT") << "\n";
      all_equal = all_equal && equal;
      if (variant == Variant::hla3) continue;  // no fast backward
      // The backward from the unsplit run's readout adjoints (its forward's readouts equal the ranks'
      // bit for bit, as above), each rank's forward again with its checkpoints and den.
      std::vector<Matrix<float>> d_outs, d_num, d_den, dq, dk, dv;
      for (Index h = 0; h < fast_heads; ++h) {
        Matrix<float> d_out(fast_n, width);
        for (Index i = 0; i < d_out.size(); ++i)
          d_out.data()[i] =
              fast::gpu::to_float(fast::gpu::to_bfloat16(float(rng.next() >> 40) * 0x1p-24f - 0.5f));
        d_outs.push_back(std::move(d_out));
      }
      const std::vector<Gradients<float>> unsplit_gradients = fast::gpu::fast_gradients(spec, whole, d_outs);
      for (Index h = 0; h < fast_heads; ++h) {
        const Gradients<float>& g = unsplit_gradients[h];
        const Terms<float> adjoint = reference::finish_adjoint(spec, g.terms, d_outs[h]);
        d_num.push_back(adjoint.num);
        d_den.push_back(Matrix<float>(adjoint.den));
        dq.push_back(g.dq);
        dk.push_back(g.dk);
        dv.push_back(g.dv);
      }
      const Index rows = fast_heads * fast_length;
      const Slice<fast::gpu::BFloat16, float> train(
          {bf16_of(rows_of(q, fast_begin, fast_length)), bf16_of(rows_of(k, fast_begin, fast_length)),
           bf16_of(rows_of(v, fast_begin, fast_length)), bf16_of(rows_of(d_num, fast_begin, fast_length))},
          {rows * width, rows, rows * width, rows * width, rows * width});  // num, den, dq, dk, dv
      const Slice<float, unsigned char> extra({rows_of(d_den, fast_begin, fast_length)},
                                              {fast::gpu::fast_checkpoint_bytes(spec, slice)});
      fast::gpu::rank_fast_forward(spec, slice, fast_slices, train.in[0], train.in[1], train.in[2],
                                   {train.out[0], false, train.out[1], extra.out[0]}, exchange);
      fast::gpu::rank_fast_backward(spec, slice, fast_slices, train.in[0], train.in[1], train.in[2],
                                    train.in[3], extra.in[0], extra.out[0], train.out[2], train.out[3],
                                    train.out[4], exchange);
      fast::gpu::check(cudaDeviceSynchronize(), "cudaDeviceSynchronize");
      const bool gradients_equal = train.download(2) == rows_of(dq, fast_begin, fast_length) &&
                                   train.download(3) == rows_of(dk, fast_begin, fast_length) &&
                                   train.download(4) == rows_of(dv, fast_begin, fast_length);
      std::cout << "rank " << rank << " of " << ranks << ", " << describe(spec)
                << ", the fast backward: " << (gradients_equal ? "equal" : "DIFFERENT") << "\n";
      all_equal = all_equal && gradients_equal;
    }
    return all_equal ? 0 : 1;
  } catch (const Error& e) {
    std::cerr << "rank " << rank << ": " << e.what() << "\n";
    return 1;
  }
}
