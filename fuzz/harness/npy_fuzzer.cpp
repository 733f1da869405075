// libFuzzer harness: the .npy reader on arbitrary bytes, arrays of every rank and the 2-D matrix
// view. A malformed file must be rejected with hla::Error, never crash, hang or trip a sanitizer.

#include <string>

#include "hla/io/npy.hpp"
#include "hla/reference/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string bytes(reinterpret_cast<const char*>(data), size);
  try {
    const hla::io::NpyArray a = hla::io::parse_npy_array(bytes, "fuzz.npy");
    std::size_t count = 1;
    for (const std::int64_t extent : a.shape) count *= static_cast<std::size_t>(extent);
    if (a.values.size() != count) __builtin_trap();
  } catch (const hla::Error&) {
  }
  try {
    const hla::io::NpyMatrix m = hla::io::parse_npy_matrix(bytes, "fuzz.npy");
    if (m.values.size() != static_cast<std::size_t>(m.rows * m.cols)) __builtin_trap();
  } catch (const hla::Error&) {
  }
  return 0;
}
