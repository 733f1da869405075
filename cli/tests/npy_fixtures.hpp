#pragma once

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace hla::cli::fixtures {

// A .npy file (version 1.0) with this header dict, padded as numpy pads it, and raw data bytes.
inline std::string npy_with_header(std::string dict, const std::string& data) {
  dict.append((64 - (10 + dict.size() + 1) % 64) % 64, ' ');
  dict += '\n';
  std::string out = "\x93NUMPY";
  out += '\x01';
  out += '\x00';
  out += static_cast<char>(dict.size() & 0xff);
  out += static_cast<char>(dict.size() >> 8);
  return out + dict + data;
}

// A .npy file with numpy's header dict for these values.
inline std::string npy_bytes(const std::string& descr, const std::string& shape, const std::string& data,
                             bool fortran_order = false) {
  return npy_with_header("{'descr': '" + descr + "', 'fortran_order': " + (fortran_order ? "True" : "False") +
                             ", 'shape': " + shape + ", }",
                         data);
}

template <class Word>
std::string raw(const std::vector<Word>& words) {
  std::string out(words.size() * sizeof(Word), '\0');
  std::memcpy(out.data(), words.data(), out.size());
  return out;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary) << bytes;
}

}  // namespace hla::cli::fixtures
