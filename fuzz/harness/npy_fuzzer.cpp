// libFuzzer harness: the .npy reader on arbitrary bytes. A malformed file must be rejected with
// hla::Error, never crash, hang or trip a sanitizer.

#include <string>

#include "hla/io/npy.hpp"
#include "hla/reference/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  try {
    const hla::io::NpyMatrix m =
        hla::io::parse_npy_matrix(std::string(reinterpret_cast<const char*>(data), size), "fuzz.npy");
    if (m.values.size() != static_cast<std::size_t>(m.rows * m.cols)) __builtin_trap();
  } catch (const hla::Error&) {
  }
  return 0;
}
