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

#include <cuda_runtime_api.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <limits>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "hla/fast/gpu.hpp"
#include "hla/fast/gpu_status.hpp"

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
  std::string dump;  // write q, k, v (as float32) and num of the last run of each configuration here
  std::string pass = "forward";
  bool bf16_out = false;
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
    check(cudaMalloc(&checkpoints, gpu::fast_checkpoint_bytes(spec, p)), "cudaMalloc");
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
  run();  // warm-up
  check(cudaDeviceSynchronize(), "warm-up");
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) {
    check(cudaEventRecord(start), "cudaEventRecord");
    run();
    check(cudaEventRecord(stop), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float elapsed = 0;
    check(cudaEventElapsedTime(&elapsed, start, stop), "cudaEventElapsedTime");
    ms.push_back(elapsed);
  }
  if (!dump.empty()) {
    dump_array(dump + "/q.f32", q, rows * p.key_dim);
    dump_array(dump + "/k.f32", k, rows * p.key_dim);
    dump_array(dump + "/v.f32", v, rows * p.value_dim);
    dump_array(dump + "/num.f32", num, rows * p.value_dim);
  }
  for (void* ptr :
       {static_cast<void*>(q), static_cast<void*>(k), static_cast<void*>(v), static_cast<void*>(num),
        static_cast<void*>(den), static_cast<void*>(dq), static_cast<void*>(dk), static_cast<void*>(dv),
        static_cast<void*>(d_out), static_cast<void*>(d_den), checkpoints}) {
    cudaFree(ptr);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(ms.begin(), ms.end());
  *spread = ms.back() - ms.front();
  return ms[ms.size() / 2];
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
    std::cout << "variant,precision,method,batch,heads,n,d,dv,chunk,median_ms,spread_ms,pass,options,out\n";
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
                        << (narrow ? "bf16" : "f32") << std::endl;
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
