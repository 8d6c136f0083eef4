#include "sim/fluid.hpp"

#include <algorithm>
#include <cmath>
#include <stdexcept>

namespace twin::sim {

namespace {
// Relative tolerance under which a resource counts as saturated.
constexpr double kEps = 1e-12;
}  // namespace

Fluid::Fluid(Engine& engine) : engine_(engine) {
  engine_.on_settle([this] { settle(); });
}

Fluid::ResourceId Fluid::add_resource(double capacity, std::string name) {
  if (!(capacity >= 0)) throw std::invalid_argument("resource capacity must be ≥ 0: " + name);
  resources_.push_back({capacity, std::move(name), {}});
  return static_cast<ResourceId>(resources_.size() - 1);
}

void Fluid::set_capacity(ResourceId r, double capacity) {
  auto& res = resources_[r];
  if (res.capacity == capacity) return;
  for (const auto& on : res.flows) advance(flows_[on.flow]);
  res.capacity = capacity;
  if (!res.dirty) res.dirty = true, dirty_.push_back(r);
}

void Fluid::reserve(ResourceId r, double amount) {
  auto& res = resources_[r];
  for (const auto& on : res.flows) advance(flows_[on.flow]);
  res.reserved += amount;
  if (!res.dirty) res.dirty = true, dirty_.push_back(r);
}

Fluid::FlowId Fluid::start(double amount, std::span<const Use> uses, double bound,
                           std::function<void()> done, double share) {
  if (uses.empty() && !std::isfinite(bound))
    throw std::invalid_argument("a flow needs a resource or a finite bound");
  FlowId id;
  if (free_flows_.empty()) {
    id = static_cast<FlowId>(flows_.size());
    flows_.emplace_back();
  } else {
    id = free_flows_.back();
    free_flows_.pop_back();
  }
  Flow& f = flows_[id];
  f.remaining = std::max(0.0, amount);
  f.rate = 0;
  f.bound = bound;
  if (share <= 0) {
    share = bound;
    for (const auto& u : uses)
      if (u.weight > 0) share = std::min(share, resources_[u.resource].capacity / u.weight);
    if (!(share > 0) || !std::isfinite(share)) share = 1;
  }
  f.share = share;
  f.since = engine_.now();
  f.uses.assign(uses.begin(), uses.end());  // reuses the slot's buffer
  f.done = std::move(done);
  f.active = true;
  ++active_;
  for (const auto& u : f.uses) resources_[u.resource].flows.push_back({id, u.weight});
  count_demand(id, +1);
  mark_dirty(f);
  if (f.uses.empty()) dirty_isolated_.push_back(id);
  return id;
}

void Fluid::set_bound(FlowId id, double bound) {
  Flow& f = flows_[id];
  if (!f.active || f.bound == bound) return;
  advance(f);
  count_demand(id, -1);
  f.bound = bound;
  count_demand(id, +1);
  mark_dirty(f);
  if (f.uses.empty()) dirty_isolated_.push_back(id);
}

void Fluid::cancel(FlowId id) {
  if (flows_[id].active) detach(id);
}

double Fluid::remaining(FlowId id) const {
  const Flow& f = flows_[id];
  if (!f.active) return 0;
  return std::max(0.0, f.remaining - f.rate * (engine_.now() - f.since).to_s());
}

double Fluid::load(ResourceId r) const {
  double l = 0;
  for (const auto& on : resources_[r].flows) l += on.weight * flows_[on.flow].rate;
  return l;
}

void Fluid::mark_dirty(const Flow& f) {
  for (const auto& u : f.uses) {
    auto& r = resources_[u.resource];
    if (!r.dirty) r.dirty = true, dirty_.push_back(u.resource);
  }
}

void Fluid::advance(Flow& f) {
  const Time now = engine_.now();
  if (now != f.since) {
    f.remaining = std::max(0.0, f.remaining - f.rate * (now - f.since).to_s());
    f.since = now;
  }
}

void Fluid::settle() {
  if (dirty_.empty() && dirty_isolated_.empty()) return;
  auto& comp_flows = comp_flows_;
  auto& comp_res = comp_res_;
  ++epoch_;
  std::swap(dirty_, dirty_scratch_);
  dirty_.clear();
  for (ResourceId r : dirty_scratch_) {
    resources_[r].dirty = false;
    // Not yet solved this round: a slack resource seen by another component's search was not
    // expanded, so its flows still need solving.
    if (resources_[r].visited != epoch_) solve_component(r, comp_flows, comp_res);
  }
  std::swap(dirty_isolated_, iso_scratch_);
  dirty_isolated_.clear();
  for (FlowId f : iso_scratch_)
    if (flows_[f].active) solve_isolated(f);
}

void Fluid::solve_isolated(FlowId id) {
  Flow& f = flows_[id];
  advance(f);
  f.rate = f.bound;
  reschedule(id);
}

// A resource is slack when it could not saturate even if every flow on it ran at its bound:
// Σ w·B ≤ usable capacity. It never fixes a flow, so the component search does not expand
// through it and progressive filling ignores it — exactly the same rates, smaller components.
bool Fluid::slack(ResourceId r) const {
  const auto& R = resources_[r];
  return R.unbounded == 0 && R.demand <= R.usable() * (1 - 1e-9);
}

void Fluid::count_demand(FlowId id, double sign) {
  const Flow& f = flows_[id];
  const bool finite = std::isfinite(f.bound);
  for (const auto& u : f.uses) {
    auto& R = resources_[u.resource];
    if (!finite)
      sign > 0 ? ++R.unbounded : --R.unbounded;
    else
      R.demand += sign * u.weight * f.bound;
  }
}

void Fluid::solve_component(ResourceId seed, std::vector<FlowId>& flows,
                            std::vector<ResourceId>& res) {
  flows.clear();
  res.clear();
  resources_[seed].mark = epoch_;
  // The seed changed: its flows are re-solved even if it is slack now (a flow may have left).
  auto visit_flows_of = [&](ResourceId r) {
    resources_[r].visited = epoch_;
    for (const auto& on : resources_[r].flows) {
      const FlowId f = on.flow;
      if (flows_[f].mark == epoch_) continue;
      flows_[f].mark = epoch_;
      flows.push_back(f);
    }
  };
  if (slack(seed)) {
    set_saturated(resources_[seed], false);
    visit_flows_of(seed);
  } else {
    res.push_back(seed);
  }
  for (std::size_t i = 0, fi = 0; i < res.size() || fi < flows.size();) {
    if (i < res.size()) {
      visit_flows_of(res[i++]);
      continue;
    }
    for (const auto& u : flows_[flows[fi++]].uses)
      if (resources_[u.resource].mark != epoch_) {
        resources_[u.resource].mark = epoch_;
        if (!slack(u.resource)) res.push_back(u.resource);
      }
  }
  if (flows.empty()) return;
  ++solves_;
  std::sort(flows.begin(), flows.end());  // deterministic order, whatever the discovery order
  for (FlowId f : flows) advance(flows_[f]);
  old_rates_.resize(flows.size());
  for (std::size_t i = 0; i < flows.size(); ++i) old_rates_[i] = flows_[flows[i]].rate;
  if (flows.size() == 1) {
    // One flow alone: min(bound, every resource's usable capacity / weight), the result
    // progressive filling reaches in its first round.
    Flow& f = flows_[flows[0]];
    double rate = f.bound;
    for (const auto& u : f.uses) rate = std::min(rate, resources_[u.resource].usable() / u.weight);
    f.rate = rate;
  } else {
    progressive_filling(flows, res);
  }
  for (std::size_t i = 0; i < flows.size(); ++i)
    if (flows_[flows[i]].rate != old_rates_[i] || flows_[flows[i]].remaining <= 0)
      reschedule(flows[i]);
}

void Fluid::progressive_filling(const std::vector<FlowId>& flows,
                                const std::vector<ResourceId>& res) {
  // Scratch: resources still constraining someone, flows not yet fixed.
  auto& active = active_res_;
  auto& unfixed = unfixed_flows_;
  auto& saturated = saturated_res_;
  active.clear();
  unfixed.assign(flows.begin(), flows.end());
  for (ResourceId r : res) {
    auto& R = resources_[r];
    R.rem = R.usable();
    R.wsum = 0;
    R.unfixed = 0;
    R.binding = true;
  }
  // Only the uses on binding resources matter below: keep them once (a collective's flow
  // crosses hundreds of links, few of which bind).
  binding_uses_.clear();
  binding_begin_.assign(1, 0);
  for (std::size_t i = 0; i < flows.size(); ++i) {
    Flow& f = flows_[flows[i]];
    f.fixed = false;
    f.rate = 0;
    f.slot = static_cast<std::uint32_t>(i);
    for (const auto& u : f.uses) {
      auto& R = resources_[u.resource];
      if (!R.binding) continue;
      R.wsum += u.weight * f.share;
      ++R.unfixed;
      binding_uses_.push_back(u);
    }
    binding_begin_.push_back(static_cast<std::uint32_t>(binding_uses_.size()));
  }
  for (ResourceId r : res)
    if (resources_[r].unfixed > 0) active.push_back(r);
  double level = 0;
  auto fix = [&](Flow& f) {
    f.fixed = true;
    f.rate = level * f.share;
    for (auto k = binding_begin_[f.slot]; k < binding_begin_[f.slot + 1]; ++k) {
      auto& R = resources_[binding_uses_[k].resource];
      R.wsum -= binding_uses_[k].weight * f.share;
      --R.unfixed;
    }
  };
  while (!unfixed.empty()) {
    double delta = kUnbounded;
    for (ResourceId r : active) {
      const auto& R = resources_[r];
      delta = std::min(delta, std::max(0.0, R.rem) / R.wsum);
    }
    for (FlowId id : unfixed) delta = std::min(delta, flows_[id].bound / flows_[id].share - level);
    if (!std::isfinite(delta)) throw std::logic_error("unbounded flow in the fluid system");
    level += delta;
    saturated.clear();
    for (ResourceId r : active) {
      auto& R = resources_[r];
      R.rem -= delta * R.wsum;
      if (R.rem <= kEps * std::max(1.0, R.capacity)) saturated.push_back(r);
    }
    for (FlowId id : unfixed) {
      Flow& f = flows_[id];
      const double b = f.bound / f.share;
      if (std::isfinite(b) && b - level <= kEps * std::max(1.0, b)) fix(f);
    }
    for (ResourceId r : saturated)
      for (const auto& on : resources_[r].flows)
        if (!flows_[on.flow].fixed) fix(flows_[on.flow]);
    std::erase_if(unfixed, [&](FlowId id) { return flows_[id].fixed; });
    std::erase_if(active, [&](ResourceId r) { return resources_[r].unfixed == 0; });
  }
  for (ResourceId r : res) {
    auto& R = resources_[r];
    R.binding = false;
    set_saturated(R, R.rem <= kEps * std::max(1.0, R.capacity));
  }
}

void Fluid::set_saturated(Resource& r, bool now_saturated) {
  if (r.saturated) r.saturated_total_s += (engine_.now() - r.saturated_since).to_s();
  r.saturated = now_saturated;
  r.saturated_since = engine_.now();
}

double Fluid::saturated_s(ResourceId r) const {
  const auto& R = resources_[r];
  return R.saturated_total_s + (R.saturated ? (engine_.now() - R.saturated_since).to_s() : 0.0);
}

void Fluid::reschedule(FlowId id) {
  Flow& f = flows_[id];
  Time when = engine_.now();
  if (f.remaining > 0) {
    const double ns = f.rate > 0 ? std::ceil(f.remaining / f.rate * 1e9) : INFINITY;
    if (ns >= 9.2e18) {  // starved (or as good as): waits for a change
      engine_.cancel(f.completion);
      return;
    }
    when += Time::ns(static_cast<std::int64_t>(ns));
  }
  // The flow's one pending completion moves (issue #21: no stale events).
  if (!engine_.move(f.completion, when, Priority::completion))
    f.completion = engine_.at(
        when, [this, id] { complete(id); }, Priority::completion);
}

void Fluid::complete(FlowId id) {
  Flow& f = flows_[id];
  f.completion = {};
  auto done = std::move(f.done);
  detach(id);
  if (done) done();
}

void Fluid::detach(FlowId id) {
  Flow& f = flows_[id];
  mark_dirty(f);
  count_demand(id, -1);
  for (const auto& u : f.uses) {
    auto& v = resources_[u.resource].flows;
    v.erase(
        std::find_if(v.begin(), v.end(), [id](const Resource::On& on) { return on.flow == id; }));
    if (v.empty()) resources_[u.resource].demand = 0;  // no rounding drift left behind
  }
  engine_.cancel(f.completion);
  f.active = false;
  f.rate = 0;
  f.uses.clear();
  --active_;
  free_flows_.push_back(id);
}

}  // namespace twin::sim
