// The sequence-parallel drivers in float (fast/ranks.hpp: one unit per scalar).
#include "hla/fast/ranks.hpp"

namespace hla::fast {
HLA_FAST_RANKS(, float)
}  // namespace hla::fast
