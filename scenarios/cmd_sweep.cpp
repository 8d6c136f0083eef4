// `twin sweep`: every combination of --grid values, run in parallel threads; one row per point,
// in grid order (the first --grid varies slowest), whatever order the threads finish in.
// Across machines: --shard I/N runs the points i with i mod N = I and writes them as a part;
// `twin merge` joins the N parts into the file one unsharded sweep writes (same bytes).
// Resumable: with --out FILE, each finished point is appended to FILE.partial (a header line
// naming the arguments, then one JSON line per point); a sweep restarted with the same
// arguments takes the points found there and runs only the others, so its final FILE is the
// same as an uninterrupted run's. FILE.partial is removed once FILE is written.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <mutex>
#include <ostream>

#include "reports/output.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/json_tree.hpp"
#include "scenarios/parallel.hpp"
#include "scenarios/scenario.hpp"
#include "scenarios/simulate.hpp"
#include "scenarios/sweep_mpi.hpp"
#include "sim/engine.hpp"

namespace twin::scenarios {

std::vector<Axis> parse_grid(const std::vector<std::string>& grid) {
  std::vector<Axis> axes;
  for (const auto& g : grid) {
    const auto eq = g.find('=');
    if (!valid_utf8(g)) throw InputError("--grid", "", "a --grid that is not UTF-8");
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
    for (const auto& b : axes)
      if (b.key == a.key)
        throw InputError("--grid", "", fmt::format("\"{}\" is given twice", a.key));
    axes.push_back(std::move(a));
  }
  return axes;
}

namespace {

// Points of the grid, refused above kMaxPoints (a product that would overflow, or more work than
// any sweep on one machine: split it with --set).
constexpr std::size_t kMaxPoints = 1'000'000;
std::size_t grid_points(const std::vector<Axis>& axes) {
  std::size_t points = 1;
  for (const auto& a : axes) {
    if (a.values.size() > kMaxPoints / points)
      throw InputError("--grid", "",
                       fmt::format("more than {} points; split the sweep", kMaxPoints));
    points *= a.values.size();
  }
  return points;
}

// A sweep row's figures of one run, in the row's column order.
void add_outputs(Json& row, const reports::StepReport& r) {
  row["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  row["step_time_s"] = r.step_time_s;
  row["exposed_comm_s"] = r.exposed_comm_s();
  row["optimizer_step_s"] = r.optimizer_step_s;
  row["tokens_per_day"] = r.tokens_per_day;
  row["nccl_sms_max"] = r.nccl_sms.max;
  const auto& m = r.memory;
  row["hbm_peak_reserved_GiB"] = m.hbm_peak_reserved_GiB;
  row["alloc_retries"] = m.alloc_retries;
  row["oom"] = m.oom;
  row["host_peak_GiB"] = m.host_peak_GiB;
  row["host_oom_probability"] = m.host_oom_probability;
  row["fits"] = m.fits();
}

// The finished points of an earlier run with the same arguments (header line equal).
// Rows that are not a point of this grid (a torn last line, a hand-edited file) are ignored: the
// point runs again.
std::map<std::size_t, Json> read_progress(const std::string& path, const std::string& header,
                                          std::size_t points) {
  std::map<std::size_t, Json> done;
  std::ifstream in(path);
  std::string line;
  if (!in || !std::getline(in, line) || line != header) return done;
  while (std::getline(in, line)) {
    const Json j = Json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.is_object() || !j.contains("i") || !j["i"].is_number_unsigned() ||
        !j.contains("row") || !j["row"].is_object())
      continue;
    const auto i = j["i"].get<std::size_t>();
    if (i < points) done[i] = j["row"];
  }
  return done;
}

}  // namespace

namespace {

// Input errors are the command's, not a point's (issue #23, item 5): the scenario and --set must
// load on their own, and every grid key must be a parameter — checked before any work or file.
// Returns the resolved scenario.
Json check_inputs(const CommonArgs& args, const std::vector<Axis>& axes) {
  Json resolved = load_scenario(args.scenario, args.load_options()).resolved;
  for (const auto& a : axes) {
    const auto& entries = scenario_schema().entries();
    if (std::none_of(entries.begin(), entries.end(),
                     [&](const auto& e) { return e.spec.key == a.key; }))
      throw InputError(
          "--grid", "",
          fmt::format("\"{}\" is not a scenario key (twin help-params lists them)", a.key));
  }
  return resolved;
}

// The sweep's identity, what `twin merge` checks of its parts: the arguments, the resolved
// scenario's content and the twin's version. The resume key (the progress file's first line)
// adds a shard's shard, so that an edited scenario or another shard starts afresh.
// `skip_oom` only when asked for: a part's rows then lack the metrics of points out of HBM, and
// parts with and without it must not be joined (without it, the identity of earlier versions).
Json identity_of(const CommonArgs& args, const SweepArgs& sw, const Json& resolved) {
  Json id{{"twin_sweep", 2},
          {"scenario", args.scenario},
          {"sets", args.sets},
          {"grid", sw.grid},
          {"max_events", args.max_events},
          {"resolved_fnv1a", content_hash(resolved)},
          {"twin", TWIN_VERSION}};
  if (sw.skip_certain_oom) id["skip_oom"] = true;
  return id;
}
std::string header_of(const CommonArgs& args, const SweepArgs& sw, const Json& resolved) {
  Json h = identity_of(args, sw, resolved);
  if (sw.shards > 1) h["shard"] = {sw.shard, sw.shards};
  return h.dump();
}

// The points a sweep (or its shard) runs, in grid order.
std::vector<std::size_t> shard_points(std::size_t points, const SweepArgs& sw) {
  if (sw.shards < 1 || sw.shard < 0 || sw.shard >= sw.shards)
    throw InputError("--shard", "",
                     fmt::format("{}/{}: expected I/N with 0 <= I < N", sw.shard, sw.shards));
  std::vector<std::size_t> v;
  for (std::size_t i = static_cast<std::size_t>(sw.shard); i < points;
       i += static_cast<std::size_t>(sw.shards))
    v.push_back(i);
  return v;
}

// The grid values of point i (the first axis varies slowest).
std::vector<std::string> point_values(const std::vector<Axis>& axes, std::size_t i) {
  std::vector<std::string> vals(axes.size());
  for (std::size_t k = axes.size(); k-- > 0;) {
    vals[k] = axes[k].values[i % axes[k].values.size()];
    i /= axes[k].values.size();
  }
  return vals;
}

bool is_point(const Json& row, const std::vector<Axis>& axes, std::size_t i) {
  const auto vals = point_values(axes, i);
  for (std::size_t k = 0; k < axes.size(); ++k)
    if (row.value(axes[k].key, Json()) != vals[k]) return false;
  return true;
}

// A point found out of HBM before simulating (SweepArgs::skip_certain_oom): the row says so and
// why, and has no step metrics.
void add_certain_oom(Json& row, const CertainOom& c) {
  row["oom"] = true;
  row["fits"] = false;
  row["certain_oom"] = {{"live_GiB", c.live_GiB},
                        {"capacity_GiB", c.capacity_GiB},
                        {"rank", c.rank},
                        {"across", c.across}};
}

// One point of the grid simulated: its row (a point that cannot run is a row saying why).
Json sweep_point(const CommonArgs& args, const std::vector<Axis>& axes, std::size_t i,
                 bool skip_certain_oom) {
  const auto vals = point_values(axes, i);
  Json row = Json::object();
  auto sets = args.sets;
  for (std::size_t k = 0; k < axes.size(); ++k) {
    row[axes[k].key] = vals[k];
    sets.push_back(axes[k].key + "=" + vals[k]);
  }
  try {
    LoadOptions lo = args.load_options();
    lo.sets = sets;
    RunOptions ro = args.run_options();
    ro.stop_if_certain_oom = skip_certain_oom;
    const auto loaded = load_scenario(args.scenario, lo);
    const auto run = simulate(loaded, ro);
    if (run.certain_oom)
      add_certain_oom(row, *run.certain_oom);
    else
      add_outputs(row, run.report);
    row["error"] = "";
    row["twin"] = fmt::format("{} {}", twin_version(), twin_commit());
    row["resolved_fnv1a"] = content_hash(loaded.resolved);  // this point's scenario
  } catch (const sim::EventLimitExceeded&) {
    throw;  // the run's budget, not the point's fault: the command fails (exit 2)
  } catch (const std::exception& e) {
    row["error"] = e.what();  // a point that cannot run is a row that says why
  }
  return row;
}

}  // namespace

std::size_t sweep_points(const SweepArgs& sw) {
  return grid_points(parse_grid(sw.grid));
}

std::string sweep_progress_header(const CommonArgs& args, const SweepArgs& sw) {
  return header_of(args, sw, check_inputs(args, parse_grid(sw.grid)));
}

Json sweep_json(const CommonArgs& args, const SweepArgs& sw, const std::string& progress) {
  const auto axes = parse_grid(sw.grid);
  const Json resolved = check_inputs(args, axes);
  const std::size_t points = grid_points(axes);
  const std::string header = header_of(args, sw, resolved);
  std::map<std::size_t, Json> done;
  std::ofstream log;
  std::mutex log_mutex;
  const bool writer = mpi_rank() == 0;  // under MPI, rank 0 alone keeps the progress file
  if (!progress.empty() && writer) {
    done = read_progress(progress, header, points);
    log.open(progress, done.empty() ? std::ios::trunc : std::ios::app);
    if (!log) throw reports::OutputError(progress + ": cannot write the sweep's progress file");
    if (done.empty()) log << header << "\n" << std::flush;
  }
  const auto mine = shard_points(points, sw);
  // A resumed row is taken only if it is this point's (its grid values are the point's).
  auto resumed = [&](std::size_t i) {
    const auto it = done.find(i);
    return it != done.end() && is_point(it->second, axes, i) ? &it->second : nullptr;
  };
  auto keep = [&](std::size_t i, const Json& row) {
    if (!log.is_open()) return;
    const std::lock_guard<std::mutex> lock(log_mutex);
    log << Json{{"i", i}, {"row", row}}.dump() << "\n" << std::flush;
  };
  if (mpi_size() > 1) {  // points handed out over the ranks of an MPI job, one at a time
    std::vector<std::size_t> todo;
    for (const auto i : mine)
      if (!resumed(i)) todo.push_back(i);
    reports::Progress meter("sweep: points", todo.size(),
                            writer && args.progress ? stderr : nullptr);
    auto got = run_over_mpi(
        todo, [&](std::size_t i) { return sweep_point(args, axes, i, sw.skip_certain_oom); },
        [&](std::size_t i, const Json& row) { keep(i, row), meter.done(); });
    Json rows = Json::array();
    if (writer)
      for (const auto i : mine) rows.push_back(resumed(i) ? *resumed(i) : std::move(got[i]));
    return rows;
  }
  reports::Progress meter("sweep: points", mine.size(), args.progress ? stderr : nullptr);
  auto rows = run_parallel<Json>(
      mine.size(), sw.jobs,
      [&](std::size_t j) {
        const std::size_t i = mine[j];
        if (const Json* r = resumed(i)) return *r;
        Json row = sweep_point(args, axes, i, sw.skip_certain_oom);
        keep(i, row);
        return row;
      },
      &meter);
  return rows;
}

// Columns: every key of any row, in the order first seen, the fullest row first — a point that
// failed carries fewer keys, and the header must not come from it (issue #23, item 6). A cell a
// row lacks is empty.
std::string to_csv(const Json& rows) {
  if (rows.empty()) return "";
  std::size_t fullest = 0;
  for (std::size_t i = 1; i < rows.size(); ++i)
    if (rows[i].size() > rows[fullest].size()) fullest = i;
  std::vector<std::string> cols;
  auto add_keys = [&cols](const Json& r) {
    for (const auto& [k, _] : r.items())
      if (std::find(cols.begin(), cols.end(), k) == cols.end()) cols.push_back(k);
  };
  add_keys(rows[fullest]);
  for (const auto& r : rows) add_keys(r);
  auto cell = [](const Json& v) {
    std::string c = v.is_string() ? v.get<std::string>() : v.dump();
    if (c.find_first_of(",\"\n") == std::string::npos) return c;
    std::string q = "\"";
    for (char ch : c) q += ch == '"' ? std::string("\"\"") : std::string(1, ch);
    return q + "\"";
  };
  std::string out;
  for (std::size_t i = 0; i < cols.size(); ++i) out += (i ? "," : "") + cols[i];
  out += "\n";
  for (const auto& r : rows) {
    for (std::size_t i = 0; i < cols.size(); ++i)
      out += (i ? "," : "") + (r.contains(cols[i]) ? cell(r[cols[i]]) : std::string());
    out += "\n";
  }
  return out;
}

std::pair<int, int> parse_shard(const std::string& text) {
  const auto slash = text.find('/');
  int i = -1, n = 0;
  std::size_t used_i = 0, used_n = 0;
  try {
    if (slash != std::string::npos) {
      i = std::stoi(text.substr(0, slash), &used_i);
      n = std::stoi(text.substr(slash + 1), &used_n);
    }
  } catch (const std::exception&) {
    i = -1;
  }
  if (slash == std::string::npos || used_i != slash || used_n != text.size() - slash - 1 || i < 0 ||
      n < 1 || i >= n)
    throw InputError("--shard", "",
                     fmt::format("\"{}\": expected I/N with 0 <= I < N, e.g. 0/4", text));
  return {i, n};
}

namespace {
// A shard's output: the sweep's identity, which shard, and its rows with their point numbers.
Json part_json(const CommonArgs& args, const SweepArgs& sw, const Json& rows) {
  const auto axes = parse_grid(sw.grid);
  const std::size_t points = grid_points(axes);
  Json part{{"twin_sweep_part", 1}, {"sweep", identity_of(args, sw, check_inputs(args, axes))},
            {"shard", sw.shard},    {"shards", sw.shards},
            {"points", points},     {"rows", Json::array()}};
  const auto mine = shard_points(points, sw);
  for (std::size_t j = 0; j < rows.size(); ++j)
    part["rows"].push_back({{"i", mine[j]}, {"row", rows[j]}});
  return part;
}
}  // namespace

int cmd_sweep(const CommonArgs& args, const SweepArgs& sw, std::ostream& out) {
  const std::string progress = sw.out.empty() ? "" : sw.out + ".partial";
  if (sw.shards > 1 && sw.out.empty())
    throw InputError("--shard", "", "a shard needs --out PART (twin merge joins the parts)");
  args.check_output(sw.out, "--out");
  args.check_output(progress, "--out");
  const Json rows = sweep_json(args, sw, progress);
  if (mpi_rank() != 0) return 0;  // under MPI, rank 0 writes
  const bool json = args.json || sw.out.ends_with(".json");
  const std::string text = sw.shards > 1 ? part_json(args, sw, rows).dump() + "\n"
                           : json        ? rows.dump(2) + "\n"
                                         : to_csv(rows);
  if (sw.out.empty())
    out << text;
  else
    reports::write_atomic(sw.out, text);
  if (!progress.empty()) std::filesystem::remove(progress);
  return 0;
}

}  // namespace twin::scenarios
