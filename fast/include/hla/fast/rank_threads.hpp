#pragma once

// Ranks as threads of one process (fast/ranks.hpp on the CPU, ranks simulated on one GPU): their
// exchange and how they run. No driver here, so that the GPU's host code includes none.

#include <barrier>
#include <exception>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "hla/reference/error.hpp"

namespace hla::fast {

// The exchange of ranks that are threads of one process: all_gather hands every rank the items of
// all, in rank order, once each has given its own. A rank that fails calls abandon(), which releases
// the others: their all_gather then throws instead of waiting for it. Once abandoned, an exchange is
// spent: every later all_gather throws at once (make a new one for the next run).
template <class Item>
class ThreadExchange {
 public:
  explicit ThreadExchange(int ranks) : items_(ranks), barrier_(ranks) {}

  std::vector<Item> all_gather(int rank, Item mine) {
    check();  // a spent exchange's barrier may expect no one: arriving there would corrupt it
    items_[rank] = std::move(mine);
    barrier_.arrive_and_wait();
    check();
    std::vector<Item> all = items_;
    barrier_.arrive_and_wait();  // nobody overwrites an item before every rank has copied it
    check();
    return all;
  }
  // Called once for each rank that will not all_gather again (by itself, or by whoever could not
  // start it).
  void abandon() {
    {
      const std::scoped_lock lock(mutex_);
      abandoned_ = true;
    }
    barrier_.arrive_and_drop();
  }

 private:
  void check() {
    const std::scoped_lock lock(mutex_);
    if (abandoned_) throw Error("another rank failed");
  }

  std::vector<Item> items_;
  std::barrier<> barrier_;
  std::mutex mutex_;
  bool abandoned_ = false;
};

// Runs rank(r) on one thread per rank; a rank that throws calls abandon() (which must release the
// ranks waiting for it, as ThreadExchange::abandon does), and so does this function once for each rank
// whose thread it could not start. Rethrows the first failure, a rank's own before the "another rank
// failed" of those it released; a thread that could not start before them all.
template <class Rank, class Abandon>
void run_ranks(int ranks, const Rank& rank, const Abandon& abandon) {
  std::vector<std::exception_ptr> failures(ranks);
  std::exception_ptr not_started;
  std::mutex mutex;
  int first = -1;
  {
    std::vector<std::jthread> threads;
    threads.reserve(ranks);
    for (int r = 0; r < ranks && !not_started; ++r) {
      try {
        threads.emplace_back([&, r] {
          try {
            rank(r);
          } catch (...) {
            failures[r] = std::current_exception();
            {
              const std::scoped_lock lock(mutex);
              if (first < 0) first = r;
            }
            abandon();
          }
        });
      } catch (const std::exception& e) {
        // No thread for ranks r, r + 1, ...: release the ranks that wait for them.
        not_started =
            std::make_exception_ptr(Error("--ranks: cannot start the thread of rank " + std::to_string(r) +
                                          " of " + std::to_string(ranks) + " (" + e.what() + ")"));
        for (int missing = r; missing < ranks; ++missing) abandon();
      }
    }
  }
  if (not_started) std::rethrow_exception(not_started);
  if (first >= 0) std::rethrow_exception(failures[first]);
}

}  // namespace hla::fast
