#include "hla/io/npy.hpp"

#include <stdlib.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <stdexcept>

#include "hla/reference/error.hpp"
#include "npy_fixtures.hpp"

using namespace hla::io;
using namespace hla::cli::fixtures;

namespace {

// A directory of the test's own (mkdtemp), removed with what the test wrote in it.
class OwnDirectory {
 public:
  OwnDirectory() {
    std::string pattern = (std::filesystem::temp_directory_path() / "hla_npy_test.XXXXXX").string();
    if (::mkdtemp(pattern.data()) == nullptr) throw std::runtime_error("mkdtemp failed");
    path_ = pattern;
  }
  ~OwnDirectory() { std::filesystem::remove_all(path_); }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

}  // namespace

TEST_CASE("npy/reads float64 and float32 in every order", "[cli][npy]") {
  const NpyMatrix c = parse_npy_matrix(npy_bytes("<f8", "(2, 3)", raw<double>({1, 2, 3, 4, 5, 6})), "c.npy");
  CHECK(c.rows == 2);
  CHECK(c.cols == 3);
  CHECK(c(1, 0) == 4);
  CHECK(c.dtype == "float64");

  const NpyMatrix f =
      parse_npy_matrix(npy_bytes("<f8", "(2, 3)", raw<double>({1, 4, 2, 5, 3, 6}), true), "f.npy");
  CHECK(f.values == c.values);

  const NpyMatrix single = parse_npy_matrix(npy_bytes("<f4", "(1, 2)", raw<float>({0.1f, -2.5f})), "s.npy");
  CHECK(single.values == std::vector<double>{double(0.1f), -2.5});
  CHECK(single.dtype == "float32");

  std::string big = raw<double>({1.5});
  std::reverse(big.begin(), big.end());
  CHECK(parse_npy_matrix(npy_bytes(">f8", "(1, 1)", big), "b.npy").values == std::vector<double>{1.5});

  const NpyMatrix empty = parse_npy_matrix(npy_bytes("<f8", "(0, 4)", ""), "e.npy");
  CHECK(empty.rows == 0);
  CHECK(empty.cols == 4);
}

TEST_CASE("npy/round trip through the writer", "[cli][npy]") {
  const OwnDirectory dir;
  const std::string path = dir.file("round_trip.npy");
  write_npy(path, 2, 2, std::vector<double>{0.5, -1e300, 3, 4});
  const NpyMatrix m = read_npy_matrix(path);
  CHECK(m.values == std::vector<double>{0.5, -1e300, 3, 4});
}

TEST_CASE("npy/rejects what it cannot read with one line naming the file", "[cli][npy]") {
  const auto rejects = [](const std::string& bytes, const std::string& message) {
    INFO(message);
    CHECK_THROWS_WITH(parse_npy_matrix(bytes, "x.npy"),
                      Catch::StartsWith("x.npy: ") && Catch::Contains(message));
  };
  rejects("", "not a .npy file");
  rejects("hello world, this is text", "not a .npy file");
  rejects(npy_bytes("<i4", "(1, 1)", raw<std::int32_t>({1})), "unsupported dtype '<i4'");
  rejects(npy_bytes("<f8", "(3,)", raw<double>({1, 2, 3})), "expected a 2-D array");
  rejects(npy_bytes("<f8", "(1, 1, 1)", raw<double>({1})), "expected a 2-D array");
  rejects(npy_bytes("<f8", "(2, 2)", raw<double>({1, 2, 3})), "fewer values than its shape");
  rejects(npy_bytes("<f8", "(1, 1)", raw<double>({1, 2})), "does not match shape");
  rejects(npy_bytes("<f8", "(99999999999999, 99999999999999)", ""), "too large");
  rejects(npy_bytes("<f8", "(1000000000, 1000)", ""), "fewer values");
  rejects(npy_bytes("<f8", "[1, 1]", raw<double>({1})), "not a valid .npy header");
  rejects(npy_bytes("<f8", "(1, 1)", "").substr(0, 12), "truncated");
}

// A header dict read as numpy reads it (ast.literal_eval, then exactly three keys).
TEST_CASE("npy/the header dict is parsed as numpy parses it", "[cli][npy]") {
  const std::string one = raw<double>({1.5});
  // A key's name inside another key's string value is not the key.
  CHECK_THROWS_WITH(
      parse_npy_matrix(npy_with_header("{'descr': 'shape', 'fortran_order': False, 'shape': (1, 1)}", one),
                       "x.npy"),
      Catch::Contains("unsupported dtype 'shape'"));
  const NpyMatrix m = parse_npy_matrix(
      npy_with_header("{\"shape\": (1, 1), 'fortran_order': False, 'descr': '<f8'}", one), "x.npy");
  CHECK(m.values == std::vector<double>{1.5});
  // A repeated key keeps its last value, as a Python dict does.
  const NpyMatrix last = parse_npy_matrix(
      npy_with_header("{'descr': '<f4', 'descr': '<f8', 'fortran_order': False, 'shape': (1, 1)}", one),
      "x.npy");
  CHECK(last.dtype == "float64");
  for (const std::string dict :
       {"{'descr': '<f8', 'fortran_order': False}",                           // missing key
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1), 'x': 1}",  // extra key
        "{'descr': '<f8', 'fortran_order': False, 'shape': (1, 1)} junk",     // trailing text
        "{'descr': '<f8' 'fortran_order': False, 'shape': (1, 1)}",           // no comma
        "{'descr': '<f8, 'fortran_order': False, 'shape': (1, 1)}"}) {        // bad string
    INFO(dict);
    CHECK_THROWS_WITH(parse_npy_matrix(npy_with_header(dict, one), "x.npy"), Catch::Contains("x.npy: "));
  }
}

TEST_CASE("npy/a file is read header first and never past what the header says", "[cli][npy]") {
  CHECK_THROWS_WITH(read_npy_matrix("/dev/zero"), Catch::Contains("bad magic string"));
}

TEST_CASE("npy/an empty array with a huge other dimension is read at once", "[cli][npy]") {
  // Found by the .npy fuzzer: shape (4000001881025430, 0) used to loop over every row.
  const NpyMatrix m = parse_npy_matrix(npy_bytes("<f8", "(4000001881025430, 0)", ""), "huge.npy");
  CHECK(m.rows == 4000001881025430);
  CHECK(m.cols == 0);
  CHECK(m.values.empty());
}

TEST_CASE("npy/reads float16 exactly", "[cli][npy]") {
  // 1, -2, 65504 (largest), 2^-24 (smallest subnormal), 2^-14 (smallest normal), 0.333251953125.
  const std::vector<std::uint16_t> bits{0x3c00, 0xc000, 0x7bff, 0x0001, 0x0400, 0x3555};
  const NpyArray a = parse_npy_array(npy_bytes("<f2", "(6,)", raw<std::uint16_t>(bits)), "h.npy");
  CHECK(a.dtype == "float16");
  CHECK(a.values == std::vector<double>{1, -2, 65504, 0x1p-24, 0x1p-14, 0.333251953125});
  const NpyArray special =
      parse_npy_array(npy_bytes("<f2", "(3,)", raw<std::uint16_t>({0x7c00, 0xfc00, 0x7e00})), "s.npy");
  CHECK(special.values[0] == INFINITY);
  CHECK(special.values[1] == -INFINITY);
  CHECK(std::isnan(special.values[2]));
  std::string big = raw<std::uint16_t>({0x3c00});
  std::swap(big[0], big[1]);
  CHECK(parse_npy_array(npy_bytes(">f2", "(1,)", big), "b.npy").values == std::vector<double>{1});
}

TEST_CASE("npy/reads rank 3 and 4 in C and Fortran order", "[cli][npy]") {
  std::vector<double> c_order(24);
  for (int i = 0; i < 24; ++i) c_order[i] = i;
  const NpyArray c = parse_npy_array(npy_bytes("<f8", "(2, 3, 4)", raw<double>(c_order)), "c.npy");
  CHECK(c.shape == std::vector<std::int64_t>{2, 3, 4});
  CHECK(c.values == c_order);
  // The same array in Fortran order: element (a, b, e) at a + 2 b + 6 e.
  std::vector<double> f_order(24);
  for (int a = 0; a < 2; ++a)
    for (int b = 0; b < 3; ++b)
      for (int e = 0; e < 4; ++e) f_order[a + 2 * b + 6 * e] = a * 12 + b * 4 + e;
  CHECK(parse_npy_array(npy_bytes("<f8", "(2, 3, 4)", raw<double>(f_order), true), "f.npy").values ==
        c_order);
  const NpyArray four =
      parse_npy_array(npy_bytes("<f4", "(1, 2, 1, 3)", raw<float>({1, 2, 3, 4, 5, 6})), "4.npy");
  CHECK(four.shape == std::vector<std::int64_t>{1, 2, 1, 3});
  CHECK(four.values == std::vector<double>{1, 2, 3, 4, 5, 6});
  CHECK_THROWS_WITH(parse_npy_array(npy_bytes("<f8", "(1, 1, 1, 1, 1)", raw<double>({1})), "x.npy"),
                    Catch::StartsWith("x.npy: ") && Catch::Contains("rank 1 to 4, got rank 5"));
  CHECK_THROWS_WITH(parse_npy_array(npy_bytes("<f8", "()", raw<double>({1})), "x.npy"),
                    Catch::Contains("got rank 0"));
  CHECK(shape_text({8, 65536, 16, 64}) == "(8, 65536, 16, 64)");
  CHECK(shape_text({3}) == "(3,)");
}

TEST_CASE("npy/compact storage keeps float32 and float16 as float and float64 as double", "[cli][npy]") {
  const std::vector<float> f{1, -0.1f, 0x1p-149f, 3.4e38f};
  const NpyArray a = parse_npy_array(npy_bytes("<f4", "(2, 2)", raw<float>(f)), "f.npy", NpyStorage::compact);
  CHECK(a.values.empty());
  CHECK(a.narrow == f);
  // Fortran order: the narrow values in C order too.
  const NpyArray t =
      parse_npy_array(npy_bytes("<f4", "(2, 2)", raw<float>(f), true), "t.npy", NpyStorage::compact);
  CHECK(t.narrow == std::vector<float>{f[0], f[2], f[1], f[3]});
  const NpyArray h = parse_npy_array(npy_bytes("<f2", "(2,)", raw<std::uint16_t>({0x0001, 0x7bff})), "h.npy",
                                     NpyStorage::compact);
  CHECK(h.narrow == std::vector<float>{0x1p-24f, 65504});
  const NpyArray d =
      parse_npy_array(npy_bytes("<f8", "(2,)", raw<double>({0.1, 1e300})), "d.npy", NpyStorage::compact);
  CHECK(d.narrow.empty());
  CHECK(d.values == std::vector<double>{0.1, 1e300});
}

TEST_CASE("npy/any shape round trips through the writer", "[cli][npy]") {
  const OwnDirectory dir;
  const std::string path = dir.file("round_trip_4d.npy");
  write_npy(path, std::vector<std::int64_t>{2, 1, 2, 1}, std::vector<double>{0.5, -1, 3, 4});
  const NpyArray a = read_npy_array(path);
  CHECK(a.shape == std::vector<std::int64_t>{2, 1, 2, 1});
  CHECK(a.values == std::vector<double>{0.5, -1, 3, 4});
}
