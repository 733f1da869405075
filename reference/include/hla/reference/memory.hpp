#pragma once

// How much memory a run may take, checked before it allocates: a size that cannot fit gets one
// line naming it, not std::bad_alloc half-way.

#include <cstdint>
#include <string>

namespace hla {

// The memory this machine can give now (Linux's MemAvailable; else its physical memory), in bytes.
std::uint64_t available_memory();

// Throws hla::Error("<what> needs about X GiB; this machine has Y GiB available") when `bytes`
// exceeds available_memory().
void require_memory(double bytes, const std::string& what);

}  // namespace hla
