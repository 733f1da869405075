// The hla binary on bad input: one line naming the file or flag, a non-zero exit, no output file.

#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "hla/fast/streaming.hpp"
#include "hla/reference/gradient.hpp"
#include "hla/io/npy.hpp"
#if defined(HLA_HAVE_CUDA)
#include "hla/fast/gpu.hpp"
#endif
#include "hla/proofs/claim.hpp"
#include "npy_fixtures.hpp"

namespace fs = std::filesystem;
using namespace hla;
using namespace hla::cli::fixtures;

namespace {

struct Run {
  int status;
  std::string err;
};

class Workspace {
 public:
  Workspace() : dir_(fs::temp_directory_path() / ("hla_cli_test_" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    // A valid default problem: n = 3, d = 2, dv = 1, small integers.
    matrix("q.npy", 3, 2, {1, 2, -1, 0, 3, 1});
    matrix("k.npy", 3, 2, {0, 1, 2, -2, 1, 1});
    matrix("v.npy", 3, 1, {1, -1, 2});
  }
  ~Workspace() { fs::remove_all(dir_); }

  std::string path(const std::string& name) const { return (dir_ / name).string(); }
  void matrix(const std::string& name, std::int64_t rows, std::int64_t cols,
              std::vector<double> values) const {
    io::write_npy(path(name), rows, cols, values);
  }

  // Runs hla eval with the default files unless `args` names others; output goes to out.npy,
  // which is removed first so that a rejected run can be seen to write nothing.
  Run eval(const std::string& args) const {
    fs::remove(path("out.npy"));
    std::string command = std::string(HLA_BINARY) + " eval " + args;
    for (const char* flag : {"q", "k", "v"}) {
      if (args.find(std::string("--") + flag + " ") == std::string::npos) {
        command += std::string(" --") + flag + " " + path(std::string(flag) + ".npy");
      }
    }
    if (args.find("--impl") == std::string::npos) command += " --impl streaming";
    if (args.find("--scalar") == std::string::npos) command += " --scalar exact";
    if (args.find("--variant") == std::string::npos) command += " --variant hla2";
    return run(command + " --out " + path("out.npy"));
  }

  Run run(const std::string& command) const {
    const std::string err_path = path("stderr.txt");
    const int raw = std::system((command + " 2> " + err_path + " > /dev/null").c_str());
    std::ifstream in(err_path);
    std::stringstream err;
    err << in.rdbuf();
    return {WIFEXITED(raw) ? WEXITSTATUS(raw) : -1, err.str()};
  }

  std::string read(const std::string& name) const {
    std::ifstream in(path(name), std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    return bytes.str();
  }

  // A written .npy file's values, exactly.
  Matrix<Rational> exact(const std::string& name) const {
    const io::NpyMatrix m = io::read_npy_matrix(path(name));
    Matrix<Rational> out(m.rows, m.cols);
    for (Index i = 0; i < m.rows * m.cols; ++i) out(i / m.cols, i % m.cols) = Rational(m.values[i]);
    return out;
  }

  bool output_exists() const { return fs::exists(path("out.npy")); }

 private:
  fs::path dir_;
};

// Exactly one line, naming `subject` and saying `problem`; non-zero exit; no output file.
void check_rejected(const Workspace& w, const Run& r, const std::string& subject,
                    const std::string& problem) {
  INFO("stderr: " << r.err);
  CHECK(r.status != 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(subject) && Catch::Contains(problem));
  CHECK_FALSE(w.output_exists());
}

// The operator of the eval tests below, and its flags: hla3, normalized, eps 1/10, decay 3/4.
constexpr const char* hla3_flags = "--variant hla3 --normalize --eps 0.1 --decay 3/4";
OperatorSpec hla3_spec() {
  OperatorSpec spec;
  spec.variant = Variant::hla3;
  spec.normalize = true;
  spec.eps = Rational(1, 10);
  spec.decay = Rational(3, 4);
  return spec;
}

}  // namespace

TEST_CASE("cli/missing file", "[cli]") {
  Workspace w;
  check_rejected(w, w.eval("--q " + w.path("absent.npy")), "absent.npy", "no such file");
}

TEST_CASE("cli/unreadable file", "[cli]") {
  Workspace w;
  fs::create_directory(w.path("dir.npy"));
  check_rejected(w, w.eval("--k " + w.path("dir.npy")), "dir.npy", "is a directory");
}

TEST_CASE("cli/not a npy file", "[cli]") {
  Workspace w;
  write_file(w.path("text.npy"), "q,k,v\n1,2,3\n");
  check_rejected(w, w.eval("--v " + w.path("text.npy")), "text.npy", "not a .npy file");
}

TEST_CASE("cli/unsupported dtype", "[cli]") {
  Workspace w;
  write_file(w.path("int.npy"), npy_bytes("<i8", "(3, 2)", raw<std::int64_t>({1, 2, 3, 4, 5, 6})));
  check_rejected(w, w.eval("--q " + w.path("int.npy")), "int.npy", "unsupported dtype");
}

TEST_CASE("cli/wrong rank", "[cli]") {
  Workspace w;
  write_file(w.path("flat.npy"), npy_bytes("<f8", "(6,)", raw<double>({1, 2, 3, 4, 5, 6})));
  check_rejected(w, w.eval("--k " + w.path("flat.npy")), "flat.npy", "expected a 2-D array");
}

TEST_CASE("cli/n mismatch between q k and v", "[cli]") {
  Workspace w;
  w.matrix("k4.npy", 4, 2, {1, 2, 3, 4, 5, 6, 7, 8});
  check_rejected(w, w.eval("--k " + w.path("k4.npy")), "k4.npy", "n = 4");
  w.matrix("v2.npy", 2, 1, {1, 2});
  check_rejected(w, w.eval("--v " + w.path("v2.npy")), "v2.npy", "n = 2");
}

TEST_CASE("cli/d mismatch between q and k", "[cli]") {
  Workspace w;
  w.matrix("k3.npy", 3, 3, {1, 2, 3, 4, 5, 6, 7, 8, 9});
  check_rejected(w, w.eval("--k " + w.path("k3.npy")), "k3.npy", "d differs");
}

TEST_CASE("cli/d = 0", "[cli]") {
  Workspace w;
  w.matrix("q0.npy", 3, 0, {});
  w.matrix("k0.npy", 3, 0, {});
  check_rejected(w, w.eval("--q " + w.path("q0.npy") + " --k " + w.path("k0.npy")), "q0.npy", "d = 0");
}

TEST_CASE("cli/NaN or infinity with an exact scalar", "[cli]") {
  Workspace w;
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  w.matrix("nan.npy", 3, 2, {1, 2, 3, nan, 5, 6});
  check_rejected(w, w.eval("--q " + w.path("nan.npy")), "nan.npy: entry [1, 1]", "NaN");
  w.matrix("inf.npy", 3, 1, {1, -inf, 2});
  check_rejected(w, w.eval("--v " + w.path("inf.npy") + " --scalar modp"), "inf.npy: entry [1, 0]",
                 "infinite");
  // Floating scalars propagate them instead.
  CHECK(w.eval("--q " + w.path("nan.npy") + " --scalar f64").status == 0);
}

TEST_CASE("cli/non-integer input with modp", "[cli]") {
  Workspace w;
  w.matrix("half.npy", 3, 2, {1, 2, 0.5, 0, 3, 1});
  check_rejected(w, w.eval("--k " + w.path("half.npy") + " --scalar modp"), "half.npy: entry [1, 0]",
                 "not an integer");
}

TEST_CASE("cli/gamma outside the interval from 0 exclusive to 1 inclusive", "[cli]") {
  Workspace w;
  for (const char* gamma : {"0", "1.5", "-1/2", "3/2"}) {
    check_rejected(w, w.eval(std::string("--decay ") + gamma), "--decay", "(0, 1]");
  }
  check_rejected(w, w.eval("--decay half"), "--decay", "not a decimal or p/q rational");
}

TEST_CASE("cli/eps < 0", "[cli]") {
  Workspace w;
  check_rejected(w, w.eval("--normalize --eps -0.001"), "--eps", "must be >= 0");
}

TEST_CASE("cli/options a variant does not have", "[cli]") {
  Workspace w;
  check_rejected(w, w.eval("--variant ahla --unmasked"), "--unmasked", "ahla has no unmasked form");
  check_rejected(w, w.eval("--variant hla3 --ridge 1"), "--ridge", "hla3 has no ridge");
  check_rejected(w, w.eval("--variant linear --form corrected"), "--form corrected",
                 "no corrected streaming form");
  check_rejected(w, w.eval("--variant hla3 --impl scan --form published --decay 1/2"), "--form published",
                 "printed for gamma = 1 only");
  check_rejected(w, w.eval("--impl scan --chunk 0"), "--chunk", "must be >= 1");
  check_rejected(w, w.eval("--impl scan --threads 0"), "--threads", "not in range 1 to 256");
  check_rejected(w, w.eval("--variant hla4"), "--variant", "'hla4' is not one of");
  check_rejected(w, w.eval("--impl fast"), "--impl", "'fast' is not one of");
  check_rejected(w, w.eval("--scalar f16"), "--scalar", "'f16' is not one of");
  check_rejected(w, w.eval("--impl reference --form published"), "--form",
                 "only applies to --impl streaming");
  check_rejected(w, w.eval("--impl streaming --bf16-out"), "--bf16-out", "only --impl gpu-fast");
}

TEST_CASE("cli/missing required flag", "[cli]") {
  Workspace w;
  const Run r = w.run(std::string(HLA_BINARY) + " eval --variant hla2 --impl reference --scalar exact");
  CHECK(r.status != 0);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains("--q"));
}

TEST_CASE("cli/n = 0 gives an empty output", "[cli]") {
  Workspace w;
  w.matrix("q.npy", 0, 2, {});
  w.matrix("k.npy", 0, 2, {});
  w.matrix("v.npy", 0, 3, {});
  for (const char* scalar : {"exact", "modp", "f32"}) {
    const Run r = w.eval(std::string("--scalar ") + scalar + " --normalize");
    INFO(r.err);
    REQUIRE(r.status == 0);
    CHECK_THAT(w.read("out.npy"), Catch::Contains("'shape': (0, 3)"));
  }
}

TEST_CASE("cli/eval writes the operator's output", "[cli]") {
  Workspace w;
  OperatorSpec spec = hla3_spec();
  const Sequence<Rational> input{w.exact("q.npy"), w.exact("k.npy"), w.exact("v.npy")};
  const Matrix<Rational> expected = reference::output(spec, input);
  for (const char* impl :
       {"reference", "streaming", "scan --chunk 2 --threads 2", "chunked --chunk 2 --threads 2"}) {
    const Run r = w.eval(std::string(hla3_flags) + " --impl " + impl);
    INFO(r.err);
    REQUIRE(r.status == 0);
    const io::NpyMatrix out = io::read_npy_matrix(w.path("out.npy"));
    REQUIRE(out.rows == 3);
    for (Index t = 0; t < 3; ++t) CHECK(out(t, 0) == to_double(expected(t, 0)));  // correctly rounded
  }
  const Run modp = w.eval("--variant hla3 --impl streaming --scalar modp");
  REQUIRE(modp.status == 0);
  spec.normalize = false;
  spec.eps = 0;
  spec.decay = 1;
  const Matrix<ModP> residues = fast::streaming_output(spec, fast::Form::corrected, convert<ModP>(input));
  const std::string bytes = w.read("out.npy");
  CHECK_THAT(bytes, Catch::Contains("'descr': '<u8'"));
  const std::string data = bytes.substr(bytes.size() - 3 * 8);
  for (Index t = 0; t < 3; ++t) {
    std::uint64_t word;
    std::memcpy(&word, data.data() + 8 * t, 8);
    CHECK(word == residues(t, 0).residue());
  }
}

TEST_CASE("cli/eval --grad writes the gradients of <dO, O>", "[cli][gradient]") {
  Workspace w;
  w.matrix("do.npy", 3, 1, {2, -1, 3});
  const Sequence<Rational> input{w.exact("q.npy"), w.exact("k.npy"), w.exact("v.npy")};
  const std::string outputs = " --grad " + w.path("do.npy") + " --out-dq " + w.path("dq.npy") + " --out-dk " +
                              w.path("dk.npy") + " --out-dv " + w.path("dv.npy");
  // Each implementation's files hold the exact gradients and O, correctly rounded.
  const auto writes_exact = [&](const std::string& flags, const OperatorSpec& spec, const char* impl) {
    const Gradients<Rational> expected = reference::gradients(spec, input, w.exact("do.npy"));
    const Matrix<Rational> expected_output = reference::output(spec, input);
    const Run r = w.eval(flags + " --impl " + impl + outputs);
    INFO(flags << " --impl " << impl << ": " << r.err);
    REQUIRE(r.status == 0);
    const std::pair<const char*, const Matrix<Rational>*> files[] = {
        {"out.npy", &expected_output}, {"dq.npy", &expected.dq}, {"dk.npy", &expected.dk}, {"dv.npy", &expected.dv}};
    for (const auto& [name, want] : files) {
      const io::NpyMatrix got = io::read_npy_matrix(w.path(name));
      REQUIRE(got.rows == want->rows());
      REQUIRE(got.cols == want->cols());
      for (Index i = 0; i < want->size(); ++i)
        CHECK(got.values[std::size_t(i)] == to_double(want->data()[i]));
    }
  };
  for (const char* impl : {"reference", "streaming", "scan --chunk 2 --threads 2", "chunked --chunk 2"})
    writes_exact(hla3_flags, hla3_spec(), impl);
  OperatorSpec hla2 = hla3_spec();  // the chunk-parallel form has hla2, normalized and decayed too
  hla2.variant = Variant::hla2;
  writes_exact("--variant hla2 --normalize --eps 0.1 --decay 3/4", hla2, "chunked --chunk 2 --threads 2");
  for (const char* name : {"dq.npy", "dk.npy", "dv.npy"}) fs::remove(w.path(name));
  // Bad input: one line, nothing written.
  check_rejected(w, w.eval("--grad " + w.path("do.npy") + " --out-dq " + w.path("dq.npy")), "--grad",
                 "needs --out-dk");
  check_rejected(w, w.eval("--out-dv " + w.path("dv.npy")), "--out-dv", "needs --grad");
  check_rejected(w, w.eval(std::string(hla3_flags) + " --unmasked --impl chunked" + outputs),
                 "--impl chunked", "the masked operator's");
  w.matrix("do2.npy", 2, 1, {1, 1});
  check_rejected(w, w.eval("--grad " + w.path("do2.npy") + " --out-dq " + w.path("dq.npy") + " --out-dk " +
                           w.path("dk.npy") + " --out-dv " + w.path("dv.npy")),
                 "do2.npy", "shape (2, 1) but the output is (3, 1)");
  check_rejected(w, w.eval("--grad " + w.path("do.npy") + " --out-dq " + w.path("q.npy") + " --out-dk " +
                           w.path("dk.npy") + " --out-dv " + w.path("dv.npy")),
                 "--out-dq", "");
  for (const char* name : {"dq.npy", "dk.npy", "dv.npy"}) CHECK_FALSE(fs::exists(w.path(name)));
}

TEST_CASE("cli/eval with the scan and chunked implementations", "[cli]") {
  Workspace w;
  OperatorSpec spec;
  spec.variant = Variant::hla2;
  spec.decay = Rational(1, 2);
  const Matrix<Rational> expected =
      reference::output(spec, Sequence<Rational>{w.exact("q.npy"), w.exact("k.npy"), w.exact("v.npy")});
  for (const char* impl :
       {"scan --chunk 2 --threads 3", "chunked --chunk 2 --threads 2", "chunked --chunk 7"}) {
    const Run r = w.eval(std::string("--variant hla2 --decay 1/2 --impl ") + impl);
    INFO(impl << ": " << r.err);
    REQUIRE(r.status == 0);
    const io::NpyMatrix out = io::read_npy_matrix(w.path("out.npy"));
    for (Index t = 0; t < 3; ++t) CHECK(out(t, 0) == to_double(expected(t, 0)));
  }
  check_rejected(w, w.eval("--variant hla3 --impl chunked --form published"), "--form published",
                 "no chunk-parallel matrix form for hla3");
  check_rejected(w, w.eval("--variant hla2 --impl chunked --form published --decay 1/2"), "--form published",
                 "Figure 1(C)");
}

// Split across ranks (fast/ranks.hpp), the scan writes the reference's output and gradients byte for
// byte in Z/p, whatever the slices; what cannot be split is refused in one line.
TEST_CASE("cli/eval --ranks and --slices split the sequence and write the reference's files in Z/p",
          "[cli]") {
  Workspace w;
  w.matrix("do.npy", 3, 1, {2, -1, 3});
  const std::string flags = "--variant hla2 --normalize --eps 1/4 --decay 1/2 --scalar modp";
  const std::string outputs = " --grad " + w.path("do.npy") + " --out-dq " + w.path("dq.npy") + " --out-dk " +
                              w.path("dk.npy") + " --out-dv " + w.path("dv.npy");
  const char* files[] = {"out.npy", "dq.npy", "dk.npy", "dv.npy"};
  REQUIRE(w.eval(flags + " --impl reference" + outputs).status == 0);
  std::vector<std::string> expected;
  for (const char* name : files) expected.push_back(w.read(name));
  for (const char* split : {"--ranks 1", "--ranks 2 --chunk 1", "--ranks 5 --threads 2", "--slices 0,2,1"}) {
    for (const char* name : files) fs::remove(w.path(name));
    const Run r = w.eval(flags + " --impl scan " + split + outputs);
    INFO(split << ": " << r.err);
    REQUIRE(r.status == 0);
    for (std::size_t i = 0; i < expected.size(); ++i) CHECK(w.read(files[i]) == expected[i]);
    fs::remove(w.path("out.npy"));
    REQUIRE(w.eval(flags + " --impl scan " + split).status == 0);
    CHECK(w.read("out.npy") == expected[0]);
  }
  for (const char* name : {"dq.npy", "dk.npy", "dv.npy"}) fs::remove(w.path(name));
  check_rejected(w, w.eval("--impl streaming --ranks 2"), "--ranks", "--impl streaming does not split it");
  check_rejected(w, w.eval("--impl scan --scalar f64 --ranks 0"), "--ranks", "must be from 1 to 1024, got 0");
  check_rejected(w, w.eval("--impl scan --scalar f64 --slices 1,1"), "--slices",
                 "the slices must cover the 3 tokens");
  check_rejected(w, w.eval("--impl scan --scalar exact --ranks 2"), "--ranks, --slices",
                 "with --scalar f64, f32 or modp, got exact");
  check_rejected(w, w.eval("--impl scan --scalar f64 --ranks 2 --slices 3"), "--ranks, --slices", "give one");
  check_rejected(w, w.eval("--impl scan --scalar f64 --decay 1/2 --form published --ranks 2"),
                 "--form published", "F3");
  check_rejected(w,
                 w.eval("--variant hla3 --impl gpu-fast --scalar f32 --ranks 2 --grad " + w.path("do.npy")),
                 "--impl gpu-fast", "the fast backward covers hla2 and ahla");
}

// Where the GPU can run, --impl gpu and gpu-streaming equal the reference in Z/p; elsewhere (no
// device, or no CUDA in the build) they are refused in one line, with the reason, writing nothing.
TEST_CASE("cli/eval on the GPU or a one-line reason why not", "[cli]") {
  Workspace w;
#if defined(HLA_HAVE_CUDA)
  const std::optional<std::string> unavailable = fast::gpu::unavailable_reason();
#else
  const std::optional<std::string> unavailable = "built without CUDA";
#endif
  for (const char* impl :
       {"gpu --chunk 2", "gpu-streaming", "gpu --ranks 2 --chunk 1", "gpu --slices 0,1,2"}) {
    const Run r = w.eval(std::string("--variant hla3 --decay 1/2 --scalar modp --impl ") + impl);
    if (unavailable) {
      INFO(*unavailable);
      check_rejected(w, r, "--impl gpu", "");
      continue;
    }
    REQUIRE(r.status == 0);
    const std::string got = w.read("out.npy");
    REQUIRE(w.eval("--variant hla3 --decay 1/2 --scalar modp --impl reference").status == 0);
    CHECK(w.read("out.npy") == got);
  }
  {  // the gradients split across simulated GPU ranks
    w.matrix("do.npy", 3, 1, {2, -1, 3});
    const std::string flags = "--variant hla2 --normalize --eps 1/4 --decay 1/2 --scalar modp --grad " +
                              w.path("do.npy") + " --out-dq " + w.path("dq.npy") + " --out-dk " +
                              w.path("dk.npy") + " --out-dv " + w.path("dv.npy");
    const Run r = w.eval(flags + " --impl gpu-scan --slices 2,0,1 --chunk 1");
    if (unavailable) {
      check_rejected(w, r, "--impl gpu", "");
    } else {
      INFO(r.err);
      REQUIRE(r.status == 0);
      std::vector<std::string> got;
      for (const char* name : {"out.npy", "dq.npy", "dk.npy", "dv.npy"}) got.push_back(w.read(name));
      for (const char* name : {"out.npy", "dq.npy", "dk.npy", "dv.npy"}) fs::remove(w.path(name));
      REQUIRE(w.eval(flags + " --impl reference").status == 0);
      int i = 0;
      for (const char* name : {"out.npy", "dq.npy", "dk.npy", "dv.npy"}) CHECK(w.read(name) == got[i++]);
      for (const char* name : {"dq.npy", "dk.npy", "dv.npy"}) fs::remove(w.path(name));
    }
  }
  {  // the fast path split across simulated ranks, forward and gradients: gpu::ranks_fast_gradients' values
    const Index n = 100, d = 8;
    Sequence<float> s{Matrix<float>(n, d), Matrix<float>(n, d), Matrix<float>(n, d)};
    Matrix<float> d_out(n, d);
    int i = 0;  // multiples of 1/8 in [0, 1) (bf16 exactly), d_out in [-1/2, 1/2)
    for (Matrix<float>* m : {&s.q, &s.k, &s.v, &d_out})
      for (Index j = 0; j < m->size(); ++j) m->data()[j] = ((i++ * 37) % 8) / 8.0f - (m == &d_out ? 0.5f : 0);
    const auto write = [&](const char* name, const Matrix<float>& m) {
      std::vector<double> values;
      for (Index r = 0; r < n; ++r)
        for (Index c = 0; c < d; ++c) values.push_back(m(r, c));
      w.matrix(name, n, d, values);
    };
    write("fq.npy", s.q), write("fk.npy", s.k), write("fv.npy", s.v), write("fdo.npy", d_out);
    const Run r =
        w.eval("--variant ahla --normalize --eps 1/4 --decay 63/64 --impl gpu-fast --scalar f32 --q " +
               w.path("fq.npy") + " --k " + w.path("fk.npy") + " --v " + w.path("fv.npy") +
               " --slices 64,36 --grad " + w.path("fdo.npy") + " --out-dq " + w.path("dq.npy") +
               " --out-dk " + w.path("dk.npy") + " --out-dv " + w.path("dv.npy"));
#if defined(HLA_HAVE_CUDA)
    if (!unavailable) {
      INFO(r.err);
      REQUIRE(r.status == 0);
      const OperatorSpec spec{
          .variant = Variant::ahla, .normalize = true, .eps = Rational(1, 4), .decay = Rational(63, 64)};
      const std::vector<Index> lengths{64, 36};
      const Gradients<float> want =
          fast::gpu::ranks_fast_gradients(spec, {s}, {d_out}, fast::slices_of_lengths(lengths)).front();
      const std::pair<const char*, const Matrix<float>*> files[] = {
          {"out.npy", &want.output}, {"dq.npy", &want.dq}, {"dk.npy", &want.dk}, {"dv.npy", &want.dv}};
      for (const auto& [name, expected] : files) {
        const io::NpyMatrix got = io::read_npy_matrix(w.path(name));
        INFO(name);
        REQUIRE((got.rows == n && got.cols == d));
        for (Index j = 0; j < n * d; ++j) CHECK(got.values[j] == double((*expected)(j / d, j % d)));
      }
      for (const char* name : {"dq.npy", "dk.npy", "dv.npy"}) fs::remove(w.path(name));
    }
#endif
    if (unavailable) check_rejected(w, r, "--impl gpu-fast", "");
    // --bf16-out: the fast path's bf16 outputs, gpu::fast_outputs' values (the same inputs, unsplit).
    const Run r16 =
        w.eval("--variant ahla --normalize --eps 1/4 --impl gpu-fast --scalar f32 --bf16-out --q " +
               w.path("fq.npy") + " --k " + w.path("fk.npy") + " --v " + w.path("fv.npy"));
#if defined(HLA_HAVE_CUDA)
    if (!unavailable) {
      INFO(r16.err);
      REQUIRE(r16.status == 0);
      const OperatorSpec spec{.variant = Variant::ahla, .normalize = true, .eps = Rational(1, 4)};
      const Matrix<float> want = fast::gpu::fast_outputs(spec, {s}, true).front();
      const io::NpyMatrix got = io::read_npy_matrix(w.path("out.npy"));
      REQUIRE((got.rows == n && got.cols == d));
      for (Index j = 0; j < n * d; ++j) CHECK(got.values[j] == double(want(j / d, j % d)));
    }
#endif
    if (unavailable) check_rejected(w, r16, "--impl gpu-fast", "");
  }
  check_rejected(w, w.eval("--variant hla2 --impl gpu --scalar exact"), "--impl gpu",
                 unavailable ? "" : "no GPU form");
  check_rejected(w, w.eval("--variant hla2 --impl gpu-streaming --scalar modp --ranks 2"), "--ranks",
                 "--impl gpu-streaming does not split it");
  // The fast path: what it covers is checked first, then the device; the workspace's heads (d = 2,
  // dv = 1) are not the multiples of 8 it takes.
  check_rejected(w, w.eval("--variant hla2 --ridge 1/2 --decay 1/2 --impl gpu-fast --scalar f32"),
                 "--impl gpu-fast", "(not both)");
  check_rejected(w, w.eval("--variant hla3 --unmasked --impl gpu-fast --scalar f32"), "--impl gpu-fast",
                 "masked hla2, ahla and hla3");
  check_rejected(w, w.eval("--variant ahla --impl gpu-fast --scalar f64"), "--impl gpu-fast", "--scalar f32");
  const Run r = w.eval("--variant ahla --impl gpu-fast --scalar f32");
  if (unavailable) {
    check_rejected(w, r, "--impl gpu-fast", "");
  } else {
    check_rejected(w, r, "fast path", "d and dv must be multiples of 8 up to 128");  // ahla's forward
  }
}

TEST_CASE("cli/proofs writes the ledger and exits 0 whatever the verdicts", "[cli]") {
  Workspace w;
  const Run r = w.run(std::string(HLA_BINARY) + " proofs --cases 3 --seed 7 --json " + w.path("ledger.json") +
                      " --markdown " + w.path("ledger.md"));
  INFO(r.err);
  REQUIRE(r.status == 0);
  const std::string json = w.read("ledger.json"), markdown = w.read("ledger.md");
  std::size_t entries = 0;
  for (std::size_t at = json.find("{\"id\": "); at != std::string::npos; at = json.find("{\"id\": ", at + 1))
    ++entries;
  CHECK(entries == proofs::all_claims().size());
  CHECK_THAT(json,
             Catch::Contains("\"verdict\": \"fails\"") && Catch::Contains("\"counterexample\": {\"n\": 2"));
  CHECK_THAT(markdown, Catch::Contains("### `thm-7.1/num` (p. 14): fails"));
  // Same seed, same ledger.
  REQUIRE(
      w.run(std::string(HLA_BINARY) + " proofs --cases 3 --seed 7 --threads 1 --json " + w.path("again.json"))
          .status == 0);
  CHECK(w.read("again.json") == json);
}

TEST_CASE("cli/proofs on bad arguments", "[cli]") {
  Workspace w;
  check_rejected(w, w.run(std::string(HLA_BINARY) + " proofs --cases 0"), "--cases", "0");
  check_rejected(w,
                 w.run(std::string(HLA_BINARY) + " proofs --cases 1 --json " + w.path("no/such/dir/x.json")),
                 "x.json", "no such directory");
  CHECK_FALSE(fs::exists(w.path("no/such/dir/x.json")));
}

TEST_CASE("cli/fuzz on bad arguments exits 2", "[cli]") {
  Workspace w;
  const auto check_two = [&](const std::string& args, const std::string& subject) {
    const Run r = w.run(std::string(HLA_BINARY) + " fuzz " + args);
    INFO(args << ": " << r.err);
    CHECK(r.status == 2);
    CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
    CHECK_THAT(r.err, Catch::Contains(subject));
  };
  check_two("--operator no-such-operator --seconds 1", "no-such-operator");
  check_two("--explain " + w.path("missing.bin") + " --operator eq-4.1", "missing.bin");
  check_two("", "--operator");
}

TEST_CASE("cli/fuzz explain decodes a saved finding and names the violated law", "[cli]") {
  Workspace w;
  for (const auto& entry : fs::recursive_directory_iterator(std::string(HLA_SOURCE_DIR) + "/fuzz/findings")) {
    if (!entry.is_regular_file()) continue;
    const std::string op = entry.path().parent_path().filename().string();
    const std::string command = std::string(HLA_BINARY) + " fuzz --explain " + entry.path().string();
    const int raw = std::system((command + " > " + w.path("explain.txt") + " 2>&1").c_str());
    const std::string out = w.read("explain.txt");
    INFO(command << "\n" << out);
    CHECK((WIFEXITED(raw) && WEXITSTATUS(raw) == 1));
    CHECK_THAT(out, Catch::Contains("violation of") && Catch::Contains("by " + op) &&
                        Catch::Contains("token 1: q = ("));
  }
  // An input on which every law holds: exit 0.
  std::ofstream(w.path("zeros.bin"), std::ios::binary) << std::string(64, '\0');
  CHECK(w.run(std::string(HLA_BINARY) + " fuzz --explain " + w.path("zeros.bin") + " --operator eq-4.1")
            .status == 0);
}

// hla check: 0 when the output passes, 1 when it fails, 2 with one line for bad input.
namespace {

Run check_run(const Workspace& w, const std::string& args, const std::string& o = "o.npy") {
  std::string command = std::string(HLA_BINARY) + " check --variant hla2 " + args;
  if (args.find("--precision") == std::string::npos) command += " --precision f64";
  for (const char* flag : {"q", "k", "v"}) {
    if (args.find(std::string("--") + flag + " ") == std::string::npos)
      command += std::string(" --") + flag + " " + w.path(std::string(flag) + ".npy");
  }
  if (args.find("--o ") == std::string::npos) command += " --o " + w.path(o);
  return w.run(command);
}

void check_bad_input(const Run& r, const std::string& subject, const std::string& problem) {
  INFO("stderr: " << r.err);
  CHECK(r.status == 2);
  CHECK(std::count(r.err.begin(), r.err.end(), '\n') == 1);
  CHECK_THAT(r.err, Catch::Contains(subject) && Catch::Contains(problem));
}

// The exact output of the default problem, written as o.npy (the streaming form in float64 on
// small integers is exact), and a copy with one entry off by one part in 2^20.
void write_outputs(const Workspace& w) {
  REQUIRE(w.run(std::string(HLA_BINARY) + " eval --variant hla2 --impl streaming --scalar exact --q " +
                w.path("q.npy") + " --k " + w.path("k.npy") + " --v " + w.path("v.npy") + " --out " +
                w.path("o.npy"))
              .status == 0);
  io::NpyMatrix o = io::read_npy_matrix(w.path("o.npy"));
  o.values[2] *= 1 + 0x1p-20;
  w.matrix("o_off.npy", o.rows, o.cols, o.values);
}

}  // namespace

TEST_CASE("cli/check passes an exact output and fails a wrong one", "[cli][check]") {
  Workspace w;
  write_outputs(w);
  CHECK(check_run(w, "").status == 0);
  CHECK(check_run(w, "", "o_off.npy").status == 1);
  const Run json = check_run(w, "--json " + w.path("check.json"), "o_off.npy");
  CHECK(json.status == 1);
  CHECK_THAT(w.read("check.json"),
             Catch::Contains("\"verdict\": \"fail\"") &&
                 Catch::Contains("\"first_failure\": {\"batch\": 0, \"head\": 0, \"token\": 2"));
}

// hla check --grad: the exact gradients (hla eval --grad, correctly rounded to float64) pass, with
// and without the output; one entry of dK off by about one part in 2^20 fails, named in the JSON.
TEST_CASE("cli/check --grad passes exact gradients and fails a wrong one", "[cli][check]") {
  Workspace w;
  write_outputs(w);
  w.matrix("do.npy", 3, 1, {1, -2, 3});
  REQUIRE(w.run(std::string(HLA_BINARY) + " eval --variant hla2 --impl streaming --scalar exact --q " + w.path("q.npy") +
                " --k " + w.path("k.npy") + " --v " + w.path("v.npy") + " --out " + w.path("o2.npy") + " --grad " +
                w.path("do.npy") + " --out-dq " + w.path("dq.npy") + " --out-dk " + w.path("dk.npy") + " --out-dv " +
                w.path("dv.npy"))
              .status == 0);
  io::NpyMatrix dk = io::read_npy_matrix(w.path("dk.npy"));
  dk.values[3] = dk.values[3] * (1 + 0x1p-20) + 0x1p-20;  // token 1, column 1
  w.matrix("dk_off.npy", dk.rows, dk.cols, dk.values);
  const auto grad = [&w](const std::string& dk_file) {
    return " --grad " + w.path("do.npy") + " --dq " + w.path("dq.npy") + " --dk " + w.path(dk_file) + " --dv " +
           w.path("dv.npy");
  };
  const auto without_output = [&](const std::string& args) {
    std::string command = std::string(HLA_BINARY) + " check --variant hla2 --precision f64" + args;
    for (const char* flag : {"q", "k", "v"}) command += std::string(" --") + flag + " " + w.path(std::string(flag) + ".npy");
    return w.run(command);
  };
  const Run pass = without_output(grad("dk.npy") + " --json " + w.path("pass.json"));
  INFO(pass.err);
  CHECK(pass.status == 0);
  CHECK_THAT(w.read("pass.json"), Catch::StartsWith("{\"verdict\": \"pass\"") &&
                                      Catch::Contains("\"reference\": \"261-bit MPFR streaming backward (CPU)\""));
  CHECK(check_run(w, grad("dk.npy")).status == 0);  // the output and the gradients
  CHECK(check_run(w, grad("dk.npy"), "o_off.npy").status == 1);
  const Run fail = without_output(grad("dk_off.npy") + " --json " + w.path("grad.json"));
  CHECK(fail.status == 1);
  CHECK_THAT(w.read("grad.json"), Catch::Contains("\"verdict\": \"fail\"") &&
                                      Catch::Contains("\"first_failure\": {\"gradient\": \"dK\", \"batch\": 0, "
                                                      "\"head\": 0, \"token\": 1, \"column\": 1}"));
  const Run both = check_run(w, grad("dk.npy") + " --json " + w.path("both.json"));
  CHECK(both.status == 0);
  CHECK_THAT(w.read("both.json"), Catch::StartsWith("{\"output\": {\"verdict\": \"pass\"") &&
                                      Catch::Contains(", \"gradients\": {\"verdict\": \"pass\""));
  // Bad input: one line, exit 2.
  check_bad_input(without_output(" --grad " + w.path("do.npy")), "--grad", "needs --dq, --dk and --dv");
  check_bad_input(without_output(" --dq " + w.path("dq.npy")), "--dq", "need --grad");
  check_bad_input(without_output(""), "check", "--o (the output) or --grad");
  // The unnormalized operator's gradients fail the normalized operator's check; the normalized
  // backward divides by den + eps, so another --eps-policy is refused.
  CHECK(without_output(grad("dk.npy") + " --normalize --eps 1").status == 1);
  check_bad_input(without_output(grad("dk.npy") + " --normalize --eps 1 --eps-policy clamp"), "--grad",
                  "--eps-policy add");
  check_bad_input(without_output(" --grad " + w.path("do.npy") + " --dq " + w.path("dk.npy") + " --dk " +
                                 w.path("dk.npy") + " --dv " + w.path("dq.npy")),
                  "dq.npy", "dO and dV have the values' shape");
}

TEST_CASE("cli/check rejects bad input with one line and exit 2", "[cli][check]") {
  Workspace w;
  write_outputs(w);
  check_bad_input(check_run(w, "--o " + w.path("absent.npy")), "absent.npy", "no such file");
  w.matrix("o2.npy", 2, 1, {1, 2});
  check_bad_input(check_run(w, "", "o2.npy"), "o2.npy", "does not match");
  check_bad_input(check_run(w, "--layout bthd"), "q.npy", "needs a 4-D array [B, T, H, D]");
  check_bad_input(check_run(w, "--layout tbhd"), "--layout", "not one of nd | bthd | bhtd");
  check_bad_input(check_run(w, "--precision f8"), "--precision", "not one of f64 | f32 | bf16 | f16");
  check_bad_input(check_run(w, "--eps-policy min"), "--eps-policy", "not one of add | signed-clamp | clamp");
  w.matrix("nan.npy", 3, 1, {1, std::numeric_limits<double>::quiet_NaN(), 2});
  check_bad_input(check_run(w, "", "nan.npy"), "nan.npy: entry [1, 0]", "is NaN");
  w.matrix("q_fine.npy", 3, 2, {1, 2, -1, 0, 3, 1.0 + 0x1p-10});
  check_bad_input(check_run(w, "--precision bf16 --q " + w.path("q_fine.npy")), "q_fine.npy: entry [2, 1]",
                  "is not a bf16 value");
  write_file(w.path("int.npy"), npy_bytes("<i8", "(3, 1)", raw<std::int64_t>({1, 2, 3})));
  check_bad_input(check_run(w, "", "int.npy"), "int.npy", "unsupported dtype");
  // Normalized with every denominator zero (q = 0, eps = 0): nothing can be compared.
  w.matrix("q0.npy", 3, 2, {0, 0, 0, 0, 0, 0});
  check_bad_input(check_run(w, "--normalize --q " + w.path("q0.npy")), "no output has a finite bound",
                  "cannot tell from zero");
  // Grouped queries: value heads a multiple of the query/key heads.
  const std::vector<double> ones(1 * 3 * 2 * 2, 1.0), ones3(1 * 3 * 3 * 1, 1.0);
  io::write_npy(w.path("q4.npy"), {1, 3, 2, 2}, ones);
  io::write_npy(w.path("v4.npy"), {1, 3, 3, 1}, ones3);
  check_bad_input(check_run(w, "--layout bthd --q " + w.path("q4.npy") + " --k " + w.path("q4.npy") +
                                   " --v " + w.path("v4.npy") + " --o " + w.path("v4.npy")),
                  "v4.npy", "grouped queries need a multiple");
}

TEST_CASE("cli/check reads 4-D layouts and grouped value heads", "[cli][check]") {
  Workspace w;
  // Two value heads sharing one query/key head, [B, T, H, D] = [1, 3, 1, 2] and [1, 3, 2, 1]; each
  // value head's output is the exact output for its values (hla eval on the 2-D slices).
  w.matrix("v1.npy", 3, 1, {2, 0, -1});
  std::vector<double> o4, v4;
  for (const char* v : {"v.npy", "v1.npy"}) {
    REQUIRE(w.run(std::string(HLA_BINARY) + " eval --variant hla2 --impl streaming --scalar exact --q " +
                  w.path("q.npy") + " --k " + w.path("k.npy") + " --v " + w.path(v) + " --out " +
                  w.path("slice.npy"))
                .status == 0);
    const io::NpyMatrix o = io::read_npy_matrix(w.path("slice.npy"));
    const io::NpyMatrix vv = io::read_npy_matrix(w.path(v));
    o4.insert(o4.end(), o.values.begin(), o.values.end());
    v4.insert(v4.end(), vv.values.begin(), vv.values.end());
  }
  // Interleave into [1, T, H, 1]: entry (t, h) at t * 2 + h.
  std::vector<double> o_bthd(6), v_bthd(6);
  for (int t = 0; t < 3; ++t)
    for (int h = 0; h < 2; ++h) {
      o_bthd[t * 2 + h] = o4[h * 3 + t];
      v_bthd[t * 2 + h] = v4[h * 3 + t];
    }
  const io::NpyMatrix q = io::read_npy_matrix(w.path("q.npy")), k = io::read_npy_matrix(w.path("k.npy"));
  io::write_npy(w.path("q4.npy"), {1, 3, 1, 2}, q.values);
  io::write_npy(w.path("k4.npy"), {1, 3, 1, 2}, k.values);
  io::write_npy(w.path("v4.npy"), {1, 3, 2, 1}, v_bthd);
  io::write_npy(w.path("o4.npy"), {1, 3, 2, 1}, o_bthd);
  const std::string files =
      " --q " + w.path("q4.npy") + " --k " + w.path("k4.npy") + " --v " + w.path("v4.npy");
  CHECK(check_run(w, "--layout bthd" + files + " --o " + w.path("o4.npy")).status == 0);
  REQUIRE(o_bthd[0] != o_bthd[1]);
  std::swap(o_bthd[0], o_bthd[1]);  // the two value heads' outputs exchanged at token 0
  io::write_npy(w.path("o4x.npy"), {1, 3, 2, 1}, o_bthd);
  CHECK(check_run(w, "--layout bthd" + files + " --o " + w.path("o4x.npy")).status == 1);
}

TEST_CASE("cli/check --report writes check.md with its plot and never replaces a directory it did not write",
          "[cli][check]") {
  Workspace w;
  write_outputs(w);
  const std::string dir = w.path("report");
  CHECK(check_run(w, "--report " + dir, "o_off.npy").status == 1);
  CHECK_THAT(w.read("report/check.md"), Catch::StartsWith("# hla check") && Catch::Contains("FAIL") &&
                                            Catch::Contains("error.png") && Catch::Contains("## Diagnosis"));
  CHECK(fs::file_size(dir + "/error.png") > 1000);
  CHECK_THAT(w.read("report/tokens.csv"),
             Catch::StartsWith("token,worst_ratio,distance_units,own_distance_units\n0,"));
  CHECK(check_run(w, "--report " + dir).status == 0);  // its own directory: replaced
  CHECK_THAT(w.read("report/check.md"), Catch::Contains("PASS"));
  fs::create_directories(w.path("mine"));
  write_file(w.path("mine/notes.txt"), "my notes");
  const Run refused = check_run(w, "--report " + w.path("mine"));
  CHECK(refused.status == 2);
  CHECK(std::count(refused.err.begin(), refused.err.end(), '\n') == 1);
  CHECK(w.read("mine/notes.txt") == "my notes");
}
