// The kernel of my_hla2.hpp checked bit for bit in the prime field Z/p against the toolkit's n x n
// definition: equal, or there is a bug. The same check on its broken twin (a wrong mask) shows
// what a failure looks like.
//
// usage: check_cpu_kernel [n] [d] [seed]   (default 256 16 1); exit 0 when the kernel equals the
// definition and its broken twin does not.

#include <hla/reference/definition.hpp>
#include <hla/reference/random.hpp>

#include <cstdlib>
#include <iostream>
#include <vector>

#include "my_hla2.hpp"

// The first (token, column) where the kernel's output differs from the definition's, or -1.
long first_difference(const std::vector<hla::ModP>& mine, const hla::Matrix<hla::ModP>& exact) {
  for (long i = 0; i < static_cast<long>(mine.size()); ++i)
    if (mine[i] != exact.data()[i]) return i;
  return -1;
}

int main(int argc, char* argv[]) {
  const int n = argc > 1 ? std::atoi(argv[1]) : 256, d = argc > 2 ? std::atoi(argv[2]) : 16, dv = d;
  const unsigned long seed = argc > 3 ? std::strtoul(argv[3], nullptr, 10) : 1;
  if (n < 1 || d < 1) {
    std::cerr << "usage: check_cpu_kernel [n >= 1] [d >= 1] [seed]\n";
    return 2;
  }
  // Random integer inputs, mapped to Z/p: there every sum and product is exact.
  hla::Rng rng(seed);
  const hla::Sequence<hla::ModP> s =
      hla::convert<hla::ModP>(hla::random_sequence(rng, n, d, dv, hla::EntryKind::integer, 1000));
  const auto flat = [](const hla::Matrix<hla::ModP>& m) { return std::vector<hla::ModP>(m.data(), m.data() + m.size()); };
  hla::OperatorSpec spec;  // masked hla2, no decay, unnormalized: the definition (W W^T . L) V, W = L . Q K^T
  spec.variant = hla::Variant::hla2;
  const hla::Matrix<hla::ModP> exact = hla::reference::output(spec, s);

  bool ok = true;
  for (const bool broken : {false, true}) {
    const long at = first_difference(my_hla2(flat(s.q), flat(s.k), flat(s.v), n, d, dv, broken), exact);
    std::cout << (broken ? "broken kernel: " : "kernel: ");
    if (at < 0) {
      std::cout << "equal to the definition in Z/p at every output (n = " << n << ", d = dv = " << d
                << ", seed " << seed << ")\n";
    } else {
      std::cout << "differs from the definition in Z/p first at token " << at / dv << ", column " << at % dv
                << " (n = " << n << ", d = dv = " << d << ", seed " << seed << ")\n";
    }
    ok = ok && (at < 0) != broken;
  }
  return ok ? 0 : 1;
}
