#include "hardware/cluster.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>
#include <string>

#include "hardware/collective.hpp"
#include "sim/random.hpp"

namespace twin::hardware {

Cluster::Cluster(sim::Engine& engine, sim::Fluid& fluid, const Profile& profile, int gpus,
                 int reserved_sms, const std::optional<FabricSpec>& fabric)
    : engine_(engine),
      fluid_(fluid),
      profile_(profile),
      gpus_per_node_(static_cast<int>(profile.node.gpus)),
      contention_(profile.contention) {
  if (gpus <= 0 || gpus % gpus_per_node_ != 0)
    throw std::invalid_argument("the GPU count must be a positive multiple of the node's GPUs");
  contention_.sm_count = static_cast<int>(profile.gpu.sm_count);
  contention_.prepare();
  const auto& n = profile.node;
  for (int g = 0; g < gpus; ++g) {
    const std::string p = "gpu" + std::to_string(g) + ".";
    // Per-GPU speed: a hash of the index, so the slow GPUs are the same in every run.
    const double u = sim::Rng(static_cast<std::uint64_t>(g) * 0x9e3779b97f4a7c15ULL + 17).uniform();
    gpus_.push_back(std::make_unique<Gpu>(fluid_, g, static_cast<int>(profile.gpu.sm_count),
                                          profile.gpu.hbm_bw().per_s,
                                          1.0 - profile.gpu.speed_spread * u, reserved_sms));
    links_.push_back(
        {fluid_.add_resource(n.nvlink_gpu(), p + "nvlink_out"),
         fluid_.add_resource(n.nvlink_gpu(), p + "nvlink_in"),
         fluid_.add_resource(n.nic(), p + "nic_out"), fluid_.add_resource(n.nic(), p + "nic_in"),
         fluid_.add_resource(n.host_h2d(), p + "h2d"), fluid_.add_resource(n.host_d2h(), p + "d2h"),
         fluid_.add_resource(static_cast<double>(profile.host.cores_per_gpu), p + "cpu_cores"),
         gpus_.back()->hbm_resource()});
    for (int peer = 0; peer < gpus_per_node_; ++peer) {
      const int b = (g / gpus_per_node_) * gpus_per_node_ + peer;
      pairs_.push_back(
          b == g ? 0
                 : fluid_.add_resource(n.nvlink_pair(), p + "nvlink_to_gpu" + std::to_string(b)));
    }
  }
  if (profile.power.enabled())
    power_.assign(static_cast<std::size_t>(gpus), PowerState(profile.power));
  collectives_ = std::make_unique<CollectiveModel>();
  if (fabric) attach_fabric(*fabric);
}

Cluster::~Cluster() = default;

void Cluster::attach_fabric(const FabricSpec& f) {
  const auto& o = f.placement;
  copies_ = f.copies;
  placement_ = place_nodes(copies_ * gpus() / gpus_per_node_, o, profile_.network);
  const auto seed = sample_seed(o.shared, o.seed);
  fabric_ = std::make_unique<Dragonfly>(
      fluid_, profile_.network, static_cast<double>(gpus_per_node_) * profile_.node.nic_GBps,
      o.routing, o.adaptive_nonminimal_fraction, o.shared, seed);
  apply_stragglers(o.shared, seed);
  if (o.shared.redraws()) redraw_every(sim::Time::s(o.shared.burst_s), 1);
  fabric_inert_ = fabric_->leaves_nonblocking();
  for (int n : placement_)
    fabric_inert_ = fabric_inert_ && fabric_->group_of(n) == fabric_->group_of(placement_[0]);
}

void Cluster::redraw_every(sim::Time burst, std::int64_t next) {
  engine_.after(burst, [this, burst, next] {
    if (engine_.pending() == 0) return;  // nothing else left to run: the step is over
    fabric_->redraw(next);
    redraw_every(burst, next + 1);
  });
}

void Cluster::apply_stragglers(const SharedMachine& m, std::uint64_t seed) {
  if (m.slow_node_fraction <= 0 && m.step_jitter <= 0) return;
  const int n = gpus();
  std::vector<double> best;
  double slowest = INFINITY;
  for (int copy = 0; copy < copies_; ++copy) {
    std::vector<double> s(static_cast<std::size_t>(n));
    for (int g = 0; g < n; ++g)
      s[static_cast<std::size_t>(g)] = gpus_[static_cast<std::size_t>(g)]->speed() *
                                       node_speed(m, fabric_node(copy, g / gpus_per_node_)) *
                                       jitter_speed(m, seed, copy * n + g);
    const double low = *std::min_element(s.begin(), s.end());
    if (low < slowest) slowest = low, best = std::move(s), slowest_copy_ = copy;
  }
  for (int g = 0; g < n; ++g)
    gpus_[static_cast<std::size_t>(g)]->set_speed(best[static_cast<std::size_t>(g)]);
}

void Cluster::merge_link(sim::Fluid::ResourceId r, sim::Fluid::ResourceId into) {
  while (solver_resource_.size() <= r)
    solver_resource_.push_back(static_cast<sim::Fluid::ResourceId>(solver_resource_.size()));
  solver_resource_[r] = into;
}

sim::Fluid::ResourceId Cluster::pair(int a, int b) const {
  if (a == b || node_of(a) != node_of(b)) throw std::invalid_argument("not an NVLink pair");
  return pairs_[static_cast<std::size_t>(a * gpus_per_node_ + b % gpus_per_node_)];
}

}  // namespace twin::hardware
