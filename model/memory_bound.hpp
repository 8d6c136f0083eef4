// The HBM a step needs whatever its timing: bytes that are live at one moment in every schedule
// the engine could produce, read off the step's graph before it is simulated (issue #21: `twin
// tune` skips the configurations this already rules out).
//
// A buffer's allocation and free are tied to tasks (step_memory.hpp: a task's start or end). On
// a rank's compute stream, whose tasks form a chain, take a task C that certainly takes time
// (a kernel of ≥ 1 µs alone: its end is later than its start). A buffer is live across C in
// every schedule when
//   its allocation task precedes C in the graph (or is C, allocating at its start): allocated at
//     or before C's start, and
//   C precedes its free task (or is it, freeing at its end), or it is never freed: freed at or
//     after C's end.
// So once the replay (memory_replay.hpp) has taken every event up to C's start, all such
// buffers are allocated at once; a caching allocator never holds more than its capacity, so
// if they sum to more, some allocation failed: the replay reports out-of-memory, in every
// schedule. Precedence is taken from the graph's edges within a rank only (collectives join
// ranks at run time, not by edges): what it misses makes the bound smaller, never wrong.
//
// The chain's positions make it linear: per task, the first compute-stream task it precedes
// (a pass in reverse topological order) and the last one that precedes it (a forward pass);
// each buffer adds its bytes to a range of positions (a difference array).
#pragma once

#include <cstdint>

#include "model/step_memory.hpp"
#include "model/step_ops.hpp"
#include "sim/task.hpp"

namespace twin::model {

struct CertainLive {
  std::int64_t bytes = 0;  // the most bytes live at once in every schedule, on the worst rank
  std::int64_t rank = -1;  // that rank (−1: no compute-stream task that takes time)
  std::int64_t task = -1;  // the compute-stream task they are all live across
};

// `lanes_per_rank` streams per rank (task.lane = rank · lanes_per_rank + stream); `compute` is
// the stream whose tasks form a chain. A rank whose compute stream is not a chain of edges
// (each task after the one before) is left out.
CertainLive certain_live(const sim::TaskGraph& g, const BufferLog& log, const StepOps& ops,
                         std::int32_t lanes_per_rank, std::int32_t compute);

}  // namespace twin::model
