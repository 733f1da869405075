#pragma once

#include <rapidcheck.h>

#include <catch2/catch.hpp>
#include <cstdint>
#include <cstdlib>
#include <optional>
#include <sstream>
#include <string>

namespace hla::testing {

inline std::string& program_name() {
  static std::string name = "test";
  return name;
}
inline void set_program_name(std::string name) {
  program_name() = std::move(name);
}

// Runs the Catch2 session (the test executables' main; testing/src/catch_session.cpp).
int run_catch(int argc, char* argv[]);
// The same, unless there is a reason to skip (a GPU test's executable without a device): then it
// prints "skipped: <reason>" and returns 77, ctest's SKIP_RETURN_CODE, except when the tests are
// only listed (--list-*: ctest's discovery runs where no device is).
int run_catch_unless(int argc, char* argv[], const std::optional<std::string>& skip_reason);

// A test's random seed: $<variable> when set, else a fresh one; printed with the line that reruns it.
std::uint64_t seed_from(const char* variable, const std::string& what);

// Reports nothing: failures are reproduced by seed (RC_PARAMS="seed=..."), so RapidCheck's own
// "reproduce=" hint, which its Catch2 integration cannot honour, is not printed.
class SilentListener : public rc::detail::TestListener {
 public:
  void onTestCaseFinished(const rc::detail::CaseDescription&) override {}
  void onShrinkTried(const rc::detail::CaseDescription&, bool) override {}
  void onTestFinished(const rc::detail::TestMetadata&, const rc::detail::TestResult&) override {}
};

// $HLA_CASES_DIVISOR, a positive integer (1 when unset): every property runs ceil(cases / it)
// cases. scripts/sanitize.sh sets 4: under the sanitizers the suite looks for memory errors and
// undefined behaviour on each code path, which a quarter of the cases reaches at a quarter of the
// cost; the release suite runs them all. Throws on any other value.
int cases_divisor();

// Checks a RapidCheck property inside the current Catch2 test case, `cases` times (divided by
// cases_divisor()) unless RC_PARAMS sets max_success. A failure reports the counterexample, the
// seed and the command that reruns this test case with that seed; the test case goes on to its
// next property.
template <class Testable>
void property(const std::string& description, Testable&& testable, int cases = 100) {
  using namespace rc::detail;
  TestParams params = configuration().testParams;
  const char* env = std::getenv("RC_PARAMS");
  if (env == nullptr || std::string(env).find("max_success") == std::string::npos) {
    const int divisor = cases_divisor();
    params.maxSuccess = (cases + divisor - 1) / divisor;
  }
  TestMetadata metadata;
  metadata.id = description;
  metadata.description = description;
  SilentListener listener;
  const TestResult result = checkTestable(std::forward<Testable>(testable), metadata, params, listener);
  if (result.template is<SuccessResult>()) {
    SUCCEED(description);
    return;
  }
  std::ostringstream message;
  message << description << "\n";
  printResultMessage(result, message);
  message << "\nseed " << params.seed << "; rerun: RC_PARAMS=\"seed=" << params.seed << "\" "
          << program_name() << " \"" << Catch::getResultCapture().getCurrentTestName() << "\"";
  FAIL_CHECK(message.str());
}

}  // namespace hla::testing
