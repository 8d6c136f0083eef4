#include "hardware/collective.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <memory>
#include <stdexcept>
#include <tuple>

namespace twin::hardware {

std::optional<CollKind> coll_kind_named(std::string_view name) {
  for (const auto& n : kCollKindNames)
    if (name == n.name) return n.value;
  return std::nullopt;
}

int channels(CollKind kind, int default_ctas, const NcclOptions& opts, int sm_count) {
  int c = std::max(1, default_ctas);
  if (opts.max_ctas > 0) c = std::min<int>(c, static_cast<int>(opts.max_ctas));
  if (kind == CollKind::all_to_all) {
    int p = 1;
    while (p < c) p *= 2;
    c = p;
  }
  return std::min(c, sm_count);
}

namespace {

using Uses = std::map<sim::Fluid::ResourceId, double>;  // ordered: deterministic

void ring_uses(const Cluster& c, const CollectiveSpec& s, Uses& u, Uses& h, double hbm_factor) {
  std::map<int, int> members;  // node → ring members on it
  for (int r : s.ranks) ++members[c.node_of(r)];
  const bool multi_node = members.size() > 1;
  for (int r : s.ranks) {
    const auto& l = c.links(r);
    const double g = members[c.node_of(r)];
    // Leaving the node once per channel, a member forwards (g−1)/g of A over NVLink; a ring
    // inside one node sends all of A over NVLink.
    const double nvl = multi_node ? (g - 1) / g : 1.0;
    if (multi_node) {
      u[l.nic_out] += 1 / g;
      u[l.nic_in] += 1 / g;
    }
    if (nvl > 0) {
      u[l.nvl_out] += nvl;
      u[l.nvl_in] += nvl;
    }
    h[l.hbm] += hbm_factor * nvl + (multi_node ? 1 / g : 0);
  }
}

void all_to_all_uses(const Cluster& c, const CollectiveSpec& s, Uses& u, Uses& h,
                     double hbm_factor) {
  const double n = static_cast<double>(s.ranks.size());
  for (int r : s.ranks) {
    const auto& l = c.links(r);
    double local = 0;
    for (int p : s.ranks)
      if (p != r && c.node_of(p) == c.node_of(r)) {
        u[c.pair(r, p)] += 1 / (n - 1);
        local += 1;
      }
    const double net = (n - 1 - local) / (n - 1), nvl = local / (n - 1);
    if (net > 0) u[l.nic_out] += net, u[l.nic_in] += net;
    if (nvl > 0) u[l.nvl_out] += nvl, u[l.nvl_in] += nvl;
    h[l.hbm] += hbm_factor * nvl + net;
  }
}

// Fabric uses, for every copy of the simulated nodes (collective.hpp).
void fabric_uses(const Cluster& c, const CollectiveSpec& s, Uses& u) {
  Dragonfly* f = c.fabric();
  if (!f) return;
  thread_local Dragonfly::RouteSum sum;  // per thread: sweeps run simulations in threads
  const int copies = c.copies();
  if (s.across_copies) {
    const int node = c.node_of(s.ranks.front());
    for (int d = 0; d < copies && copies > 1; ++d)
      f->route(c.fabric_node(d, node), c.fabric_node((d + 1) % copies, node), 1.0, sum);
    return sum.drain(u);
  }
  std::vector<int> order;  // nodes in ring order, one entry per run of ranks
  std::map<int, int> members;
  for (int r : s.ranks) {
    const int n = c.node_of(r);
    if (order.empty() || order.back() != n) order.push_back(n);
    ++members[n];
  }
  if (order.size() > 1 && order.front() == order.back()) order.pop_back();
  if (members.size() < 2) return;
  const double n = static_cast<double>(s.ranks.size());
  for (int d = 0; d < copies; ++d) {
    if (s.kind == CollKind::all_to_all) {
      for (const auto& [a, ga] : members)
        for (const auto& [b, gb] : members)
          if (a != b) f->route(c.fabric_node(d, a), c.fabric_node(d, b), ga * gb / (n - 1), sum);
    } else {
      for (std::size_t k = 0; k < order.size(); ++k)
        f->route(c.fabric_node(d, order[k]), c.fabric_node(d, order[(k + 1) % order.size()]), 1.0,
                 sum);
    }
  }
  sum.drain(u);
}

}  // namespace

CollectivePlan plan_collective(const Cluster& c, const CollectiveSpec& s) {
  const auto& p = c.profile();
  const int n = static_cast<int>(s.ranks.size());
  if (n < 1) throw std::invalid_argument("a collective needs at least one rank");
  CollectivePlan plan;
  plan.ctas = channels(s.kind, s.default_ctas, c.nccl(), static_cast<int>(p.gpu.sm_count));
  int nodes = 0;
  {
    std::vector<int> ns;
    for (int r : s.ranks) ns.push_back(c.node_of(r));
    std::sort(ns.begin(), ns.end());
    nodes = static_cast<int>(std::unique(ns.begin(), ns.end()) - ns.begin());
  }
  plan.crosses_network = nodes > 1 || s.across_copies;
  const double frac = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  Uses u, h;
  if (s.across_copies) {
    if (s.kind != CollKind::all_reduce || n != 1)
      throw std::invalid_argument("a collective across copies is an all-reduce of one rank");
    const double cn = c.copies();
    plan.amount = cn > 1 ? 2 * (cn - 1) / cn * s.bytes : 0;
    const auto& l = c.links(s.ranks.front());
    u[l.nic_out] += 1;
    u[l.nic_in] += 1;
    h[l.hbm] += 1;
  } else if (s.kind == CollKind::all_to_all) {
    plan.amount = frac * s.bytes;
    if (n > 1) all_to_all_uses(c, s, u, h, p.nccl.hbm_traffic_factor);
  } else {
    plan.amount = (s.kind == CollKind::all_reduce ? 2 : 1) * frac * s.bytes;
    if (n > 1) ring_uses(c, s, u, h, p.nccl.hbm_traffic_factor);
  }
  const double cta_Bps =
      (plan.crosses_network ? p.nccl.cta_net_GBps : p.nccl.cta_nvlink_GBps) * 1e9;
  plan.bound = plan.ctas * cta_Bps;
  plan.solo_Bps = plan.bound;
  fabric_uses(c, s, u);
  for (const auto& [r, w] : u) {
    plan.uses.push_back({r, w});
    plan.solo_Bps = std::min(plan.solo_Bps, c.fluid_capacity(r) / w);
  }
  for (const auto& [r, w] : h) plan.hbm.push_back({r, w});
  double lat = p.nccl.base_latency_us;
  if (s.across_copies) {
    lat += 2 * (c.copies() - 1) * p.nccl.hop_latency_net_us;
  } else if (s.kind == CollKind::all_to_all) {
    lat += plan.crosses_network ? p.nccl.hop_latency_net_us : p.nccl.hop_latency_nvlink_us;
  } else if (n > 1) {
    const int net_steps = plan.crosses_network ? nodes - 1 : 0;
    const int nvl_steps = n - 1 - net_steps;
    const int mult = s.kind == CollKind::all_reduce ? 2 : 1;
    lat +=
        mult * (net_steps * p.nccl.hop_latency_net_us + nvl_steps * p.nccl.hop_latency_nvlink_us);
  }
  plan.latency = sim::Time::us(lat);
  return plan;
}

namespace {

// Plans of one byte, by everything but the size: the links and latency of a collective do not
// depend on its bytes and its amount is proportional to them. A step repeats the same
// collectives every layer, so most plans come from here. A map: plans keep their addresses.
using PlanKey = std::tuple<CollKind, int, bool, std::vector<int>>;
struct PlanCache {
  std::map<PlanKey, CollectivePlan> plans;
  bool merged = false;  // merge_alike_links ran: no new plan may come
};

PlanCache& plan_cache(Cluster& c) {
  auto& slot = c.plan_cache();
  if (!slot) slot = std::make_shared<PlanCache>();
  return *static_cast<PlanCache*>(slot.get());
}

const CollectivePlan& cached_plan(Cluster& c, const CollectiveSpec& spec) {
  auto& cache = plan_cache(c);
  PlanKey key{spec.kind, spec.default_ctas, spec.across_copies, spec.ranks};
  auto it = cache.plans.find(key);
  if (it == cache.plans.end()) {
    if (cache.merged) throw std::logic_error("a collective was bound after its links were merged");
    CollectiveSpec one = spec;
    one.bytes = 1;
    it = cache.plans.emplace(std::move(key), plan_collective(c, one)).first;
  }
  return it->second;
}

// One collective in flight. Callbacks capture only (State*, index), which fits std::function's
// inline buffer: no allocation per task (a step has ~10⁶ of them). The cluster keeps it alive.
struct CollectiveState {
  Cluster* c;
  const CollectivePlan* plan;  // of one byte, in the cluster's cache
  double amount;               // A of this collective
  std::vector<sim::Task*> tasks;
  std::vector<int> ranks;
  std::vector<int> got;  // CTAs granted per rank so far
  std::size_t launched = 0;
  std::int64_t t0 = 0;

  void ready(std::uint32_t i) {
    c->gpu(ranks[i]).request(plan->ctas, Gpu::Holder::nccl, [this, i](int k) { granted(i, k); });
  }
  void granted(std::uint32_t i, int k) {
    if ((got[i] += k) == plan->ctas && ++launched == ranks.size()) begin();
  }
  // Data moves once every rank holds all its CTAs.
  void begin() {
    t0 = c->engine().now().count_ns();
    for (const auto& h : plan->hbm) c->fluid().reserve(h.resource, h.weight * plan->solo_Bps);
    if (amount <= 0 || plan->uses.empty()) return after_data();
    const auto& uses = plan->solver_uses.empty() ? plan->uses : plan->solver_uses;
    c->fluid().start(
        amount, uses, plan->bound, [this] { after_data(); }, plan->bound);
  }
  void after_data() {
    for (const auto& h : plan->hbm) c->fluid().reserve(h.resource, -h.weight * plan->solo_Bps);
    if (Dragonfly* f = c->fabric())
      for (const auto& u : plan->uses)
        if (f->is_fabric(u.resource))
          f->record(u.resource, u.weight * amount, t0, c->engine().now().count_ns());
    c->engine().after(
        plan->latency, [this] { end(); }, sim::Priority::completion);
  }
  void end() {
    for (std::size_t i = 0; i < ranks.size(); ++i) {
      c->gpu(ranks[i]).release(plan->ctas, Gpu::Holder::nccl);
      tasks[i]->finish();
    }
  }
};

}  // namespace

void run_collective(const std::vector<sim::Task*>& tasks, Cluster& c, CollectiveSpec spec) {
  if (tasks.size() != spec.ranks.size()) throw std::invalid_argument("one task per rank");
  const auto& plan = cached_plan(c, spec);
  auto* st = c.keep(std::make_shared<CollectiveState>(CollectiveState{
      &c, &plan, plan.amount * spec.bytes, tasks, spec.ranks, std::vector<int>(tasks.size(), 0)}));
  for (std::uint32_t i = 0; i < tasks.size(); ++i)
    tasks[i]->on_ready = [st, i](sim::Task&) { st->ready(i); };
}

void merge_alike_links(Cluster& c) {
  auto& cache = plan_cache(c);
  if (cache.merged) return;
  cache.merged = true;
  // Each link's uses by the plans, as (plan number, weight) in plan order, with its capacity.
  using Usage = std::pair<double, std::vector<std::pair<std::size_t, double>>>;
  std::map<sim::Fluid::ResourceId, Usage> usage;
  std::size_t k = 0;
  for (const auto& [key, plan] : cache.plans) {
    for (const auto& u : plan.uses) {
      auto& x = usage[u.resource];
      x.first = c.fluid_capacity(u.resource);
      x.second.emplace_back(k, u.weight);
    }
    ++k;
  }
  std::map<Usage, std::vector<sim::Fluid::ResourceId>> classes;  // ordered: deterministic
  for (auto& [r, x] : usage) classes[std::move(x)].push_back(r);
  for (const auto& [x, members] : classes) {
    if (members.size() < 2) continue;
    const auto into =
        c.fluid().add_resource(x.first, c.fluid().name(members.front()) + " and " +
                                            std::to_string(members.size() - 1) + " alike");
    for (auto r : members) c.merge_link(r, into);
  }
  // Every member of a class has the same weight in each plan: keep the first of each class.
  std::vector<std::size_t> taken_by(c.fluid().resource_count(), 0);  // plan number + 1
  k = 0;
  for (auto& [key, plan] : cache.plans) {
    ++k;
    plan.solver_uses.clear();
    for (const auto& u : plan.uses) {
      const auto r = c.solver_resource(u.resource);
      if (taken_by[r] == k) continue;
      taken_by[r] = k;
      plan.solver_uses.push_back({r, u.weight});
    }
  }
}

}  // namespace twin::hardware

namespace twin::hardware {

void run_cpu_all_reduce(const std::vector<sim::Task*>& tasks, Cluster& c, double bytes) {
  const double n = static_cast<double>(tasks.size());
  const auto& p = c.profile();
  const double steps = n > 1 ? 2 * std::ceil(std::log2(n)) : 0;
  const sim::Time took = sim::Time::us(steps * p.host.gloo_hop_latency_us) +
                         sim::Time::s(n > 1 ? 2 * bytes / (p.node.nic_GBps * 1e9) : 0);
  auto arrived = std::make_shared<std::size_t>(0);
  for (auto* t : tasks)
    t->on_ready = [&c, tasks, arrived, took](sim::Task&) {
      if (++*arrived < tasks.size()) return;
      c.engine().after(
          took,
          [tasks] {
            for (auto* x : tasks) x->finish();
          },
          sim::Priority::completion);
    };
}

}  // namespace twin::hardware
