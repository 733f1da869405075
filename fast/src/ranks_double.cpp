// The sequence-parallel drivers in double (fast/ranks.hpp: one unit per scalar).
#include "hla/fast/ranks.hpp"

namespace hla::fast {
HLA_FAST_RANKS(, double)
}  // namespace hla::fast
