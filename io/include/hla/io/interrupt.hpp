#pragma once

// SIGINT and SIGTERM, and the processes the tool starts. install_interrupt_handling() blocks both
// signals in every thread and waits for them on a thread of its own. On a signal it stops every
// child process started through run_child/start_child (each runs in its own process group, so a
// Ctrl-C at the terminal reaches only hla), removes every path registered as Temporary, prints
// "hla: interrupted by SIGINT" and exits with 128 + the signal's number; a command that reports
// its own interruption (hla fuzz) asks for that with set_interrupt_returns(true) instead.

#include <csignal>
#include <filesystem>
#include <string>
#include <vector>

namespace hla::io {

// Call once, first thing in main, before any thread starts.
void install_interrupt_handling();

// The signal that interrupted the run, or 0.
int interrupted();

// With true, a signal stops the children and sets interrupted() but leaves the process running.
void set_interrupt_returns(bool returns);

// A path removed (recursively) if the run is interrupted while the object lives.
class Temporary {
 public:
  explicit Temporary(std::filesystem::path path);
  Temporary(const Temporary&) = delete;
  Temporary& operator=(const Temporary&) = delete;
  ~Temporary();

 private:
  std::filesystem::path path_;
};

// Starts argv[0] with arguments argv[1..] in a process group of its own, with the signals
// unblocked and stdout and stderr sent to `log` when it is not empty; `environment` entries
// ("NAME=value") are added. Returns the child's pid. Throws hla::Error if it cannot start.
pid_t start_child(const std::vector<std::string>& argv, const std::filesystem::path& log = {},
                  const std::vector<std::string>& environment = {});

// Waits for a child started by start_child; returns its wait status. `block` false: returns -1
// at once while it runs.
int wait_child(pid_t pid, bool block = true);

// Sends SIGTERM to a child's process group and waits for it.
void stop_child(pid_t pid);

// start_child, then wait_child: the child's wait status.
int run_child(const std::vector<std::string>& argv);

}  // namespace hla::io
