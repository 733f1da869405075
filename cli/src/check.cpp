#include "hla/cli/check.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <filesystem>
#include <future>
#include <iostream>
#include <limits>
#include <ostream>
#include <sstream>

#include "hla/io/files.hpp"
#include "hla/io/npy.hpp"
#include "hla/reports/check.hpp"

namespace hla::cli {

int run_check(const CheckRequest& req, std::ostream& out) {
#ifdef __GLIBC__
  // The check allocates and frees matrices of n x dv doubles per head (32 MB at n = 65536,
  // d = 64), which glibc maps afresh each time, so every use pays its page faults: kept in one
  // heap instead, never returned to the system during the run (docs/perf.md: at B = 8, H = 16,
  // 32.9 M page faults became 4.8 M and the system time 101 s became 69 s, together with
  // faster rounding).
  mallopt(M_MMAP_THRESHOLD, 1 << 30);
  mallopt(M_TRIM_THRESHOLD, std::numeric_limits<int>::max());
  mallopt(M_ARENA_MAX, 1);
#endif
  const io::NamedPath inputs[] = {
      {"--q", req.q_path}, {"--k", req.k_path}, {"--v", req.v_path}, {"--o", req.o_path}};
  std::vector<io::NamedPath> outputs;
  if (!req.json_path.empty()) outputs.push_back({"--json", req.json_path});
  io::check_outputs(outputs, inputs);
  if (!req.report_dir.empty()) io::check_output_directory("--report", req.report_dir);
  // Kept as the files store them (float32 and float16 as float): half the memory of double.
  // The four files at once; a bad one is reported in the order q, k, v, o.
  const auto read = [](const std::string& path) {
    return std::async(std::launch::async, [path] { return io::read_npy_array(path, io::NpyStorage::compact); });
  };
  reports::Phases phases(req.options.progress);
  std::future<io::NpyArray> files[] = {read(req.q_path), read(req.k_path), read(req.v_path), read(req.o_path)};
  const io::NpyArray q = files[0].get(), k = files[1].get(), v = files[2].get(), o = files[3].get();
  phases.done("the arrays read");
  const auto view = [](const std::string& path, const io::NpyArray& a) {
    return a.values.empty() && !a.narrow.empty() ? reports::ArrayView{path, a.shape, nullptr, a.narrow.data()}
                                                 : reports::ArrayView{path, a.shape, a.values.data()};
  };
  const reports::CheckResult result =
      reports::check_arrays(req.options, req.layout, view(req.q_path, q), view(req.k_path, k),
                            view(req.v_path, v), view(req.o_path, o));
  out << reports::check_summary(result, req.options);
  if (!req.json_path.empty()) {
    std::ostringstream json;
    reports::write_check_json(result, req.options, json);
    io::write_output(req.json_path, json.str());
    out << "JSON: " << req.json_path << "\n";
  }
  if (!req.report_dir.empty()) {
    reports::write_check_report(result, req.options, req.report_dir, std::cerr);
    out << "report: " << (std::filesystem::path(req.report_dir) / "check.md").string() << "\n";
  }
  return result.passed ? 0 : 1;
}

}  // namespace hla::cli
