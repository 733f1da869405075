// NCCL's all-gather between ranks in separate processes (gpu.hpp, NcclRanks; docs/ranks.md). NCCL is
// opened with dlopen when first needed: the build links nothing of it, and a program that never makes
// an NcclRanks never loads it.

#include <dlfcn.h>
#include <fcntl.h>
#include <unistd.h>

#include <chrono>
#include <sstream>
#include <string>
#include <thread>
#include <type_traits>

#include "hla/fast/gpu.hpp"
#if __has_include(<nccl.h>)
#include <nccl.h>
#define HLA_HAVE_NCCL_HEADER 1
#endif

namespace hla::fast::gpu {

#if defined(HLA_HAVE_NCCL_HEADER)
namespace {

// The NCCL functions the exchange calls, resolved from libnccl.so.2 once.
struct Nccl {
  decltype(&ncclGetUniqueId) get_unique_id = nullptr;
  decltype(&ncclCommInitRank) init_rank = nullptr;
  decltype(&ncclAllGather) all_gather = nullptr;
  decltype(&ncclCommDestroy) destroy = nullptr;
  decltype(&ncclGetErrorString) error_string = nullptr;
  std::string why_not;  // empty when loaded
};

const Nccl& nccl() {
  static const Nccl loaded = [] {
    Nccl n;
    void* library = dlopen("libnccl.so.2", RTLD_NOW | RTLD_LOCAL);
    if (!library) {
      n.why_not = std::string("NCCL: cannot load libnccl.so.2 (") + dlerror() + ")";
      return n;
    }
    const auto resolve = [&](auto& function, const char* name) {
      function = reinterpret_cast<std::remove_reference_t<decltype(function)>>(dlsym(library, name));
      if (!function && n.why_not.empty()) n.why_not = std::string("NCCL: libnccl.so.2 has no ") + name;
    };
    resolve(n.get_unique_id, "ncclGetUniqueId");
    resolve(n.init_rank, "ncclCommInitRank");
    resolve(n.all_gather, "ncclAllGather");
    resolve(n.destroy, "ncclCommDestroy");
    resolve(n.error_string, "ncclGetErrorString");
    return n;  // the library stays open for the process's life
  }();
  return loaded;
}

void check_nccl(ncclResult_t result, const char* what) {
  if (result != ncclSuccess) throw Error(std::string("NCCL: ") + what + ": " + nccl().error_string(result));
}

// Rank 0's id, written to a new temporary file beside id_file and linked to id_file, which fails rather
// than replace a file that exists; the others see the whole id or nothing.
void publish(const std::string& id_file, const ncclUniqueId& id) {
  const std::string temporary = id_file + ".writing." + std::to_string(::getpid());
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_EXCL, 0600);
  if (fd < 0) throw Error("NCCL: cannot create " + temporary);
  const bool written = ::write(fd, &id, sizeof id) == static_cast<ssize_t>(sizeof id);
  ::close(fd);
  const bool linked = written && ::link(temporary.c_str(), id_file.c_str()) == 0;
  ::unlink(temporary.c_str());
  if (!linked) throw Error("NCCL: cannot create " + id_file + (written ? " (does it exist already?)" : ""));
}

ncclUniqueId await(const std::string& id_file, int rank, double timeout_s) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
  for (;;) {
    ncclUniqueId id;
    const int fd = ::open(id_file.c_str(), O_RDONLY);
    if (fd >= 0) {
      const bool read = ::read(fd, &id, sizeof id) == static_cast<ssize_t>(sizeof id);
      ::close(fd);
      if (read) return id;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      std::ostringstream message;
      message << "NCCL: rank " << rank << " waited " << timeout_s << " s for rank 0's " << id_file;
      throw Error(message.str());
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

}  // namespace

std::optional<std::string> nccl_unavailable() {
  if (!nccl().why_not.empty()) return nccl().why_not;
  return std::nullopt;
}

NcclRanks::NcclRanks(int rank, int ranks, const std::string& id_file, double timeout_s)
    : rank_(rank), ranks_(ranks) {
  if (ranks < 1 || ranks > max_ranks || rank < 0 || rank >= ranks)
    throw Error("--ranks: rank " + std::to_string(rank) + " of " + std::to_string(ranks) + " (from 1 to " +
                std::to_string(max_ranks) + " ranks)");
  if (const auto why = nccl_unavailable()) throw Error(*why);
  ncclUniqueId id;
  if (rank == 0) {
    check_nccl(nccl().get_unique_id(&id), "ncclGetUniqueId");
    publish(id_file, id);
  } else {
    id = await(id_file, rank, timeout_s);
  }
  ncclComm_t comm = nullptr;
  const ncclResult_t joined = nccl().init_rank(&comm, ranks, id, rank);  // every rank has read the id
  if (rank == 0) ::unlink(id_file.c_str());
  check_nccl(joined, "ncclCommInitRank");
  comm_ = comm;
}

NcclRanks::~NcclRanks() {
  if (comm_) nccl().destroy(static_cast<ncclComm_t>(comm_));
}

void NcclRanks::all_gather(const void* send, void* receive, std::size_t bytes, CUstream_st* stream) {
  check_nccl(nccl().all_gather(send, receive, bytes, ncclUint8, static_cast<ncclComm_t>(comm_), stream),
             "ncclAllGather");
}

#else

std::optional<std::string> nccl_unavailable() {
  return "NCCL: built without nccl.h";
}

NcclRanks::NcclRanks(int rank, int ranks, const std::string&, double) : rank_(rank), ranks_(ranks) {
  throw Error(*nccl_unavailable());
}
NcclRanks::~NcclRanks() = default;
void NcclRanks::all_gather(const void*, void*, std::size_t, CUstream_st*) {
  throw Error(*nccl_unavailable());
}

#endif

}  // namespace hla::fast::gpu
