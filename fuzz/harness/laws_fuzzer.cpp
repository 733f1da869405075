// libFuzzer harness: the laws of one scan operator, named by HLA_FUZZ_OPERATOR, on every input.
// A violated law prints "hla-fuzz violation: ..." with the minimized input and aborts, so that
// libFuzzer saves the input as a crash artifact.

#include <cstdio>
#include <cstdlib>
#include <string>

#include "hla/checking/law_check.hpp"

namespace {
std::string operator_id;
}

// No allocation stacks in AddressSanitizer reports: recording one per allocation halves the
// execution rate of this allocation-heavy harness. Errors are still caught and reported with
// the stack of the faulting access; ASAN_OPTIONS=malloc_context_size=30 restores them.
extern "C" const char* __asan_default_options() {
  return "malloc_context_size=0";
}

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  const char* id = std::getenv("HLA_FUZZ_OPERATOR");
  if (id == nullptr || hla::checking::find_operator(id) == nullptr) {
    std::fprintf(stderr, "hla-fuzz: set HLA_FUZZ_OPERATOR to one of the operators of `hla fuzz --list`\n");
    std::exit(2);
  }
  operator_id = id;
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (const auto violation = hla::checking::check_bytes(operator_id, data, size)) {
    const std::string message =
        hla::checking::report(operator_id, hla::checking::minimize(operator_id, *violation));
    std::fprintf(stderr, "hla-fuzz violation: %s\n", message.c_str());
    std::abort();
  }
  return 0;
}
