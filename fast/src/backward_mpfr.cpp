// The backward in Mpfr (fast/backward.hpp: one unit per scalar).
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, Mpfr)
}  // namespace hla::fast
