// Where a job's nodes sit in the fabric (JOB.md §2.2: Slurm places jobs; `--switches` is
// honoured only for minutes, then a job may be spread over groups), and how traffic is routed.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "hardware/shared_machine.hpp"
#include "hardware/topology.hpp"
#include "sim/param.hpp"

namespace twin::hardware {

// packed: as few groups as possible, leaf by leaf; spread: round-robin over groups; random: a
// seeded sample of the machine's nodes; file: the nodes of `node_list_file`; slurm: as Slurm
// places a job on a busy machine (shared.busy_fraction of every group held by other jobs): within
// one group if one has room (`--switches=1`, best fit), else — the wait for it is enforced for
// minutes only (JOB.md §2.2) — over the groups with the most free nodes first.
enum class PlacementPolicy { packed, spread, random, file, slurm };
inline constexpr sim::Named<PlacementPolicy> kPlacementPolicyNames[] = {
    {PlacementPolicy::packed, "packed"},
    {PlacementPolicy::spread, "spread"},
    {PlacementPolicy::random, "random"},
    {PlacementPolicy::file, "file"},
    {PlacementPolicy::slurm, "slurm"}};

struct PlacementOptions {
  PlacementPolicy policy = PlacementPolicy::packed;
  std::string node_list_file;           // Slurm node names (bracket ranges allowed)
  std::vector<std::string> node_names;  // filled by the loader from node_list_file
  std::int64_t racks_per_group = 5;     // node names carry the rack (JOB.md §2.2: 5 racks/group)
  std::int64_t seed = 1;
  Routing routing = Routing::adaptive;
  double adaptive_nonminimal_fraction = 0.5;
  // false: simulate one replica and let it stand for every replica (their flows share the fabric
  // with the same timing); true: simulate every replica's ranks.
  bool simulate_all_replicas = false;
  SharedMachine
      shared;  // other jobs: busy nodes, background traffic, stragglers (scenario key "shared")
};

const sim::Schema<PlacementOptions>& placement_schema();

// Expands Slurm's bracket syntax: "jpbo-[001-003]-01,jpbo-004-[02,05]" → 5 names.
std::vector<std::string> expand_hostlist(const std::string& text);
// A node name's place: the first integer is its rack, the last its slot in the rack (1-based);
// consecutive racks_per_group racks form a group [est: JUPITER's names carry the rack].
int node_from_name(const std::string& name, const NetworkSpec& net, std::int64_t racks_per_group);

// Fabric node ids (0 … nodes_total−1) of `nodes` job nodes in rank order. Throws
// std::invalid_argument if the machine or the node list is too small.
std::vector<int> place_nodes(int nodes, const PlacementOptions& o, const NetworkSpec& net);
// The groups the nodes of each block of `block` consecutive nodes span (a replica's nodes).
std::vector<int> groups_per_block(const std::vector<int>& nodes, int block, const NetworkSpec& net);
// The most groups that the nodes at one position of every block span: the replica all-reduce
// joins the GPUs of the same rank in every replica, so its rings cross that many groups.
int groups_across_blocks_max(const std::vector<int>& nodes, int block, const NetworkSpec& net);

}  // namespace twin::hardware
