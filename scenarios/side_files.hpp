// Files a scenario names beside it — data.doc_lengths_file, placement.node_list_file — read and
// checked, every error an InputError naming the file. The loader (loader.cpp) finds and opens them.
#pragma once

#include <cstdint>
#include <istream>
#include <string>
#include <vector>

#include "hardware/placement.hpp"

namespace twin::scenarios {

// Whitespace-separated positive token counts, one document each; at least one.
std::vector<std::int64_t> read_doc_lengths(std::istream& in, const std::string& file);

// A Slurm node list (bracket ranges allowed), checked by placing `nodes` job nodes on the
// machine with `p` (whose node_names it does not read).
std::vector<std::string> read_node_list(std::istream& in, const std::string& file, int nodes,
                                        hardware::PlacementOptions p,
                                        const hardware::NetworkSpec& net);

}  // namespace twin::scenarios
