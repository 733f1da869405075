// The backward in checking::Depth<24>, the rounding depths in float (hla/checking/instances.hpp).
#include "hla/checking/instances.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, checking::Depth<24>)
}  // namespace hla::fast
