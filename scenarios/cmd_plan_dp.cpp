// `twin plan-dp`: throughput per data-parallel replica count (HSDP), with the fabric links that
// saturate and the host out-of-memory risk at that node count. Metrics: reports/metrics.hpp.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <algorithm>
#include <filesystem>
#include <ostream>

#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/parallel.hpp"
#include "scenarios/samples.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

namespace {

LoadOptions with_replicas(const CommonArgs& args, const PlanDpArgs& plan, int dp) {
  LoadOptions lo = args.load_options();
  lo.sets.push_back(fmt::format("parallel.dp={}", dp));
  const std::string& p = plan.placement;
  if (p == "packed" || p == "spread" || p == "random" || p == "slurm") {
    lo.sets.push_back("placement.policy=" + p);
  } else if (!p.empty()) {  // a Slurm node list, relative to where twin runs
    std::error_code ec;
    if (!std::filesystem::exists(p, ec))
      throw InputError(
          "--placement", "",
          fmt::format("\"{}\": not packed, spread, random or slurm, and no such file", p));
    lo.sets.push_back("placement.policy=file");
    lo.sets.push_back("placement.node_list_file=" + std::filesystem::absolute(p).string());
  }
  return lo;
}

// --split: the shared machine's effects added one at a time (cumulative), each stage's settings
// on top of the scenario's: an idle machine with packed placement, + placement on the busy
// machine, + other jobs' traffic, + stragglers (= the scenario as given).
const std::vector<std::pair<const char*, std::vector<std::string>>>& stages() {
  static const std::vector<std::pair<const char*, std::vector<std::string>>> s = {
      {"idle",
       {"placement.policy=packed", "shared.busy_fraction=0", "shared.background_global_load=0",
        "shared.background_leaf_load=0", "shared.slow_node_fraction=0", "shared.step_jitter=0"}},
      {"placement",
       {"shared.background_global_load=0", "shared.background_leaf_load=0",
        "shared.slow_node_fraction=0", "shared.step_jitter=0"}},
      {"traffic", {"shared.slow_node_fraction=0", "shared.step_jitter=0"}},
      {"stragglers", {}}};
  return s;
}

// Every point loaded before any runs, so that bad input fails first: per replica count, per
// stage (the split's, else the scenario's only), per draw of the shared machine. DP = 1 loads
// first, so an error of a larger count is the count's (the machine cannot hold it).
std::vector<Loaded> load_points(const CommonArgs& args, const PlanDpArgs& plan,
                                const std::vector<int>& counts, std::size_t n_stages) {
  std::vector<Loaded> loaded;
  for (int dp : counts)
    for (std::size_t st = stages().size() - n_stages; st < stages().size(); ++st) {
      LoadOptions base = with_replicas(args, plan, dp);
      if (plan.seed >= 0) base.sets.push_back(fmt::format("placement.seed={}", plan.seed));
      for (const auto& set : stages()[st].second) base.sets.push_back(set);
      for (const auto& lo :
           plan.samples > 0 ? sample_loads(base, plan.samples) : std::vector{base}) {
        try {
          loaded.push_back(load_scenario(args.scenario, lo));
        } catch (const InputError& e) {
          if (dp == 1) throw;
          const bool ours = e.file == "--set" && e.path == "parallel.dp";  // the count we set
          throw InputError("--replicas", "",
                           fmt::format("{} replicas: {}", dp, ours ? e.message : e.what()));
        }
      }
    }
  return loaded;
}

// The runs of every point, at [((count · stages) + stage) · draws + draw]; the last stage is
// the scenario's.
struct PlanRuns {
  std::vector<reports::StepReport> runs;
  std::size_t stages = 1, draws = 1;
  bool sampled = false;
  // One metric over a count's draws (of the scenario's stage, or of stage `st` of the split):
  // its median, and when sampled its p10, p50 and p90 into `row`.
  double over_draws(std::size_t i, Json& row, RunMetric m, std::size_t st = SIZE_MAX) const {
    const std::size_t block = i * stages + std::min(st, stages - 1);
    std::vector<const reports::StepReport*> v;
    for (std::size_t d = 0; d < draws; ++d) v.push_back(&runs[block * draws + d]);
    Json p;
    const double median = add_percentiles(p, m, v);
    if (sampled) row.update(p);
    return median;
  }
  const reports::StepReport& first_of(std::size_t i) const { return runs[first_index(i)]; }
  std::size_t first_index(std::size_t i) const { return ((i + 1) * stages - 1) * draws; }
};

// One replica count's row: throughput, time and days over its draws, placement and links of
// its first draw of the scenario (`base`: DP = 1's tokens/s/GPU).
Json plan_row(const PlanRuns& pr, const PlanDpArgs& plan, int count, std::size_t i,
              std::int64_t gpus, double base) {
  const auto& r = pr.first_of(i);
  const auto& net = r.network;
  Json row{{"replicas", count}, {"gpus", gpus}};
  row["nodes"] = net.nodes;
  row["groups"] = net.groups;
  row["groups_per_replica_max"] = net.groups_per_replica_max;
  row["groups_per_replica_all_reduce"] = net.groups_per_replica_all_reduce;
  const double tps = pr.over_draws(i, row, kTokensPerGpu);
  row["tokens_per_s_per_gpu"] = tps;
  row["relative_to_dp1"] = base > 0 ? tps / base : 0;
  row["step_time_s"] = pr.over_draws(i, row, kStepTime);
  const double per_day = pr.over_draws(i, row, kTokensPerDay);
  row["tokens_per_day"] = per_day;
  row["days_to_tokens"] = plan.tokens / per_day;
  if (plan.samples > 0) row["samples"] = plan.samples;
  if (plan.split) {
    Json split = Json::object(), unused;
    for (std::size_t st = 0; st < pr.stages; ++st)
      split[stages()[st].first] = pr.over_draws(i, unused, kTokensPerGpu, st);
    row["tokens_per_s_per_gpu_by_stage"] = split;
  }
  row["links_saturating"] = net.links_saturating;
  const auto top = net.busiest_links.empty() ? reports::LinkReport{} : net.busiest_links[0];
  row["busiest_link"] = top.link;
  row["busiest_link_utilization"] = top.utilization_while_busy;
  row["busiest_link_saturated_s"] = top.saturated_s;
  row["host_oom_probability"] = r.memory.host_oom_probability;
  return row;
}

}  // namespace

Json plan_dp_json(const CommonArgs& args, const PlanDpArgs& plan) {
  std::vector<int> counts = plan.replicas;
  if (std::find(counts.begin(), counts.end(), 1) == counts.end()) counts.insert(counts.begin(), 1);
  PlanRuns pr;
  pr.draws = static_cast<std::size_t>(std::max(1, plan.samples));
  pr.stages = plan.split ? stages().size() : 1;
  pr.sampled = plan.samples > 0;
  const auto loaded = load_points(args, plan, counts, pr.stages);
  // A point that fails to simulate fails the command (exit 2 past --max-events, 1 otherwise);
  // nothing is printed (issue #23, item 5).
  pr.runs = run_draws(
      loaded, pr.draws, plan.jobs,
      [&](std::size_t i) { return simulate(loaded[i], args.run_options()).report; },
      "plan-dp: replica counts × samples", args.progress);
  Json unused;
  const double base = pr.over_draws(0, unused, kTokensPerGpu);
  Json rows = Json::array();
  for (std::size_t i = 0; i < counts.size(); ++i)
    rows.push_back(plan_row(pr, plan, counts[i], i,
                            loaded[pr.first_index(i)].scenario.job.parallel.total_gpus(), base));
  return {{"scenario", args.scenario},
          {"tokens", plan.tokens},
          {"rows", rows},
          {"provenance", provenance(loaded[0].resolved)}};  // of DP = 1
}

namespace {

void print_rows(const Json& j, std::ostream& out) {
  fmt::print(out, "{:>8} {:>6} {:>6} {:>7} {:>12} {:>8} {:>13} {:>9} {:>9} {:>9} {:>8}  {}\n",
             "replicas", "GPUs", "nodes", "groups", "tok/s/GPU", "vs DP=1", "B tokens/day", "days",
             "host OOM", "saturated", "link use", "busiest link");
  for (const auto& r : j["rows"]) {
    fmt::print(out,
               "{:>8} {:>6} {:>6} {:>7} {:>12.1f} {:>8.3f} {:>13.1f} {:>9.1f} {:>9.2f} {:>8.1f}s "
               "{:>8.2f}  {}\n",
               r["replicas"].get<int>(), r["gpus"].get<std::int64_t>(),
               r["nodes"].get<std::size_t>(), r["groups"].get<std::size_t>(),
               r["tokens_per_s_per_gpu"].get<double>(), r["relative_to_dp1"].get<double>(),
               r["tokens_per_day"].get<double>() / 1e9, r["days_to_tokens"].get<double>(),
               r["host_oom_probability"].get<double>(), r["busiest_link_saturated_s"].get<double>(),
               r["busiest_link_utilization"].get<double>(), r["busiest_link"].get<std::string>());
  }
}

void print_samples(const Json& j, std::ostream& out) {
  fmt::print(out,
             "\n{} samples of the shared machine (shared.*): tok/s/GPU above is the median\n{:>8} "
             "{:>10} {:>10} {:>10} {:>12} {:>16}\n",
             j["rows"][0]["samples"].get<int>(), "replicas", "p10", "p50", "p90", "groups/rep.",
             "groups/all-red.");
  for (const auto& r : j["rows"])
    fmt::print(out, "{:>8} {:>10.1f} {:>10.1f} {:>10.1f} {:>12} {:>16}\n", r["replicas"].get<int>(),
               r["tokens_per_s_per_gpu_p10"].get<double>(),
               r["tokens_per_s_per_gpu_p50"].get<double>(),
               r["tokens_per_s_per_gpu_p90"].get<double>(), r["groups_per_replica_max"].get<int>(),
               r["groups_per_replica_all_reduce"].get<int>());
}

// A table of tok/s/GPU: one row per replica count, one column per key of each row's `field`.
void print_columns(const Json& rows, const std::string& field, std::ostream& out) {
  fmt::print(out, "{:>8}", "replicas");
  for (const auto& [k, v] : rows[0][field].items()) fmt::print(out, " {:>11}", k);
  fmt::print(out, "\n");
  for (const auto& r : rows) {
    fmt::print(out, "{:>8}", r["replicas"].get<int>());
    for (const auto& [k, v] : r[field].items()) fmt::print(out, " {:>11.1f}", v.get<double>());
    fmt::print(out, "\n");
  }
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::size_t at = 0;
  for (std::size_t c; (c = s.find(',', at)) != std::string::npos; at = c + 1)
    out.push_back(s.substr(at, c - at));
  out.push_back(s.substr(at));
  return out;
}

}  // namespace

Json plan_dp_compare_json(const CommonArgs& args, const PlanDpArgs& plan) {
  Json by = Json::object(), rows = Json::array();
  for (const auto& p : split_commas(plan.placement)) {
    PlanDpArgs one = plan;
    one.placement = p;
    by[p] = plan_dp_json(args, one);
  }
  const auto& first = by.begin().value()["rows"];
  for (std::size_t i = 0; i < first.size(); ++i) {
    Json row{{"replicas", first[i]["replicas"]},
             {"tokens_per_s_per_gpu_by_placement", Json::object()}};
    for (const auto& [p, j] : by.items())
      row["tokens_per_s_per_gpu_by_placement"][p] = j["rows"][i]["tokens_per_s_per_gpu"];
    rows.push_back(row);
  }
  return {{"scenario", args.scenario}, {"rows", rows}, {"placements", by}};
}

int cmd_plan_dp(const CommonArgs& args, const PlanDpArgs& plan, std::ostream& out) {
  if (plan.placement.find(',') != std::string::npos) {
    const Json j = plan_dp_compare_json(args, plan);
    if (args.json) return out << j.dump(2) << "\n", 0;
    fmt::print(out, "tok/s/GPU by placement{}:\n",
               plan.samples > 0 ? " (median of the samples)" : "");
    print_columns(j["rows"], "tokens_per_s_per_gpu_by_placement", out);
    return 0;
  }
  const Json j = plan_dp_json(args, plan);
  if (args.json) return out << j.dump(2) << "\n", 0;
  print_rows(j, out);
  if (j["rows"][0].contains("tokens_per_s_per_gpu_p10")) print_samples(j, out);
  if (j["rows"][0].contains("tokens_per_s_per_gpu_by_stage")) {
    fmt::print(out, "\nthe shared machine's effects one at a time (tok/s/GPU, median):\n");
    print_columns(j["rows"], "tokens_per_s_per_gpu_by_stage", out);
  }
  fmt::print(
      out,
      "B tokens/day: billions; days: to {:.0f} billion tokens; saturated: time the busiest fabric "
      "link was full; link use: its utilization while busy\n",
      j["tokens"].get<double>() / 1e9);
  return 0;
}

}  // namespace twin::scenarios
