// The subcommands of `twin`. Each returns the process exit code; input errors propagate as
// InputError and become exit code 2 in main (only main exits).
#pragma once

#include <iosfwd>
#include <string>
#include <vector>

#include "scenarios/loader.hpp"

namespace twin::scenarios {

struct CommonArgs {
  std::string scenario;
  std::vector<std::string> sets;
  std::string data_dir;
  bool json = false;
  LoadOptions load_options() const;
};

struct RunArgs {
  std::string trace_file;
  std::vector<int> trace_ranks;
};

int cmd_model(const CommonArgs& args, std::ostream& out);
int cmd_run(const CommonArgs& args, const RunArgs& run, std::ostream& out);
int cmd_resolve(const CommonArgs& args, std::ostream& out);
int cmd_help_params(bool json, std::ostream& out);

// The accounting of a loaded scenario as JSON (also embedded in other outputs).
Json accounting_json(const Scenario& s);

}  // namespace twin::scenarios
