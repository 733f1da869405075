// The backward on the instrumented scalars (hla/checking/backward.hpp).
#include "hla/checking/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, Gauge<double>)
HLA_FAST_BACKWARD(, checking::Depth<24>)
HLA_FAST_BACKWARD(, checking::Depth<53>)
}  // namespace hla::fast
