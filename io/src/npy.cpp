#include "hla/io/npy.hpp"

#include <unistd.h>

#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
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

// IEEE binary16 to double, exactly (subnormals, infinities and NaN included).
double decode_half(const std::string& bytes, std::size_t offset, bool big_endian) {
  const auto byte = [&](std::size_t i) {
    return static_cast<unsigned>(static_cast<unsigned char>(bytes[offset + i]));
  };
  const unsigned bits = big_endian ? (byte(0) << 8) | byte(1) : (byte(1) << 8) | byte(0);
  const int exponent = static_cast<int>((bits >> 10) & 0x1f);
  const unsigned fraction = bits & 0x3ff;
  double magnitude;
  if (exponent == 0x1f) {
    magnitude =
        fraction == 0 ? std::numeric_limits<double>::infinity() : std::numeric_limits<double>::quiet_NaN();
  } else if (exponent == 0) {
    magnitude = std::ldexp(static_cast<double>(fraction), -24);
  } else {
    magnitude = std::ldexp(static_cast<double>(fraction | 0x400), exponent - 25);
  }
  return (bits & 0x8000) ? -magnitude : magnitude;
}

std::string dims_text(const std::vector<std::int64_t>& shape) {
  std::string out;
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  return shape.size() == 1 ? out + "," : out;
}

std::string header_bytes(const std::string& descr, const std::vector<std::int64_t>& shape) {
  std::string dict =
      "{'descr': '" + descr + "', 'fortran_order': False, 'shape': (" + dims_text(shape) + "), }";
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
void write_words(const std::string& path, const std::string& descr, const std::vector<std::int64_t>& shape,
                 const std::vector<Word>& values) {
  std::string bytes = header_bytes(descr, shape);
  for (const Word w : values) {
    const auto bits = std::bit_cast<std::uint64_t>(w);
    for (int i = 0; i < 8; ++i) bytes += static_cast<char>((bits >> (8 * i)) & 0xff);
  }
  write_output(path, bytes);
}

// Where parse reads a .npy stream from: read(to, count) stores at most count bytes at `to` and
// returns how many (fewer only at the end); left() bounds the bytes still to come.
struct Source {
  std::function<std::size_t(char* to, std::size_t count)> read;
  std::function<std::uint64_t()> left;
};

// The header first, checked before anything else is read; then, if the source holds them,
// exactly the bytes the shape says (a short file is never allocated for), straight into the
// array where the file stores its type as the array does. Ranks 1 to 4.
NpyArray parse(const Source& source, const std::string& name, NpyStorage storage) {
  const auto read = [&source](std::size_t count) {
    std::string out(count, '\0');
    out.resize(source.read(out.data(), count));
    return out;
  };
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

  NpyArray m;
  std::size_t width = 0;
  const std::string& descr = header.descr;
  const auto is = [&descr](const char* type) {
    return descr.size() == 3 && (descr[0] == '<' || descr[0] == '>' || descr[0] == '=') &&
           descr.substr(1) == type;
  };
  if (is("f8")) {
    m.dtype = "float64";
    width = 8;
  } else if (is("f4")) {
    m.dtype = "float32";
    width = 4;
  } else if (is("f2")) {
    m.dtype = "float16";
    width = 2;
  } else {
    throw hla::Error(name + ": unsupported dtype '" + descr + "' (expected float64, float32 or float16)");
  }
  const bool big_endian = descr[0] == '>';
  if (header.shape.empty() || header.shape.size() > 4) {
    throw hla::Error(name + ": expected an array of rank 1 to 4, got rank " +
                     std::to_string(header.shape.size()));
  }
  m.shape = header.shape;
  const std::string shape = shape_text(m.shape);
  const std::uint64_t limit = std::numeric_limits<std::int64_t>::max() / 8;
  std::uint64_t count = 1;
  bool empty = false;
  for (const std::int64_t extent : m.shape) empty = empty || extent == 0;
  for (const std::int64_t extent : m.shape) {
    if (empty) break;
    if (static_cast<std::uint64_t>(extent) > limit / count)
      throw hla::Error(name + ": shape " + shape + " is too large");
    count *= static_cast<std::uint64_t>(extent);
  }
  if (empty) count = 0;
  const std::uint64_t bytes = count * width;
  const auto fewer = [&] { return hla::Error(name + ": file holds fewer values than its shape " + shape + " needs"); };
  const auto no_more = [&] {
    char extra;
    if (source.read(&extra, 1) != 0)
      throw hla::Error(name + ": data size does not match shape " + shape + ": more bytes than it needs");
  };
  if (source.left() < bytes) throw fewer();
  const bool narrow = storage == NpyStorage::compact && width < 8;  // float holds float32 and float16
  // The common case, a little-endian C-order file of the stored type: the bytes as they are.
  const bool as_stored = std::endian::native == std::endian::little && !header.fortran_order && !big_endian &&
                         (width == 8 || (width == 4 && narrow));
  require_memory(static_cast<double>(count) *
                     static_cast<double>((as_stored ? 0 : width) + (narrow ? sizeof(float) : sizeof(double))),
                 name + ": shape " + shape);
  (narrow ? m.narrow.resize(count) : m.values.resize(count));
  if (as_stored) {
    char* to = narrow ? reinterpret_cast<char*>(m.narrow.data()) : reinterpret_cast<char*>(m.values.data());
    if (source.read(to, bytes) < bytes) throw fewer();
    no_more();
    return m;
  }
  const std::string data = read(bytes);
  if (data.size() < bytes) throw fewer();
  no_more();
  if (count == 0) return m;  // an extent 0: no values, however large the others
  // C-order position i, its index in the file (Fortran order reverses the strides).
  const std::size_t rank = m.shape.size();
  std::vector<std::size_t> index(rank, 0), fortran_stride(rank, 1);
  for (std::size_t a = 1; a < rank; ++a)
    fortran_stride[a] = fortran_stride[a - 1] * static_cast<std::size_t>(m.shape[a - 1]);
  for (std::size_t i = 0; i < count; ++i) {
    std::size_t at = i;
    if (header.fortran_order) {
      at = 0;
      for (std::size_t a = 0; a < rank; ++a) at += index[a] * fortran_stride[a];
      for (std::size_t a = rank; a-- > 0;) {  // next C-order multi-index
        if (++index[a] < static_cast<std::size_t>(m.shape[a])) break;
        index[a] = 0;
      }
    }
    const double value = width == 8   ? decode<double, std::uint64_t>(data, at * width, big_endian)
                         : width == 4 ? decode<float, std::uint32_t>(data, at * width, big_endian)
                                      : decode_half(data, at * width, big_endian);
    if (narrow)
      m.narrow[i] = static_cast<float>(value);  // exact: a float32 or float16 value
    else
      m.values[i] = value;
  }
  return m;
}

NpyMatrix as_matrix(NpyArray a, const std::string& name) {
  if (a.shape.size() != 2) {
    throw hla::Error(name + ": expected a 2-D array [n, d], got rank " + std::to_string(a.shape.size()));
  }
  return {a.shape[0], a.shape[1], std::move(a.values), std::move(a.dtype)};
}

}  // namespace

std::string shape_text(const std::vector<std::int64_t>& shape) {
  std::string out = "(";  // appended: GCC 12 warns (-Wrestrict) on "(" + std::string
  out += dims_text(shape);
  return out += ")";
}

NpyMatrix parse_npy_matrix(const std::string& bytes, const std::string& name) {
  return as_matrix(parse_npy_array(bytes, name), name);
}

NpyArray parse_npy_array(const std::string& bytes, const std::string& name, NpyStorage storage) {
  std::size_t at = 0;
  const Source source{[&](char* to, std::size_t count) {
                        const std::size_t n = std::min(count, bytes.size() - std::min(at, bytes.size()));
                        if (n > 0) std::memcpy(to, bytes.data() + at, n);  // to may be null when n is 0
                        at += n;
                        return n;
                      },
                      [&] { return std::uint64_t(bytes.size() - std::min(at, bytes.size())); }};
  return parse(source, name, storage);
}

NpyMatrix read_npy_matrix(const std::string& path) {
  return as_matrix(read_npy_array(path), path);
}

NpyArray read_npy_array(const std::string& path, NpyStorage storage) {
  std::error_code error;
  if (!std::filesystem::exists(path, error)) throw hla::Error(path + ": no such file");
  if (std::filesystem::is_directory(path, error))
    throw hla::Error(path + ": is a directory, not a .npy file");
  std::ifstream in(path, std::ios::binary);
  if (!in) throw hla::Error(path + ": cannot open for reading");
  const std::uintmax_t size = std::filesystem::file_size(path, error);
  std::uint64_t consumed = 0;
  const Source source{[&](char* to, std::size_t count) {
                        std::size_t got = 0;
                        constexpr std::size_t piece = std::size_t{1} << 26;
                        while (got < count && in) {
                          in.read(to + got, static_cast<std::streamsize>(std::min(piece, count - got)));
                          got += static_cast<std::size_t>(in.gcount());
                        }
                        if (in.bad()) throw hla::Error(path + ": read error");
                        consumed += got;
                        return got;
                      },
                      // A size that cannot be told (a pipe) bounds nothing; the reads then tell.
                      [&] { return error ? ~std::uint64_t{0} : std::uint64_t(size) - std::min<std::uint64_t>(consumed, size); }};
  return parse(source, path, storage);
}

void write_npy(const std::string& path, std::int64_t rows, std::int64_t cols,
               const std::vector<double>& values) {
  write_words(path, "<f8", {rows, cols}, values);
}

void write_npy(const std::string& path, std::int64_t rows, std::int64_t cols,
               const std::vector<std::uint64_t>& values) {
  write_words(path, "<u8", {rows, cols}, values);
}

void write_npy(const std::string& path, const std::vector<std::int64_t>& shape,
               const std::vector<double>& values) {
  write_words(path, "<f8", shape, values);
}

}  // namespace hla::io
