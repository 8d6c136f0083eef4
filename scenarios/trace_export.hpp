// The Chrome trace of one simulated step (`twin run --trace`, the report's timeline): the asked
// ranks' tasks on their streams with their launches as args, arrows for dependencies across
// streams and from the peer each collective waited for, phase ends, the step as PyTorch's
// profiler names it, and counters of SMs held by NCCL and of HBM allocated and reserved per
// allocator pool (from each rank's allocator replay, `alloc`).
#pragma once

#include <map>
#include <string>
#include <vector>

#include "model/memory_replay.hpp"
#include "model/step_graph.hpp"
#include "reports/metrics.hpp"
#include "scenarios/loader.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

// Ranks in `asked` that are not simulated (outside [0, gpus)) are left out; none: rank 0.
std::string trace_text(const sim::TaskGraph& graph, const model::StepBuilder& builder,
                       const std::map<int, reports::SmTimeline>& sms,
                       const std::map<int, model::AllocatorTrace>& alloc,
                       const std::vector<int>& asked, int gpus, double step_s,
                       const Json& provenance);

}  // namespace twin::scenarios
