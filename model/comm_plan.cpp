#include "model/comm_plan.hpp"

#include <algorithm>
#include <stdexcept>

namespace twin::model {

using hardware::CollKind;

CommPlan plan_comms(const Job& job, const hardware::NcclOptions& nccl, int sm_count) {
  const auto& d = nccl.default_ctas;
  const auto& t = job.training;
  const bool a2a_grads = t.grad_reduce == GradReduce::bf16_all_to_all;
  // NCCL's own channel count of each collective (nccl.default_ctas), capped as NCCL_MAX_CTAS says.
  auto planned = [&](Comm comm, CollKind kind, std::int64_t default_ctas, bool in_job = true) {
    return PlannedCollective{
        comm, kind, hardware::channels(kind, static_cast<int>(default_ctas), nccl, sm_count),
        in_job};
  };
  CommPlan p;
  auto set = [&p](StepColl c, PlannedCollective x) { p.colls[static_cast<std::size_t>(c)] = x; };
  set(StepColl::dense_gather, planned(Comm::dense, CollKind::all_gather, d.dense));
  set(StepColl::dense_reduce, planned(Comm::dense, CollKind::reduce_scatter, d.dense));
  set(StepColl::nvlink_gather, planned(Comm::node, CollKind::all_gather, d.nvlink_gather,
                                       t.dense_reshard == DenseReshard::node_local));
  const bool moe = job.model.moe();  // a dense model runs no expert or EP collective
  set(StepColl::expert_gather,
      planned(Comm::expert, CollKind::all_gather, d.expert_allgather, moe));
  set(StepColl::expert_grad_reduce,
      a2a_grads ? planned(Comm::expert, CollKind::all_to_all, d.grad_all_to_all, moe)
                : planned(Comm::expert, CollKind::reduce_scatter, d.expert_reduce_scatter, moe));
  // A per-rank dispatcher (HybridEP, DeepEP) is not NCCL: it runs on its own SMs, which
  // NCCL_MAX_CTAS does not cap.
  auto ep = planned(Comm::ep, CollKind::all_to_all, d.ep_all_to_all, moe);
  if (t.ep_dispatch == EpDispatch::per_rank)
    ep.ctas = static_cast<int>(std::min<std::int64_t>(d.ep_all_to_all, sm_count));
  set(StepColl::ep_all_to_all, ep);
  set(StepColl::replica_all_reduce,
      planned(Comm::replica, CollKind::all_reduce, d.replica_all_reduce, job.parallel.dp > 1));
  // The norm's scalar: accumulated during backward (rung 11a), or computed by a GPU optimizer.
  set(StepColl::norm_all_reduce, planned(Comm::dense, CollKind::all_reduce, d.dense,
                                         t.grad_norm == GradNorm::accumulated || !t.cpu_offload));
  const bool tp = job.parallel.tp > 1;
  set(StepColl::tp_all_gather, planned(Comm::tp, CollKind::all_gather, d.tp, tp));
  set(StepColl::tp_reduce_scatter, planned(Comm::tp, CollKind::reduce_scatter, d.tp, tp));
  set(StepColl::float8_amax,
      planned(Comm::dense, CollKind::all_reduce, d.dense, t.float8 && t.float8_all_gather));
  return p;
}

int CommPlan::buffered_channels() const {
  std::array<int, static_cast<std::size_t>(Comm::count)> most{};
  for (const auto& c : colls)
    if (c.in_job) {
      auto& m = most[static_cast<std::size_t>(c.comm)];
      m = std::max(m, c.ctas);
    }
  int sum = 0;
  for (int m : most) sum += m;
  return sum;
}

ProcessGroups process_groups(const ParallelPlan& p, int ranks, int gpus_per_node, int copies) {
  const int R = static_cast<int>(p.replica_gpus), ep = static_cast<int>(p.ep);
  const int dp = ranks / R;  // replicas simulated: all of them, or one standing for every copy
  if (ranks % R != 0 || (dp != p.dp && copies != p.dp))
    throw std::invalid_argument("the cluster holds neither one replica nor all of them");
  ProcessGroups g;
  auto add = [&g](Comm c) -> std::vector<int>& {
    return g.of[static_cast<std::size_t>(c)].emplace_back();
  };
  const int tp = static_cast<int>(p.tp);
  for (int d = 0; d < dp; ++d) {
    for (int i = 0; i < tp; ++i) {  // a dense shard group: the ranks of one TP index
      auto& dense = add(Comm::dense);
      for (int j = i; j < R; j += tp) dense.push_back(d * R + j);
    }
    for (int b = 0; b < ep; ++b) {
      auto& expert = add(Comm::expert);
      for (int j = b; j < R; j += ep) expert.push_back(d * R + j);
    }
  }
  for (int r = 0; r < ranks; r += ep) {
    auto& e = add(Comm::ep);
    for (int j = 0; j < ep; ++j) e.push_back(r + j);
  }
  for (int r = 0; r < ranks; r += gpus_per_node) {
    auto& n = add(Comm::node);
    for (int j = 0; j < gpus_per_node; ++j) n.push_back(r + j);
  }
  for (int j = 0; j < R; ++j) {
    auto& rep = add(Comm::replica);
    for (int d = 0; d < dp; ++d) rep.push_back(d * R + j);
  }
  for (int r = 0; r < ranks; r += tp) {
    auto& t = add(Comm::tp);
    for (int j = 0; j < tp; ++j) t.push_back(r + j);
  }
  g.replicas_are_copies = copies > 1;
  return g;
}

}  // namespace twin::model
