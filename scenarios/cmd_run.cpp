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
  RunOptions o;
  o.trace = !run.trace_file.empty();
  o.trace_ranks = run.trace_ranks;
  o.event_limit = args.max_events;
  o.plan_rank = run.plan_file.empty() ? -1 : run.plan_rank;
  auto r = simulate(loaded, o);
  if (o.plan_rank >= 0 && r.plan.is_null())
    throw InputError(args.scenario, "--plan-rank", fmt::format("rank {} is not simulated", run.plan_rank));
  if (o.trace) reports::write_atomic(run.trace_file, r.trace);
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
