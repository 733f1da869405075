#include "hla/io/npy.hpp"

#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "hla/reference/error.hpp"

namespace hla::io {
namespace {

constexpr char magic[] = "\x93NUMPY";
constexpr std::size_t magic_size = 6;

std::uint64_t read_little_endian(const std::string& bytes, std::size_t offset, std::size_t width) {
  std::uint64_t x = 0;
  for (std::size_t i = 0; i < width; ++i)
    x |= std::uint64_t(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return x;
}

// The header is a Python dict literal: {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  std::string string_value(std::string_view key) {
    seek_value(key);
    const char quote = peek();
    if (quote != '\'' && quote != '"') throw fail("'" + std::string(key) + "' is not a string");
    const std::size_t end = text_.find(quote, pos_ + 1);
    if (end == std::string_view::npos) throw fail("unterminated string");
    return std::string(text_.substr(pos_ + 1, end - pos_ - 1));
  }

  bool bool_value(std::string_view key) {
    seek_value(key);
    if (text_.substr(pos_, 4) == "True") return true;
    if (text_.substr(pos_, 5) == "False") return false;
    throw fail("'" + std::string(key) + "' is not True or False");
  }

  std::vector<std::int64_t> shape_value() {
    seek_value("shape");
    if (peek() != '(') throw fail("'shape' is not a tuple");
    ++pos_;
    std::vector<std::int64_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') break;
      std::int64_t dim = 0;
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (dim > (std::numeric_limits<std::int64_t>::max() - 9) / 10) throw fail("dimension too large");
        dim = 10 * dim + (text_[pos_++] - '0');
      }
      if (pos_ == start) throw fail("malformed 'shape'");
      dims.push_back(dim);
      skip_space();
      if (peek() == ',')
        ++pos_;
      else if (peek() != ')')
        throw fail("malformed 'shape'");
    }
    return dims;
  }

 private:
  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;

  hla::Error fail(const std::string& what) const {
    return hla::Error(name_ + ": not a valid .npy header (" + what + ")");
  }
  char peek() const { return pos_ < text_.size() ? text_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t')) ++pos_;
  }
  void seek_value(std::string_view key) {
    for (const char quote : {'\'', '"'}) {
      std::string quoted;
      quoted += quote;
      quoted.append(key);
      quoted += quote;
      const std::size_t at = text_.find(quoted);
      if (at == std::string_view::npos) continue;
      pos_ = at + quoted.size();
      skip_space();
      if (peek() != ':') throw fail("no ':' after '" + std::string(key) + "'");
      ++pos_;
      skip_space();
      return;
    }
    throw fail("no '" + std::string(key) + "' entry");
  }
};

template <class Float, class Bits>
double decode(const std::string& bytes, std::size_t offset, bool big_endian) {
  Bits bits = 0;
  for (std::size_t i = 0; i < sizeof(Bits); ++i) {
    const std::size_t byte = big_endian ? sizeof(Bits) - 1 - i : i;
    bits |= Bits(static_cast<unsigned char>(bytes[offset + byte])) << (8 * i);
  }
  return static_cast<double>(std::bit_cast<Float>(bits));
}

std::string header_bytes(const std::string& descr, std::int64_t rows, std::int64_t cols) {
  std::string dict = "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + std::to_string(rows) +
                     ", " + std::to_string(cols) + "), }";
  // Version 1.0: magic, 2 version bytes, 2 length bytes; pad with spaces to a multiple of 64.
  const std::size_t unpadded = magic_size + 4 + dict.size() + 1;
  dict.append((64 - unpadded % 64) % 64, ' ');
  dict += '\n';
  std::string header(magic, magic_size);
  header += '\x01';
  header += '\x00';
  header += static_cast<char>(dict.size() & 0xff);
  header += static_cast<char>(dict.size() >> 8);
  return header + dict;
}

template <class Word>
void write_words(const std::string& path, const std::string& descr, std::int64_t rows, std::int64_t cols,
                 const std::vector<Word>& values) {
  std::string bytes = header_bytes(descr, rows, cols);
  for (const Word w : values) {
    const auto bits = std::bit_cast<std::uint64_t>(w);
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  write_atomically(path, bytes);
}

}  // namespace

void write_atomically(const std::string& path, const std::string& bytes) {
  const std::string temporary = path + ".tmp" + std::to_string(::getpid());
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    if (!out) throw hla::Error(path + ": cannot create the output file");
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    out.flush();
    if (!out) {
      std::remove(temporary.c_str());
      throw hla::Error(path + ": cannot write the output file");
    }
  }
  std::error_code error;
  std::filesystem::rename(temporary, path, error);
  if (error) {
    std::remove(temporary.c_str());
    throw hla::Error(path + ": cannot write the output file (" + error.message() + ")");
  }
}

NpyMatrix parse_npy_matrix(const std::string& bytes, const std::string& name) {
  if (bytes.size() < magic_size + 4 || bytes.compare(0, magic_size, magic, magic_size) != 0) {
    throw hla::Error(name + ": not a .npy file (bad magic string)");
  }
  const int major = static_cast<unsigned char>(bytes[magic_size]);
  const std::size_t length_width = major == 1 ? 2 : 4;
  if (major < 1 || major > 3)
    throw hla::Error(name + ": unsupported .npy format version " + std::to_string(major));
  if (bytes.size() < magic_size + 2 + length_width) throw hla::Error(name + ": truncated .npy header");
  const std::size_t header_length = read_little_endian(bytes, magic_size + 2, length_width);
  const std::size_t data_offset = magic_size + 2 + length_width + header_length;
  if (data_offset > bytes.size()) throw hla::Error(name + ": truncated .npy header");
  HeaderParser header(std::string_view(bytes).substr(magic_size + 2 + length_width, header_length), name);

  const std::string descr = header.string_value("descr");
  const bool fortran_order = header.bool_value("fortran_order");
  const std::vector<std::int64_t> shape = header.shape_value();

  NpyMatrix m;
  std::size_t width = 0;
  bool big_endian = false;
  if (descr == "<f8" || descr == ">f8" || descr == "=f8") {
    m.dtype = "float64";
    width = 8;
  } else if (descr == "<f4" || descr == ">f4" || descr == "=f4") {
    m.dtype = "float32";
    width = 4;
  } else {
    throw hla::Error(name + ": unsupported dtype '" + descr + "' (expected float64 or float32)");
  }
  big_endian = descr[0] == '>';
  if (shape.size() != 2) {
    throw hla::Error(name + ": expected a 2-D array [n, d], got rank " + std::to_string(shape.size()));
  }
  m.rows = shape[0];
  m.cols = shape[1];
  const std::size_t available = bytes.size() - data_offset;
  if (m.cols != 0 &&
      static_cast<std::size_t>(m.rows) > available / width / static_cast<std::size_t>(m.cols)) {
    throw hla::Error(name + ": file holds fewer values than its shape (" + std::to_string(m.rows) + ", " +
                     std::to_string(m.cols) + ") needs");
  }
  const std::size_t count = static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols);
  if (count * width != available) {
    throw hla::Error(name + ": data size " + std::to_string(available) + " bytes does not match shape (" +
                     std::to_string(m.rows) + ", " + std::to_string(m.cols) + ")");
  }
  m.values.resize(count);
  if (count == 0) return m;  // (n, 0) or (0, d): no values, however large the other dimension
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const std::size_t index = fortran_order ? c * m.rows + r : r * m.cols + c;
      const std::size_t offset = data_offset + index * width;
      m.values[r * m.cols + c] = width == 8 ? decode<double, std::uint64_t>(bytes, offset, big_endian)
                                            : decode<float, std::uint32_t>(bytes, offset, big_endian);
    }
  }
  return m;
}

NpyMatrix read_npy_matrix(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw hla::Error(path + ": no such file");
  if (std::filesystem::is_directory(path, error))
    throw hla::Error(path + ": is a directory, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw hla::Error(path + ": cannot open for reading");
  std::ostringstream contents;
  contents << in.rdbuf();
  if (in.bad()) throw hla::Error(path + ": read error");
  return parse_npy_matrix(contents.str(), path);
}

void write_npy(const std::string& path, std::int64_t rows, std::int64_t cols,
               const std::vector<double>& values) {
  write_words(path, "<f8", rows, cols, values);
}

void write_npy(const std::string& path, std::int64_t rows, std::int64_t cols,
               const std::vector<std::uint64_t>& values) {
  write_words(path, "<u8", rows, cols, values);
}

}  // namespace hla::io
