#include "scenarios/side_files.hpp"

#include <fmt/format.h>

#include <sstream>
#include <stdexcept>

#include "scenarios/loader.hpp"

namespace twin::scenarios {

std::vector<std::int64_t> read_doc_lengths(std::istream& in, const std::string& file) {
  std::vector<std::int64_t> out;
  std::string line;
  for (std::size_t n = 1; std::getline(in, line); ++n) {
    std::istringstream ls(line);
    std::string tok;
    while (ls >> tok) {
      std::size_t used = 0;
      long long v = 0;
      try {
        v = std::stoll(tok, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      if (used != tok.size() || v <= 0)
        throw InputError(file, "",
                         fmt::format("line {}: \"{}\" is not a positive token count", n, tok));
      out.push_back(v);
    }
  }
  if (out.empty()) throw InputError(file, "", "no document lengths in file");
  return out;
}

std::vector<std::string> read_node_list(std::istream& in, const std::string& file, int nodes,
                                        hardware::PlacementOptions p,
                                        const hardware::NetworkSpec& net) {
  std::stringstream text;
  text << in.rdbuf();
  try {
    p.node_names = hardware::expand_hostlist(text.str());
    hardware::place_nodes(nodes, p, net);
  } catch (const std::invalid_argument& e) {
    throw InputError(file, "", e.what());
  }
  return p.node_names;
}

}  // namespace twin::scenarios
