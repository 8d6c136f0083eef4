// The machine as other jobs leave it (issue #16): JUPITER is shared by hundreds of projects
// (JOB.md §2.2). Three effects, each off at its default (an idle machine of identical GPUs):
//  - busy nodes: other jobs hold a share of every group's nodes, so a job placed as Slurm places
//    it ("slurm" policy, placement.hpp) spills over groups;
//  - background traffic: other jobs use a share of each fabric link's capacity — the leaf bundles
//    and the global links and their group aggregates — drawn per link and per sample, and again
//    every `burst_s` of the step when bursts are shorter than a step; a job on a service level
//    of its own keeps at least its virtual lane's arbitration share of each link;
//  - stragglers: nodes that are always slow (the same ones recurring) and a per-step jitter of
//    every GPU's speed, on top of the profile's fixed per-GPU spread.
// A sample is one draw of everything that varies between steps: which nodes other jobs hold,
// their traffic, the jitter. `twin run/plan-dp --samples N` runs samples 0 … N−1.
#pragma once

#include <cstdint>

#include "sim/param.hpp"

namespace twin::hardware {

struct SharedMachine {
  std::int64_t sample = 0;            // which draw (with placement.seed)
  double busy_fraction = 0;           // share of every group's nodes held by other jobs
  double background_global_load = 0;  // mean share of a global link (bundle) used by other jobs
  double background_leaf_load = 0;    // mean share of a leaf's uplink/downlink bundle
  double burst_s = 0;                 // how long a link keeps its drawn share (0: the whole step)
  double own_sl_share = 0;  // share of a link the job's own service level guarantees it (0: none)
  double slow_node_fraction = 0;  // nodes that are always slow
  double slow_node_speed = 0.9;   // their speed relative to nominal
  double step_jitter = 0;         // per-GPU, per-step relative speed noise (standard deviation)
  bool any_traffic() const { return background_global_load > 0 || background_leaf_load > 0; }
  bool redraws() const { return any_traffic() && burst_s > 0; }
  // Whether a sample's draws can change anything: with every effect off they are never read
  // (busy nodes, other jobs' traffic, slow nodes, jitter), so every sample is the same run.
  bool draws_matter() const {
    return busy_fraction > 0 || any_traffic() || slow_node_fraction > 0 || step_jitter > 0;
  }
};

const sim::Schema<SharedMachine>& shared_machine_schema();

// The seed of a sample's draws.
std::uint64_t sample_seed(const SharedMachine& m, std::int64_t placement_seed);
// Other jobs' share of one link (key: any number naming it) in a sample's burst (0: the first, or
// the whole step): uniform on [0, 2·mean], at most 0.95 [est: bounded, so that one link of the
// hundreds a collective crosses does not stand for a machine-wide jam; an exponential draw did —
// with mean 0.3, one of 32 leaf bundles near full cut a 1,024-GPU all-to-all tenfold].
double background_share(double mean, std::uint64_t seed, std::uint64_t key, std::int64_t burst = 0);
// The share of a link's capacity the job keeps beside other jobs' `share`: 1 − share on the
// default service level, where the others' packets go first (the model's pessimistic reading of
// head-of-line blocking in one virtual lane); on an SL of its own, InfiniBand's weighted VL
// arbitration serves each lane with waiting packets at least its weight's share of the link
// (IBTA spec vol. 1, §7.6.9, VL arbitration), so max(1 − share, own_sl_share).
double job_share_of_link(const SharedMachine& m, double share);
// A machine node's speed factor: slow_node_speed for a fixed slow_node_fraction of the nodes
// (chosen by a hash of the node id: the same nodes in every sample), else 1.
double node_speed(const SharedMachine& m, int node);
// A GPU's per-step factor: 1 − step_jitter·|z|, z standard normal per GPU and sample (≥ 0.5).
double jitter_speed(const SharedMachine& m, std::uint64_t seed, int gpu);

}  // namespace twin::hardware
