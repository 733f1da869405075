// The forward drivers in Mpfr (fast/backward.hpp, HLA_FAST_FORWARD: one unit per scalar).
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_FORWARD(, Mpfr)
}  // namespace hla::fast
