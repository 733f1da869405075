#pragma once

// The .npy reader and writer of hla eval, its tests and the .npy fuzzer.

#include <cstdint>
#include <string>
#include <vector>

namespace hla::io {

// A two-dimensional array read from a .npy file (format versions 1.0-3.0), float64, float32 or
// float16 in either byte order and either memory order, widened to double without rounding.
struct NpyMatrix {
  std::int64_t rows = 0;
  std::int64_t cols = 0;
  std::vector<double> values;  // row-major
  std::string dtype;           // "float64", "float32" or "float16"

  double operator()(std::int64_t r, std::int64_t c) const { return values[r * cols + c]; }
};

// An array of rank 1 to 4 read from a .npy file: float64, float32 or float16 in either byte order
// and either memory order, in C (row-major) order, widened to double without rounding (`values`)
// or, read with NpyStorage::compact, float32 and float16 files kept as float (`narrow`, exact;
// `values` empty): half the memory, for the field's large arrays.
struct NpyArray {
  std::vector<std::int64_t> shape;
  std::vector<double> values;
  std::vector<float> narrow;
  std::string dtype;  // "float64", "float32" or "float16"
};
enum class NpyStorage { wide, compact };

// Throws hla::Error("<path>: <problem>") for a missing or unreadable file, a file that is not
// .npy, an unsupported dtype, a rank other than 2, or a size that disagrees with the header.
NpyMatrix read_npy_matrix(const std::string& path);
// The same for arrays of rank 1 to 4 (a rank outside them is an error).
NpyArray read_npy_array(const std::string& path, NpyStorage storage = NpyStorage::wide);

// Parses .npy bytes; `name` prefixes error messages. Exposed for tests and fuzzing.
NpyMatrix parse_npy_matrix(const std::string& bytes, const std::string& name);
NpyArray parse_npy_array(const std::string& bytes, const std::string& name,
                         NpyStorage storage = NpyStorage::wide);

// "(2, 3, 4)", as numpy prints a shape.
std::string shape_text(const std::vector<std::int64_t>& shape);

// Writes [rows, cols] little-endian float64 or uint64 through write_output (files.hpp): a failed
// run never leaves a partial file at `path`.
void write_npy(const std::string& path, std::int64_t rows, std::int64_t cols,
               const std::vector<double>& values);
void write_npy(const std::string& path, std::int64_t rows, std::int64_t cols,
               const std::vector<std::uint64_t>& values);
// Any shape, float64 (C order): as numpy.save writes it.
void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
               const std::vector<double>& values);

}  // namespace hla::io
