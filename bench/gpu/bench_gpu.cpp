// Times the GPU forward (masked; --options plain, normalized, decayed, normalized-decayed, gamma =
// 0.999, and hla2's ridge, lambda = 1/2) on [batch, heads, n, d] inputs with CUDA events: warm-up, then the
// median of --reps runs, inputs drawn on the device (never zeros). The fast path writes its outputs in
// float32 or, with
// --out bf16, in bf16 (the others write num and den in float32). Prints one CSV line per
// configuration; bench/gpu/run.py adds the peers and the roofline floors.
// `--pass backward` times the backward instead, from dO drawn like v: gpu::gradients (methods
// streaming and scan; its forward pass, which the gradients of a normalized operator need, is not
// included) or, method fast, gpu::fast_backward from the checkpoints of one untimed forward
// (normalized: from Gaussian readouts' adjoints d_num, d_den).
// `--pass train` (method fast) times the forward that writes the checkpoints and the backward
// together (normalized, that forward writes num and den in float32 whatever --out).
// One sequence across ranks (docs/ranks.md; method fast, --pass forward or train): under scripts/ranks.sh
// (HLA_RANKS > 1) each process times its rank's step (gpu::rank_fast_forward through NCCL, with train
// its checkpoints and then gpu::rank_fast_backward, every rank a slice of n / P tokens, or of n with
// `--scaling weak`) and its all-gathers alone (train: two, the forward's and the backward's), and
// prints its line. Without
// it, `--ranks P` projects the same on this one GPU: each rank's step timed alone, its all-gather a
// loopback (its own summary copied into every slot: the time of a rank's work, not of a network; the
// carry it computes from those copies is not the operator's).
// The last columns: ranks, rank, slice (its tokens), exchange_bytes (what a rank sends in one
// all-gather), exchange_ms (its all-gathers alone, median: one forward, two train).

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "hla/fast/gpu.hpp"
#include "hla/fast/gpu_status.hpp"
#include "hla/fast/slices.hpp"

using namespace hla;
namespace gpu = hla::fast::gpu;
using gpu::check;

namespace {

std::vector<std::string> split(const std::string& text) {
  std::vector<std::string> out;
  std::stringstream in(text);
  for (std::string item; std::getline(in, item, ',');) out.push_back(item);
  return out;
}

struct Options {
  std::int64_t batch = 8, heads = 16;
  int d = 64, dv = 64, reps = 5;
  std::int64_t chunk = 64;
  std::vector<std::string> variants{"hla2", "ahla"}, precisions{"f32", "bf16"}, methods{"scan", "streaming"};
  std::vector<std::int64_t> lengths{1024, 4096, 16384, 65536};
  std::vector<std::string> options{"plain"};
  std::string dump;  // write q, k, v (as float32), num and, with a backward, dq, dk, dv of the last run here
  std::string pass = "forward";
  bool bf16_out = false;
  int ranks = 1;      // --ranks P: the projection on this GPU
  bool weak = false;  // --scaling weak: n tokens a rank
};

Options parse(int argc, char** argv) {
  Options o;
  for (int i = 1; i < argc; ++i) {
    const std::string flag = argv[i];
    if (i + 1 >= argc) throw Error(flag + ": needs a value");
    const std::string value = argv[++i];
    if (flag == "--batch")
      o.batch = std::stoll(value);
    else if (flag == "--heads")
      o.heads = std::stoll(value);
    else if (flag == "--d")
      o.d = std::stoi(value);
    else if (flag == "--dv")
      o.dv = std::stoi(value);
    else if (flag == "--reps")
      o.reps = std::stoi(value);
    else if (flag == "--chunk")
      o.chunk = std::stoll(value);
    else if (flag == "--pass") {
      if (value != "forward" && value != "backward" && value != "train")
        throw Error("--pass: forward, backward or train, got " + value);
      o.pass = value;
    } else if (flag == "--dump")
      o.dump = value;
    else if (flag == "--variants")
      o.variants = split(value);
    else if (flag == "--precisions")
      o.precisions = split(value);
    else if (flag == "--methods")
      o.methods = split(value);
    else if (flag == "--options")
      o.options = split(value);
    else if (flag == "--out") {
      if (value != "f32" && value != "bf16") throw Error("--out: f32 or bf16, got " + value);
      o.bf16_out = value == "bf16";
    } else if (flag == "--ranks") {
      o.ranks = std::stoi(value);
      fast::validate_ranks(o.ranks);
    } else if (flag == "--scaling") {
      if (value != "strong" && value != "weak") throw Error("--scaling: strong or weak, got " + value);
      o.weak = value == "weak";
    } else if (flag == "--n") {
      o.lengths.clear();
      for (const auto& n : split(value)) o.lengths.push_back(std::stoll(n));
    } else
      throw Error("unknown option " + flag);
  }
  if (o.reps < 1) throw Error("--reps: must be >= 1");
  if (!o.dump.empty() && o.bf16_out) throw Error("--dump: writes float32 outputs; leave out --out bf16");
  return o;
}

// Raw little-endian float32, row-major, no header: the peer reads it with numpy.fromfile.
template <class In>
void dump_array(const std::string& path, const In* device, std::int64_t count) {
  std::vector<In> host(count);
  check(cudaMemcpy(host.data(), device, count * sizeof(In), cudaMemcpyDeviceToHost), "cudaMemcpy");
  std::vector<float> values(count);
  for (std::int64_t i = 0; i < count; ++i) {
    if constexpr (std::is_same_v<In, gpu::BFloat16>) {
      values[i] = gpu::to_float(host[i]);
    } else {
      values[i] = host[i];
    }
  }
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(values.data()), count * sizeof(float));
  if (!out) throw Error(path + ": cannot write");
}

// The median of `reps` timed runs of f() after one warm-up, on the legacy stream, and their spread.
struct Timing {
  double median, spread;
};
template <class F>
Timing time_runs(int reps, const F& f) {
  f();
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(start), "cudaEventRecord");
    f();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    ms.push_back(elapsed);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  return {ms[ms.size() / 2], ms.back() - ms.front()};
}

// gpu-fast: the tensor-core path (gpu::fast_forward; bf16 inputs only), else gpu::terms; with
// `backward`, gpu::gradients (num holds dO, den zero, as for an unnormalized operator) or
// gpu::fast_backward (dO in bf16, the checkpoints from one forward before the timed runs; normalized,
// Gaussian readouts' adjoints d_num, d_den, whose elementwise formation from dO is not timed, and the
// forward writes num and den); `train`: the fast forward with checkpoints, then the fast backward.
template <class In>
double time_pass(const OperatorSpec& spec, fast::Implementation impl, const gpu::Problem& p,
                 std::int64_t chunk, int reps, const std::string& pass, bool bf16_out, double* spread,
                 const std::string& dump) {
  const bool backward = pass != "forward";
  const std::int64_t rows = p.batch * p.heads * p.length;
  In *q, *k, *v, *d_out = nullptr;
  float *num, *den, *dq = nullptr, *dk = nullptr, *dv = nullptr, *d_den = nullptr;
  void* checkpoints = nullptr;
  check(cudaMalloc(reinterpret_cast<void**>(&q), rows * p.key_dim * sizeof(In)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&k), rows * p.key_dim * sizeof(In)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&v), rows * p.value_dim * sizeof(In)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&num), rows * p.value_dim * sizeof(float)), "cudaMalloc");
  check(cudaMalloc(reinterpret_cast<void**>(&den), rows * sizeof(float)), "cudaMalloc");
  if (backward) {
    check(cudaMalloc(reinterpret_cast<void**>(&dq), rows * p.key_dim * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&dk), rows * p.key_dim * sizeof(float)), "cudaMalloc");
    check(cudaMalloc(reinterpret_cast<void**>(&dv), rows * p.value_dim * sizeof(float)), "cudaMalloc");
    gpu::fill_gaussian(num, rows * p.value_dim, 4, 1.0f);
    check(cudaMemset(den, 0, rows * sizeof(float)), "cudaMemset");
  }
  const float scale = 1.0f / std::sqrt(static_cast<float>(p.key_dim));
  gpu::fill_gaussian(q, rows * p.key_dim, 1, scale);
  gpu::fill_gaussian(k, rows * p.key_dim, 2, scale);
  gpu::fill_gaussian(v, rows * p.value_dim, 3, 1.0f);
  const fast::Form form = fast::default_form(spec, impl);
  const bool on_matrix_units = impl == fast::Implementation::gpu_fast;
  if (pass == "train" && !on_matrix_units) throw Error("--pass train: the fast path's (--methods fast)");
  if (on_matrix_units && backward) {
    check(cudaMalloc(reinterpret_cast<void**>(&d_out), rows * p.value_dim * sizeof(In)), "cudaMalloc");
    gpu::fill_gaussian(d_out, rows * p.value_dim, 4, 1.0f);
    if (spec.normalize) {
      check(cudaMalloc(reinterpret_cast<void**>(&d_den), rows * sizeof(float)), "cudaMalloc");
      gpu::fill_gaussian(d_den, rows, 5, 1.0f);
    }
    // Heads wider than 64 take none (0 bytes).
    if (const std::int64_t bytes = gpu::fast_checkpoint_bytes(spec, p); bytes > 0)
      check(cudaMalloc(&checkpoints, bytes), "cudaMalloc");
  }
  // The forward before a backward: normalized, num and den (the terms the readouts' adjoints need).
  const gpu::FastOutput forward_out = backward && spec.normalize
                                          ? gpu::FastOutput{num, false, den, checkpoints}
                                          : gpu::FastOutput{num, bf16_out, nullptr, checkpoints};
  const auto run = [&] {
    if constexpr (std::is_same_v<In, gpu::BFloat16>) {
      if (on_matrix_units) {
        if (pass != "backward") gpu::fast_forward(spec, p, q, k, v, forward_out);
        if (backward) gpu::fast_backward(spec, p, q, k, v, d_out, d_den, checkpoints, dq, dk, dv);
        return;
      }
    }
    if (on_matrix_units) throw Error("the fast path takes bf16 inputs only");
    if (backward)
      return gpu::gradients<In, float>(spec, form, p, {impl, 0, chunk}, q, k, v, num, den, dq, dk, dv);
    gpu::terms(spec, form, impl, p, chunk, q, k, v, num, den);
  };
  if (on_matrix_units && pass == "backward") {  // the checkpoints the timed backward reads
    if constexpr (std::is_same_v<In, gpu::BFloat16>) gpu::fast_forward(spec, p, q, k, v, forward_out);
  }
  const Timing timing = time_runs(reps, run);
  if (!dump.empty()) {
    dump_array(dump + "/q.f32", q, rows * p.key_dim);
    dump_array(dump + "/k.f32", k, rows * p.key_dim);
    dump_array(dump + "/v.f32", v, rows * p.value_dim);
    dump_array(dump + "/num.f32", num, rows * p.value_dim);
    if (backward) {  // the gradients, so that two builds' backward compare byte for byte too
      dump_array(dump + "/dq.f32", dq, rows * p.key_dim);
      dump_array(dump + "/dk.f32", dk, rows * p.key_dim);
      dump_array(dump + "/dv.f32", dv, rows * p.value_dim);
    }
  }
  for (void* ptr :
       {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(num),
        static_cast<void*>(den), static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv),
        static_cast<void*>(d_out), static_cast<void*>(d_den), checkpoints}) {
    cudaFree(ptr);
  }
  *spread = timing.spread;
  return timing.median;
}

// Every slot of the gather gets this rank's own send: one rank's work on this GPU, as if alone.
class LoopbackExchange final : public gpu::RankExchange {
 public:
  LoopbackExchange(int rank, int ranks) : rank_(rank), ranks_(ranks) {}
  int rank() const override { return rank_; }
  int ranks() const override { return ranks_; }
  void all_gather(const void* send, void* receive, std::size_t bytes, CUstream_st* stream) override {
    for (int r = 0; r < ranks_; ++r)
      check(cudaMemcpyAsync(static_cast<char*>(receive) + r * bytes, send, bytes, cudaMemcpyDeviceToDevice,
                            stream),
            "cudaMemcpyAsync (loopback)");
  }

 private:
  int rank_, ranks_;
};

// One rank's step on the fast path (bf16 inputs) with the sequence split as `slices`, and its
// all-gathers alone: {step ms, exchange ms}. `train`: the forward with checkpoints (normalized: num and
// den in float32, whatever bf16_out) and the backward from Gaussian dO (bf16) and d_den, two all-gathers.
std::pair<double, double> time_rank(const OperatorSpec& spec, const gpu::Problem& slice,
                                    const fast::Slices& slices, bool bf16_out, bool train, int reps,
                                    gpu::RankExchange& exchange) {
  const std::int64_t rows = slice.batch * slice.heads * slice.length;
  std::vector<void*> owned;
  const auto allocate = [&owned](std::int64_t bytes) {  // at least 16 bytes: an empty slice too
    void* p = nullptr;
    check(cudaMalloc(&p, std::max<std::int64_t>(bytes, 16)), "cudaMalloc");
    owned.push_back(p);
    return p;
  };
  const auto bf16_array = [&](std::int64_t count) {
    return static_cast<gpu::BFloat16*>(allocate(count * 2));
  };
  const auto float_array = [&](std::int64_t count) { return static_cast<float*>(allocate(count * 4)); };
  gpu::BFloat16 *q = bf16_array(rows * slice.key_dim), *k = bf16_array(rows * slice.key_dim),
                *v = bf16_array(rows * slice.value_dim);
  const float scale = 1.0f / std::sqrt(static_cast<float>(slice.key_dim));
  const int seed = 10 * exchange.rank();
  gpu::fill_gaussian(q, rows * slice.key_dim, 1 + seed, scale);
  gpu::fill_gaussian(k, rows * slice.key_dim, 2 + seed, scale);
  gpu::fill_gaussian(v, rows * slice.value_dim, 3 + seed, 1.0f);
  const bool narrow = bf16_out && !(train && spec.normalize);
  gpu::FastOutput forward_out{allocate(rows * slice.value_dim * (narrow ? 2 : 4)), narrow};
  gpu::BFloat16* d_num = nullptr;
  float *d_den = nullptr, *dq = nullptr, *dk = nullptr, *dv = nullptr;
  if (train) {
    if (spec.normalize) {
      forward_out.den = float_array(rows);
      d_den = float_array(rows);
      gpu::fill_gaussian(d_den, rows, 5 + seed, 1.0f);
    }
    forward_out.checkpoints = allocate(gpu::fast_checkpoint_bytes(spec, slice));
    d_num = bf16_array(rows * slice.value_dim);
    gpu::fill_gaussian(d_num, rows * slice.value_dim, 4 + seed, 1.0f);
    dq = float_array(rows * slice.key_dim);
    dk = float_array(rows * slice.key_dim);
    dv = float_array(rows * slice.value_dim);
  }
  const double step = time_runs(reps, [&] {
                        gpu::rank_fast_forward(spec, slice, slices, q, k, v, forward_out, exchange);
                        if (train)
                          gpu::rank_fast_backward(spec, slice, slices, q, k, v, d_num, d_den,
                                                  forward_out.checkpoints, dq, dk, dv, exchange);
                      }).median;
  const std::int64_t bytes = gpu::fast_rank_exchange_bytes(spec, slice);
  void* send = allocate(bytes);
  void* receive = allocate(bytes * exchange.ranks());
  const double gather = time_runs(reps, [&] {
                          for (int i = 0; i < (train ? 2 : 1); ++i)
                            exchange.all_gather(send, receive, bytes, nullptr);
                        }).median;
  for (void* p : owned) cudaFree(p);
  return {step, gather};
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const Options o = parse(argc, argv);
    if (const auto reason = gpu::unavailable_reason()) throw Error(*reason);
    // Keep stream-ordered allocations (the fast path's scratch when it splits sequences) in the
    // pool between runs, as a caching allocator such as PyTorch's would, rather than returning
    // them to the driver at every synchronization.
    int device = 0;
    cudaMemPool_t pool;
    check(cudaGetDevice(&device), "cudaGetDevice");
    check(cudaDeviceGetDefaultMemPool(&pool, device), "cudaDeviceGetDefaultMemPool");
    std::uint64_t keep = std::numeric_limits<std::uint64_t>::max();
    check(cudaMemPoolSetAttribute(pool, cudaMemPoolAttrReleaseThreshold, &keep), "cudaMemPoolSetAttribute");
    // Under scripts/ranks.sh: this process is one rank of HLA_RANKS, exchanging through NCCL.
    const char* ranks_text = std::getenv("HLA_RANKS");
    const int process_ranks = ranks_text ? std::stoi(ranks_text) : 1;
    std::unique_ptr<gpu::NcclRanks> nccl;
    if (process_ranks > 1) {
      const char* rank_text = std::getenv("HLA_RANK");
      const char* id = std::getenv("HLA_RANK_ID");
      if (!rank_text || !id)
        throw Error("HLA_RANKS without HLA_RANK and HLA_RANK_ID: start it with scripts/ranks.sh");
      nccl = std::make_unique<gpu::NcclRanks>(std::stoi(rank_text), process_ranks, id);
    }
    const int ranks = nccl ? process_ranks : o.ranks;
    if (ranks > 1 && (o.pass == "backward" || o.methods != std::vector<std::string>{"fast"} ||
                      o.precisions != std::vector<std::string>{"bf16"}))
      throw Error(
          "--ranks: the fast path's forward or training step (--methods fast --precisions bf16 --pass "
          "forward or train)");
    std::cout << "variant,precision,method,batch,heads,n,d,dv,chunk,median_ms,spread_ms,pass,options,out,"
                 "ranks,rank,slice,exchange_bytes,exchange_ms\n";
    for (const auto& variant_text : o.variants) {
      for (const auto& options : o.options) {
        OperatorSpec spec;
        const auto variant = parse_variant(variant_text);
        if (!variant) throw Error("--variants: unknown variant " + variant_text);
        spec.variant = *variant;
        if (options != "plain" && options != "normalized" && options != "decayed" &&
            options != "normalized-decayed" && options != "ridge")
          throw Error("--options: plain, normalized, decayed, normalized-decayed or ridge, got " + options);
        if (options == "ridge" && spec.variant != Variant::hla2) continue;  // hla2's option
        spec.normalize = options.starts_with("normalized");
        spec.eps = spec.normalize ? Rational(1, 4) : Rational(0);
        spec.decay = options.ends_with("decayed") ? Rational(999, 1000) : Rational(1);
        spec.ridge = options == "ridge" ? Rational(1, 2) : Rational(0);
        for (const auto& precision : o.precisions) {
          for (const auto& method_text : o.methods) {
            // The GPU implementations without their "gpu-" prefix: scan, streaming, fast.
            const auto impl = fast::parse_implementation("gpu-" + method_text);
            if (!impl || !fast::on_gpu(*impl)) throw Error("--methods: unknown method " + method_text);
            if (impl == fast::Implementation::gpu_fast && precision != "bf16") continue;  // bf16 inputs only
            for (const std::int64_t n : o.lengths) {
              if (ranks > 1) {
                const std::int64_t total = o.weak ? n * ranks : n;
                const fast::Slices slices = fast::even_slices(total, ranks);
                const auto time_as = [&](gpu::RankExchange& exchange) {
                  const int rank = exchange.rank();
                  const gpu::Problem slice{o.batch, o.heads, slices.length(rank), o.d, o.dv};
                  const bool train = o.pass == "train";
                  const auto [step_ms, exchange_ms] =
                      time_rank(spec, slice, slices, o.bf16_out, train, o.reps, exchange);
                  const bool narrow = o.bf16_out && !(train && spec.normalize);
                  std::cout << variant_text << ",bf16,fast," << o.batch << "," << o.heads << "," << total
                            << "," << o.d << "," << o.dv << ",64," << step_ms << ",0," << o.pass << ","
                            << options << "," << (narrow ? "bf16" : "f32") << "," << ranks << "," << rank
                            << "," << slices.length(rank) << "," << gpu::fast_rank_exchange_bytes(spec, slice)
                            << "," << exchange_ms << std::endl;
                };
                if (nccl) {
                  time_as(*nccl);
                } else {
                  for (int r = 0; r < ranks; ++r) {
                    LoopbackExchange alone(r, ranks);
                    time_as(alone);
                  }
                }
                continue;
              }
              const gpu::Problem p{o.batch, o.heads, n, o.d, o.dv};
              double spread = 0;
              const double ms = precision == "bf16"
                                    ? time_pass<gpu::BFloat16>(spec, *impl, p, o.chunk, o.reps, o.pass,
                                                               o.bf16_out, &spread, o.dump)
                                    : time_pass<float>(spec, *impl, p, o.chunk, o.reps, o.pass, o.bf16_out,
                                                       &spread, o.dump);
              const bool narrow = o.bf16_out && *impl == fast::Implementation::gpu_fast &&
                                  !(o.pass != "forward" && spec.normalize);
              std::cout << variant_text << "," << precision << "," << method_text << "," << o.batch << ","
                        << o.heads << "," << n << "," << o.d << "," << o.dv << "," << o.chunk << "," << ms
                        << "," << spread << "," << o.pass << "," << options << ","
                        << (narrow ? "bf16" : "f32") << ",1,0," << n << ",0,0" << std::endl;
            }
          }
        }
      }
    }
    return 0;
  } catch (const std::exception& e) {
    std::cerr << "hla_bench_gpu: " << e.what() << "\n";
    return 1;
  }
}
