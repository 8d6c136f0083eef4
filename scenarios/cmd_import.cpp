// `twin import-torchtitan`: a TorchTitan job file as a twin scenario (torchtitan_import.hpp),
// checked by loading it as `twin run` would, then written, printed or run.
#include <fmt/format.h>
#include <fmt/ostream.h>
#include <unistd.h>

#include <filesystem>
#include <iostream>

#include "reports/output.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/torchtitan_import.hpp"

namespace twin::scenarios {

namespace fs = std::filesystem;

namespace {

// node.gpus of a hardware profile, following its `base` chain.
int profile_gpus_per_node(const fs::path& data_dir, const std::string& name) {
  fs::path file = data_dir / "hardware" / "profiles" / (name + ".json");
  for (int depth = 0; depth < 8; ++depth) {
    if (!fs::exists(file)) throw InputError(file.string(), "", "no such hardware profile");
    const Json j = read_json_file(file);
    if (j.contains("node") && j["node"].contains("gpus"))
      return j["node"]["gpus"]["value"].get<int>();
    if (!j.contains("base")) break;
    file = file.parent_path() / (j["base"].get<std::string>() + ".json");
  }
  throw InputError(file.string(), "node.gpus", "the profile names no GPUs per node");
}

void print_notes(const ImportedJob& job, std::ostream& err) {
  fmt::print(err, "mapped:\n");
  for (const auto& m : job.mapped) fmt::print(err, "  {}\n", m);
  if (!job.no_effect.empty()) {
    fmt::print(err, "no effect on one step (logging, checkpoints, data, learning rate):\n  ");
    for (std::size_t i = 0; i < job.no_effect.size(); ++i)
      fmt::print(err, "{}{}", i ? ", " : "", job.no_effect[i]);
    fmt::print(err, "\n");
  }
  fmt::print(err, "not modelled ({}):\n", job.ignored.size());
  for (const auto& m : job.ignored) fmt::print(err, "  {}\n", m);
}

}  // namespace

int cmd_import_torchtitan(const CommonArgs& args, const ImportArgs& a, std::ostream& out) {
  const auto opts = args.load_options();
  args.check_output(a.out, "--out");
  TorchtitanMachine machine{a.nodes, a.gpus_per_node, a.profile};
  const auto job =
      import_torchtitan(args.scenario, machine, profile_gpus_per_node(opts.data_dir, a.profile));
  // Invalid UTF-8 in a TOML string becomes U+FFFD rather than an internal error.
  const std::string text = job.scenario.dump(2, ' ', false, Json::error_handler_t::replace) + "\n";
  // Checked as `twin run` loads it (with the --set overrides) before anything is written.
  const fs::path file =
      a.out.empty() ? fs::temp_directory_path() / fmt::format("twin-import-{}.json", ::getpid())
                    : fs::path(a.out);
  const fs::path check = a.out.empty() ? file : fs::path(a.out + ".check.json");
  reports::write_atomic(check, text);
  try {
    load_scenario(check, opts);
  } catch (...) {
    fs::remove(check);
    throw;
  }
  if (check != file) fs::rename(check, file);
  if (!args.quiet) print_notes(job, std::cerr);
  int rc = 0;
  if (a.run) {
    CommonArgs run_args = args;
    run_args.scenario = file.string();
    rc = cmd_run(run_args, RunArgs{}, out);
  } else if (a.out.empty()) {
    out << text;
  }
  if (a.out.empty()) fs::remove(file);
  return rc;
}

}  // namespace twin::scenarios
