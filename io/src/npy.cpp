#include "hla/io/npy.hpp"

#include <unistd.h>

#include <bit>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "hla/io/files.hpp"
#include "hla/reference/error.hpp"
#include "hla/reference/memory.hpp"

namespace hla::io {
namespace {

constexpr char magic[] = "\x93NUMPY";
constexpr std::size_t magic_size = 6;
constexpr std::size_t max_header_bytes = 1 << 16;  // numpy (1.24 on) refuses over 10000 by default

std::uint64_t read_little_endian(const std::string& bytes, std::size_t offset, std::size_t width) {
  std::uint64_t x = 0;
  for (std::size_t i = 0; i < width; ++i)
    x |= std::uint64_t(static_cast<unsigned char>(bytes[offset + i])) << (8 * i);
  return x;
}

// The header: a Python dict literal, read as numpy reads it (ast.literal_eval, then exactly the
// keys 'descr', 'fortran_order' and 'shape'; a repeated key keeps its last value), e.g.
// {'descr': '<f8', 'fortran_order': False, 'shape': (3, 4), }
struct Header {
  std::string descr;
  bool fortran_order = false;
  std::vector<std::int64_t> shape;
};

class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& name) : text_(text), name_(name) {}

  Header parse() {
    Header h;
    bool seen[3] = {false, false, false};
    expect('{');
    while (!take('}')) {
      const std::string key = string_literal();
      expect(':');
      if (key == "descr") {
        h.descr = string_literal();
        seen[0] = true;
      } else if (key == "fortran_order") {
        h.fortran_order = boolean();
        seen[1] = true;
      } else if (key == "shape") {
        h.shape = tuple();
        seen[2] = true;
      } else {
        throw fail("unexpected key '" + key + "'");
      }
      if (!take(',')) {
        expect('}');
        break;
      }
    }
    skip_space();
    if (pos_ != text_.size()) throw fail("text after the dict");
    for (int i = 0; i < 3; ++i) {
      if (!seen[i])
        throw fail(std::string("no '") + (i == 0 ? "descr" : i == 1 ? "fortran_order" : "shape") + "' entry");
    }
    return h;
  }

 private:
  std::string_view text_;
  const std::string& name_;
  std::size_t pos_ = 0;

  hla::Error fail(const std::string& what) const {
    return hla::Error(name_ + ": not a valid .npy header (" + what + ")");
  }
  void skip_space() {
    while (pos_ < text_.size() && std::strchr(" \t\n\r", text_[pos_]) != nullptr && text_[pos_] != '\0')
      ++pos_;
  }
  bool take(char c) {
    skip_space();
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!take(c)) throw fail(std::string("expected '") + c + "'");
  }
  std::string string_literal() {
    skip_space();
    const char quote = pos_ < text_.size() ? text_[pos_] : '\0';
    if (quote != '\'' && quote != '"') throw fail("expected a string");
    std::string out;
    for (++pos_; pos_ < text_.size() && text_[pos_] != quote; ++pos_) {
      if (text_[pos_] == '\\' && pos_ + 1 < text_.size()) ++pos_;
      out += text_[pos_];
    }
    if (pos_ >= text_.size()) throw fail("unterminated string");
    ++pos_;
    return out;
  }
  bool boolean() {
    skip_space();
    for (const auto& [word, value] : {std::pair{std::string_view("True"), true}, {"False", false}}) {
      if (text_.substr(pos_, word.size()) == word) {
        pos_ += word.size();
        return value;
      }
    }
    throw fail("'fortran_order' is not True or False");
  }
  std::vector<std::int64_t> tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    while (!take(')')) {
      skip_space();
      std::int64_t dim = 0;
      const std::size_t start = pos_;
      while (pos_ < text_.size() && text_[pos_] >= '0' && text_[pos_] <= '9') {
        if (dim > (std::numeric_limits<std::int64_t>::max() - 9) / 10) throw fail("dimension too large");
        dim = 10 * dim + (text_[pos_++] - '0');
      }
      if (pos_ == start) throw fail("malformed 'shape'");
      dims.push_back(dim);
      if (!take(',')) {
        expect(')');
        break;
      }
    }
    return dims;
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
  write_output(path, bytes);
}

// Reads a .npy stream through read(count), which returns at most count bytes (fewer only at the
// end): the header first, checked before anything else is read, then exactly the bytes the
// shape says, in pieces, so that a short file is never allocated for in full.
template <class Read>
NpyMatrix parse(Read&& read, const std::string& name) {
  const std::string preamble = read(magic_size + 2);
  if (preamble.size() < magic_size + 2 || preamble.compare(0, magic_size, magic, magic_size) != 0) {
    throw hla::Error(name + ": not a .npy file (bad magic string)");
  }
  const int major = static_cast<unsigned char>(preamble[magic_size]);
  if (major < 1 || major > 3)
    throw hla::Error(name + ": unsupported .npy format version " + std::to_string(major));
  const std::size_t length_width = major == 1 ? 2 : 4;
  const std::string length = read(length_width);
  if (length.size() < length_width) throw hla::Error(name + ": truncated .npy header");
  const std::size_t header_length = read_little_endian(length, 0, length_width);
  if (header_length > max_header_bytes) {
    throw hla::Error(name + ": a .npy header of " + std::to_string(header_length) +
                     " bytes; numpy writes a few hundred at most");
  }
  const std::string text = read(header_length);
  if (text.size() < header_length) throw hla::Error(name + ": truncated .npy header");
  const Header header = HeaderParser(text, name).parse();

  NpyMatrix m;
  std::size_t width = 0;
  const std::string& descr = header.descr;
  if (descr == "<f8" || descr == ">f8" || descr == "=f8") {
    m.dtype = "float64";
    width = 8;
  } else if (descr == "<f4" || descr == ">f4" || descr == "=f4") {
    m.dtype = "float32";
    width = 4;
  } else {
    throw hla::Error(name + ": unsupported dtype '" + descr + "' (expected float64 or float32)");
  }
  const bool big_endian = descr[0] == '>';
  if (header.shape.size() != 2) {
    throw hla::Error(name + ": expected a 2-D array [n, d], got rank " + std::to_string(header.shape.size()));
  }
  m.rows = header.shape[0];
  m.cols = header.shape[1];
  const auto too_large = [&] {
    return hla::Error(name + ": shape (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) +
                      ") is too large");
  };
  const std::uint64_t limit = std::numeric_limits<std::int64_t>::max() / 8;
  if (m.cols != 0 && static_cast<std::uint64_t>(m.rows) > limit / static_cast<std::uint64_t>(m.cols))
    throw too_large();
  const std::size_t count = static_cast<std::size_t>(m.rows) * static_cast<std::size_t>(m.cols);
  const std::string data = read(count * width);
  if (data.size() < count * width) {
    throw hla::Error(name + ": file holds fewer values than its shape (" + std::to_string(m.rows) + ", " +
                     std::to_string(m.cols) + ") needs");
  }
  if (!read(1).empty()) {
    throw hla::Error(name + ": data size does not match shape (" + std::to_string(m.rows) + ", " +
                     std::to_string(m.cols) + "): more bytes than it needs");
  }
  require_memory(static_cast<double>(count) * static_cast<double>(width + sizeof(double)),
                 name + ": shape (" + std::to_string(m.rows) + ", " + std::to_string(m.cols) + ")");
  m.values.resize(count);
  if (count == 0) return m;  // (n, 0) or (0, d): no values, however large the other dimension
  for (std::int64_t r = 0; r < m.rows; ++r) {
    for (std::int64_t c = 0; c < m.cols; ++c) {
      const std::size_t index = header.fortran_order ? c * m.rows + r : r * m.cols + c;
      m.values[r * m.cols + c] = width == 8 ? decode<double, std::uint64_t>(data, index * width, big_endian)
                                            : decode<float, std::uint32_t>(data, index * width, big_endian);
    }
  }
  return m;
}

}  // namespace

NpyMatrix parse_npy_matrix(const std::string& bytes, const std::string& name) {
  std::size_t at = 0;
  return parse(
      [&](std::size_t count) {
        const std::string piece = bytes.substr(std::min(at, bytes.size()), count);
        at += piece.size();
        return piece;
      },
      name);
}

NpyMatrix read_npy_matrix(const std::string& path) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw hla::Error(path + ": no such file");
  if (std::filesystem::is_directory(path, error))
    throw hla::Error(path + ": is a directory, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw hla::Error(path + ": cannot open for reading");
  return parse(
      [&](std::size_t count) {
        std::string out;
        constexpr std::size_t piece = std::size_t{1} << 20;
        while (out.size() < count && in) {
          const std::size_t start = out.size();
          out.resize(start + std::min(piece, count - start));
          in.read(out.data() + start, static_cast<std::streamsize>(out.size() - start));
          out.resize(start + static_cast<std::size_t>(in.gcount()));
        }
        if (in.bad()) throw hla::Error(path + ": read error");
        return out;
      },
      path);
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
