// What a run will hold and how many events it will take, estimated before anything is built, and
// the limits checked against them (simulate.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "model/workload.hpp"
#include "scenarios/simulate.hpp"
#include "sim/engine.hpp"

namespace twin::scenarios {

int simulated_gpus(const Scenario& s) {
  return static_cast<int>(s.placement.simulate_all_replicas ? s.job.parallel.total_gpus()
                                                            : s.job.parallel.replica_gpus);
}

ResourceEstimate estimate_resources(const Scenario& s) {
  const auto& d = s.job.data;
  double mean_doc =
      d.doc_length_median_tokens * std::exp(d.doc_length_sigma * d.doc_length_sigma / 2);
  if (!d.doc_lengths.empty()) {
    double sum = 0;
    for (const auto n : d.doc_lengths) sum += static_cast<double>(n);
    mean_doc = sum / static_cast<double>(d.doc_lengths.size());
  }
  ResourceEstimate e;
  const double rows =
      static_cast<double>(s.job.parallel.data_ranks() * s.job.training.rows_per_gpu);
  e.documents =
      rows * model::kBands * static_cast<double>(s.job.training.seq_len) / std::max(1.0, mean_doc);
  e.tasks = 45.0 * simulated_gpus(s) * static_cast<double>(s.job.model.layers + 2);
  // An upper bound: the shipped scenarios run 0.32–0.80 events a task (2026-12-07, once a
  // flow's re-timed completion stopped leaving a stale event behind; 0.89 before).
  e.events = 1.1 * e.tasks;
  constexpr double kBytesPerTask = 300, kBytesPerDocument = 24;  // measured RSS, rounded up
  e.GiB = (e.tasks * kBytesPerTask + e.documents * kBytesPerDocument) / (1ull << 30);
  return e;
}

void check_resources(const Scenario& s, const std::string& file, const RunOptions& opts) {
  const auto e = estimate_resources(s);
  if (opts.memory_limit_GiB > 0 && e.GiB > opts.memory_limit_GiB)
    throw InputError(
        file, "",
        fmt::format("this run would need ~{:.1f} GiB ({:.3g} tasks, {:.3g} documents); "
                    "the limit is {:.1f} GiB (--max-memory-GiB). Fewer model.layers, "
                    "parallel.replica_gpus or dp, a shorter training.seq_len or longer "
                    "documents need less",
                    e.GiB, e.tasks, e.documents, opts.memory_limit_GiB));
  if (e.events >
      static_cast<double>(opts.event_limit))  // the run's budget, as when a run passes it
    throw sim::EventLimitExceeded(
        fmt::format("{}: this run would need ~{:.3g} events; the limit is {}", file, e.events,
                    opts.event_limit));
}

}  // namespace twin::scenarios
