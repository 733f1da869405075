// The forward drivers in Gauge<double>, the gauge of their rounding-error bound (hla/checking/instances.hpp).
#include "hla/checking/instances.hpp"

namespace hla::fast {
HLA_FAST_FORWARD(, Gauge<double>)
}  // namespace hla::fast
