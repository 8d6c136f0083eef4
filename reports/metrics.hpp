// Metric definitions: each metric of `twin run` is defined here once, with its formula.
//
//   step_time_s           = max over ranks of the time its optimizer step ends (t = 0 is the
//                           step's start; every rank starts together).
//   tokens_per_s_per_gpu  = tokens_per_step / (GPUs · step_time_s)
//   tokens_per_day        = tokens_per_step · 86,400 / step_time_s
//   For one rank, over [0, step_time_s], with C = the union of its GPU compute-kernel intervals
//   and N = the union of its collective intervals (its NCCL kernels, from launch to end):
//     compute_overlapped  = |C ∩ N|        compute_only = |C \ N|
//     comm_wait           = |N \ C|        idle         = step_time_s − |C ∪ N|
//   (the four sum to step_time_s); exposed_comm_s = comm_wait of rank 0.
//   node_compute_spread   over the simulated nodes n (G GPUs each), with c(n) = the mean over its
//                         GPUs of |C|: (max_n c(n) − min_n c(n)) / mean_n c(n) — the public
//                         JUPITER logs' "node-to-node step-time spread" in the twin's terms;
//   node_comm_wait_ratio  with w(n) = the mean over its GPUs of comm_wait: max_n w(n) / min_n w(n)
//                         (0 when a node waits for none) — fast nodes wait for slow ones.
//   gpu_time_s[k]         = Σ durations of the rank's tasks of kind k (overlaps counted twice).
//   optimizer_step_s      = end of the rank's optimizer − the moment its optimizer.step() begins,
//                           after the gradient norm and clip (clip_grad_norm_, which PyTorch's
//                           profiler records outside Optimizer.step#…; with the norm
//                           accumulated in backward, once the last gradient reached the host).
//   optimizer_parts_s[name] = Σ durations of rank 0's tasks of that name that start once its
//                           last gradient reached the host (backward's end): the
//                           optimizer's parts on the CPU, GPU and copies (gradient norm, its gloo
//                           all-reduce, clip, AdamW, Muon, Newton–Schulz; a collective's time
//                           includes waiting for peers).
//   power_cap_s           = Σ over rank 0's kernels of (its time alone under the power
//                           controller's clock − its time alone at full clock) (hardware/power.hpp;
//                           0 where the profile's power model is off).
//   nccl_sms              over a rank's timeline, S(t) = SMs held by NCCL CTAs:
//     mean_while_collective = ∫S dt / |{t : S(t) > 0}|,  max = max S,
//     seconds_at_or_above_64 = |{t : S(t) ≥ 64}|.
//   memory                (model/memory_replay.hpp, model/host_memory.hpp; README "Memory"):
//     host_headroom_GiB = host_capacity_GiB − host_peak_GiB; host_oom_probability =
//     1 − (1 − q·P(U > headroom))^sockets, U the memory unattributed at job start, q =
//     host_unattributed_kept_fraction (the profile's share of sockets that keep it; 1: the bound).
//   network.groups_per_replica_max = max over replicas of the Dragonfly groups its nodes span
//                         (its FSDP rings and EP groups lie inside it, so they span as many);
//   network.groups_per_replica_all_reduce = max over node positions j of the groups that the
//                         j-th node of every replica spans (the HSDP all-reduce's rings).
//   network.links         per fabric link (hardware/topology.hpp), with B = bytes it carried,
//     C = its capacity (with shared.burst_s, the last burst's), T = the union of the intervals
//     in which flows used it: busy_s = |T|,  utilization_while_busy = B / (C·|T|),
//     mean_utilization = B / (C·step); saturated_s = the time the solver found it full (it
//     fixed flows' rates);
//     links_saturating = links with saturated_s > 1% of the step.
//   flops                 model_per_step = Σ forward + backward FLOPs of the step
//   (model/accounting.hpp,
//                         no recomputation); with_recompute_per_step adds recomputation;
//                         model_TFLOPs_per_gpu = model_per_step / (GPUs · step_time_s) / 10¹²;
//                         mfu = model_per_step / (GPUs · step_time_s · bf16 dense peak);
//                         hfu = with_recompute_per_step / (the same).
//   runnable              ok = no HBM out-of-memory on any rank (model/memory_replay.hpp) and
//                         host_headroom_GiB ≥ 0; why says which and where otherwise, and for
//                         HBM whether it runs out in every schedule (model/memory_bound.hpp:
//                         max over ranks and compute-stream kernels K of Σ bytes of the
//                         buffers allocated before K starts and freed after K ends in every
//                         order the graph allows, against the allocator's capacity).
//   provenance            twin version, commit, FNV-1a of the resolved scenario (build_info.hpp).
//   plan-dp               relative_to_dp1 = tokens_per_s_per_gpu(DP) / tokens_per_s_per_gpu(1);
//                         days_to_tokens = tokens / tokens_per_day.
//                         With --samples N (shared.sample = 0 … N−1), each metric m as
//                         m_p10 / m_p50 / m_p90 = percentile(m over the samples, q), q = 0.1,
//                         0.5, 0.9, linear between the sorted values (percentile() below), and
//                         relative_to_dp1 = tokens_per_s_per_gpu_p50(DP) / _p50(1).
#pragma once

#include <cstdint>
#include <vector>

#include "sim/units.hpp"

namespace twin::reports {

struct Interval {
  std::int64_t begin_ns, end_ns;
};

// Sorts and merges in place; returns the total length in seconds.
double merge(std::vector<Interval>& v);
// Length of the intersection of two merged interval lists, in seconds.
double intersection_s(const std::vector<Interval>& a, const std::vector<Interval>& b);

struct Breakdown {
  double compute_overlapped = 0, compute_only = 0, comm_wait = 0, idle = 0;
};
Breakdown breakdown(std::vector<Interval> compute, std::vector<Interval> comm, double step_s);
// The same from lists already merged, with their lengths (what merge() returned): a report over
// hundreds of ranks sorts each list once.
Breakdown breakdown_merged(const std::vector<Interval>& compute, double compute_s,
                           const std::vector<Interval>& comm, double comm_s, double step_s);

// node_compute_spread and node_comm_wait_ratio (above) from per-rank compute time |C| and
// comm_wait, ranks numbered node by node, `gpus_per_node` each.
struct NodeSpread {
  double compute_spread = 0, comm_wait_ratio = 0;
};
NodeSpread node_spread(const std::vector<double>& compute_s, const std::vector<double>& comm_wait_s,
                       int gpus_per_node);

// The q-quantile (0 ≤ q ≤ 1) of v, linear between order statistics: sorted x, h = q·(n − 1),
// x[⌊h⌋] + (h − ⌊h⌋)·(x[⌊h⌋+1] − x[⌊h⌋]). v must not be empty.
double percentile(std::vector<double> v, double q);

// Records a step function S(t) (SMs held by NCCL) and summarises it.
class SmTimeline {
 public:
  void change(sim::Time t, int held);
  struct Stats {
    double mean_while_collective = 0;
    int max = 0;
    double seconds_at_or_above_64 = 0;
  };
  Stats stats(sim::Time end) const;
  const std::vector<std::pair<std::int64_t, int>>& points() const { return points_; }

 private:
  std::vector<std::pair<std::int64_t, int>> points_;  // (time ns, held from then on)
};

}  // namespace twin::reports
