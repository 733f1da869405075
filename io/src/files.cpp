#include "hla/io/files.hpp"

#include <fcntl.h>
#include <stdio.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <optional>
#include <set>
#include <sstream>

#include "hla/io/interrupt.hpp"
#include "hla/reference/error.hpp"

namespace hla::io {
namespace {

namespace fs = std::filesystem;

// Why a file cannot be written at `p` (resolved), or nullopt.
std::optional<std::string> unwritable_file(const fs::path& p) {
  std::error_code ec;
  const fs::file_status st = fs::status(p, ec);
  if (st.type() == fs::file_type::not_found && fs::is_symlink(fs::symlink_status(p, ec)))
    return "is a symlink to a missing file; name the file itself";
  switch (st.type()) {
    case fs::file_type::not_found: {
      const fs::path parent = p.parent_path();
      if (!fs::is_directory(parent, ec)) return "no such directory " + parent.string();
      if (access(parent.c_str(), W_OK) != 0) return "cannot write in " + parent.string();
      return std::nullopt;
    }
    case fs::file_type::regular:
      if (access(p.parent_path().c_str(), W_OK) != 0) return "cannot write in " + p.parent_path().string();
      return std::nullopt;
    case fs::file_type::character:
      if (access(p.c_str(), W_OK) != 0) return "cannot write to this device";
      return std::nullopt;
    case fs::file_type::directory:
      return "is a directory; name a file";
    case fs::file_type::fifo:
      return "is a FIFO; name a regular file";
    case fs::file_type::socket:
      return "is a socket; name a regular file";
    case fs::file_type::block:
      return "is a block device; name a regular file";
    default:
      return "is not a regular file";
  }
}

bool same_file(const fs::path& a, const fs::path& b) {
  std::error_code ec;
  if (fs::exists(a, ec) && fs::exists(b, ec)) return fs::equivalent(a, b, ec);
  return a == b;
}

void write_all(int fd, const std::string& bytes, const std::string& path) {
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) throw Error(path + ": cannot write the output file (" + std::strerror(errno) + ")");
    done += static_cast<std::size_t>(n);
  }
}

// The files (and symlinks and other entries) under `dir`, relative, sorted; directories left out.
std::vector<std::string> entries_under(const fs::path& dir) {
  std::vector<std::string> out;
  for (const fs::directory_entry& e : fs::recursive_directory_iterator(dir)) {
    if (!e.is_symlink() && e.is_directory()) continue;
    out.push_back(e.path().lexically_relative(dir).string());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Why `dir` (an existing directory) may not be replaced, or nullopt: it is empty, or it holds
// exactly the regular files its marker lists.
std::optional<std::string> not_ours(const fs::path& dir) {
  std::error_code ec;
  if (fs::is_empty(dir, ec)) return std::nullopt;
  const fs::path marker = dir / directory_marker;
  std::ifstream in(marker);
  std::string line;
  if (!fs::is_regular_file(fs::symlink_status(marker, ec)) || !std::getline(in, line) ||
      line.rfind("hla ", 0) != 0) {
    return "is not empty and holds no " + std::string(directory_marker) +
           " marker of an earlier run; name a new or empty directory";
  }
  std::set<std::string> listed{directory_marker};
  while (std::getline(in, line)) {
    if (!line.empty()) listed.insert(line);
  }
  for (const std::string& entry : entries_under(dir)) {
    if (!listed.contains(entry) || !fs::is_regular_file(fs::symlink_status(dir / entry, ec))) {
      return "holds " + entry + ", which hla did not write there; move it or name another directory";
    }
  }
  return std::nullopt;
}

// ".<name><suffix>": a hidden name beside `p` (appended, which GCC 12's -Wrestrict leaves alone).
std::string hidden_name(const fs::path& p, const char* suffix) {
  std::string name(1, '.');
  name += p.filename().string();
  name += suffix;
  return name;
}

// A fresh, empty directory beside `target`, named after it.
fs::path make_staging(const fs::path& target) {
  std::string name = (target.parent_path() / hidden_name(target, ".hla-staging-XXXXXX")).string();
  if (mkdtemp(name.data()) == nullptr)
    throw Error(target.string() + ": cannot create a directory beside it (" + std::strerror(errno) + ")");
  return name;
}

}  // namespace

fs::path resolve(const std::string& text) {
  fs::path p = fs::absolute(text).lexically_normal();
  if (!p.has_filename() && p != p.root_path()) p = p.parent_path();  // "dir/", "."
  std::error_code ec;
  if (fs::exists(p, ec)) {  // /dev/stdout on a pipe names "pipe:[N]": not a path, kept as it is
    const fs::path real = fs::canonical(p, ec);
    return ec ? p : real;
  }
  if (fs::is_symlink(fs::symlink_status(p, ec))) return p;  // dangling: refused by the checks
  if (fs::is_directory(p.parent_path(), ec)) return fs::canonical(p.parent_path()) / p.filename();
  return p;
}

void check_outputs(std::span<const NamedPath> outputs, std::span<const NamedPath> inputs) {
  std::vector<std::pair<const NamedPath*, fs::path>> files;
  for (const NamedPath& out : outputs) {
    if (out.path.empty()) throw Error(out.flag + ": an empty path");
    const fs::path p = resolve(out.path);
    if (const auto why = unwritable_file(p)) throw Error(out.flag + ": " + out.path + ": " + *why);
    for (const NamedPath& in : inputs) {
      if (!in.path.empty() && same_file(p, resolve(in.path)))
        throw Error(out.flag + ": " + out.path + " is also the input " + in.flag + "; write elsewhere");
    }
    std::error_code ec;
    if (fs::is_character_file(p, ec)) continue;  // /dev/null may take several outputs
    for (const auto& [other, q] : files) {
      if (same_file(p, q))
        throw Error(out.flag + ": " + out.path + " is also the output of " + other->flag +
                    "; name two files");
    }
    files.emplace_back(&out, p);
  }
}

void write_output(const std::string& path, const std::string& bytes) {
  const fs::path p = resolve(path);
  if (const auto why = unwritable_file(p)) throw Error(path + ": " + *why);
  std::error_code ec;
  if (fs::is_character_file(p, ec)) {  // in place, unbuffered: never replaced
    const int fd = ::open(p.c_str(), O_WRONLY | O_CLOEXEC);
    if (fd < 0) throw Error(path + ": cannot open the device (" + std::strerror(errno) + ")");
    try {
      write_all(fd, bytes, path);
    } catch (...) {
      ::close(fd);
      throw;
    }
    ::close(fd);
    return;
  }
  std::string temporary = (p.parent_path() / hidden_name(p, ".hla-XXXXXX")).string();
  const int fd = mkstemp(temporary.data());
  if (fd < 0) throw Error(path + ": cannot create the output file (" + std::strerror(errno) + ")");
  const Temporary guard(temporary);
  try {
    mode_t mode = 0;
    if (fs::exists(p, ec)) {
      mode = static_cast<mode_t>(fs::status(p).permissions()) & 07777;  // keep the file's permissions
    } else {
      const mode_t mask = umask(0);
      umask(mask);
      mode = 0666 & ~mask;
    }
    fchmod(fd, mode);
    write_all(fd, bytes, path);
    if (fsync(fd) != 0) throw Error(path + ": cannot write the output file (" + std::strerror(errno) + ")");
    ::close(fd);
    if (std::rename(temporary.c_str(), p.c_str()) != 0)
      throw Error(path + ": cannot write the output file (" + std::strerror(errno) + ")");
  } catch (...) {
    ::close(fd);
    ::unlink(temporary.c_str());
    throw;
  }
}

void check_output_directory(const std::string& flag, const std::string& dir) {
  if (dir.empty()) throw Error(flag + ": an empty directory name");
  const fs::path p = resolve(dir);
  const fs::path cwd = fs::current_path();
  const fs::path inside = cwd.lexically_relative(p);
  if (!inside.empty() && *inside.begin() != "..")
    throw Error(flag + ": " + dir + " is the current directory or holds it; name a new directory");
  std::error_code ec;
  const fs::file_status link = fs::symlink_status(p, ec);
  if (fs::is_symlink(link)) throw Error(flag + ": " + dir + ": is a symlink to a missing directory");
  if (!fs::exists(link)) {
    if (!fs::is_directory(p.parent_path(), ec))
      throw Error(flag + ": " + dir + ": no such parent directory " + p.parent_path().string());
    if (access(p.parent_path().c_str(), W_OK) != 0)
      throw Error(flag + ": " + dir + ": cannot write in " + p.parent_path().string());
    return;
  }
  if (!fs::is_directory(link)) throw Error(flag + ": " + dir + ": exists and is not a directory");
  if (access(p.parent_path().c_str(), W_OK) != 0)
    throw Error(flag + ": " + dir + ": cannot write in " + p.parent_path().string());
  if (const auto why = not_ours(p)) throw Error(flag + ": " + dir + " " + *why);
}

StagedDirectory::StagedDirectory(const std::string& flag, const std::string& target)
    : flag_(flag), target_(resolve(target)), staging_(make_staging(target_)) {
  guard_ = std::make_unique<Temporary>(staging_);
}

StagedDirectory::~StagedDirectory() {
  if (committed_) return;
  std::error_code ignored;
  fs::remove_all(staging_, ignored);
}

void StagedDirectory::commit() {
  {
    std::ostringstream marker;
    marker << "hla " << HLA_VERSION << " (these files were written by hla; it may replace them)\n";
    for (const std::string& entry : entries_under(staging_)) marker << entry << "\n";
    std::ofstream out(staging_ / directory_marker);
    out << marker.str();
    if (!out.flush()) throw Error(flag_ + ": " + target_.string() + ": cannot write its marker");
  }
  check_output_directory(flag_, target_.string());  // again: it may have changed during the run
  std::error_code ec;
  if (!fs::exists(fs::symlink_status(target_, ec))) {
    fs::rename(staging_, target_);
  } else if (renameat2(AT_FDCWD, staging_.c_str(), AT_FDCWD, target_.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(staging_);  // the earlier run's files, now at the staging path
  } else {                     // no atomic exchange on this file system: move the earlier run aside first
    const fs::path previous = make_staging(target_);
    fs::rename(target_, previous);
    fs::rename(staging_, target_);
    fs::remove_all(previous);
  }
  committed_ = true;
}

}  // namespace hla::io
