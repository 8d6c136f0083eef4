// The run's memory metrics (reports/metrics.hpp, README "Outputs"): HBM per allocator pool from
// each rank's replay (model/memory_replay.hpp) for rank 0 and the worst rank, retries and
// out-of-memory, Grace memory per component and its out-of-memory risk.
#pragma once

#include <vector>

#include "model/host_memory.hpp"
#include "model/memory_replay.hpp"
#include "reports/step_report.hpp"
#include "scenarios/loader.hpp"

namespace twin::scenarios {

// `hbm`: every simulated rank's replay, by rank; `capacity`: what cudaMalloc may reserve.
reports::MemoryReport memory_report(const Scenario& s, const model::HostMemory& host,
                                    double capacity, const std::vector<model::HbmReplay>& hbm);

}  // namespace twin::scenarios
