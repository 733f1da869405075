// The backward in checking::Depth<53>, the rounding depths in double (hla/checking/backward.hpp).
#include "hla/checking/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, checking::Depth<53>)
}  // namespace hla::fast
