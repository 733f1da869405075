// The backward in checking::Depth<53>, the rounding depths in double (hla/checking/instances.hpp).
#include "hla/checking/instances.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, checking::Depth<53>)
}  // namespace hla::fast
