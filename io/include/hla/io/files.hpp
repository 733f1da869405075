#pragma once

// Every file and directory the tool writes goes through here, under one promise (README, "Bad
// input, and your files"): nothing is deleted or replaced that the tool did not create, except
// an output file the user named, and nothing at an output path changes until the output is
// complete.
//
// - An output file is checked before any work (check_outputs): a symlink is followed to the file
//   it names; a directory, FIFO, socket or block device is refused; a character device
//   (/dev/null, /dev/stdout) is written in place, unbuffered, without being replaced; an output
//   that names an input, or another output, is refused. A regular file is written to a temporary
//   beside it and renamed over it when complete (write_output).
// - An output directory (the error report) is staged beside its target and swapped in when
//   complete (StagedDirectory). The tool replaces a directory only when it is empty or holds
//   exactly the files of an earlier run, listed in the marker file that run wrote.

#include <filesystem>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "hla/io/interrupt.hpp"

namespace hla::io {

// An output file named by a flag, e.g. {"--out", "o.npy"}.
struct NamedPath {
  std::string flag;
  std::string path;
};

// Throws hla::Error ("<flag>: <path>: <why>") for an output that cannot or must not be written:
// an empty path, a missing parent directory, a directory or other non-file target, a dangling
// symlink, one that names one of `inputs` or another output. Reads nothing, writes nothing.
void check_outputs(std::span<const NamedPath> outputs, std::span<const NamedPath> inputs = {});

// Writes `bytes` to `path` as check_outputs describes: a regular file through a temporary beside it
// and a rename, a character device in place. A failed or interrupted write leaves `path` as it was.
// Throws hla::Error naming the path.
void write_output(const std::string& path, const std::string& bytes);

// The marker of a directory the tool wrote: its first line names the tool and its version, the
// rest lists every file the tool wrote there, one relative path per line.
inline constexpr const char* directory_marker = ".hla-output";

// Throws hla::Error ("<flag>: <dir>: <why>, what to do") unless `dir` may receive a new output
// directory: it does not exist (its parent does), or it is an empty directory, or it holds exactly
// the files its marker lists. `dir` may end in a slash or be a symlink to a directory (the
// directory it names is used); it may not be the current directory or contain it.
void check_output_directory(const std::string& flag, const std::string& dir);

// A directory assembled beside its target and swapped in by commit(): until then the target is
// untouched; a failure, an exception or an interrupt removes the staging directory. The previous
// output, where there was one, is removed after the swap (it holds only the files its marker lists).
class StagedDirectory {
 public:
  // @pre check_output_directory(flag, target) passed
  StagedDirectory(const std::string& flag, const std::string& target);
  StagedDirectory(const StagedDirectory&) = delete;
  StagedDirectory& operator=(const StagedDirectory&) = delete;
  ~StagedDirectory();

  // Where to write the files.
  const std::filesystem::path& path() const { return staging_; }
  // Writes the marker (listing every file under path()), checks the target again and swaps.
  void commit();

 private:
  std::string flag_;
  std::filesystem::path target_, staging_;
  std::unique_ptr<Temporary> guard_;  // removed on an interrupt
  bool committed_ = false;
};

// The resolved form of an output path: absolute, without "." and "..", without a trailing slash,
// a symlink followed to what it names.
std::filesystem::path resolve(const std::string& path);

}  // namespace hla::io
