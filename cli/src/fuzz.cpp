#include "hla/cli/fuzz.hpp"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iomanip>
#include <ostream>
#include <regex>
#include <sstream>
#include <thread>
#include <vector>

#include "hla/checking/law_check.hpp"
#include "hla/io/interrupt.hpp"
#include "hla/reference/error.hpp"

namespace fs = std::filesystem;

namespace hla::cli {
namespace {

constexpr double max_seconds = 7 * 24 * 3600;

fs::path fuzzer_binary() {
  const fs::path binary = fs::canonical("/proc/self/exe").parent_path() / "fuzzers" / "hla_fuzz_laws";
  if (!fs::exists(binary)) {
    throw Error("the fuzzers are not built (" + binary.string() +
                "): they need clang-14 and libclang-rt-14-dev, which scripts/setup.sh installs");
  }
  return binary;
}

const checking::Operator& operator_named(const std::string& id) {
  const checking::Operator* op = checking::find_operator(id);
  if (op == nullptr) throw Error("--operator: unknown operator '" + id + "' (hla fuzz --list names them)");
  return *op;
}

std::string read_file(const fs::path& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  return bytes.str();
}

// One libFuzzer process, its stderr in a log file.
struct Job {
  pid_t pid = -1;
  fs::path log;
  int status = 0;
  bool running = true;
};

Job start(const fs::path& binary, const std::string& op, const fs::path& corpus, const fs::path& dir,
          int index, double seconds) {
  Job job;
  job.log = dir / ("job-" + std::to_string(index) + ".log");
  const std::vector<std::string> args{
      binary.string(),
      corpus.string(),
      "-max_total_time=" + std::to_string(static_cast<long>(std::ceil(seconds))),
      "-seed=" + std::to_string(index + 1),
      "-print_final_stats=1",
      "-artifact_prefix=" + (dir / "").string()};
  job.pid = io::start_child(args, job.log, {"HLA_FUZZ_OPERATOR=" + op});
  return job;
}

struct Progress {
  long executions = 0;
  long coverage = 0;
  long rate = 0;  // libFuzzer's own executions per second, once it has finished
};

// The last "#N ... cov: C" status line of a libFuzzer log, and its final statistics.
Progress progress_of(const fs::path& log) {
  static const std::regex status(R"(#(\d+)\s+\w+\s+cov: (\d+))"),
      final_count(R"(stat::number_of_executed_units: (\d+))"),
      final_rate(R"(stat::average_exec_per_sec:\s+(\d+))");
  Progress p;
  const std::string text = read_file(log);
  for (std::sregex_iterator it(text.begin(), text.end(), status), end; it != end; ++it) {
    p.executions = std::stol((*it)[1]);
    p.coverage = std::max(p.coverage, std::stol((*it)[2]));
  }
  std::smatch m;
  if (std::regex_search(text, m, final_count)) p.executions = std::stol(m[1]);
  if (std::regex_search(text, m, final_rate)) p.rate = std::stol(m[1]);
  return p;
}

}  // namespace

void list_fuzz_operators(std::ostream& out) {
  for (const checking::Operator& op : checking::operators()) {
    out << std::left << std::setw(24) << op.id
        << (op.finding.empty() ? "lawful     " : "finding " + op.finding + " ") << op.description << "\n";
  }
}

int run_fuzz(const FuzzOptions& options, std::ostream& out, std::ostream& progress) {
  const checking::Operator& op = operator_named(options.operator_id);
  if (!(options.seconds > 0 && options.seconds <= max_seconds))  // NaN and inf too
    throw Error("--seconds: must be more than 0 and at most " + std::to_string(long(max_seconds)) +
                " (a week)");
  if (options.jobs < 1 || options.jobs > 256) throw Error("--jobs: must be from 1 to 256");
  const fs::path binary = fuzzer_binary();
  io::set_interrupt_returns(true);  // a signal stops the fuzzers; the summary below says so
  // A directory of this run's own (a kept one of an earlier run with the same pid is never reused).
  std::string name =
      (fs::temp_directory_path() / ("hla-fuzz-" + op.id + "-" + std::to_string(::getpid()) + "-XXXXXX"))
          .string();
  if (mkdtemp(name.data()) == nullptr)
    throw Error("hla fuzz: cannot create a directory in " + fs::temp_directory_path().string());
  const fs::path dir = name;
  fs::create_directories(dir / "corpus");
  const fs::path corpus = options.corpus.empty() ? dir / "corpus" : fs::path(options.corpus);
  if (!fs::is_directory(corpus)) throw Error("--corpus: " + corpus.string() + " is not a directory");

  std::vector<Job> jobs;
  for (int i = 0; i < options.jobs; ++i)
    jobs.push_back(start(binary, op.id, corpus, dir, i, options.seconds));
  const auto begin = std::chrono::steady_clock::now();
  const auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - begin).count();
  };
  Progress total;
  const auto tally = [&] {
    total = {};
    for (const Job& j : jobs) {
      const Progress p = progress_of(j.log);
      total.executions += p.executions;
      total.coverage = std::max(total.coverage, p.coverage);
      total.rate += p.rate;
    }
  };
  const Job* failed = nullptr;
  for (int running = options.jobs; running > 0 && failed == nullptr && io::interrupted() == 0;) {
    std::this_thread::sleep_for(std::chrono::milliseconds(250));
    for (Job& j : jobs) {
      if (j.running && (j.status = io::wait_child(j.pid, false)) != -1) {
        j.running = false;
        --running;
        // A job stopped by an interrupt (the watcher's SIGTERM, sent after it set interrupted()) did not
        // fail.
        if ((!WIFEXITED(j.status) || WEXITSTATUS(j.status) != 0) && io::interrupted() == 0) failed = &j;
      }
    }
    tally();
    const double t = elapsed();
    progress << "\r" << op.id << ": " << std::fixed << std::setprecision(0) << std::min(t, options.seconds)
             << " s of " << options.seconds << " s, " << total.executions << " executions, "
             << static_cast<long>(total.executions / std::max(t, 1e-9)) << "/s, coverage " << total.coverage
             << "   " << std::flush;
  }
  progress << "\n";
  for (Job& j : jobs) {
    if (j.running) io::stop_child(j.pid);
  }
  tally();
  const double seconds = elapsed();
  // libFuzzer's own rate leaves out process start-up; a job stopped early has none, so fall back
  // to executions over wall time.
  const long rate =
      total.rate > 0 && failed == nullptr ? total.rate : static_cast<long>(total.executions / seconds);
  out << op.id << ": " << total.executions << " executions in " << std::fixed << std::setprecision(1)
      << seconds << " s, " << rate << " executions/s over " << options.jobs
      << (options.jobs == 1 ? " job" : " jobs") << ", coverage " << total.coverage << " edges\n";
  if (const int sig = io::interrupted(); sig != 0 && failed == nullptr) {
    out << "interrupted by " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << " after " << std::setprecision(1)
        << seconds << " s: no violation in " << total.executions << " executions\n";
    std::error_code ignored;
    fs::remove_all(dir, ignored);
    return 128 + sig;
  }
  if (failed == nullptr) {
    out << "no violation in " << total.executions << " executions\n";
    std::error_code ignored;
    fs::remove_all(dir, ignored);  // logs and the fresh corpus; nothing to keep
    return 0;
  }
  const std::string log = read_file(failed->log);
  const std::size_t at = log.find("hla-fuzz violation: ");
  if (at == std::string::npos) {
    throw Error("hla fuzz: the fuzzer stopped without a law violation (a crash or sanitizer report?): see " +
                failed->log.string());
  }
  const std::size_t end = log.find("\n==", at);
  out << log.substr(at + 20, end == std::string::npos ? std::string::npos : end - at - 20) << "\n";
  static const std::regex artifact(R"(Test unit written to (\S+))");
  std::smatch m;
  if (std::regex_search(log, m, artifact)) {
    out << "saved input: " << m[1] << " (hla fuzz --explain " << m[1] << " --operator " << op.id << ")\n";
  }
  return 1;
}

int explain_fuzz_input(const FuzzOptions& options, std::ostream& out) {
  std::string id = options.operator_id;
  if (id.empty()) {  // fuzz/findings/<operator>/<file>
    id = fs::path(options.explain).parent_path().filename().string();
    if (checking::find_operator(id) == nullptr)
      throw Error("--explain: name the operator with --operator (hla fuzz --list names them)");
  }
  operator_named(id);
  if (!fs::is_regular_file(options.explain)) throw Error("--explain: " + options.explain + ": no such file");
  const std::string bytes = read_file(options.explain);
  const auto* data = reinterpret_cast<const std::uint8_t*>(bytes.data());
  const checking::Input input = checking::decode(data, bytes.size());
  if (const auto violation = checking::check(id, input)) {
    out << checking::report(id, checking::minimize(id, *violation)) << "\n";
    return 1;
  }
  out << "every law of " << id << " holds on this input: " << checking::describe(input) << "\n";
  return 0;
}

}  // namespace hla::cli
