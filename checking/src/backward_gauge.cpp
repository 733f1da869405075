// The backward in Gauge<double>, the gauge of its rounding-error bound (hla/checking/instances.hpp).
#include "hla/checking/instances.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, Gauge<double>)
}  // namespace hla::fast
