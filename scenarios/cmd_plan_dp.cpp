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
  if (p == "packed" || p == "spread" || p == "random") {
    lo.sets.push_back("placement.policy=" + p);
  } else if (!p.empty()) {  // a Slurm node list, relative to where twin runs
    std::error_code ec;
    if (!std::filesystem::exists(p, ec))
      throw InputError("--placement", "", fmt::format("\"{}\": not packed, spread or random, and no such file", p));
    lo.sets.push_back("placement.policy=file");
    lo.sets.push_back("placement.node_list_file=" + std::filesystem::absolute(p).string());
  }
  return lo;
}

}  // namespace

Json plan_dp_json(const CommonArgs& args, const PlanDpArgs& plan) {
  std::vector<int> counts = plan.replicas;
  if (std::find(counts.begin(), counts.end(), 1) == counts.end()) counts.insert(counts.begin(), 1);
  const std::size_t draws = static_cast<std::size_t>(std::max(1, plan.samples));
  // Load every point first: bad input fails before any run. DP = 1 loads first, so an error of
  // a larger count is the count's (the machine cannot hold it), not the scenario's.
  std::vector<Loaded> loaded;  // count-major: loaded[i·draws + d]
  for (int dp : counts) {
    LoadOptions base = with_replicas(args, plan, dp);
    if (plan.seed >= 0) base.sets.push_back(fmt::format("placement.seed={}", plan.seed));
    for (const auto& lo : plan.samples > 0 ? sample_loads(base, plan.samples) : std::vector{base}) {
      try {
        loaded.push_back(load_scenario(args.scenario, lo));
      } catch (const InputError& e) {
        if (dp == 1) throw;
        const bool ours = e.file == "--set" && e.path == "parallel.dp";  // the count we set
        throw InputError("--replicas", "", fmt::format("{} replicas: {}", dp, ours ? e.message : e.what()));
      }
    }
  }
  // A point that fails to simulate fails the command (exit 2 past --max-events, 1 otherwise);
  // nothing is printed (issue #23, item 5).
  reports::Progress progress("plan-dp: replica counts × samples", loaded.size(), args.progress ? stderr : nullptr);
  auto runs = run_parallel<Json>(loaded.size(), plan.jobs, [&](std::size_t i) {
    return simulate(loaded[i], args.run_options()).json;
  }, &progress);
  // One metric over a count's draws: its median, and with --samples its p10, p50 and p90.
  auto over_draws = [&](std::size_t i, Json& row, const std::string& key) {
    std::vector<const Json*> v;
    for (std::size_t d = 0; d < draws; ++d) v.push_back(&runs[i * draws + d]);
    Json p;
    const double median = add_percentiles(p, key, v);
    if (plan.samples > 0) row.update(p);
    return median;
  };
  Json base_row;
  const double base = over_draws(0, base_row, "tokens_per_s_per_gpu");
  Json rows = Json::array();
  for (std::size_t i = 0; i < counts.size(); ++i) {
    const auto& r = runs[i * draws];  // the first draw: placement and links
    Json row{{"replicas", counts[i]}, {"gpus", loaded[i * draws].scenario.job.parallel.total_gpus()}};
    const auto& net = r["network"];
    row["nodes"] = net["nodes"];
    row["groups"] = net["groups"];
    row["groups_per_replica_max"] = net["groups_per_replica_max"];
    const double tps = over_draws(i, row, "tokens_per_s_per_gpu");
    row["tokens_per_s_per_gpu"] = tps;
    row["relative_to_dp1"] = base > 0 ? tps / base : 0;
    row["step_time_s"] = over_draws(i, row, "step_time_s");
    const double per_day = over_draws(i, row, "tokens_per_day");
    row["tokens_per_day"] = per_day;
    row["days_to_tokens"] = plan.tokens / per_day;
    if (plan.samples > 0) row["samples"] = plan.samples;
    row["links_saturating"] = net["links_saturating"];
    const Json top = net["busiest_links"].empty() ? Json::object() : net["busiest_links"][0];
    row["busiest_link"] = top.value("link", "");
    row["busiest_link_utilization"] = top.value("utilization_while_busy", 0.0);
    row["busiest_link_saturated_s"] = top.value("saturated_s", 0.0);
    row["host_oom_probability"] = r["memory"]["host_oom_probability"];
    rows.push_back(row);
  }
  return {{"scenario", args.scenario}, {"tokens", plan.tokens}, {"rows", rows},
          {"provenance", provenance(loaded[0].resolved)}};  // of DP = 1
}

int cmd_plan_dp(const CommonArgs& args, const PlanDpArgs& plan, std::ostream& out) {
  const Json j = plan_dp_json(args, plan);
  if (args.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  fmt::print(out, "{:>8} {:>6} {:>6} {:>7} {:>12} {:>8} {:>13} {:>9} {:>9} {:>9} {:>8}  {}\n", "replicas",
             "GPUs", "nodes", "groups", "tok/s/GPU", "vs DP=1", "B tokens/day", "days", "host OOM",
             "saturated", "link use", "busiest link");
  for (const auto& r : j["rows"]) {
    fmt::print(out, "{:>8} {:>6} {:>6} {:>7} {:>12.1f} {:>8.3f} {:>13.1f} {:>9.1f} {:>9.2f} {:>8.1f}s {:>8.2f}  {}\n",
               r["replicas"].get<int>(), r["gpus"].get<std::int64_t>(), r["nodes"].get<std::size_t>(),
               r["groups"].get<std::size_t>(), r["tokens_per_s_per_gpu"].get<double>(),
               r["relative_to_dp1"].get<double>(), r["tokens_per_day"].get<double>() / 1e9,
               r["days_to_tokens"].get<double>(), r["host_oom_probability"].get<double>(),
               r["busiest_link_saturated_s"].get<double>(), r["busiest_link_utilization"].get<double>(),
               r["busiest_link"].get<std::string>());
  }
  if (j["rows"][0].contains("tokens_per_s_per_gpu_p10")) {
    fmt::print(out, "\n{} samples of the shared machine (shared.*): tok/s/GPU above is the median\n{:>8} {:>10} {:>10} {:>10} {:>12}\n",
               j["rows"][0]["samples"].get<int>(), "replicas", "p10", "p50", "p90", "groups/rep.");
    for (const auto& r : j["rows"])
      fmt::print(out, "{:>8} {:>10.1f} {:>10.1f} {:>10.1f} {:>12}\n", r["replicas"].get<int>(),
                 r["tokens_per_s_per_gpu_p10"].get<double>(), r["tokens_per_s_per_gpu_p50"].get<double>(),
                 r["tokens_per_s_per_gpu_p90"].get<double>(), r["groups_per_replica_max"].get<int>());
  }
  fmt::print(out, "B tokens/day: billions; days: to {:.0f} billion tokens; saturated: time the busiest fabric "
                  "link was full; link use: its utilization while busy\n",
             j["tokens"].get<double>() / 1e9);
  return 0;
}

}  // namespace twin::scenarios
