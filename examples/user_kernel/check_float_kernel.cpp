// The kernel of my_hla2.hpp in float32 on bf16 inputs, as it would run in production, checked
// by hla check's C++ API (hla/reports/check.hpp, in hla::testing): PASS, with the figures behind
// it; its broken twin (a wrong mask) FAIL, with the diagnosis naming the mistake.
//
// usage: check_float_kernel [n] [d] [seed]   (default 1024 16 1); exit 0 when the kernel passes and
// its broken twin fails diagnosed as `unmasked`.

#include <hla/reference/random.hpp>
#include <hla/reports/check.hpp>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "my_hla2.hpp"

int main(int argc, char* argv[]) {
  using hla::reports::Format;
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024, d = argc > 2 ? std::atoi(argv[2]) : 16, dv = d;
  const unsigned long seed = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1;
  if (n < 1 || d < 1) {
    std::cerr << "usage: check_float_kernel [n >= 1] [d >= 1] [seed]\n";
    return 2;
  }
  hla::reports::CheckOptions options;  // masked hla2, no decay, unnormalized
  options.spec.variant = hla::Variant::hla2;
  options.precision = Format::bf16;      // the kernel reads bf16 values ...
  options.output_format = Format::f32;   // ... and returns float32
  hla::Rng rng(seed);
  const auto draw = [&](int cols) {  // Gaussian inputs scaled by 1/sqrt(d), rounded to bf16
    hla::Matrix<double> m(n, cols);
    for (hla::Index i = 0; i < m.size(); ++i)
      m.data()[i] = hla::reports::round_to(Format::bf16, rng.gaussian() / std::sqrt(double(d)));
    return m;
  };
  const hla::Sequence<double> tokens{draw(d), draw(d), draw(dv)};
  const auto as_float = [](const hla::Matrix<double>& m) { return std::vector<float>(m.data(), m.data() + m.size()); };

  bool ok = true;
  for (const bool broken : {false, true}) {
    const std::vector<float> o = my_hla2(as_float(tokens.q), as_float(tokens.k), as_float(tokens.v), n, d, dv, broken);
    hla::reports::HeadInput head{0, 0, tokens, hla::Matrix<double>(n, dv)};
    for (int i = 0; i < n * dv; ++i) head.output.data()[i] = o[i];
    const hla::reports::CheckResult result = hla::reports::check(options, std::vector{head});
    std::cout << (broken ? "== broken kernel\n" : "== kernel\n") << hla::reports::check_summary(result, options);
    const bool named = std::find(result.matches.begin(), result.matches.end(), "unmasked") != result.matches.end();
    ok = ok && (broken ? !result.passed && named : result.passed);
  }
  return ok ? 0 : 1;
}
