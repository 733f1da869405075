// The backward in double (fast/backward.hpp: one unit per scalar).
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, double)
}  // namespace hla::fast
