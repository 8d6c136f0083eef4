// `twin run`: one scenario through the twin.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <ostream>

#include "reports/output.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/simulate.hpp"

namespace twin::scenarios {

int cmd_run(const CommonArgs& args, const RunArgs& run, std::ostream& out) {
  const auto loaded = load_scenario(args.scenario, args.load_options());
  // Ranks asked for must be simulated: checked before the work (issue #23, item 10).
  const int gpus = simulated_gpus(loaded.scenario);
  auto check_rank = [&](const char* option, int r) {
    if (r < 0 || r >= gpus)
      throw InputError(args.scenario, option, fmt::format("rank {} is not simulated (ranks 0–{})", r, gpus - 1));
  };
  for (const int r : run.trace_ranks) check_rank("--trace-ranks", r);
  std::vector<int> trace_ranks = run.trace_ranks;
  if (run.trace_all_ranks)
    for (int r = 0; r < gpus; ++r) trace_ranks.push_back(r);
  if (!run.plan_file.empty()) check_rank("--plan-rank", run.plan_rank);
  args.check_output(run.trace_file, "--trace");
  args.check_output(run.plan_file, "--plan");
  RunOptions o = args.run_options();
  o.trace = !run.trace_file.empty();
  o.trace_ranks = trace_ranks;
  o.plan_rank = run.plan_file.empty() ? -1 : run.plan_rank;
  auto r = simulate(loaded, o);
  if (o.trace)
    reports::write_atomic(run.trace_file, reports::gzip_named(run.trace_file) ? reports::gzip(r.trace) : r.trace);
  if (o.plan_rank >= 0) reports::write_atomic(run.plan_file, r.plan.dump(1) + "\n");
  if (args.json) {
    Json j = r.json;
    j["resolved_scenario"] = loaded.resolved;
    out << j.dump(2) << "\n";
  } else {
    out << summary(r.json);
    if (o.trace) fmt::print(out, "  trace written to {}\n", run.trace_file);
  }
  return 0;
}

}  // namespace twin::scenarios
