// The HBM a step needs whatever its timing: bytes that are live at one moment in every schedule
// the engine could produce, read off the step's graph before it is simulated (issue #21: `twin
// tune` skips the configurations this already rules out).
//
// A buffer's allocation and free are tied to tasks (step_memory.hpp: a task's start or end).
// Take a rank's compute stream, as far as its tasks form a chain in the graph (each after the one
// before; a task that could run beside the chain, as a retry's, is left out), and a task C of it
// that certainly takes time (a kernel of ≥ 1 µs alone: it ends later than it starts). A buffer is
// live across C in every schedule when
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
// The chain makes it linear: per task, in topological order, the last chain task that precedes
// it, and in reverse, the first one it precedes; each buffer adds its bytes to a range of the
// chain's positions (a difference array).
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
// the stream whose tasks form a chain. Zero bytes (rank −1) for a graph with a cycle.
CertainLive certain_live(const sim::TaskGraph& g, const BufferLog& log, const StepOps& ops,
                         std::int32_t lanes_per_rank, std::int32_t compute);

}  // namespace twin::model
