#pragma once

// The backward (fast/backward.hpp) on the instrumented scalars, instantiated once in
// checking/src/backward_*.cpp: the gauge of its rounding-error bound (Gauge<double>) and the
// rounding depths K in float and double (Depth<24>, Depth<53>). Include this, not fast/backward.hpp
// alone, where the backward runs on them.

#include "hla/checking/depth.hpp"
#include "hla/checking/gauge.hpp"
#include "hla/fast/backward.hpp"

namespace hla::fast {
HLA_FAST_BACKWARD(extern, Gauge<double>)
HLA_FAST_BACKWARD(extern, checking::Depth<24>)
HLA_FAST_BACKWARD(extern, checking::Depth<53>)
}  // namespace hla::fast
