// The sequence-parallel drivers in ModP (fast/ranks.hpp: one unit per scalar).
#include "hla/fast/ranks.hpp"

namespace hla::fast {
HLA_FAST_RANKS(, ModP)
}  // namespace hla::fast
