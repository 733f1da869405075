// libFuzzer harness: the command line's parsing. The bytes are split at NUL, space and newline
// into arguments after "hla"; they are parsed with the same definition of subcommands and options
// as the hla binary, and eval's options converted and validated. Nothing is run. Bad arguments
// must end in CLI11's or hla's one-line errors, never a crash, a hang or a sanitizer report.

#include <string>
#include <vector>

#include "hla/cli/command.hpp"
#include "hla/reference/error.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  std::vector<std::string> words{"hla"};
  std::string word;
  for (std::size_t i = 0; i < size && words.size() < 64; ++i) {
    const char c = static_cast<char>(data[i]);
    if (c == '\0' || c == ' ' || c == '\n') {
      if (!word.empty()) words.push_back(std::move(word));
      word.clear();
    } else {
      word += c;
    }
  }
  if (!word.empty()) words.push_back(word);
  std::vector<const char*> argv;
  for (const std::string& w : words) argv.push_back(w.c_str());
  hla::cli::CommandLine command;
  try {
    command.app.parse(static_cast<int>(argv.size()), argv.data());
  } catch (const CLI::Error&) {
    return 0;
  }
  try {
    if (command.eval->parsed()) {
      const hla::cli::EvalRequest request = command.eval_request();
      hla::validate(request.spec);
      hla::fast::validate(request.scan);
    }
    if (command.bench_cpu->parsed()) (void)command.bench_request();
  } catch (const hla::Error&) {
  }
  return 0;
}
