// A run's metrics as one typed record: every figure `twin run` reports, each computed once
// (reports/metrics.hpp states the formulas) and read by the commands from here — the summary,
// sweep rows, the ladder, plan-dp and tune — not back out of JSON by key. to_json() writes the
// stable JSON of `twin run --json` from it, field for field (the names carry their units).
// Filled by scenarios/simulate.cpp from the run's observers (model and hardware stay out of
// reports/: STYLE.md's layering).
#pragma once

#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "reports/metrics.hpp"

namespace twin::reports {

using Json = nlohmann::ordered_json;

struct SlowestRank {
  std::size_t rank = 0;  // the rank with the most GPU compute time (union of its kernels)
  double gpu_compute_s = 0;
  std::string why;
};

// One allocator pool of one rank (model/caching_allocator.hpp's pools).
struct PoolMemory {
  std::string pool;
  double peak_allocated_GiB = 0, peak_reserved_GiB = 0;
  // At the rank's allocated peak; cached_unused = reserved − allocated.
  double at_peak_allocated_GiB = 0, at_peak_reserved_GiB = 0, cached_unused_at_peak_GiB = 0;
  // Before the first retry released anything; only on ranks that retried.
  std::optional<double> at_first_retry_allocated_GiB, at_first_retry_reserved_GiB;
};

struct RankMemory {
  std::int64_t rank = 0;
  double peak_allocated_GiB = 0, peak_reserved_GiB = 0, inactive_split_at_peak_GiB = 0;
  std::size_t alloc_retries = 0;
  bool oom = false;
  std::string failed_allocation;  // the first allocation that failed: "name (GiB, pool)"
  std::vector<PoolMemory> pools;
};

struct MemoryReport {
  double hbm_capacity_GiB = 0, nccl_buffers_GiB = 0, ep_buffers_GiB = 0;
  double hbm_peak_reserved_GiB = 0, hbm_peak_allocated_GiB = 0;  // of the worst rank
  std::size_t alloc_retries = 0;                                 // most on any rank
  std::size_t ranks_with_retries = 0;
  bool oom = false;
  RankMemory rank0, worst_rank;  // worst: the first out of memory, else the most reserved
  double host_peak_GiB = 0, host_capacity_GiB = 0, host_headroom_GiB = 0;
  double host_pinned_rounding_GiB = 0, host_pages_in_hbm_GiB = 0;
  double host_unattributed_median_GiB = 0, host_oom_probability = 0;
  double host_unattributed_kept_fraction = 1;
  std::vector<std::pair<std::string, double>> host_parts_GiB;  // in the order written
  // Fits: no HBM out-of-memory, and Grace room on a socket with the median unattributed memory.
  bool fits() const { return !oom && host_headroom_GiB > host_unattributed_median_GiB; }
};

struct LinkReport {
  std::string link;
  double bytes_GB = 0, busy_s = 0, saturated_s = 0, utilization_while_busy = 0,
         mean_utilization = 0;
};

struct NetworkReport {
  std::string placement, routing;
  std::size_t nodes = 0, groups = 0;
  int groups_per_replica_max = 0, groups_per_replica_all_reduce = 0, slowest_replica = 0;
  double slowest_gpu_speed = 1;
  std::int64_t simulated_replicas = 1;
  std::size_t links_saturating = 0;
  std::vector<LinkReport> busiest_links;  // the first 8, most saturated first
};

// The run's own cost: tasks in the step's graph, events the engine fired (cancelled and re-timed
// ones count once, when they fire), fluid components solved.
struct SimulationStats {
  std::size_t tasks = 0;
  std::uint64_t events = 0, fluid_solves = 0;
  int passes = 1;
};

struct Runnable {
  bool ok = true;
  std::string why;
};
// HBM and Grace hold what the step needs; why says which does not, and where.
Runnable runnable(const MemoryReport& m);

struct FlopsReport {
  double model_per_step = 0, with_recompute_per_step = 0, model_TFLOPs_per_gpu = 0, mfu = 0,
         hfu = 0;
};

struct StepReport {
  std::string scenario;
  double step_time_s = 0, tokens_per_s_per_gpu = 0, tokens_per_day = 0;
  SlowestRank slowest_rank;
  Breakdown rank0, slowest;                                // breakdown_s
  std::vector<std::pair<std::string, double>> gpu_time_s;  // rank 0, by category name
  double optimizer_step_s = 0;
  std::vector<std::pair<std::string, double>> optimizer_parts_s;  // rank 0, by task name
  double power_cap_s = 0;                                         // metrics.hpp
  double node_compute_spread = 0, node_comm_wait_ratio = 0;       // metrics.hpp
  double exposed_comm_s() const { return rank0.comm_wait; }
  SmTimeline::Stats nccl_sms;  // rank 0
  MemoryReport memory;
  NetworkReport network;
  SimulationStats simulation;
  Runnable runnable;
  FlopsReport flops;
  Json provenance;
  // The GPU time of a category on rank 0, 0 if it ran none.
  double gpu_time(const std::string& category) const;
};

Json to_json(const Breakdown& b);
Json to_json(const MemoryReport& m);
Json to_json(const StepReport& r);

// `twin run`'s readable summary.
std::string summary(const StepReport& r);
// What host_oom_probability assumes, where it is the bound (no socket releases its unattributed
// memory): a clause to print after it, else "".
std::string host_risk_caveat(const MemoryReport& m);

}  // namespace twin::reports
