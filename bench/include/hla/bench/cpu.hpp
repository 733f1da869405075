#pragma once

#include <cstdint>
#include <iosfwd>

#include "hla/reference/operator_spec.hpp"

namespace hla::bench {

struct CpuBenchOptions {
  Variant variant = Variant::hla2;
  std::int64_t n = 65536;
  std::int64_t d = 64;
  std::int64_t dv = 64;
  std::int64_t chunk = 128;
  int repetitions = 5;
  std::uint64_t seed = 1;
  bool backward = false;  // time the gradients of <dO, O> (and O) instead of O
};

// Throughput of the float32 masked operator: streaming, and the chunk-parallel form on one and
// two threads, measured in one run (a warm-up, then the median of `repetitions`); the forward
// pass, or with `backward` the backward pass (each implementation's gradients with O). Prints a
// table, then one JSON line: {"variant", "pass", "n", "d", "dv", "chunk", "streaming_tokens_per_s",
// "chunked_1_thread_tokens_per_s", "chunked_2_threads_tokens_per_s", ...}.
void run_cpu_bench(const CpuBenchOptions& options, std::ostream& out);

}  // namespace hla::bench
