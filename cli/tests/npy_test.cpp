#include "hla/io/npy.hpp"

#include <catch2/catch.hpp>

#include "hla/reference/error.hpp"
#include "npy_fixtures.hpp"

using namespace hla::io;
using namespace hla::cli::fixtures;

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
  const std::string path = "npy_round_trip_test.npy";
  write_npy(path, 2, 2, std::vector<double>{0.5, -1e300, 3, 4});
  const NpyMatrix m = read_npy_matrix(path);
  CHECK(m.values == std::vector<double>{0.5, -1e300, 3, 4});
  std::remove(path.c_str());
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
