// The backward in Gauge<double>, the gauge of its rounding-error bound (hla/checking/backward.hpp).
#include "hla/checking/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(, Gauge<double>)
}  // namespace hla::fast
