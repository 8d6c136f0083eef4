// `twin tune`: searches the plan space for the best configuration that fits (issue #21 item 3).
// A space within --budget-points is searched exhaustively: every combination of --vary runs as
// a sweep (threads, like `twin sweep`; under mpirun spread over the ranks, sweep_mpi.hpp, and
// rank 0 reports). A larger one is searched by coordinates (below), on one machine.
// Configurations that cannot run or do not fit are counted by reason; the best are re-simulated
// and explained against the scenario as given: where their step time goes differently.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <ostream>

#include "scenarios/commands.hpp"
#include "scenarios/json_tree.hpp"
#include "scenarios/sweep_mpi.hpp"

namespace twin::scenarios {

namespace {

// The default plan space: the knobs JOB.md §6 turned that a user re-tunes (NCCL CTAs, sequence
// length, activation offload, checkpointing, the expert GEMMs' tile scheduler): 144 points.
const std::vector<std::string> kDefaultSpace = {
    "nccl.max_ctas=8,16,32,64", "training.seq_len=32768,49152,65536",
    "training.offload_fraction=0.7,0.86,1.0", "training.activation_checkpointing=selective,full",
    "training.moe_tile_scheduler=static,dynamic"};

std::string skip_reason(const Json& row) {
  if (!row.value("error", std::string()).empty())
    return "cannot run: " + row["error"].get<std::string>();
  if (row.value("oom", false)) return "out of HBM";
  return "out of Grace memory (less headroom than the median unattributed memory)";
}

// Where a configuration's step goes differently from the baseline's (rank 0): the breakdown's
// parts and the three kinds of GPU work that moved most.
Json why(const reports::StepReport& r, const reports::StepReport& base) {
  Json w{{"step_time_s", r.step_time_s - base.step_time_s}};
  const auto d = to_json(r.rank0), b = to_json(base.rank0);
  for (const auto& [k, v] : d.items()) w["breakdown_s"][k] = v.get<double>() - b[k].get<double>();
  std::vector<std::pair<double, std::string>> moved;
  for (const auto& [k, v] : r.gpu_time_s) moved.emplace_back(v - base.gpu_time(k), k);
  std::stable_sort(moved.begin(), moved.end(), [](const auto& a, const auto& b) {
    return std::abs(a.first) > std::abs(b.first);
  });
  w["gpu_time_s"] = Json::object();
  for (std::size_t i = 0; i < std::min<std::size_t>(3, moved.size()); ++i)
    if (moved[i].first != 0) w["gpu_time_s"][moved[i].second] = moved[i].first;
  return w;
}

// The rows of the configurations searched, in the order of their values' positions.
Json rows_of(const std::map<std::vector<std::size_t>, Json>& seen) {
  Json rows = Json::array();
  for (const auto& [point, row] : seen) rows.push_back(row);
  return rows;
}

// A sweep row that can be ranked: it ran, and it fits (or --any).
bool rankable(const Json& row, const TuneArgs& t) {
  return row.value("error", std::string()).empty() && (t.any || row.value("fits", false));
}

// The scenario's own value of each axis, as its index among the axis's values (0 if absent).
std::vector<std::size_t> scenario_point(const CommonArgs& args, const std::vector<Axis>& axes) {
  const Json resolved = load_scenario(args.scenario, args.load_options()).resolved;
  std::vector<std::size_t> at(axes.size(), 0);
  for (std::size_t a = 0; a < axes.size(); ++a) {
    const Json* v = find_path(resolved, axes[a].key);
    if (!v) continue;
    const std::string text = v->is_string() ? v->get<std::string>() : v->dump();
    const auto& vals = axes[a].values;
    if (const auto it = std::find(vals.begin(), vals.end(), text); it != vals.end())
      at[a] = static_cast<std::size_t>(it - vals.begin());
  }
  return at;
}

// Coordinate search of a space larger than --budget-points: from the scenario's own values,
// every value of one axis with the others fixed (one sweep), moving to the best configuration
// found; passes over the axes until a pass moves nothing or the next line would exceed the
// budget. It ends at a local optimum of the grid (no single-axis change is better) unless the
// budget ends it first; deterministic. Returns the rows of every configuration simulated
// (rows_of's order).
Json coordinate_search(const CommonArgs& args, const TuneArgs& t, const std::vector<Axis>& axes) {
  using Point = std::vector<std::size_t>;
  std::map<Point, Json> seen;
  Point at = scenario_point(args, axes);
  const auto better = [&](const Point& a, const Point& b) {
    const Json &x = seen.at(a), &y = seen.at(b);
    if (!rankable(x, t)) return false;
    return !rankable(y, t) || x[t.objective].get<double>() > y[t.objective].get<double>();
  };
  for (bool moved = true; moved;) {
    moved = false;
    for (std::size_t a = 0; a < axes.size(); ++a) {
      std::vector<std::size_t> todo;
      for (std::size_t v = 0; v < axes[a].values.size(); ++v) {
        Point p = at;
        p[a] = v;
        if (!seen.count(p)) todo.push_back(v);
      }
      if (seen.size() + todo.size() > t.budget_points) return rows_of(seen);
      SweepArgs line;
      line.jobs = t.jobs;
      line.skip_certain_oom = !t.any;  // ranked only if they fit: no need to time them
      for (std::size_t b = 0; b < axes.size(); ++b) {
        std::string values;
        for (const auto v : b == a ? todo : std::vector<std::size_t>{at[b]})
          values += (values.empty() ? "" : ",") + axes[b].values[v];
        line.grid.push_back(axes[b].key + "=" + values);
      }
      if (!todo.empty()) {
        const Json rows = sweep_json(args, line);
        for (std::size_t k = 0; k < todo.size(); ++k) {
          Point p = at;
          p[a] = todo[k];
          seen[p] = rows[k];
        }
      }
      Point best = at;
      for (std::size_t v = 0; v < axes[a].values.size(); ++v) {
        Point p = at;
        p[a] = v;
        if (better(p, best)) best = p;
      }
      moved = moved || best != at;
      at = best;
    }
  }
  return rows_of(seen);
}

reports::StepReport simulate_with(const CommonArgs& args, const std::vector<std::string>& extra) {
  LoadOptions lo = args.load_options();
  lo.sets.insert(lo.sets.end(), extra.begin(), extra.end());
  return simulate(load_scenario(args.scenario, lo), args.run_options()).report;
}

// One of the best configurations: its values, objective, and why, against the baseline (it is
// simulated again for its breakdown).
Json ranked_entry(const CommonArgs& args, const TuneArgs& t, const std::vector<Axis>& axes,
                  const Json& row, const reports::StepReport& base, double base_objective) {
  Json values = Json::object();
  std::vector<std::string> sets;
  for (const auto& a : axes) {
    values[a.key] = row[a.key];
    sets.push_back(a.key + "=" + row[a.key].get<std::string>());
  }
  const double v = row[t.objective].get<double>();
  return {{"values", values},
          {t.objective, v},
          {"relative_to_baseline", v / base_objective},
          {"fits", row["fits"]},
          {"why", why(simulate_with(args, sets), base)}};
}

}  // namespace

Json tune_json(const CommonArgs& args, const TuneArgs& t) {
  if (t.objective != "tokens_per_s_per_gpu" && t.objective != "tokens_per_day")
    throw InputError(
        "--objective", "",
        fmt::format("\"{}\": expected tokens_per_s_per_gpu or tokens_per_day", t.objective));
  SweepArgs sw;
  sw.grid = t.vary.empty() ? kDefaultSpace : t.vary;
  sw.jobs = t.jobs;
  sw.skip_certain_oom = !t.any;  // ranked only if they fit: no need to time them
  const auto axes = parse_grid(sw.grid);
  const std::size_t points = sweep_points(sw);
  const bool exhaustive = points <= t.budget_points;
  if (!exhaustive && mpi_size() > 1)
    throw InputError("--vary", "",
                     fmt::format("{} configurations exceed --budget-points {}, and the coordinate "
                                 "search runs on one machine: narrow --vary or raise the budget",
                                 points, t.budget_points));
  const Json rows = exhaustive ? sweep_json(args, sw) : coordinate_search(args, t, axes);
  if (mpi_rank() != 0) return Json();  // under MPI, the other ranks only ran points
  if (rows.empty())
    throw InputError(
        "--budget-points", "",
        fmt::format("{} is fewer than the first axis's values: nothing searched", t.budget_points));
  std::vector<std::size_t> ok;
  std::map<std::string, int> skipped;
  int oom_unsimulated = 0;  // out of HBM whatever the timing: found before simulating
  for (std::size_t i = 0; i < rows.size(); ++i) {
    if (rankable(rows[i], t))
      ok.push_back(i);
    else
      ++skipped[skip_reason(rows[i])];
    oom_unsimulated += rows[i].contains("certain_oom") ? 1 : 0;
  }
  // Best first; ties in grid order (stable): the same answer every run.
  std::stable_sort(ok.begin(), ok.end(), [&](std::size_t a, std::size_t b) {
    return rows[a][t.objective].get<double>() > rows[b][t.objective].get<double>();
  });
  const auto base = simulate_with(args, {});
  const double base_objective =
      t.objective == "tokens_per_day" ? base.tokens_per_day : base.tokens_per_s_per_gpu;
  Json top = Json::array();
  for (std::size_t n = 0;
       n < std::min<std::size_t>(static_cast<std::size_t>(std::max(t.top, 0)), ok.size()); ++n) {
    top.push_back(ranked_entry(args, t, axes, rows[ok[n]], base, base_objective));
  }
  Json skip = Json::object();
  for (const auto& [reason, count] : skipped) skip[reason] = count;
  return {{"scenario", args.scenario},
          {"objective", t.objective},
          {"space", sw.grid},
          {"space_points", points},
          {"search", exhaustive ? "exhaustive" : "coordinate"},
          {"configurations", rows.size()},
          {"ranked", ok.size()},
          {"skipped", skip},
          {"oom_before_simulating", oom_unsimulated},
          {"baseline", {{t.objective, base_objective}, {"step_time_s", base.step_time_s}}},
          {"top", top}};
}

int cmd_tune(const CommonArgs& args, const TuneArgs& t, std::ostream& out) {
  const Json j = tune_json(args, t);
  if (j.is_null()) return 0;  // not rank 0 of an MPI job
  if (args.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  fmt::print(out, "tune {}: {} of {} configurations ({} search), {} ranked by {}\n", args.scenario,
             j["configurations"].get<std::size_t>(), j["space_points"].get<std::size_t>(),
             j["search"].get<std::string>(), j["ranked"].get<std::size_t>(), t.objective);
  for (const auto& [reason, count] : j["skipped"].items())
    fmt::print(out, "  skipped {:4d}: {}\n", count.get<int>(), reason);
  if (const int n = j["oom_before_simulating"].get<int>(); n > 0)
    fmt::print(out,
               "  ({} of them out of HBM before simulating: more bytes live at once, whatever "
               "the timing, than HBM holds)\n",
               n);
  fmt::print(out, "baseline (the scenario as given): {} {:.1f}, step {:.3g} s\n", t.objective,
             j["baseline"][t.objective].get<double>(), j["baseline"]["step_time_s"].get<double>());
  int rank = 0;
  for (const auto& c : j["top"]) {
    std::string values;
    for (const auto& [k, v] : c["values"].items())
      values += fmt::format("{}{}={}", values.empty() ? "" : " ", k, v.get<std::string>());
    fmt::print(out, "#{} {:.1f} ({:+.1f}% vs baseline){}: {}\n", ++rank,
               c[t.objective].get<double>(), 100 * (c["relative_to_baseline"].get<double>() - 1),
               c["fits"].get<bool>() ? "" : " [does not fit]", values);
    const auto& w = c["why"];
    std::string parts;
    for (const auto& [k, v] : w["breakdown_s"].items())
      parts += fmt::format(", {} {:+.3f} s", k, v.get<double>());
    std::string kinds;
    for (const auto& [k, v] : w["gpu_time_s"].items())
      kinds += fmt::format(", {} {:+.3f} s", k, v.get<double>());
    fmt::print(out, "   step {:+.3f} s (rank 0{}); GPU time moved most: {}\n",
               w["step_time_s"].get<double>(), parts, kinds.empty() ? "none" : kinds.substr(2));
  }
  return 0;
}

}  // namespace twin::scenarios
