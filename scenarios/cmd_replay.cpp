// `twin replay --kineto TRACE SCENARIO [--to KEY=VALUE ...]`: a real step (a PyTorch profiler
// trace) re-simulated by the twin's engine (issue #20, item 3; scenarios/trace_replay.hpp): on
// the machine it ran on (SCENARIO after --set) it should give the trace's step back; with --to
// (another profile, other NCCL settings) it says what the same step would do there.
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <map>
#include <ostream>

#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/trace_replay.hpp"

namespace twin::scenarios {

Json replay_json(const CommonArgs& args, const ReplayArgs& rp) {
  const auto step = read_kineto(rp.kineto, rp.step);
  const auto source = load_scenario(args.scenario, args.load_options());
  LoadOptions to = args.load_options();
  to.sets.insert(to.sets.end(), rp.to.begin(), rp.to.end());
  const auto target = load_scenario(args.scenario, to);
  const auto deps = infer_dependencies(step);
  const auto r = replay_trace(step, deps, source.scenario, target.scenario);
  std::map<std::string, std::pair<double, double>> cats;  // category → (real s, replayed s)
  double real_first = 1e300, real_last = 0;
  for (std::size_t i = 0; i < step.activities.size(); ++i) {
    const auto& a = step.activities[i];
    auto& c = cats[a.category];
    c.first += a.dur_us * 1e-6, c.second += r.end_s[i] - r.start_s[i];
    real_first = std::min(real_first, a.start_us),
    real_last = std::max(real_last, a.start_us + a.dur_us);
  }
  Json categories = Json::object();
  for (const auto& [k, v] : cats) categories[k] = {{"real_s", v.first}, {"replayed_s", v.second}};
  return {{"trace", rp.kineto},
          {"step", step.step},
          {"scenario", args.scenario},
          {"to", rp.to},
          {"activities", step.activities.size()},
          {"dependencies",
           {{"cross_stream", deps.cross_stream},
            {"host_bound", deps.host_bound},
            {"launch_latency_us", deps.launch_latency_us},
            {"front_end_gaps_s", deps.front_end_us * 1e-6},
            {"unexplained_idle_s", deps.unexplained_us * 1e-6}}},
          {"real_step_s", (real_last - real_first) * 1e-6},
          {"replayed_step_s", r.step_s},
          {"categories", categories},
          {"provenance", provenance(target.resolved)}};
}

int cmd_replay(const CommonArgs& args, const ReplayArgs& rp, std::ostream& out) {
  const Json j = replay_json(args, rp);
  if (args.json) {
    out << j.dump(2) << "\n";
    return 0;
  }
  const double real = j["real_step_s"].get<double>(), sim = j["replayed_step_s"].get<double>();
  fmt::print(out, "{} {} re-simulated on {}{} ({} activities)\n", j["trace"].get<std::string>(),
             j["step"].get<std::string>(), j["scenario"].get<std::string>(),
             rp.to.empty() ? std::string(" as recorded")
                           : " with " + fmt::format("{}", fmt::join(rp.to, " ")),
             j["activities"].get<std::size_t>());
  const auto& d = j["dependencies"];
  fmt::print(out,
             "inferred: {} waits on other streams, {} launches that held the GPU back (latency "
             "{:.1f} µs), "
             "{:.3f} ms of front-end gaps kept, {:.3f} ms of idle time unexplained\n",
             d["cross_stream"].get<int>(), d["host_bound"].get<int>(),
             d["launch_latency_us"].get<double>(), d["front_end_gaps_s"].get<double>() * 1e3,
             d["unexplained_idle_s"].get<double>() * 1e3);
  fmt::print(out, "{:16s} {:>11} {:>13} {:>9}\n", "category", "real ms", "replayed ms", "change");
  for (const auto& [k, v] : j["categories"].items()) {
    const double a = v["real_s"].get<double>(), b = v["replayed_s"].get<double>();
    fmt::print(out, "{:16s} {:>11.2f} {:>13.2f} {:>9}\n", k, a * 1e3, b * 1e3,
               a > 0 ? fmt::format("{:+.1f}%", 100 * (b / a - 1)) : "-");
  }
  fmt::print(out, "step (first start to last end): real {:.2f} ms, replayed {:.2f} ms ({:+.1f}%)\n",
             real * 1e3, sim * 1e3, real > 0 ? 100 * (sim / real - 1) : 0.0);
  return 0;
}

}  // namespace twin::scenarios
