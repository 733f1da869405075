#pragma once

// hla check --progress: each phase of a long check, told as it ends with its wall-clock seconds.

#include <chrono>
#include <functional>
#include <sstream>
#include <string>

namespace hla::reports {

using Progress = std::function<void(const std::string&)>;

class Phases {
 public:
  explicit Phases(const Progress& progress) : progress_(progress) {}
  // Tells `progress` (if any) "<what>: <seconds since the last phase> s".
  void done(const std::string& what) {
    const auto now = std::chrono::steady_clock::now();
    if (progress_) {
      std::ostringstream line;
      line.precision(3);
      line << what << ": " << std::chrono::duration<double>(now - start_).count() << " s";
      progress_(line.str());
    }
    start_ = now;
  }

 private:
  const Progress& progress_;
  std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

}  // namespace hla::reports
