// One scenario through the twin: load → build the step graph → run the engine → metrics.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "scenarios/loader.hpp"

namespace twin::scenarios {

struct RunOptions {
  std::vector<int> trace_ranks;  // ranks whose streams go into the Chrome trace
  bool trace = false;
  std::uint64_t event_limit = 2'000'000'000;
  int alloc_events_rank = -1;  // ≥ 0: export that rank's allocation sequence
  int plan_rank = -1;          // ≥ 0: export that rank's launch plan (scenarios/plan.hpp)
};

struct RunResult {
  Json json;          // the metrics of reports/metrics.hpp (stable names)
  std::string trace;  // Chrome trace JSON when asked for
  // One rank's allocations in simulated order, for replay on a real allocator:
  // {"capacity_bytes", "expandable_segments", "pools": [...], "events": [["alloc", id, bytes,
  // pool, name] | ["free", id]]}.
  Json alloc_events;
  Json plan;  // scenarios/plan.hpp, when asked for
};

RunResult simulate(const Loaded& loaded, const RunOptions& opts);
// The GPUs (ranks) a simulation of the scenario has: one replica's, or every replica's.
int simulated_gpus(const Scenario& s);

// A short readable summary of a result.
std::string summary(const Json& result);

}  // namespace twin::scenarios
