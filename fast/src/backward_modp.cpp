// The backward in ModP (fast/backward.hpp: one unit per scalar).
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, ModP)
}  // namespace hla::fast
