#pragma once

// The drivers, forward and backward (fast/backward.hpp), on the instrumented scalars, instantiated
// once in checking/src/forward_*.cpp and backward_*.cpp: the gauge of their rounding-error bound
// (Gauge<double>) and the rounding depths K in float and double (Depth<24>, Depth<53>). Include
// this, not the drivers' headers alone, where they run on these scalars.

#include "hla/checking/depth.hpp"
#include "hla/checking/gauge.hpp"
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_FORWARD(extern, Gauge<double>)
HLA_FAST_BACKWARD(extern, Gauge<double>)
HLA_FAST_FORWARD(extern, checking::Depth<24>)
HLA_FAST_BACKWARD(extern, checking::Depth<24>)
HLA_FAST_FORWARD(extern, checking::Depth<53>)
HLA_FAST_BACKWARD(extern, checking::Depth<53>)
}  // namespace hla::fast
