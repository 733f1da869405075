#include "hla/bench/cpu.hpp"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <iomanip>
#include <ostream>
#include <vector>

#include "hla/fast/backward.hpp"
#include "hla/fast/chunked.hpp"
#include "hla/fast/scan.hpp"
#include "hla/fast/streaming.hpp"
#include "hla/reference/memory.hpp"
#include "hla/reference/random.hpp"

namespace hla::bench {
namespace {

// Median wall time of `repetitions` calls after one warm-up call.
template <class F>
double median_seconds(int repetitions, F&& f) {
  f();
  std::vector<double> times;
  for (int r = 0; r < repetitions; ++r) {
    const auto start = std::chrono::steady_clock::now();
    f();
    times.push_back(std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

Sequence<float> gaussian_inputs(const CpuBenchOptions& o, std::uint64_t seed) {
  Rng rng(seed);
  const float scale = 1.0f / std::sqrt(static_cast<float>(o.d));
  const auto fill = [&](Index rows, Index cols) {
    Matrix<float> m(rows, cols);
    for (Index i = 0; i < m.size(); ++i) m(i / cols, i % cols) = static_cast<float>(rng.gaussian()) * scale;
    return m;
  };
  return {fill(o.n, o.d), fill(o.n, o.d), fill(o.n, o.dv)};
}

}  // namespace

void run_cpu_bench(const CpuBenchOptions& o, std::ostream& out) {
  if (o.n < 1 || o.d < 1 || o.dv < 1 || o.chunk < 1 || o.repetitions < 1) {
    throw Error("hla bench cpu: --n, --d, --dv, --chunk and --repetitions must be >= 1");
  }
  OperatorSpec spec;
  spec.variant = o.variant;
  const fast::Form stream_form = fast::default_form(spec, fast::Implementation::streaming);
  const fast::Form chunk_form = fast::default_form(spec, fast::Implementation::chunked);
  if (fast::unavailable(spec, fast::Implementation::chunked, chunk_form))
    throw Error("--variant: " + std::string(variant_name(o.variant)) +
                " has no chunk-parallel form to benchmark");
  {  // inputs, two outputs of num and den, the chunk summaries and one chunk-sized copy of W_g K
    const double n = static_cast<double>(o.n), d = static_cast<double>(o.d), dv = static_cast<double>(o.dv);
    const double chunks = std::ceil(n / static_cast<double>(o.chunk));
    double floats = n * (2 * d + dv) + 2 * n * (dv + 1) + n * d + 2 * chunks * (d * d + 3 * d * dv + 2 * d);
    if (o.backward)  // dO, the gradients twice over, and the summaries' and carries' adjoints
      floats += n * dv + 2 * n * (2 * d + dv) + 2 * chunks * (d * d + 3 * d * dv + 2 * d);
    require_memory(1.5 * sizeof(float) * floats, "hla bench cpu: --n " + std::to_string(o.n) + " with --d " +
                                                     std::to_string(o.d) + " and --dv " +
                                                     std::to_string(o.dv));
  }
  const Sequence<float> s = gaussian_inputs(o, o.seed);
  const Matrix<float> d_out = gaussian_inputs(o, o.seed + 1).v;  // dO: another draw, of O's shape
  // Each timed call computes the pass and keeps its result; the results are compared afterwards.
  Terms<float> streamed_terms, chunked_terms;
  Gradients<float> streamed_gradients, chunked_gradients;
  const auto run = [&](int threads) {
    Terms<float>& t = threads == 0 ? streamed_terms : chunked_terms;
    Gradients<float>& g = threads == 0 ? streamed_gradients : chunked_gradients;
    const fast::ScanOptions options{o.chunk, threads};
    if (!o.backward) {
      t = threads == 0 ? fast::streaming_terms(spec, stream_form, s)
                       : fast::chunked_terms(spec, chunk_form, s, options);
    } else {
      g = threads == 0 ? fast::streaming_gradients(spec, stream_form, s, d_out)
                       : fast::chunked_gradients(spec, chunk_form, s, d_out, options);
    }
  };
  const double streaming = median_seconds(o.repetitions, [&] { run(0); });
  const double one = median_seconds(o.repetitions, [&] { run(1); });
  const double two = median_seconds(o.repetitions, [&] { run(2); });
  // The two implementations must compute the same thing: the relative difference of the outputs,
  // or of dQ, dK and dV together.
  const auto sq = [](const Matrix<float>& m) { return static_cast<double>(m.squaredNorm()); };
  const Gradients<float>&a = streamed_gradients, &b = chunked_gradients;
  const double difference =
      o.backward ? std::sqrt((sq(a.dq - b.dq) + sq(a.dk - b.dk) + sq(a.dv - b.dv)) /
                             (sq(a.dq) + sq(a.dk) + sq(a.dv)))
                 : std::sqrt(sq(streamed_terms.num - chunked_terms.num) / sq(streamed_terms.num));
  const char* pass = o.backward ? "backward" : "forward";

  const auto rate = [&](double seconds) { return static_cast<double>(o.n) / seconds; };
  out << std::fixed << std::setprecision(0);
  out << describe(spec) << " float32, " << pass << " pass, n = " << o.n << ", d = " << o.d
      << ", dv = " << o.dv << ", chunk " << o.chunk << ", median of " << o.repetitions
      << " after a warm-up\n";
  out << "  streaming            " << std::setw(12) << rate(streaming) << " tokens/s\n";
  out << "  chunked, 1 thread    " << std::setw(12) << rate(one) << " tokens/s  (" << std::setprecision(2)
      << streaming / one << "x streaming)\n"
      << std::setprecision(0);
  out << "  chunked, 2 threads   " << std::setw(12) << rate(two) << " tokens/s  (" << std::setprecision(2)
      << streaming / two << "x streaming)\n";
  out << "  relative difference of the " << (o.backward ? "gradients" : "outputs")
      << " (Frobenius): " << std::scientific << difference << "\n";
  out << std::fixed << std::setprecision(1);
  out << "{\"variant\": \"" << variant_name(o.variant) << "\", \"pass\": \"" << pass << "\", \"n\": " << o.n
      << ", \"d\": " << o.d << ", \"dv\": " << o.dv << ", \"chunk\": " << o.chunk
      << ", \"streaming_tokens_per_s\": " << rate(streaming)
      << ", \"chunked_1_thread_tokens_per_s\": " << rate(one)
      << ", \"chunked_2_threads_tokens_per_s\": " << rate(two)
      << (o.backward ? ", \"gradient_relative_difference\": " : ", \"output_relative_difference\": ")
      << std::scientific << std::setprecision(3) << difference << "}\n";
}

}  // namespace hla::bench
