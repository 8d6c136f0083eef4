// `twin ladder`: every rung of JOB.md §6 (scenarios/ladder/NN-name.json) predicted, beside the
// published figure where JOB.md gives one (scenarios/ladder/published.json), with the error.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "scenarios/commands.hpp"
#include "scenarios/parallel.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

namespace fs = std::filesystem;

namespace {

// A metric of a result by dotted name; "a+b" adds two; "breakdown_s.rank0.compute" is
// compute_only + compute_overlapped.
double metric(const Json& r, const std::string& name) {
  if (auto plus = name.find('+'); plus != std::string::npos) {
    const auto dot = name.find('.');
    const std::string prefix = dot < plus ? name.substr(0, dot + 1) : "";
    return metric(r, name.substr(0, plus)) + metric(r, prefix + name.substr(plus + 1));
  }
  if (name == "breakdown_s.rank0.compute")
    return metric(r, "breakdown_s.rank0.compute_only") +
           metric(r, "breakdown_s.rank0.compute_overlapped");
  const Json* node = &r;
  std::size_t start = 0;
  while (true) {
    const auto dot = name.find('.', start);
    const auto key = name.substr(start, dot - start);
    if (!node->contains(key)) return 0;
    node = &(*node)[key];
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return node->get<double>();
}

}  // namespace

Json ladder_json(const LadderArgs& a) {
  const fs::path dir = a.data_dir.empty() ? default_data_dir() / "scenarios/ladder"
                                          : fs::path(a.data_dir) / "scenarios/ladder";
  std::vector<fs::path> rungs;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().extension() == ".json" &&
        std::isdigit(static_cast<unsigned char>(e.path().filename().string()[0])))
      rungs.push_back(e.path());
  std::sort(rungs.begin(), rungs.end());
  const Json published = read_json_file(dir / "published.json")["rungs"];
  const LoadOptions lo{a.data_dir.empty() ? default_data_dir() : fs::path(a.data_dir), a.sets};
  reports::Progress progress("ladder: rungs", rungs.size(), a.progress ? stderr : nullptr);
  auto results = run_parallel<RunResult>(
      rungs.size(), a.jobs,
      [&](std::size_t i) { return simulate(load_scenario(rungs[i], lo), {}); }, &progress);
  Json out = Json::array();
  for (std::size_t i = 0; i < rungs.size(); ++i) {
    const auto& r = results[i].report;
    Json row{{"rung", r.scenario},
             {"tokens_per_s_per_gpu", r.tokens_per_s_per_gpu},
             {"step_time_s", r.step_time_s},
             {"exposed_comm_s", r.exposed_comm_s()},
             {"optimizer_step_s", r.optimizer_step_s}};
    Json checks = Json::array();
    if (published.contains(r.scenario))  // published figures name their metric by JSON path
      for (const auto& [k, v] : published[r.scenario].items()) {
        const double pred = metric(results[i].json, k), pub = v.get<double>();
        checks.push_back({{"metric", k},
                          {"predicted", pred},
                          {"published", pub},
                          {"error_pct", 100 * (pred - pub) / pub}});
      }
    row["published"] = checks;
    out.push_back(row);
  }
  return out;
}

int cmd_ladder(const LadderArgs& a, std::ostream& out) {
  const Json rows = ladder_json(a);
  if (a.json) {
    out << rows.dump(2) << "\n";
    return 0;
  }
  fmt::print(out, "{:<28} {:>9} {:>9} {:>8}  published checks (predicted / published, error)\n",
             "rung", "tok/s/GPU", "step s", "wait s");
  for (const auto& r : rows) {
    fmt::print(out, "{:<28} {:>9.0f} {:>9.2f} {:>8.2f} ", r["rung"].get<std::string>(),
               r["tokens_per_s_per_gpu"].get<double>(), r["step_time_s"].get<double>(),
               r["exposed_comm_s"].get<double>());
    for (const auto& c : r["published"])
      fmt::print(out, " {} {:.4g}/{:.4g} ({:+.1f}%);", c["metric"].get<std::string>(),
                 c["predicted"].get<double>(), c["published"].get<double>(),
                 c["error_pct"].get<double>());
    fmt::print(out, "\n");
  }
  return 0;
}

}  // namespace twin::scenarios
