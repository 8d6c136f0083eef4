// Who talks to whom in a step, decided once: the job's communicators (process groups), the
// collectives the step runs on each, and NCCL's channels (CTAs) for each — derived from the job
// and the NCCL options. The step builder, the NCCL buffer sizing (memory_replay.hpp) and the
// launch records read it; nothing else recomputes a CTA count. JOB.md §4 (FSDP2 + EP + HSDP),
// §6.13 (NCCL_MAX_CTAS).
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "hardware/collective.hpp"
#include "hardware/nccl_options.hpp"
#include "model/job.hpp"

namespace twin::model {

// Communicators of a rank: FSDP over the replica's ranks (dense weights), FSDP over the ranks
// holding the same expert block, EP inside a node's EP group, the node (node-local re-gather of
// dense weights, rung 10), the replicas (HSDP all-reduce).
// Tensor parallelism's group (tp consecutive ranks of a node) comes last.
enum class Comm : std::int32_t { dense, expert, ep, node, replica, tp, count };
inline constexpr sim::Named<Comm> kCommNames[] = {
    {Comm::dense, "dense"}, {Comm::expert, "expert"},   {Comm::ep, "ep"},
    {Comm::node, "node"},   {Comm::replica, "replica"}, {Comm::tp, "tp"}};

// The collectives of the step, each on one communicator with one kind.
enum class StepColl : std::int32_t {
  dense_gather,        // FSDP all-gather of dense weights (embedding, layers, head)
  dense_reduce,        // reduce-scatter of dense gradients
  nvlink_gather,       // node-local re-gather of dense weights in backward (rung 10)
  expert_gather,       // FSDP all-gather of expert weights
  expert_grad_reduce,  // expert gradients: fp32 reduce-scatter or bf16 all-to-all (rung 9)
  ep_all_to_all,       // token dispatch and combine
  replica_all_reduce,  // HSDP: gradient shards across replicas
  norm_all_reduce,     // the accumulated gradient norm's scalar (rung 11a)
  tp_all_gather,       // tensor parallelism: activations gathered over the sequence
  tp_reduce_scatter,   // … and partial sums reduced and scattered back
  float8_amax,         // FP8 all-gather: a weight's amax over its shard group
  count
};

struct PlannedCollective {
  Comm comm = Comm::dense;
  hardware::CollKind kind = hardware::CollKind::all_gather;
  int ctas = 1;        // channels it runs (hardware::channels of NCCL's own count)
  bool in_job = true;  // whether this job runs it at all (buffers are kept only for those)
};

struct CommPlan {
  std::array<PlannedCollective, static_cast<std::size_t>(StepColl::count)> colls;
  const PlannedCollective& operator[](StepColl c) const {
    return colls[static_cast<std::size_t>(c)];
  }
  // NCCL channels a rank keeps buffers for: per communicator the most channels of any of its
  // collectives the job runs, summed over communicators.
  int buffered_channels() const;
};

CommPlan plan_comms(const Job& job, const hardware::NcclOptions& nccl, int sm_count);

// The process groups of the simulated ranks (global GPU indices in ring order), per
// communicator: `ranks` simulated GPUs of `gpus_per_node` each, holding every replica or one
// standing for all of them (`copies` > 1: the replica all-reduce then runs across copies).
struct ProcessGroups {
  std::array<std::vector<std::vector<int>>, static_cast<std::size_t>(Comm::count)> of;
  bool replicas_are_copies = false;
  const std::vector<std::vector<int>>& operator[](Comm c) const {
    return of[static_cast<std::size_t>(c)];
  }
};

ProcessGroups process_groups(const ParallelPlan& p, int ranks, int gpus_per_node, int copies);

}  // namespace twin::model
