// `twin sweep`: every combination of --grid values, run in parallel threads; one row per point,
// in grid order (the first --grid varies slowest), whatever order the threads finish in.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "reports/output.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/parallel.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

namespace {

struct Axis {
  std::string key;
  std::vector<std::string> values;
};

std::vector<Axis> parse_grid(const std::vector<std::string>& grid) {
  std::vector<Axis> axes;
  for (const auto& g : grid) {
    const auto eq = g.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == g.size())
      throw InputError("--grid", "", fmt::format("\"{}\": expected KEY=V1,V2,...", g));
    Axis a{g.substr(0, eq), {}};
    std::size_t start = eq + 1;
    while (true) {
      const auto comma = g.find(',', start);
      a.values.push_back(g.substr(start, comma - start));
      if (comma == std::string::npos) break;
      start = comma + 1;
    }
    axes.push_back(std::move(a));
  }
  return axes;
}

const char* kOutputs[] = {"tokens_per_s_per_gpu", "step_time_s", "exposed_comm_s",
                          "optimizer_step_s"};

}  // namespace

Json sweep_json(const CommonArgs& args, const SweepArgs& sw) {
  const auto axes = parse_grid(sw.grid);
  std::size_t points = 1;
  for (const auto& a : axes) points *= a.values.size();
  auto rows = run_parallel<Json>(points, sw.jobs, [&](std::size_t i) {
    Json row = Json::object();
    auto sets = args.sets;
    std::size_t rest = i;
    std::vector<std::string> vals(axes.size());
    for (std::size_t k = axes.size(); k-- > 0;) {
      vals[k] = axes[k].values[rest % axes[k].values.size()];
      rest /= axes[k].values.size();
    }
    for (std::size_t k = 0; k < axes.size(); ++k) {
      row[axes[k].key] = vals[k];
      sets.push_back(axes[k].key + "=" + vals[k]);
    }
    try {
      LoadOptions lo = args.load_options();
      lo.sets = sets;
      const auto r = simulate(load_scenario(args.scenario, lo), {}).json;
      for (const char* o : kOutputs) row[o] = r[o];
      row["nccl_sms_max"] = r["nccl_sms"]["max"];
      row["error"] = "";
    } catch (const std::exception& e) {
      row["error"] = e.what();  // a point that cannot run is a row that says why
    }
    return row;
  });
  return rows;
}

std::string to_csv(const Json& rows) {
  if (rows.empty()) return "";
  std::string out;
  bool first = true;
  for (const auto& [k, _] : rows[0].items()) out += (first ? "" : ",") + k, first = false;
  out += "\n";
  for (const auto& r : rows) {
    first = true;
    for (const auto& [k, v] : r.items()) {
      std::string cell = v.is_string() ? v.get<std::string>() : v.dump();
      if (cell.find_first_of(",\"\n") != std::string::npos) {
        std::string q = "\"";
        for (char c : cell) q += c == '"' ? std::string("\"\"") : std::string(1, c);
        cell = q + "\"";
      }
      out += (first ? "" : ",") + cell;
      first = false;
    }
    out += "\n";
  }
  return out;
}

int cmd_sweep(const CommonArgs& args, const SweepArgs& sw, std::ostream& out) {
  const Json rows = sweep_json(args, sw);
  const bool json = args.json || sw.out.ends_with(".json");
  const std::string text = json ? rows.dump(2) + "\n" : to_csv(rows);
  if (sw.out.empty())
    out << text;
  else
    reports::write_atomic(sw.out, text);
  return 0;
}

}  // namespace twin::scenarios
