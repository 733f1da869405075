#pragma once

#include <stdexcept>
#include <string>

namespace hla {

// Bad input or an undefined value (a zero denominator in exact arithmetic). The message is
// one line that names the offending file, flag or token.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace hla
