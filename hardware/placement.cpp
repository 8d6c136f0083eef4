#include "hardware/placement.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <numeric>
#include <set>
#include <stdexcept>

#include "sim/random.hpp"

namespace twin::hardware {

const sim::Schema<PlacementOptions>& placement_schema() {
  static const sim::Schema<PlacementOptions> s = [] {
    sim::Schema<PlacementOptions> s;
    s.enumeration(
         "policy", sim::names(kPlacementPolicyNames),
         "where the job's nodes sit: packed into as few Dragonfly+ groups as possible, spread "
         "round-robin over groups, a random sample, the nodes of node_list_file, or as Slurm "
         "places it on a busy machine (shared.busy_fraction): one group if one has room, else "
         "spilled over the groups with the most free nodes",
         [](auto& p) -> auto& { return p.policy; })
        .text(
            "node_list_file",
            "Slurm node list (names, bracket ranges; relative to the scenario file) for "
            "policy \"file\"",
            [](auto& p) -> auto& { return p.node_list_file; })
        .integer(
            "racks_per_group", "racks", 1, 1000,
            "racks per Dragonfly+ group, to map node names (rack, slot) to groups",
            [](auto& p) -> auto& { return p.racks_per_group; })
        .integer(
            "seed", "", 0, 9.0e15, "seed of the random placement",
            [](auto& p) -> auto& { return p.seed; })
        .enumeration(
            "routing", sim::names(kRoutingNames),
            "inter-group routing: minimal paths, Valiant (via every other group), or "
            "adaptive (a fixed share of traffic non-minimal)",
            [](auto& p) -> auto& { return p.routing; })
        .real(
            "adaptive_nonminimal_fraction", "", 0, 1,
            "adaptive routing: share of inter-group traffic sent through other groups [est]",
            [](auto& p) -> auto& { return p.adaptive_nonminimal_fraction; })
        .boolean(
            "simulate_all_replicas",
            "simulate every data-parallel replica's ranks instead of one replica standing "
            "for all (exact, but dp times the work)",
            [](auto& p) -> auto& { return p.simulate_all_replicas; });
    return s;
  }();
  return s;
}

namespace {
constexpr long kMaxNames = 100'000;
}  // namespace

std::vector<std::string> expand_hostlist(const std::string& text) {
  // Split at commas outside brackets, then expand the first bracket group recursively.
  std::vector<std::string> parts;
  std::string cur;
  int depth = 0;
  for (char ch : text) {
    if (ch == '[') ++depth;
    if (ch == ']') --depth;
    if (depth < 0) throw std::invalid_argument("unbalanced ']' in a node list");
    if ((ch == ',' && depth == 0) || std::isspace(static_cast<unsigned char>(ch))) {
      if (!cur.empty()) parts.push_back(cur);
      cur.clear();
    } else {
      cur += ch;
    }
  }
  if (depth != 0) throw std::invalid_argument("unbalanced '[' in a node list");
  if (!cur.empty()) parts.push_back(cur);
  std::vector<std::string> out;
  for (const auto& p : parts) {
    const auto open = p.find('[');
    if (open == std::string::npos) {
      out.push_back(p);
      continue;
    }
    const auto close = p.find(']', open);
    const std::string head = p.substr(0, open), tail = p.substr(close + 1);
    std::string inner = p.substr(open + 1, close - open - 1) + ",";
    std::size_t at = 0;
    while (at < inner.size()) {
      const auto comma = inner.find(',', at);
      const std::string item = inner.substr(at, comma - at);
      at = comma + 1;
      const auto dash = item.find('-');
      const std::string lo = item.substr(0, dash),
                        hi = dash == std::string::npos ? lo : item.substr(dash + 1);
      if (lo.empty() || hi.empty() || lo.size() > 9 || hi.size() > 9 ||
          lo.find_first_not_of("0123456789") != std::string::npos ||
          hi.find_first_not_of("0123456789") != std::string::npos)
        throw std::invalid_argument("bad range '" + item + "' in a node list");
      // An empty range (hi < lo) is refused: every range then adds names, so the bound on the
      // names also bounds the work (found by fuzzing: [0-999999][5-4] looped without output).
      if (std::stol(hi) < std::stol(lo))
        throw std::invalid_argument("empty range '" + item + "' in a node list");
      if (std::stol(hi) - std::stol(lo) > kMaxNames || out.size() > kMaxNames)
        throw std::invalid_argument("node list longer than any machine");
      for (long v = std::stol(lo); v <= std::stol(hi); ++v)
        for (const auto& x : expand_hostlist(head + fmt::format("{:0{}}", v, lo.size()) + tail)) {
          out.push_back(x);
          // The product of several ranges, not only each range, is bounded (issue #23, item 2).
          if (out.size() > kMaxNames)
            throw std::invalid_argument("node list longer than any machine");
        }
    }
  }
  return out;
}

int node_from_name(const std::string& name, const NetworkSpec& net, std::int64_t racks_per_group) {
  std::vector<long> nums;
  for (std::size_t i = 0; i < name.size();) {
    if (!std::isdigit(static_cast<unsigned char>(name[i]))) {
      ++i;
      continue;
    }
    std::size_t j = i;
    while (j < name.size() && std::isdigit(static_cast<unsigned char>(name[j]))) ++j;
    if (j - i > 9) throw std::invalid_argument("node name '" + name + "': number too long");
    nums.push_back(std::stol(name.substr(i, j - i)));
    i = j;
  }
  if (nums.size() < 2)
    throw std::invalid_argument("node name '" + name + "' has no rack and slot numbers");
  const long per_rack = static_cast<long>(net.nodes_per_group / racks_per_group);
  const long rack = nums.front(), slot = nums.back();
  if (slot < 1 || slot > per_rack)
    throw std::invalid_argument(
        fmt::format("node '{}': slot {} outside 1–{}", name, slot, per_rack));
  const long id = (rack / racks_per_group) * net.nodes_per_group +
                  (rack % racks_per_group) * per_rack + slot - 1;
  if (id >= net.nodes_total)
    throw std::invalid_argument("node '" + name + "' is beyond the machine");
  return static_cast<int>(id);
}

namespace {
// Slurm on a busy machine: other jobs hold busy_fraction of the nodes (as many as leave the job
// room: it runs once enough are free), a seeded sample per draw; the job takes one group if one
// has room (best fit: the fullest such group), else the groups with the most free nodes first,
// each group's free nodes in order (leaf by leaf).
std::vector<int> place_slurm(int nodes, const PlacementOptions& o, const NetworkSpec& net) {
  const int total = static_cast<int>(net.nodes_total),
            per_group = static_cast<int>(net.nodes_per_group);
  const int busy =
      std::min(static_cast<int>(std::lround(o.shared.busy_fraction * total)), total - nodes);
  std::vector<int> all(static_cast<std::size_t>(total));
  std::iota(all.begin(), all.end(), 0);
  sim::Rng rng(sample_seed(o.shared, o.seed));
  for (int k = 0; k < busy; ++k)
    std::swap(all[static_cast<std::size_t>(k)],
              all[static_cast<std::size_t>(k + static_cast<int>(rng.below(total - k)))]);
  const int groups = (total + per_group - 1) / per_group;
  std::vector<std::vector<int>> free(static_cast<std::size_t>(groups));
  std::sort(all.begin() + busy, all.end());
  for (auto it = all.begin() + busy; it != all.end(); ++it)
    free[static_cast<std::size_t>(*it / per_group)].push_back(*it);
  std::vector<int> order(static_cast<std::size_t>(groups));
  std::iota(order.begin(), order.end(), 0);
  auto size = [&](int g) { return static_cast<int>(free[static_cast<std::size_t>(g)].size()); };
  int fit = -1;
  for (int g : order)
    if (size(g) >= nodes && (fit < 0 || size(g) < size(fit))) fit = g;
  if (fit >= 0) {
    order = {fit};
  } else {
    std::stable_sort(order.begin(), order.end(), [&](int a, int b) { return size(a) > size(b); });
  }
  std::vector<int> ids;
  for (int g : order)
    for (int n : free[static_cast<std::size_t>(g)])
      if (static_cast<int>(ids.size()) < nodes) ids.push_back(n);
  return ids;
}
}  // namespace

std::vector<int> groups_per_block(const std::vector<int>& nodes, int block,
                                  const NetworkSpec& net) {
  std::vector<int> out;
  for (std::size_t at = 0; at < nodes.size(); at += static_cast<std::size_t>(block)) {
    std::set<long> g;
    for (std::size_t i = at; i < std::min(nodes.size(), at + static_cast<std::size_t>(block)); ++i)
      g.insert(nodes[i] / net.nodes_per_group);
    out.push_back(static_cast<int>(g.size()));
  }
  return out;
}

int groups_across_blocks_max(const std::vector<int>& nodes, int block, const NetworkSpec& net) {
  int most = 0;
  for (std::size_t j = 0; j < std::min(nodes.size(), static_cast<std::size_t>(block)); ++j) {
    std::set<long> g;
    for (std::size_t i = j; i < nodes.size(); i += static_cast<std::size_t>(block))
      g.insert(nodes[i] / net.nodes_per_group);
    most = std::max(most, static_cast<int>(g.size()));
  }
  return most;
}

std::vector<int> place_nodes(int nodes, const PlacementOptions& o, const NetworkSpec& net) {
  const int total = static_cast<int>(net.nodes_total),
            per_group = static_cast<int>(net.nodes_per_group);
  if (o.policy == PlacementPolicy::file) {
    std::vector<int> ids;
    std::set<int> seen;
    for (const auto& n : o.node_names) {
      const int id = node_from_name(n, net, o.racks_per_group);
      if (!seen.insert(id).second) throw std::invalid_argument("node '" + n + "' is listed twice");
      ids.push_back(id);
    }
    if (static_cast<int>(ids.size()) < nodes)
      throw std::invalid_argument(
          fmt::format("the node list has {} nodes; the job needs {}", ids.size(), nodes));
    ids.resize(static_cast<std::size_t>(nodes));
    return ids;
  }
  if (nodes > total)
    throw std::invalid_argument(
        fmt::format("the job needs {} nodes; the machine has {}", nodes, total));
  if (o.policy == PlacementPolicy::slurm) return place_slurm(nodes, o, net);
  std::vector<int> ids(static_cast<std::size_t>(nodes));
  if (o.policy == PlacementPolicy::packed) {
    std::iota(ids.begin(), ids.end(), 0);
  } else if (o.policy == PlacementPolicy::spread) {
    const int groups = (total + per_group - 1) / per_group;
    std::vector<int> next(static_cast<std::size_t>(groups), 0);
    for (int k = 0, g = 0; k < nodes; g = (g + 1) % groups) {
      const int id = g * per_group + next[static_cast<std::size_t>(g)];
      if (next[static_cast<std::size_t>(g)] < per_group && id < total) {
        ids[static_cast<std::size_t>(k++)] = id;
        ++next[static_cast<std::size_t>(g)];
      }
    }
  } else {  // random: a partial Fisher–Yates shuffle of the machine's nodes
    std::vector<int> all(static_cast<std::size_t>(total));
    std::iota(all.begin(), all.end(), 0);
    sim::Rng rng(static_cast<std::uint64_t>(o.seed));
    for (int k = 0; k < nodes; ++k) {
      const int j = k + static_cast<int>(rng.uniform() * (total - k));
      std::swap(all[static_cast<std::size_t>(k)],
                all[static_cast<std::size_t>(std::min(j, total - 1))]);
    }
    ids.assign(all.begin(), all.begin() + nodes);
  }
  return ids;
}

}  // namespace twin::hardware
