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

// What sets one collective kind apart (collective.hpp): ring passes (its amount is passes·(n−1)/n
// of S, its latency passes × the ring's steps) or an all-to-all (amount (n−1)/n of S, links to
// every peer, one hop).
struct KindModel {
  CollKind kind;
  bool all_to_all;
  int passes;
};
constexpr KindModel kKindModels[] = {{CollKind::all_gather, false, 1},
                                     {CollKind::reduce_scatter, false, 1},
                                     {CollKind::all_reduce, false, 2},
                                     {CollKind::all_to_all, true, 1}};
const KindModel& kind_model(CollKind k) {
  for (const auto& m : kKindModels)
    if (m.kind == k) return m;
  throw std::logic_error("a collective kind without a model");
}

// Fabric uses, for every copy of the simulated nodes (collective.hpp).
void fabric_uses(const Cluster& c, const CollectiveSpec& s, Uses& u, Dragonfly::RouteSum& sum) {
  Dragonfly* f = c.fabric();
  if (!f) return;
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
    if (kind_model(s.kind).all_to_all) {
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

int nodes_spanned(const Cluster& c, const std::vector<int>& ranks) {
  std::vector<int> ns;
  for (int r : ranks) ns.push_back(c.node_of(r));
  std::sort(ns.begin(), ns.end());
  return static_cast<int>(std::unique(ns.begin(), ns.end()) - ns.begin());
}

// The all-reduce across copies (collective.hpp): each rank's ring over its copies' nodes.
void plan_across_copies(const Cluster& c, const CollectiveSpec& s, CollectivePlan& plan, Uses& u,
                        Uses& h) {
  if (s.kind != CollKind::all_reduce || s.ranks.size() != 1)
    throw std::invalid_argument("a collective across copies is an all-reduce of one rank");
  const double cn = c.copies();
  plan.amount = cn > 1 ? 2 * (cn - 1) / cn * s.bytes : 0;
  const auto& l = c.links(s.ranks.front());
  u[l.nic_out] += 1;
  u[l.nic_in] += 1;
  h[l.hbm] += 1;
}

// NCCL's latency for the plan (ring/Simple): base + hops, one per ring step (passes × n − 1,
// a node boundary a network hop), or one hop for an all-to-all.
double latency_us(const Cluster& c, const CollectiveSpec& s, bool crosses_network, int nodes) {
  const auto& p = c.profile().nccl;
  const int n = static_cast<int>(s.ranks.size());
  const auto& m = kind_model(s.kind);
  if (s.across_copies) return p.base_latency_us + 2 * (c.copies() - 1) * p.hop_latency_net_us;
  if (m.all_to_all)
    return p.base_latency_us + (crosses_network ? p.hop_latency_net_us : p.hop_latency_nvlink_us);
  if (n <= 1) return p.base_latency_us;
  const int net_steps = crosses_network ? nodes - 1 : 0;
  const int nvl_steps = n - 1 - net_steps;
  return p.base_latency_us +
         m.passes * (net_steps * p.hop_latency_net_us + nvl_steps * p.hop_latency_nvlink_us);
}

}  // namespace

CollectivePlan CollectiveModel::plan(const Cluster& c, const CollectiveSpec& s) {
  const auto& p = c.profile();
  const int n = static_cast<int>(s.ranks.size());
  if (n < 1) throw std::invalid_argument("a collective needs at least one rank");
  CollectivePlan plan;
  plan.ctas = s.ctas;
  const int nodes = nodes_spanned(c, s.ranks);
  plan.crosses_network = nodes > 1 || s.across_copies;
  const double frac = n > 1 ? static_cast<double>(n - 1) / n : 0.0;
  const auto& m = kind_model(s.kind);
  Uses u, h;
  if (s.across_copies) {
    plan_across_copies(c, s, plan, u, h);
  } else {
    plan.amount = m.passes * frac * s.bytes;
    if (n > 1) (m.all_to_all ? all_to_all_uses : ring_uses)(c, s, u, h, p.nccl.hbm_traffic_factor);
  }
  const double cta_Bps = p.nccl.cta_bw(plan.crosses_network).per_s;
  plan.bound = plan.ctas * cta_Bps;
  plan.solo_Bps = plan.bound;
  fabric_uses(c, s, u, route_sum_);
  for (const auto& [r, w] : u) {
    plan.uses.push_back({r, w});
    plan.solo_Bps = std::min(plan.solo_Bps, c.fluid_capacity(r) / w);
  }
  for (const auto& [r, w] : h) plan.hbm.push_back({r, w});
  plan.latency = sim::Time::us(latency_us(c, s, plan.crosses_network, nodes));
  return plan;
}

const CollectivePlan& CollectiveModel::cached_plan(Cluster& c, const CollectiveSpec& spec) {
  PlanKey key{spec.kind, spec.ctas, spec.across_copies, spec.ranks};
  auto it = plans_.find(key);
  if (it == plans_.end()) {
    if (merged_) throw std::logic_error("a collective was bound after its links were merged");
    CollectiveSpec one = spec;
    one.bytes = 1;
    it = plans_.emplace(std::move(key), plan(c, one)).first;
  }
  return it->second;
}

namespace {

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
  Gpu::Priority priority = Gpu::Priority::high;

  void ready(std::uint32_t i) {
    c->gpu(ranks[i]).request(
        plan->ctas, Gpu::Holder::nccl, [this, i](int k) { granted(i, k); }, priority);
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

void CollectiveModel::run(const std::vector<sim::Task*>& tasks, Cluster& c,
                          const CollectiveSpec& spec) {
  if (tasks.size() != spec.ranks.size()) throw std::invalid_argument("one task per rank");
  const auto& plan = cached_plan(c, spec);
  auto* st = c.keep(std::make_shared<CollectiveState>(CollectiveState{
      &c, &plan, plan.amount * spec.bytes, tasks, spec.ranks, std::vector<int>(tasks.size(), 0)}));
  st->priority = spec.priority;
  for (std::uint32_t i = 0; i < tasks.size(); ++i)
    tasks[i]->on_ready = [st, i](sim::Task&) { st->ready(i); };
}

void CollectiveModel::merge_alike_links(Cluster& c) {
  if (merged_) return;
  merged_ = true;
  // Each link's uses by the plans, as (plan number, weight) in plan order, with its capacity.
  using Usage = std::pair<double, std::vector<std::pair<std::size_t, double>>>;
  std::map<sim::Fluid::ResourceId, Usage> usage;
  std::size_t k = 0;
  const auto* fabric = c.topology();
  for (const auto& [key, plan] : plans_) {
    for (const auto& u : plan.uses) {
      if (fabric && fabric->redrawn(u.resource)) continue;  // its own draws in every burst
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
  for (auto& [key, plan] : plans_) {
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

sim::Time cpu_collective_time(const Profile& p, CpuCollKind kind, double n, double bytes) {
  if (n <= 1) return sim::Time{};
  const double hops = kind == CpuCollKind::all_reduce ? 2 * (n - 1) : 1;  // collective.hpp
  const double sent = (kind == CpuCollKind::all_reduce ? 2 : 1) * (n - 1) / n * bytes;
  return sim::Time::us(hops * p.host.gloo_hop_latency_us) +
         sim::Time::s(sent / (p.host.gloo_GBps * 1e9));
}

void run_cpu_collective(const std::vector<sim::Task*>& tasks, Cluster& c, CpuCollKind kind,
                        double bytes) {
  const sim::Time took =
      cpu_collective_time(c.profile(), kind, static_cast<double>(tasks.size()), bytes);
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
