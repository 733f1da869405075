// The kernel of my_hla2.hpp in float32 on bf16 inputs, as it would run in production, checked
// by hla check's C++ API (hla/reports/check.hpp, in hla::testing): PASS, with the figures behind
// it; its broken twin (a wrong mask) FAIL, with the diagnosis naming the mistake.
//
// usage: check_float_kernel [n] [d] [seed]   (default 1024 16 1); exit 0 when the kernel passes and
// its broken twin fails diagnosed as `unmasked`.

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <vector>

#include "float_check.hpp"
#include "my_hla2.hpp"

int main(int argc, char* argv[]) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 1024, d = argc > 2 ? std::atoi(argv[2]) : 16, dv = d;
  const unsigned long seed = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1;
  if (n < 1 || d < 1) {
    std::cerr << "usage: check_float_kernel [n >= 1] [d >= 1] [seed]\n";
    return 2;
  }
  const hla::reports::CheckOptions options = float32_on_bf16_options();
  const hla::Sequence<double> tokens = bf16_gaussian_tokens(n, d, dv, seed);

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
