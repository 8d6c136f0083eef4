#include "hardware/topology.hpp"

#include <fmt/format.h>

#include <boost/graph/adjacency_list.hpp>
#include <boost/graph/breadth_first_search.hpp>
#include <stdexcept>

namespace twin::hardware {

Dragonfly::Dragonfly(sim::Fluid& fluid, const NetworkSpec& spec, double node_nic_GBps,
                     Routing routing, double adaptive_fraction, const SharedMachine& shared,
                     std::uint64_t seed)
    : fluid_(fluid),
      spec_(spec),
      shared_(shared),
      seed_(seed),
      routing_(routing),
      adaptive_fraction_(adaptive_fraction),
      groups_(
          static_cast<int>((spec.nodes_total + spec.nodes_per_group - 1) / spec.nodes_per_group)),
      nodes_per_group_(static_cast<int>(spec.nodes_per_group)),
      nodes_per_leaf_(static_cast<int>(spec.nodes_per_leaf)),
      leaves_per_group_((nodes_per_group_ + nodes_per_leaf_ - 1) / nodes_per_leaf_),
      leaves_nonblocking_(shared.background_leaf_load <= 0 &&
                          static_cast<double>(spec.spines_per_group) * spec.leaf_spine_GBps >=
                              static_cast<double>(spec.nodes_per_leaf) * node_nic_GBps) {
  if (groups_ > kMaxGroups)
    throw std::invalid_argument(
        fmt::format("{} groups: the fabric model takes at most {}", groups_, kMaxGroups));
  // Groups as vertices, a global-link bundle as an edge between every pair with links.
  using Graph = boost::adjacency_list<boost::vecS, boost::vecS, boost::undirectedS>;
  Graph g(static_cast<std::size_t>(groups_));
  if (spec.global_links_per_group_pair > 0)
    for (int a = 0; a < groups_; ++a)
      for (int b = a + 1; b < groups_; ++b) boost::add_edge(a, b, g);
  hops_.assign(static_cast<std::size_t>(groups_),
               std::vector<int>(static_cast<std::size_t>(groups_), -1));
  for (int s = 0; s < groups_; ++s) {
    std::vector<int> dist(static_cast<std::size_t>(groups_), 0);
    boost::breadth_first_search(g, boost::vertex(static_cast<std::size_t>(s), g),
                                boost::visitor(boost::make_bfs_visitor(
                                    boost::record_distances(dist.data(), boost::on_tree_edge()))));
    for (int t = 0; t < groups_; ++t) hops_[s][t] = (t == s || dist[t] > 0) ? dist[t] : -1;
  }
}

int Dragonfly::group_hops(int g, int h) const {
  return hops_[static_cast<std::size_t>(g)][static_cast<std::size_t>(h)];
}

sim::Fluid::ResourceId Dragonfly::add_link(double capacity_GBps, double mean_load,
                                           std::uint64_t key, const std::string& name) {
  const Loaded l{capacity_GBps * 1e9, mean_load, key};
  const auto r = fluid_.add_resource(left(l), name);
  names_[r] = name;
  if (mean_load > 0) loaded_.emplace(r, l);
  return r;
}

double Dragonfly::left(const Loaded& l) const {
  return l.capacity_Bps *
         job_share_of_link(shared_, background_share(l.mean_load, seed_, l.key, burst_));
}

void Dragonfly::redraw(std::int64_t burst) {
  burst_ = burst;
  for (const auto& [r, l] : loaded_) fluid_.set_capacity(r, left(l));
}

sim::Fluid::ResourceId Dragonfly::leaf(int node, bool up) {
  const int l = leaf_of(node);
  auto [it, fresh] = leaves_.try_emplace({l, up}, 0);
  if (fresh)
    it->second = add_link(static_cast<double>(spec_.spines_per_group) * spec_.leaf_spine_GBps,
                          shared_.background_leaf_load, 2 * static_cast<std::uint64_t>(l) + up,
                          fmt::format("leaf{}.{}", l, up ? "up" : "down"));
  return it->second;
}

sim::Fluid::ResourceId Dragonfly::global(int g, int h) {
  auto [it, fresh] = globals_.try_emplace({g, h}, 0);
  if (fresh)
    it->second =
        add_link(static_cast<double>(spec_.global_links_per_group_pair) * spec_.global_link_GBps,
                 shared_.background_global_load, global_key(g, h),
                 fmt::format("global.group{}->group{}", g, h));
  return it->second;
}

sim::Fluid::ResourceId Dragonfly::aggregate(int g, bool egress) {
  auto [it, fresh] = aggregates_.try_emplace({g, egress}, 0);
  if (fresh)
    it->second = add_link(
        static_cast<double>(groups_ - 1) * static_cast<double>(spec_.global_links_per_group_pair) *
            spec_.global_link_GBps,
        shared_.background_global_load, (2ULL << 40) + 2 * static_cast<std::uint64_t>(g) + egress,
        fmt::format("global.group{}.{}", g, egress ? "egress" : "ingress"));
  return it->second;
}

double Dragonfly::nonminimal_share(int g, int h) const {
  if (routing_ == Routing::minimal || groups_ < 3) return 0.0;
  if (routing_ == Routing::valiant) return 1.0;
  // Adaptive routing sends a packet minimally while the minimal port's queue is short; other
  // jobs' traffic fills that queue for their share u of the link's time, so the job's minimal
  // share (1 − a on an idle machine) shrinks to (1 − a)(1 − u) [est: UGAL-style choice, the
  // fluid model's steady state].
  const double u =
      background_share(shared_.background_global_load, seed_, global_key(g, h), burst_);
  return u > 0 ? 1 - (1 - adaptive_fraction_) * (1 - u) : adaptive_fraction_;
}

void Dragonfly::route(int a, int b, double scale, RouteSum& sum) {
  if (a == b || leaf_of(a) == leaf_of(b) || scale <= 0) return;
  auto& r = routes_[static_cast<std::uint64_t>(leaf_of(a)) *
                        static_cast<std::uint64_t>(groups_ * leaves_per_group_) +
                    static_cast<std::uint64_t>(leaf_of(b))];
  if (r.empty() && !(leaves_nonblocking_ && group_of(a) == group_of(b))) {
    if (!leaves_nonblocking_) {
      r.emplace_back(leaf(a, true), 1.0);
      r.emplace_back(leaf(b, false), 1.0);
    }
    const int ga = group_of(a), gb = group_of(b);
    if (ga != gb) {
      if (group_hops(ga, gb) != 1)
        throw std::invalid_argument(fmt::format("groups {} and {} have no global link", ga, gb));
      const double nonmin = nonminimal_share(ga, gb);
      r.emplace_back(aggregate(ga, true), 1.0);
      r.emplace_back(aggregate(gb, false), 1.0);
      if (nonmin < 1) r.emplace_back(global(ga, gb), 1 - nonmin);
    }
  }
  for (const auto& [res, w] : r) sum.add(res, scale * w);
}

void Dragonfly::record(sim::Fluid::ResourceId r, double bytes, std::int64_t from_ns,
                       std::int64_t to_ns) {
  auto& u = usage_[r];
  u.bytes += bytes;
  u.busy_ns.emplace_back(from_ns, to_ns);
}

}  // namespace twin::hardware
