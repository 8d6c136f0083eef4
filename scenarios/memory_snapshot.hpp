// One rank's caching allocator over a simulated step in the structure of PyTorch's
// torch.cuda.memory._snapshot() after torch.cuda.memory._record_memory_history(), so that
// PyTorch's own viewers read it (pytorch.org/memory_viz, torch.cuda._memory_viz): `segments`
// (each with its blocks, as at the step's end) and `device_traces` (one list: the step's
// segment_alloc / alloc / free_requested / free_completed / segment_free / oom actions with
// their simulated time in µs). A block's or action's one frame names the twin's buffer.
// calibrate/snapshot_pickle.py pickles the JSON as the viewers expect.
#pragma once

#include "model/memory_replay.hpp"
#include "scenarios/loader.hpp"

namespace twin::scenarios {

Json memory_snapshot_json(const model::AllocatorTrace& t, const Scenario& s, int rank,
                          double capacity_bytes);

}  // namespace twin::scenarios
