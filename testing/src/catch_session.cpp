#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>
#include <iostream>
#include <random>
#include <stdexcept>
#include <string>
#include <string_view>

#include "hla/testing/property.hpp"

namespace hla::testing {

int run_catch(int argc, char* argv[]) {
  set_program_name(argc > 0 ? argv[0] : "test");
  Catch::Session session;
  if (const int status = session.applyCommandLine(argc, argv); status != 0) return status;
  // A test name or tag that matches no test case fails (exit status 2) rather than passing with none run.
  auto& config = session.configData();
  config.warnings = static_cast<Catch::WarnAbout::What>(config.warnings | Catch::WarnAbout::NoTests);
  return session.run();
}

int run_catch_unless(int argc, char* argv[], const std::optional<std::string>& skip_reason) {
  bool listing = false;
  for (int i = 1; i < argc; ++i) listing = listing || std::string_view(argv[i]).starts_with("--list");
  if (skip_reason && !listing) {
    std::cout << "skipped: " << *skip_reason << "\n";
    return 77;
  }
  return run_catch(argc, argv);
}

std::uint64_t seed_from(const char* variable, const std::string& what) {
  const char* env = std::getenv(variable);
  const std::uint64_t seed = env != nullptr ? std::strtoull(env, nullptr, 10) : std::random_device{}();
  std::cout << what << " seed " << seed << " (" << variable << "=" << seed << " reruns it)\n";
  return seed;
}

int cases_divisor() {
  static const int divisor = [] {
    const char* env = std::getenv("HLA_CASES_DIVISOR");
    if (env == nullptr) return 1;
    char* end = nullptr;
    const long value = std::strtol(env, &end, 10);
    if (*env == '\0' || *end != '\0' || value < 1 || value > 1000000)
      throw std::invalid_argument(std::string("HLA_CASES_DIVISOR: '") + env + "' is not a positive integer");
    return static_cast<int>(value);
  }();
  return divisor;
}

}  // namespace hla::testing
