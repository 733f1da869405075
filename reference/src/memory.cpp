#include "hla/reference/memory.hpp"

#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "hla/reference/error.hpp"

namespace hla {

std::uint64_t available_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  std::uint64_t kib = 0;
  std::string unit;
  while (meminfo >> key >> kib >> unit) {
    if (key == "MemAvailable:") return kib * 1024;
  }
  return static_cast<std::uint64_t>(sysconf(_SC_PHYS_PAGES)) *
         static_cast<std::uint64_t>(sysconf(_SC_PAGE_SIZE));
}

void require_memory(double bytes, const std::string& what) {
  const double available = static_cast<double>(available_memory());
  if (bytes <= available) return;
  char line[160];
  std::snprintf(line, sizeof line, " needs about %.1f GiB; this machine has %.1f GiB available",
                bytes / (1u << 30), available / (1u << 30));
  throw Error(what + line);
}

}  // namespace hla
