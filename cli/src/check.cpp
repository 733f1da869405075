#include "hla/cli/check.hpp"

#ifdef __GLIBC__
#include <malloc.h>
#endif

#include <filesystem>
#include <future>
#include <iostream>
#include <limits>
#include <optional>
#include <ostream>
#include <sstream>

#include "hla/io/files.hpp"
#include "hla/io/npy.hpp"
#include "hla/reports/check.hpp"
#include "hla/reports/check_grad.hpp"

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
  std::vector<io::NamedPath> inputs = {{"--q", req.q_path}, {"--k", req.k_path}, {"--v", req.v_path}};
  const bool output = !req.o_path.empty(), gradients = !req.grad_path.empty();
  if (output) inputs.push_back({"--o", req.o_path});
  if (gradients)
    for (const io::NamedPath& p : std::vector<io::NamedPath>{
             {"--grad", req.grad_path}, {"--dq", req.dq_path}, {"--dk", req.dk_path}, {"--dv", req.dv_path}})
      inputs.push_back(p);
  std::vector<io::NamedPath> outputs;
  if (!req.json_path.empty()) outputs.push_back({"--json", req.json_path});
  io::check_outputs(outputs, inputs);
  if (!req.report_dir.empty()) io::check_output_directory("--report", req.report_dir);
  // Kept as the files store them (float32 and float16 as float): half the memory of double.
  // The files at once; a bad one is reported in the order q, k, v, o, dO, dQ, dK, dV.
  const auto read = [](const std::string& path) {
    return std::async(std::launch::async, [path] { return io::read_npy_array(path, io::NpyStorage::compact); });
  };
  reports::Phases phases(req.options.progress);
  std::vector<std::future<io::NpyArray>> files;
  for (const io::NamedPath& p : inputs) files.push_back(read(p.path));
  std::vector<io::NpyArray> arrays;
  for (auto& f : files) arrays.push_back(f.get());
  phases.done("the arrays read");
  const auto view = [&](std::size_t i) {
    const io::NpyArray& a = arrays[i];
    const std::string& path = inputs[i].path;
    return a.values.empty() && !a.narrow.empty() ? reports::ArrayView{path, a.shape, nullptr, a.narrow.data()}
                                                 : reports::ArrayView{path, a.shape, a.values.data()};
  };
  std::optional<reports::CheckResult> result;
  std::optional<reports::GradientCheckResult> gradient;
  if (output) result = reports::check_arrays(req.options, req.layout, view(0), view(1), view(2), view(3));
  if (gradients) {
    const std::size_t at = output ? 4 : 3;
    gradient = reports::check_gradient_arrays(req.options, req.layout, view(0), view(1), view(2), view(at),
                                              view(at + 1), view(at + 2), view(at + 3));
  }
  if (result) out << reports::check_summary(*result, req.options);
  if (gradient) out << reports::gradient_check_summary(*gradient, req.options);
  if (!req.json_path.empty()) {
    // The output's object as before; the gradients' alone; with both, {"output": .., "gradients": ..}.
    std::ostringstream json;
    if (result && gradient) json << "{\"output\": ";
    if (result) reports::write_check_json(*result, req.options, json);
    if (result && gradient) json << ", \"gradients\": ";
    if (gradient) reports::write_gradient_check_json(*gradient, req.options, json);
    if (result && gradient) json << "}\n";
    io::write_output(req.json_path, json.str());
    out << "JSON: " << req.json_path << "\n";
  }
  if (!req.report_dir.empty()) {
    reports::write_check_report(*result, req.options, req.report_dir, std::cerr);
    out << "report: " << (std::filesystem::path(req.report_dir) / "check.md").string() << "\n";
  }
  return (!result || result->passed) && (!gradient || gradient->passed) ? 0 : 1;
}

}  // namespace hla::cli
