// Runs independent jobs on N threads and returns their results in input order, whatever order
// they finish in (deterministic output for sweeps and the ladder).
#pragma once

#include <atomic>
#include <functional>
#include <thread>
#include <vector>

namespace twin::scenarios {

template <class R>
std::vector<R> run_parallel(std::size_t n, int jobs, const std::function<R(std::size_t)>& f) {
  std::vector<R> out(n);
  std::atomic<std::size_t> next{0};
  auto worker = [&] {
    for (std::size_t i; (i = next++) < n;) out[i] = f(i);
  };
  std::vector<std::thread> pool;
  for (int j = 1; j < std::max(1, jobs); ++j) pool.emplace_back(worker);
  worker();
  for (auto& t : pool) t.join();
  return out;
}

}  // namespace twin::scenarios
