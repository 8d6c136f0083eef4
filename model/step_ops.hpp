// What each task of a step does, as data. The step builder (step_graph.hpp) emits the task graph
// (streams, edges), the buffer log (step_memory.hpp) and these records, and nothing else; a
// task without a record is a marker (it takes no time). bind_step() attaches the records to a
// machine — the only place where the step meets hardware/ — and then merges its alike links
// (hardware/collective.hpp), so a step is bound once, whole. Launch plans, the memory log and
// traces read the same data.
#pragma once

#include <cstdint>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/collective.hpp"
#include "hardware/ops.hpp"
#include "sim/large_pages.hpp"
#include "sim/task.hpp"

namespace twin::model {

// One kernel (hardware/ops.hpp: its time alone, HBM bytes, class and contention shape).
struct KernelOp {
  std::uint32_t task;
  std::int32_t rank;
  hardware::KernelWork work;
};
// Grid kernels back to back as one task: parts [first, first + count) of StepOps::parts.
struct FusedOp {
  std::uint32_t task;
  std::int32_t rank;
  std::uint32_t first, count;
};
// One collective over a process group (its ranks, in ring order: the comm plan's groups, which
// outlive the ops): task first_task + i on GPU (*ranks)[i].
struct CollectiveOp {
  std::uint32_t first_task;
  hardware::CollKind kind;
  int ctas;
  bool across_copies;
  double bytes;
  const std::vector<int>* ranks;
  hardware::Gpu::Priority priority;
};
struct CopyOp {
  std::uint32_t task;
  std::int32_t rank;
  hardware::CopyDir dir;
  double bytes;
};
// `core_s` core·seconds on at most `max_cores` of the rank's cores.
struct CpuOp {
  std::uint32_t task;
  std::int32_t rank;
  double core_s, max_cores;
};
// A gloo collective of `bytes` among the host threads of the tasks' ranks (collective.hpp).
struct CpuCollectiveOp {
  hardware::CpuCollKind kind;
  std::vector<std::uint32_t> tasks;
  double bytes;
};

// The numerous records in append-only chunks of 2 MiB or more (sim/large_pages.hpp): no copy as
// they grow, and pages a previous simulation already touched.
struct StepOps {
  sim::Chunked<KernelOp, 16> kernels;
  sim::Chunked<FusedOp, 17> fused;
  sim::Chunked<hardware::KernelPart, 16> parts;  // of the fused tasks; each task's run contiguous
  sim::Chunked<CollectiveOp, 16> collectives;
  sim::Chunked<CopyOp, 17> copies;
  std::vector<CpuOp> cpu;
  std::vector<CpuCollectiveOp> cpu_collectives;
};

// Binds every record to the machine: each task's on_ready runs its work there. The ops must
// outlive the simulation (fused tasks read their parts in place).
void bind_step(const StepOps& ops, sim::TaskGraph& g, hardware::Cluster& c);

}  // namespace twin::model
