#include "hardware/shared_machine.hpp"

#include <algorithm>
#include <cmath>

#include "sim/random.hpp"

namespace twin::hardware {

const sim::Schema<SharedMachine>& shared_machine_schema() {
  static const sim::Schema<SharedMachine> s = [] {
    sim::Schema<SharedMachine> s;
    s.integer(
         "sample", "", 0, 9.0e15,
         "which draw of busy nodes, background traffic and jitter (twin run/plan-dp --samples "
         "N run 0 … N−1)",
         [](auto& m) -> auto& { return m.sample; })
        .real(
            "busy_fraction", "", 0, 0.99,
            "share of every group's nodes other jobs hold; placement.policy \"slurm\" places the "
            "job on the rest [est: JUPITER runs near full; 0 = an idle machine]",
            [](auto& m) -> auto& { return m.busy_fraction; })
        .real(
            "background_global_load", "", 0, 0.95,
            "mean share of each global-link bundle (and group aggregate) other jobs' traffic "
            "uses, drawn per link and sample [est; De Sensi et al., SC24, arXiv:2408.14090: up "
            "to 50% of all-reduce goodput lost on Leonardo's Dragonfly+]",
            [](auto& m) -> auto& { return m.background_global_load; })
        .real(
            "background_leaf_load", "", 0, 0.95,
            "mean share of each leaf's uplink/downlink bundle other jobs' traffic uses [est]",
            [](auto& m) -> auto& { return m.background_leaf_load; })
        .real(
            "burst_s", "s", 0, 1e6,
            "how long other jobs' traffic keeps the share drawn for a link: 0 = for the whole "
            "step (one draw per sample); else every link's share is drawn again every burst_s "
            "of the step [est: other jobs' collectives come and go within seconds]",
            [](auto& m) -> auto& { return m.burst_s; })
        .real(
            "own_sl_share", "", 0, 1,
            "share of each loaded link the job keeps when its traffic runs on an InfiniBand "
            "service level of its own (weighted VL arbitration: a lane with packets waiting gets "
            "at least its weight's share); 0 = the default SL, shared with other jobs [est: De "
            "Sensi et al., SC24: a non-default SL partly recovers Leonardo's loss to noise; 0.5 "
            "= two lanes of equal weight]",
            [](auto& m) -> auto& { return m.own_sl_share; })
        .real(
            "slow_node_fraction", "", 0, 1,
            "share of the machine's nodes that are always slow (the same nodes every step) "
            "[est: recurring slow nodes in public JUPITER training logs]",
            [](auto& m) -> auto& { return m.slow_node_fraction; })
        .real(
            "slow_node_speed", "", 0.1, 1, "speed of a slow node's GPUs, relative to nominal [est]",
            [](auto& m) -> auto& { return m.slow_node_speed; })
        .real(
            "step_jitter", "", 0, 0.2,
            "standard deviation of every GPU's per-step speed [est: ~9% node-to-node step-time "
            "spread in public JUPITER training logs]",
            [](auto& m) -> auto& { return m.step_jitter; });
    return s;
  }();
  return s;
}

namespace {
std::uint64_t mix(std::uint64_t a, std::uint64_t b) {
  return sim::Rng(a * 0x9e3779b97f4a7c15ULL ^ b).next();
}
}  // namespace

std::uint64_t sample_seed(const SharedMachine& m, std::int64_t placement_seed) {
  return mix(static_cast<std::uint64_t>(placement_seed), static_cast<std::uint64_t>(m.sample) + 1);
}

double background_share(double mean, std::uint64_t seed, std::uint64_t key, std::int64_t burst) {
  if (mean <= 0) return 0;
  const std::uint64_t k = mix(seed, key);
  sim::Rng r(burst == 0 ? k : mix(k, static_cast<std::uint64_t>(burst)));
  return std::min(0.95, 2 * mean * r.uniform());
}

double job_share_of_link(const SharedMachine& m, double share) {
  return std::max(1 - share, m.own_sl_share);
}

double node_speed(const SharedMachine& m, int node) {
  if (m.slow_node_fraction <= 0) return 1;
  sim::Rng r(mix(0x5eed, static_cast<std::uint64_t>(node)));
  return r.uniform() < m.slow_node_fraction ? m.slow_node_speed : 1.0;
}

double jitter_speed(const SharedMachine& m, std::uint64_t seed, int gpu) {
  if (m.step_jitter <= 0) return 1;
  sim::Rng r(mix(seed, 0x100000000ULL + static_cast<std::uint64_t>(gpu)));
  return std::max(0.5, 1 - m.step_jitter * std::abs(r.normal()));
}

}  // namespace twin::hardware
