#pragma once

// The GPU tests include the gauge by this name (testing::Gauge, see checking/gauge.hpp).
#include "hla/checking/gauge.hpp"
