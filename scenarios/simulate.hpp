// One scenario through the twin: load → build the step graph → run the engine → metrics.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "reports/step_report.hpp"
#include "scenarios/loader.hpp"

namespace twin::scenarios {

struct RunOptions {
  std::vector<int> trace_ranks;  // ranks whose streams go into the Chrome trace
  bool trace = false;
  std::uint64_t event_limit = 2'000'000'000;
  double memory_limit_GiB = 0;  // > 0: refuse a run estimated to need more (estimate_resources)
  int alloc_events_rank = -1;   // ≥ 0: export that rank's allocation sequence
  int snapshot_rank = -1;       // ≥ 0: that rank's allocator snapshot (memory_snapshot.hpp)
  int plan_rank = -1;           // ≥ 0: export that rank's launch plan (scenarios/plan.hpp)
  bool plan_all_ranks = false;  // export every simulated rank's plan (RunResult::plans)
  // Before simulating, look for HBM that runs out whatever the timing (model/memory_bound.hpp);
  // if so, stop there: RunResult::certain_oom says why and nothing else is set (`twin tune`).
  bool stop_if_certain_oom = false;
};

// More bytes live at once in every schedule than the allocator may hold, on one rank.
struct CertainOom {
  double live_GiB = 0, capacity_GiB = 0;
  std::int64_t rank = -1;
  std::string across;  // the compute-stream task they are all live across, with its layer
};

struct RunResult {
  reports::StepReport report;  // the metrics of reports/metrics.hpp, typed
  Json json;                   // the same as `twin run --json` writes them (stable names)
  std::string trace;           // Chrome trace JSON when asked for
  // One rank's allocations in simulated order, for replay on a real allocator:
  // {"capacity_bytes", "expandable_segments", "pools": [...], "events": [["alloc", id, bytes,
  // pool, name, t_s] | ["free", id, t_s]]}, t_s the simulated time in the step.
  Json alloc_events;
  Json plan;                              // scenarios/plan.hpp, when asked for
  std::vector<Json> plans;                // every rank's, in rank order, with plan_all_ranks
  Json memory_snapshot;                   // scenarios/memory_snapshot.hpp, when asked for
  std::optional<CertainOom> certain_oom;  // with RunOptions::stop_if_certain_oom: not simulated
};

RunResult simulate(const Loaded& loaded, const RunOptions& opts);
// The GPUs (ranks) a simulation of the scenario has: one replica's, or every replica's.
int simulated_gpus(const Scenario& s);

// What a run will hold, estimated from the resolved scenario before anything is built: the
// documents drawn for every replica's rows (model/workload.cpp: rows × 9 bands × seq_len tokens
// over the mean document length) and the step graph's tasks (~41 per simulated GPU and layer:
// scenarios/europa.json builds 0.97 M tasks for 384 GPUs × 61 layers, in 255 MB).
struct ResourceEstimate {
  double documents = 0, tasks = 0, events = 0, GiB = 0;
};
ResourceEstimate estimate_resources(const Scenario& s);
// Refuses a run, before any allocation, that would pass opts.memory_limit_GiB (InputError naming
// the estimate, the limit and the keys that drive it) or opts.event_limit (sim::EventLimitExceeded,
// as a run that passes it): issue #23, item 8.
void check_resources(const Scenario& s, const std::string& file, const RunOptions& opts);

}  // namespace twin::scenarios
