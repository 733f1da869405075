#pragma once

// What the two float32 checks share (check_float_kernel.cpp, check_gpu_kernel.cpp): hla check's
// options for a kernel that reads bf16 values and returns float32, and its inputs.

#include <hla/reference/random.hpp>
#include <hla/reports/check.hpp>

#include <cmath>
#include <vector>

// Masked hla2, no decay, unnormalized; bf16 inputs, float32 output.
inline hla::reports::CheckOptions float32_on_bf16_options() {
  hla::reports::CheckOptions options;
  options.spec.variant = hla::Variant::hla2;
  options.precision = hla::reports::Format::bf16;     // the kernel reads bf16 values ...
  options.output_format = hla::reports::Format::f32;  // ... and returns float32
  return options;
}

// Gaussian q, k, v scaled by 1/sqrt(d), each rounded to bf16 (float32 holds them exactly).
inline hla::Sequence<double> bf16_gaussian_tokens(int n, int d, int dv, unsigned long seed) {
  hla::Rng rng(seed);
  const auto draw = [&](int cols) {
    hla::Matrix<double> m(n, cols);
    for (hla::Index i = 0; i < m.size(); ++i)
      m.data()[i] = hla::reports::round_to(hla::reports::Format::bf16, rng.gaussian() / std::sqrt(double(d)));
    return m;
  };
  return {draw(d), draw(d), draw(dv)};
}

inline std::vector<float> as_float(const hla::Matrix<double>& m) {
  return std::vector<float>(m.data(), m.data() + m.size());
}
