#pragma once

// The names that cli/src/eval.cpp and main.cpp still use for the .npy reader and writer (io/).
#include "hla/io/npy.hpp"

namespace hla::cli {
using io::NpyMatrix;
using io::read_npy_matrix;
using io::write_atomically;
using io::write_npy;
}  // namespace hla::cli
