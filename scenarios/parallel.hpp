// Runs independent jobs on N threads and returns their results in input order, whatever order
// they finish in (deterministic output for sweeps and the ladder). An exception in any job stops
// the others from taking new jobs and is rethrown on the calling thread once all have joined —
// the one of the lowest job index, so that the same input gives the same error with 1 or N
// threads (an exception escaping a thread would end the process: issue #23, item 1).
#pragma once

#include <atomic>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

#include "reports/progress.hpp"

namespace twin::scenarios {

// `progress` (may be null) hears of each finished job.
template <class R>
std::vector<R> run_parallel(std::size_t n, int jobs, const std::function<R(std::size_t)>& f,
                            reports::Progress* progress = nullptr) {
  std::vector<R> out(n);
  std::atomic<std::size_t> next{0};
  std::atomic<bool> failed{false};
  std::mutex m;
  std::exception_ptr first;
  std::size_t first_index = n;
  auto worker = [&] {
    for (std::size_t i; !failed && (i = next++) < n;) {
      try {
        out[i] = f(i);
        if (progress != nullptr) progress->done();
      } catch (...) {
        const std::lock_guard<std::mutex> lock(m);
        if (i < first_index) first = std::current_exception(), first_index = i;
        failed = true;
      }
    }
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < std::max(1, jobs); ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  if (first) std::rethrow_exception(first);
  return out;
}

}  // namespace twin::scenarios
