#include "hla/io/interrupt.hpp"

#include <fcntl.h>
#include <pthread.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>
#include <thread>

#include "hla/reference/error.hpp"

namespace hla::io {
namespace {

namespace fs = std::filesystem;

std::mutex registry_mutex;
std::vector<pid_t> children;        // each the leader of its own process group
std::vector<fs::path> temporaries;  // removed on an interrupt
std::atomic<int> signal_seen{0};
std::atomic<bool> interrupt_returns{false};

sigset_t handled_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGINT);
  sigaddset(&set, SIGTERM);
  return set;
}

// SIGTERM to each child's group; after two seconds, SIGKILL to what still runs.
void stop_all(const std::vector<pid_t>& pids, bool reap) {
  for (const pid_t pid : pids) kill(-pid, SIGTERM);
  if (!reap) return;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(2);
  for (const pid_t pid : pids) {
    while (waitpid(pid, nullptr, WNOHANG) == 0) {
      if (std::chrono::steady_clock::now() > deadline) {
        kill(-pid, SIGKILL);
        waitpid(pid, nullptr, 0);
        break;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
  }
}

[[noreturn]] void watch() {
  const sigset_t set = handled_signals();
  while (true) {
    int sig = 0;
    if (sigwait(&set, &sig) != 0) continue;
    signal_seen = sig;
    std::vector<pid_t> pids;
    std::vector<fs::path> paths;
    {
      const std::lock_guard lock(registry_mutex);
      pids = children;
      paths = temporaries;
    }
    if (interrupt_returns) {
      stop_all(pids, false);
      continue;
    }
    stop_all(pids, true);
    for (const fs::path& p : paths) {
      std::error_code ignored;
      fs::remove_all(p, ignored);
    }
    std::fprintf(stderr, "\nhla: interrupted by %s\n", sig == SIGINT ? "SIGINT" : "SIGTERM");
    std::fflush(stderr);
    std::_Exit(128 + sig);
  }
}

}  // namespace

void install_interrupt_handling() {
  const sigset_t set = handled_signals();
  pthread_sigmask(SIG_BLOCK, &set, nullptr);
  std::thread(watch).detach();
}

int interrupted() {
  return signal_seen;
}

void set_interrupt_returns(bool returns) {
  interrupt_returns = returns;
}

Temporary::Temporary(fs::path path) : path_(std::move(path)) {
  const std::lock_guard lock(registry_mutex);
  temporaries.push_back(path_);
}

Temporary::~Temporary() {
  const std::lock_guard lock(registry_mutex);
  const auto it = std::find(temporaries.begin(), temporaries.end(), path_);
  if (it != temporaries.end()) temporaries.erase(it);
}

pid_t start_child(const std::vector<std::string>& argv, const fs::path& log,
                  const std::vector<std::string>& environment) {
  if (argv.empty()) throw Error("start_child: no program");
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  std::vector<char*> env;  // built before fork: the child only calls what is safe after it
  for (char** e = environ; *e != nullptr; ++e) env.push_back(*e);
  for (const std::string& e : environment) env.push_back(const_cast<char*>(e.c_str()));
  env.push_back(nullptr);
  const std::lock_guard lock(registry_mutex);  // registered before a signal can miss it
  const pid_t parent = getpid();
  const pid_t pid = fork();
  if (pid < 0) throw Error("cannot start " + argv[0]);
  if (pid == 0) {
    setpgid(0, 0);
    prctl(PR_SET_PDEATHSIG, SIGTERM);  // a killed hla takes its children with it
    if (getppid() != parent) _exit(127);
    const sigset_t set = handled_signals();
    sigprocmask(SIG_UNBLOCK, &set, nullptr);
    if (!log.empty()) {
      const int fd = open(log.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
      if (fd >= 0) {
        dup2(fd, STDOUT_FILENO);
        dup2(fd, STDERR_FILENO);
      }
    }
    execvpe(args[0], args.data(), env.data());
    _exit(127);
  }
  setpgid(pid, pid);
  children.push_back(pid);
  return pid;
}

int wait_child(pid_t pid, bool block) {
  int status = 0;
  const pid_t done = waitpid(pid, &status, block ? 0 : WNOHANG);
  if (done == 0) return -1;
  {
    const std::lock_guard lock(registry_mutex);
    children.erase(std::remove(children.begin(), children.end(), pid), children.end());
  }
  if (done < 0 && signal_seen != 0 && !interrupt_returns) {
    while (true) std::this_thread::sleep_for(std::chrono::seconds(1));  // the watcher reaped it and exits
  }
  if (done < 0) throw Error("lost a child process");
  return status;
}

void stop_child(pid_t pid) {
  stop_all({pid}, true);
  const std::lock_guard lock(registry_mutex);
  children.erase(std::remove(children.begin(), children.end(), pid), children.end());
}

int run_child(const std::vector<std::string>& argv) {
  return wait_child(start_child(argv));
}

}  // namespace hla::io
