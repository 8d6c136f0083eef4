// JUPITER's InfiniBand fabric as a Dragonfly+ (JOB.md §2.2): groups of nodes, each group a
// non-blocking two-level fat tree (leaf and spine switches), global links between the spines of
// every pair of groups. The group-level graph is a Boost.Graph; routes come through route().
//
// Resources (fluid capacities, per direction): a leaf's uplinks to all spines of its group
// together (spines × leaf_spine_GBps, traffic spread over the spines by ECMP/adaptive routing,
// so a bundle), the same downwards; the global links from group g to group h together
// (global_links_per_group_pair × global_link_GBps); and all global links leaving g (egress)
// and entering g (ingress) together. A node's own NICs are the cluster's per-GPU NIC resources.
// Routes, per unit sent from node a to node b:
//     same leaf: nothing beyond the NICs;
//     same group: leaf_up(a) + leaf_down(b);
//     other group: leaf_up(a) + egress(g_a) + ingress(g_b) + leaf_down(b), and
//       minimal: + pair(g_a→g_b);
//       valiant: through another group, spread evenly over all of them: the first hop is one
//                of g_a's egress links, the second one of g_b's ingress links, so the
//                aggregates bound it (the intermediate groups' own aggregates and the hop inside
//                them, spine to spine through a leaf, are not modelled);
//       adaptive: a fraction f valiant, 1 − f minimal (+ (1 − f)·pair(g_a→g_b)); f is fixed per
//                scenario (the solver shares fixed paths; a real adaptive router picks per packet).
// Leaf bundles are left out when they are non-blocking (spines × leaf_spine_GBps ≥ the NIC
// bandwidth of the leaf's nodes): every byte a leaf carries up (down) leaves (enters) one of its
// nodes' NICs, which bound it already, so such a leaf never saturates — the same rates, with
// far fewer resources per flow.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <unordered_map>
#include <utility>
#include <vector>

#include "hardware/profile.hpp"
#include "hardware/shared_machine.hpp"
#include "sim/fluid.hpp"
#include "sim/param.hpp"

namespace twin::hardware {

enum class Routing { minimal, valiant, adaptive };
inline constexpr sim::Named<Routing> kRoutingNames[] = {
    {Routing::minimal, "minimal"}, {Routing::valiant, "valiant"}, {Routing::adaptive, "adaptive"}};

class Dragonfly {
 public:
  // node_nic_GBps: all NICs of one node, per direction.
  // `shared`: other jobs' traffic takes a share of each link bundle's capacity (drawn per link
  // with `seed`; shared_machine.hpp); a leaf with background traffic is no longer non-blocking.
  Dragonfly(sim::Fluid& fluid, const NetworkSpec& spec, double node_nic_GBps, Routing routing,
            double adaptive_fraction, const SharedMachine& shared = {}, std::uint64_t seed = 0);
  bool leaves_nonblocking() const { return leaves_nonblocking_; }

  // Groups the model takes: it keeps group × group hop tables, found by a breadth-first search
  // from every group over every pair's links (~groups³); Dragonfly+ machines have tens to a
  // few hundred groups (JUPITER 25).
  static constexpr std::int64_t kMaxGroups = 512;
  int groups() const { return groups_; }
  int group_of(int node) const { return node / nodes_per_group_; }
  int leaf_of(int node) const {
    return group_of(node) * leaves_per_group_ + (node % nodes_per_group_) / nodes_per_leaf_;
  }
  // Minimal group hops from g to h on the group graph (Boost.Graph breadth-first search).
  int group_hops(int g, int h) const;

  // Weights per resource, summed over many routes (a flat array: collectives of thousands of
  // node pairs add up their routes here).
  struct RouteSum {
    std::vector<double> weight;
    std::vector<sim::Fluid::ResourceId> touched;
    void add(sim::Fluid::ResourceId r, double w) {
      if (r >= weight.size()) weight.resize(r + 1, 0.0);
      if (weight[r] == 0) touched.push_back(r);
      weight[r] += w;
    }
    // Moves the sums into `uses` and clears.
    void drain(std::map<sim::Fluid::ResourceId, double>& uses) {
      for (auto r : touched) uses[r] += weight[r], weight[r] = 0;
      touched.clear();
    }
  };
  // The fabric resources a unit of traffic from node a to node b crosses, with weights, added
  // to `sum` scaled by `scale` (> 0).
  void route(int a, int b, double scale, RouteSum& sum);

  // What crossed each fabric resource, for reports: bytes, and the intervals of the flows that
  // used it (a collective's data phase).
  struct Usage {
    double bytes = 0;
    std::vector<std::pair<std::int64_t, std::int64_t>> busy_ns;
  };
  void record(sim::Fluid::ResourceId r, double bytes, std::int64_t from_ns, std::int64_t to_ns);
  const std::map<sim::Fluid::ResourceId, Usage>& usage() const { return usage_; }
  const std::string& name(sim::Fluid::ResourceId r) const { return names_.at(r); }
  bool is_fabric(sim::Fluid::ResourceId r) const { return names_.count(r) > 0; }

  // Other jobs' bursts (shared.burst_s): draws every loaded link's share for burst `burst` of the
  // step and sets the capacities it leaves (links made later take the current burst's draw).
  void redraw(std::int64_t burst);
  // Whether r's capacity changes between bursts (so it cannot be merged with alike links).
  bool redrawn(sim::Fluid::ResourceId r) const { return shared_.redraws() && loaded_.count(r) > 0; }

  // The share of g → h traffic routed through a third group (routes are fixed when first
  // planned — a step's collectives before it runs — so with bursts they follow the first draw).
  double nonminimal_share(int g, int h) const;

 private:
  sim::Fluid::ResourceId leaf(int node, bool up);
  sim::Fluid::ResourceId global(int g, int h);
  std::uint64_t global_key(int g, int h) const {
    return (1ULL << 40) + static_cast<std::uint64_t>(g * groups_ + h);
  }
  sim::Fluid::ResourceId aggregate(int g, bool egress);

  // A fabric link bundle of `capacity_GBps` with other jobs' traffic of `mean_load` (key: names
  // the bundle in the draws).
  sim::Fluid::ResourceId add_link(double capacity_GBps, double mean_load, std::uint64_t key,
                                  const std::string& name);
  struct Loaded {  // a link other jobs' traffic shares
    double capacity_Bps, mean_load;
    std::uint64_t key;
  };
  // The capacity a loaded link leaves the job in the current burst.
  double left(const Loaded& l) const;

  sim::Fluid& fluid_;
  NetworkSpec spec_;
  SharedMachine shared_;
  std::uint64_t seed_;
  Routing routing_;
  double adaptive_fraction_;
  int groups_, nodes_per_group_, nodes_per_leaf_, leaves_per_group_;
  bool leaves_nonblocking_;
  std::vector<std::vector<int>> hops_;  // group × group
  std::map<std::pair<int, bool>, sim::Fluid::ResourceId> leaves_;
  std::map<std::pair<int, int>, sim::Fluid::ResourceId> globals_;
  std::map<std::pair<int, bool>, sim::Fluid::ResourceId> aggregates_;
  // Routes by source leaf · leaves + destination leaf, filled on first use (a job meets few of
  // the machine's leaf pairs: a table of all of them grows as leaves²).
  std::unordered_map<std::uint64_t, std::vector<std::pair<sim::Fluid::ResourceId, double>>> routes_;
  std::map<sim::Fluid::ResourceId, std::string> names_;
  std::map<sim::Fluid::ResourceId, Usage> usage_;
  std::map<sim::Fluid::ResourceId, Loaded> loaded_;  // links other jobs' traffic shares
  std::int64_t burst_ = 0;
};

}  // namespace twin::hardware
