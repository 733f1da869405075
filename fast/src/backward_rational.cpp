// The backward in Rational (fast/backward.hpp: one unit per scalar).
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, Rational)
}  // namespace hla::fast
