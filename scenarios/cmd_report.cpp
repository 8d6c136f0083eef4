// `twin report`: one self-contained HTML page of the scenario's pictures (issue #19), and
// optionally the ladder, sweeps and a plan-dp run (reports/html_page.hpp, report_charts.hpp).
#include <fmt/format.h>
#include <fmt/ostream.h>

#include <filesystem>
#include <optional>
#include <ostream>

#include "reports/output.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/kineto.hpp"
#include "scenarios/report_charts.hpp"

namespace twin::scenarios {

namespace {

namespace fs = std::filesystem;

// The run of the scenario with the traces the charts need: rank 0's and the slowest rank's
// streams and counters (a second run when the slowest is another rank: which one is known after
// the first).
RunResult traced_run(const CommonArgs& args, const Loaded& loaded) {
  RunOptions o = args.run_options();
  o.trace = true;
  o.trace_ranks = {0};
  RunResult r = simulate(loaded, o);
  const int slowest = static_cast<int>(r.report.slowest_rank.rank);
  if (slowest == 0) return r;
  o.trace_ranks = {0, slowest};
  return simulate(loaded, o);
}

reports::Section step_section(const RunResult& r, const Json& trace) {
  return {"The step",
          {breakdown_chart(r.report), timeline_chart(trace), nccl_sms_chart(trace),
           gpu_time_chart(r.report)}};
}

reports::Section memory_section(const RunResult& r, const Json& trace) {
  return {"Memory",
          {hbm_pools_chart(trace, false), hbm_pools_chart(trace, true),
           host_memory_chart(r.report.memory)}};
}

std::vector<std::pair<std::string, std::string>> facts(const reports::StepReport& j) {
  const auto& m = j.memory;
  return {{"tokens/s per GPU", fmt::format("{:.0f}", j.tokens_per_s_per_gpu)},
          {"MFU", fmt::format("{:.1f}% ({:.0f} TFLOP/s per GPU)", 100 * j.flops.mfu,
                              j.flops.model_TFLOPs_per_gpu)},
          {"step", fmt::format("{:.2f} s", j.step_time_s)},
          {"waiting on communication (rank 0)", fmt::format("{:.2f} s", j.exposed_comm_s())},
          {"HBM peak reserved",
           fmt::format("{:.1f} of {:.1f} GiB", m.hbm_peak_reserved_GiB, m.hbm_capacity_GiB)},
          {"Host memory peak",
           fmt::format("{:.1f} of {:.1f} GiB", m.host_peak_GiB, m.host_capacity_GiB)},
          {"runnable", j.runnable.ok ? "yes" : "NO: " + j.runnable.why}};
}

// `--plan-dp FILE`, read and checked; a comparison of placements (`--placement A,B`) gives its
// first one's plan. Null without the option.
Json read_plan_dp(const std::string& file) {
  if (file.empty()) return Json();
  Json plan_dp = read_json_file(file);
  if (plan_dp.is_object() && plan_dp.contains("placements") && plan_dp["placements"].is_object() &&
      !plan_dp["placements"].empty())
    plan_dp = Json(plan_dp["placements"].begin().value());
  bool ok = plan_dp.is_object() && plan_dp.contains("rows") && plan_dp["rows"].is_array();
  for (const auto& r : ok ? plan_dp["rows"] : Json::array())
    ok = ok && r.is_object() && r.contains("replicas") && r.contains("gpus") &&
         r.contains("tokens_per_s_per_gpu") && r.contains("relative_to_dp1");
  if (!ok)
    throw InputError(file, "rows",
                     "expected the output of `twin plan-dp --json` (rows of replicas, gpus, "
                     "tokens_per_s_per_gpu, "
                     "relative_to_dp1)");
  return plan_dp;
}

// The real trace beside the twin's plan of the same rank.
reports::Section real_trace_section(const CommonArgs& args, const Loaded& loaded,
                                    const KinetoStep& real, int rank) {
  RunOptions o = args.run_options();
  o.plan_rank = rank;
  const Json plan = simulate(loaded, o).plan;
  if (plan.is_null())
    throw InputError("--kineto-rank", "",
                     fmt::format("{}: not a rank of the scenario's simulated GPUs", rank));
  const auto r = spans_of(real), t = spans_of_plan(plan);
  return {"Against a real trace", {compare_timeline_chart(r, t), compare_categories_chart(r, t)}};
}

// The ladder, sweeps and plan-dp sections, where asked for.
void add_what_ifs(reports::Page& page, const CommonArgs& args, const ReportArgs& rep,
                  const std::vector<std::pair<std::string, Json>>& sweeps, const Json& plan_dp) {
  if (rep.ladder) {
    LadderArgs la;
    la.data_dir = args.data_dir;
    la.jobs = rep.jobs;
    la.progress = args.progress;
    page.sections.push_back({"Against the published figures", {ladder_chart(ladder_json(la))}});
  }
  reports::Section what_if{"What-ifs", {}};
  for (const auto& [file, rows] : sweeps) what_if.charts.push_back(sweep_chart(rows, file));
  if (!plan_dp.is_null()) what_if.charts.push_back(plan_dp_chart(plan_dp));
  if (!what_if.charts.empty()) page.sections.push_back(std::move(what_if));
}

}  // namespace

int cmd_report(const CommonArgs& args, const ReportArgs& rep, std::ostream& out) {
  if (rep.out.empty())
    throw InputError("-o", "", "the report needs an output file (-o report.html)");
  args.check_output(rep.out, "-o");
  const fs::path data = args.load_options().data_dir;
  const auto libs = reports::load_chart_libraries((data / "reports/web/node_modules").string());
  // Every input is read before any work: a bad file fails at once.
  std::vector<std::pair<std::string, Json>> sweeps;
  for (const auto& f : rep.sweeps) sweeps.emplace_back(f, read_sweep_rows(f));
  const Json plan_dp = read_plan_dp(rep.plan_dp);
  const auto real = rep.kineto.kineto.empty() ? std::optional<KinetoStep>()
                                              : read_kineto(rep.kineto.kineto, rep.kineto.step);
  const Loaded loaded = load_scenario(args.scenario, args.load_options());
  const RunResult run = traced_run(args, loaded);

  reports::Page page;
  page.title = "twin: " + loaded.resolved.value("name", args.scenario);
  page.facts = facts(run.report);
  const Json& prov = run.report.provenance;
  page.provenance =
      fmt::format("twin {} ({}) · {} · resolved scenario fnv1a {} · {}", twin_version(),
                  twin_commit(), args.scenario, prov["resolved_fnv1a"].get<std::string>(),
                  loaded.resolved.value("description", ""));
  const Json trace = Json::parse(run.trace);  // parsed once for the step's and memory's charts
  page.sections = {step_section(run, trace), memory_section(run, trace)};
  add_what_ifs(page, args, rep, sweeps, plan_dp);
  if (real) page.sections.push_back(real_trace_section(args, loaded, *real, rep.kineto.rank));
  const fs::path fit = data / "reports/calibration/contention/fit.json";
  if (fs::exists(fit))
    page.sections.push_back({"Calibration", {contention_chart(read_json_file(fit))}});

  std::size_t charts = 0;
  for (const auto& s : page.sections) charts += s.charts.size();
  reports::write_atomic(rep.out, reports::html_page(page, libs));
  fmt::print(out, "wrote {} ({} charts)\n", rep.out, charts);
  return 0;
}

}  // namespace twin::scenarios
