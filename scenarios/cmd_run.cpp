// `twin run`: one scenario through the twin.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <ostream>

#include "reports/output.hpp"
#include "reports/progress.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/parallel.hpp"
#include "scenarios/samples.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

namespace {
// --plan with --plan-ranks all: a folder that is new or already a folder (its rank-N.json are
// replaced), refused before any work.
void check_plan_folder(const std::string& path) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (fs::exists(path, ec) && !fs::is_directory(path, ec))
    throw InputError("--plan", "",
                     path +
                         ": exists and is not a folder (--plan-ranks all writes "
                         "one rank-N.json per rank into a folder)");
}

// The step over draws of the shared machine: p10/p50/p90 of its time, throughput and the spread
// between its nodes.
Json samples_json(const CommonArgs& args, const RunArgs& run) {
  std::vector<Loaded> loaded;
  for (const auto& lo : sample_loads(args.load_options(), run.samples))
    loaded.push_back(load_scenario(args.scenario, lo));
  const auto runs = run_draws(
      loaded, loaded.size(), run.jobs,
      [&](std::size_t i) { return simulate(loaded[i], args.run_options()).report; }, "run: samples",
      args.progress);
  std::vector<const reports::StepReport*> all;
  for (const auto& r : runs) all.push_back(&r);
  Json j{{"count", run.samples}};
  for (const auto m : {kStepTime, kTokensPerGpu, kNodeComputeSpread, kNodeCommWaitRatio})
    add_percentiles(j, m, all);
  return j;
}
}  // namespace

int cmd_run(const CommonArgs& args, const RunArgs& run, std::ostream& out) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  // Ranks asked for must be simulated: checked before the work (issue #23, item 10).
  const int gpus = simulated_gpus(loaded.scenario);
  auto check_rank = [&](const char* option, int r) {
    if (r < 0 || r >= gpus)
      throw InputError(args.scenario, option,
                       fmt::format("rank {} is not simulated (ranks 0–{})", r, gpus - 1));
  };
  for (const int r : run.trace_ranks) check_rank("--trace-ranks", r);
  std::vector<int> trace_ranks = run.trace_ranks;
  if (run.trace_all_ranks)
    for (int r = 0; r < gpus; ++r) trace_ranks.push_back(r);
  if (!run.plan_file.empty() && !run.plan_all_ranks) check_rank("--plan-rank", run.plan_rank);
  if (run.plan_all_ranks && run.plan_file.empty())
    throw InputError("--plan-ranks", "", "needs --plan FOLDER");
  args.check_output(run.trace_file, "--trace");
  if (run.plan_all_ranks)
    check_plan_folder(run.plan_file);
  else
    args.check_output(run.plan_file, "--plan");
  RunOptions o = args.run_options();
  o.trace = !run.trace_file.empty();
  o.trace_ranks = trace_ranks;
  o.plan_rank = run.plan_file.empty() || run.plan_all_ranks ? -1 : run.plan_rank;
  o.plan_all_ranks = run.plan_all_ranks;
  const auto r = simulate(loaded, o);
  const Json samples = run.samples > 0 ? samples_json(args, run) : Json();
  if (o.trace)
    reports::write_atomic(run.trace_file,
                          reports::gzip_named(run.trace_file) ? reports::gzip(r.trace) : r.trace);
  if (o.plan_rank >= 0) reports::write_atomic(run.plan_file, r.plan.dump(1) + "\n");
  if (o.plan_all_ranks) {
    std::filesystem::create_directories(run.plan_file);
    for (std::size_t i = 0; i < r.plans.size(); ++i)
      reports::write_atomic(std::filesystem::path(run.plan_file) / fmt::format("rank-{}.json", i),
                            r.plans[i].dump(1) + "\n");
  }
  if (args.json) {
    Json j = r.json;
    if (run.samples > 0) j["samples"] = samples;
    j["resolved_scenario"] = loaded.resolved;
    out << j.dump(2) << "\n";
  } else {
    out << reports::summary(r.report);
    if (run.samples > 0) {
      const auto& s = samples;
      fmt::print(
          out,
          "  over {} draws of the shared machine: step p10/p50/p90 {:.2f} / {:.2f} / {:.2f} s, "
          "tokens/s/GPU {:.1f} / {:.1f} / {:.1f}, node-to-node compute spread {:.1f} / {:.1f} / "
          "{:.1f}%\n",
          run.samples, s["step_time_s_p10"].get<double>(), s["step_time_s_p50"].get<double>(),
          s["step_time_s_p90"].get<double>(), s["tokens_per_s_per_gpu_p10"].get<double>(),
          s["tokens_per_s_per_gpu_p50"].get<double>(), s["tokens_per_s_per_gpu_p90"].get<double>(),
          100 * s["node_compute_spread_p10"].get<double>(),
          100 * s["node_compute_spread_p50"].get<double>(),
          100 * s["node_compute_spread_p90"].get<double>());
    }
    if (o.trace) fmt::print(out, "  trace written to {}\n", run.trace_file);
  }
  return 0;
}

}  // namespace twin::scenarios
