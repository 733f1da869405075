// The backward in float (fast/backward.hpp: one unit per scalar).
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, float)
}  // namespace hla::fast
