// NCCL collectives as activities spanning ranks (JOB.md §8, §6.13).
//
// Channels: one CTA per channel, each holding one SM from its rank's launch to the collective's
// end, waiting for late peers included:
//     ctas = min(default for that collective, NCCL_MAX_CTAS if set), send/recv (all-to-all)
//     rounded up to a power of two, never more than the GPU's SMs (channels(); the caller
//     resolves them once — model/comm_plan.hpp for a step — and the spec carries the result).
// Data moves once every participant has launched (holds all its CTAs), as one fluid flow whose
// amount A is the bytes each rank sends:
//     ring all-gather / reduce-scatter of an S-byte (gathered) buffer over n ranks: A = (n−1)/n·S
//     ring all-reduce: A = 2(n−1)/n·S;   all-to-all of an S-byte send buffer: A = (n−1)/n·S.
// Links used, per rank, in units of A (so the solver shares every link among all flows):
//     ring: every node's ring traffic leaves it once per channel and NCCL spreads channels over
//           the node's NICs, so each of the node's g ring members carries 1/g of A on its NIC
//           (each direction) and forwards (g−1)/g of A over NVLink; a ring inside one node
//           sends all of A over NVLink.
//     all-to-all: the share of peers off the node on the NIC, the rest on NVLink, 1/(n−1) of A
//           on each NVLink pair to a peer of the same node.
//     HBM: hbm_traffic_factor per NVLink byte, plus one write per network byte — reserved from
//     each GPU's HBM at the collective's solo rate while it transfers (not a shared flow, so
//     that kernels of different GPUs stay independent in the solver).
// Rate bound: ctas × per-CTA bandwidth (network or NVLink, whichever the collective crosses).
// Sharing: a link splits its bandwidth among the connections using it, one per channel, so a
// collective's fair-share weight in the solver is its channel count (φ = ctas × per-CTA
// bandwidth, sim/fluid.hpp); with the per-link weights above, an 8-channel ring spread over a
// node's 4 NICs holds 2 channels' worth of each NIC beside a 64-channel all-to-all.
// Fabric (when attached, topology.hpp): each node boundary of a ring carries A once, from the
// node to the next node of the ring; an all-to-all carries g_a·g_b/(n−1) of A from node a to
// node b; for every copy of the simulated nodes, so one simulated flow stands for its copies.
// An all-reduce across copies: A = 2(c−1)/c·S over the rank's NIC and the ring of its c copies'
// nodes, 2(c−1) network steps.
// Latency (NCCL's tuning model, ring/Simple): base + NVLink steps·hop_nvlink + network
// steps·hop_net, with n−1 steps (2(n−1) for all-reduce), one per node boundary on the network;
// all-to-all: base + one hop.
// Each kind is one descriptor (collective.cpp, kKindModels): how many ring passes its amount
// takes (all-reduce 2, the others 1) or whether it is an all-to-all, which gives its amount, its
// link uses and its latency steps.
// Collectives of one communicator serialize: the caller chains their tasks.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/nccl_options.hpp"
#include "sim/param.hpp"
#include "sim/task.hpp"

namespace twin::hardware {

enum class CollKind { all_gather, reduce_scatter, all_reduce, all_to_all };
inline constexpr sim::Named<CollKind> kCollKindNames[] = {
    {CollKind::all_gather, "all_gather"},
    {CollKind::reduce_scatter, "reduce_scatter"},
    {CollKind::all_reduce, "all_reduce"},
    {CollKind::all_to_all, "all_to_all"}};
// The kind of a name in kCollKindNames, or nullopt.
std::optional<CollKind> coll_kind_named(std::string_view name);

struct CollectiveSpec {
  CollKind kind = CollKind::all_gather;
  std::vector<int> ranks;  // global GPU indices, in ring order
  double bytes = 0;        // S, as above
  int ctas = 1;            // channels (CTAs) it runs, as channels() resolves them
  // An all-reduce among the copies of each rank (cluster.hpp): the data-parallel replicas'
  // all-reduce when one replica stands for all. Each rank's ring runs over its copies' nodes.
  bool across_copies = false;
  // Its stream's priority: who gets an SM first (gpu.hpp). FSDP2's collectives run on its
  // high-priority streams; a collective on an NCCL-internal or the compute stream has normal.
  Gpu::Priority priority = Gpu::Priority::high;
};

struct CollectivePlan {
  int ctas = 1;
  double amount = 0;                  // A
  std::vector<sim::Fluid::Use> uses;  // every link, per rank
  // The same with alike links merged (merge_alike_links): what the solver is given; empty: `uses`.
  std::vector<sim::Fluid::Use> solver_uses;
  std::vector<sim::Fluid::Use> hbm;  // HBM bytes per byte of A, per GPU
  double bound = 0;                  // bytes/s of A
  double solo_Bps = 0;               // rate alone: min(bound, every link's capacity / weight)
  sim::Time latency{};
  bool crosses_network = false;
};

int channels(CollKind kind, int default_ctas, const NcclOptions& opts, int sm_count);

// The collectives of one machine: their plans (cached by everything but the size: a step repeats
// the same collectives every layer), the merging of alike links, and the fabric's route scratch.
// The cluster owns one (Cluster::collectives()).
class CollectiveModel {
 public:
  // Binds tasks[i] (on GPU spec.ranks[i]) to one collective.
  void run(const std::vector<sim::Task*>& tasks, Cluster& c, const CollectiveSpec& spec);
  // Once every collective is bound (a step's graph is built): links that every planned
  // collective uses with the same weight, and of the same capacity, always carry the same flows
  // at the same rates — the NICs of one ring's members, the NVLinks of one group. Each such class
  // becomes one solver resource (Cluster::solver_resource), so a ring over 384 GPUs is a flow
  // over a few resources instead of 1,500; rates are unchanged. Collectives bound afterwards are
  // refused.
  void merge_alike_links(Cluster& c);
  // The plan of a collective on this machine (amount, links, bound, latency; collective.hpp).
  CollectivePlan plan(const Cluster& c, const CollectiveSpec& spec);

 private:
  const CollectivePlan& cached_plan(Cluster& c, const CollectiveSpec& spec);
  // Plans of one byte, by everything but the size: the links and latency of a collective do not
  // depend on its bytes and its amount is proportional to them. A map: plans keep their
  // addresses.
  using PlanKey = std::tuple<CollKind, int, bool, std::vector<int>>;
  std::map<PlanKey, CollectivePlan> plans_;
  bool merged_ = false;            // merge_alike_links ran: no new plan may come
  Dragonfly::RouteSum route_sum_;  // fabric routes' scratch (one model per simulation)
};

inline void run_collective(const std::vector<sim::Task*>& tasks, Cluster& c,
                           const CollectiveSpec& spec) {
  c.collectives().run(tasks, c, spec);
}
inline void merge_alike_links(Cluster& c) {
  c.collectives().merge_alike_links(c);
}

// CPU (gloo) collectives among the host threads of the tasks' ranks, on CPU tensors: no SMs, no
// GPU links. Each starts when the last participant arrives and takes, with n ranks, h =
// host.gloo_hop_latency_us and r = host.gloo_GBps:
//  all_reduce  gloo's ring, the algorithm PyTorch's ProcessGroupGloo gets (its allreduce sets
//              none, and gloo/allreduce.cc runs `ring` for UNSPECIFIED): a reduce-scatter and an
//              all-gather of n − 1 steps each, so a payload of one segment (a scalar: gloo cuts
//              the input into 2n segments, all but the first empty) passes every rank twice, one
//              after another: 2(n − 1)·h + 2(n − 1)/n · bytes / r;
//  all_to_all  gloo/alltoall.cc posts the sends and receives to every peer at once, then waits
//              for them: h + (n − 1)/n · bytes / r (`bytes`: what one rank holds, all peers'
//              parts).
enum class CpuCollKind { all_reduce, all_to_all };
sim::Time cpu_collective_time(const Profile& p, CpuCollKind kind, double ranks, double bytes);
void run_cpu_collective(const std::vector<sim::Task*>& tasks, Cluster& c, CpuCollKind kind,
                        double bytes);

}  // namespace twin::hardware
