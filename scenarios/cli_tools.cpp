// The commands of `twin` that do not simulate a scenario's step (or not only): a real trace
// compared or replayed, one collective or kernel timed, the resolved scenario, the HTML report,
// a TorchTitan job imported, the scenario keys listed (cli.cpp has the others).
#include <iostream>
#include <memory>

#include "scenarios/cli_options.hpp"

namespace twin::scenarios {

namespace {

// A real step to read: the trace and its step (`twin compare`, `twin replay`).
void add_trace_options(CLI::App* sub, std::string& trace, std::string& step) {
  sub->add_option("--kineto", trace, "the trace torch.profiler exported (.json or .json.gz)")
      ->required();
  sub->add_option("--step", step, "its ProfilerStep#N to read (default: the last)");
}

Command add_compare(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<CompareArgs>();
  auto* compare = app.add_subcommand(
      "compare",
      "a real step (PyTorch profiler trace) beside the twin's prediction of the same rank");
  add_common(compare, common, kJson | kLimits);
  add_trace_options(compare, a->kineto, a->step);
  compare->add_option("--rank", a->rank, "the scenario's rank the trace is of")
      ->capture_default_str();
  compare->footer(
      "Example: twin compare --kineto tests/data/traces/micro-step-max-ctas-16.trace.json.gz "
      "scenarios/micro-step.json");
  return {compare, [a, &common] { return cmd_compare(common, *a, std::cout); }};
}

Command add_replay(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<ReplayArgs>();
  auto* replay = app.add_subcommand(
      "replay",
      "a real step (PyTorch profiler trace) re-simulated, as recorded or on another machine");
  add_common(replay, common, kJson);
  add_trace_options(replay, a->kineto, a->step);
  replay
      ->add_option(
          "--to", a->to,
          "KEY=VALUE: the machine to re-simulate on differs from the "
          "scenario's so (e.g. hardware.profile=jupiter-gh200, nccl.max_ctas=16; repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  replay->footer(
      "Example: twin replay --kineto tests/data/traces/moe-step.trace.json.gz "
      "scenarios/micro-step.json "
      "--to nccl.max_ctas=8\nWhat a trace cannot tell and how it is filled in: README.md, "
      "\"Re-simulating a real step\".");
  return {replay, [a, &common] { return cmd_replay(common, *a, std::cout); }};
}

Command add_collective(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<CollectiveArgs>();
  auto* collective = app.add_subcommand(
      "collective",
      "one NCCL collective alone on the scenario's machine, per size, in nccl-tests' columns");
  add_common(collective, common, kJson);
  collective->add_option("--kind", a->kind, "all_gather | reduce_scatter | all_reduce | all_to_all")
      ->capture_default_str();
  collective->add_option("--ranks", a->ranks, "GPUs, placed as the scenario places nodes")
      ->capture_default_str();
  auto* bytes = collective
                    ->add_option("--bytes", a->bytes,
                                 "sizes as nccl-tests counts them (the full buffer), "
                                 "e.g. 1e6,1e9")
                    ->delimiter(',');
  collective->add_option("--ctas", a->ctas, "NCCL's own channel count (nccl.max_ctas caps it)")
      ->capture_default_str();
  collective
      ->add_option(
          "--nccl-tests", a->nccl_tests,
          "real nccl-tests logs: print the twin beside each "
          "of their rows (their collective, ranks and sizes; NCCL_MAX_CTAS from NCCL's INFO lines)")
      ->excludes(bytes);
  collective->footer(
      "Examples: twin collective scenarios/europa.json --kind all_gather --ranks 8 --bytes "
      "1e6,1e8,4e9\n"
      "  twin collective scenarios/europa.json --set hardware.profile=h200-measured --ctas 24 "
      "--nccl-tests reports/calibration/nccl-tests/all_gather_perf.txt");
  return {collective, [a, &common] { return cmd_collective(common, *a, std::cout); }};
}

Command add_resolve(CLI::App& app, CommonArgs& common) {
  auto* resolve = app.add_subcommand("resolve", "print the fully resolved scenario as JSON");
  add_common(resolve, common, 0);
  return {resolve, [&common] { return cmd_resolve(common, std::cout); }};
}

Command add_kernel(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<KernelArgs>();
  auto* kernel = app.add_subcommand(
      "kernel", "one kernel alone and with k SMs held (NCCL CTAs), on the scenario's hardware");
  add_common(kernel, common, kJson);
  kernel
      ->add_option(
          "--kernel,--class", a->kernel,
          "gemm | gemm_fp8 | grouped_static | grouped_dynamic | attention_fwd | "
          "attention_bwd | an elementwise family: ew_add ew_norm ew_swiglu ew_gather "
          "ew_scatter_add ew_widen ew_fp8_quant ew_fp8_dequant ew_sum_fp32 ew_loss ew_norm_bwd "
          "ew_swiglu_bwd ew_loss_bwd")
      ->required();
  kernel
      ->add_option("--shape", a->shape,
                   "gemm: M,N,K; grouped: ROWS_PER_EXPERT,N,K,EXPERTS; attention: FLOPS; "
                   "elementwise: BYTES (read + write)")
      ->delimiter(',')
      ->check(positive_finite())  // a kernel of no work has no slowdown (0 / 0)
      ->required();
  kernel->add_option("--held-sms", a->held_sms, "SMs held, e.g. 0,16,40 (default: the measured 18)")
      ->delimiter(',');
  kernel->add_option(
      "--beside-collective", a->beside_collective,
      "also run the kernel beside a collective over the node's GPUs starting with it: "
      "KIND,BYTES,CTAS (all_gather | reduce_scatter | all_reduce | all_to_all; NCCL's "
      "default CTAs, capped by nccl.max_ctas)");
  kernel->add_option("--profile", a->profile,
                     "hardware profile (hardware/profiles/NAME.json): short for --set "
                     "hardware.profile=NAME");
  kernel
      ->add_option("--alone-us", a->alone_us,
                   "the kernel's time alone as measured (µs; default: the cost model's): the "
                   "contention model then slows that time, as the calibration fit does")
      ->check(positive_finite());
  kernel->add_option("--nvjet", a->nvjet,
                     "gemm: price the launch cuBLAS made, by its kernel's name in a trace "
                     "(nvjet_sm90_tst_<tile>_<k tile>x<stages>_<cluster>_…), instead of the twin's "
                     "choice");
  kernel
      ->add_option("--grid", a->grid,
                   "with --nvjet: the launch's CTAs, as the trace records its grid (needed for "
                   "split-K kernels; default: one CTA per tile, padded to whole clusters)")
      ->check(positive_finite());
  kernel->footer(
      "Example: twin kernel scenarios/europa.json --set hardware.profile=h200-measured "
      "--kernel gemm --shape 16384,13568,6144 --held-sms 0,16,40,88");
  return {kernel, [a, &common] { return cmd_kernel(common, *a, std::cout); }};
}

Command add_report(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<ReportArgs>();
  auto* report = app.add_subcommand(
      "report",
      "one self-contained HTML page of the scenario's pictures (step, timeline, memory), "
      "optionally the ladder, sweeps and a plan-dp run");
  add_common(report, common, kLimits | kQuiet);
  report->add_option("-o,--out", a->out, "the HTML file to write")->required();
  report->add_flag("--ladder", a->ladder,
                   "add the ladder beside the published figures (simulates 14 rungs)");
  report->add_option("--sweep", a->sweeps, "a `twin sweep --out` file (CSV or JSON); repeatable");
  report->add_option("--plan-dp", a->plan_dp, "a `twin plan-dp --json` output");
  report->add_option("--kineto", a->kineto.kineto,
                     "a PyTorch profiler trace to draw beside the twin's plan of --kineto-rank");
  report->add_option("--kineto-rank", a->kineto.rank, "the scenario's rank the trace is of")
      ->capture_default_str();
  report->add_option("--kineto-step", a->kineto.step,
                     "the trace's ProfilerStep#N (default: the last)");
  report->add_option("--jobs", a->jobs, "threads for the ladder")->check(CLI::Range(1, 1024));
  report->footer(
      "Example: twin plan-dp scenarios/europa.json --replicas 1,2,4 --json > dp.json && "
      "twin report scenarios/europa.json --ladder --plan-dp dp.json -o report.html");
  return {report, [a, &common] { return cmd_report(common, *a, std::cout); }};
}

Command add_help_params(CLI::App& app) {
  auto json = std::make_shared<bool>(false);
  auto* params = app.add_subcommand("help-params", "list every scenario key: unit, default, range");
  params->add_flag("--json", *json, "as JSON");
  return {params, [json] { return cmd_help_params(*json, std::cout); }};
}

Command add_import(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<ImportArgs>();
  auto* imp = app.add_subcommand(
      "import-torchtitan",
      "a TorchTitan job file (TOML) as a twin scenario: every key mapped, named as having no "
      "effect on a step, or reported as not modelled (on stderr)");
  imp->footer(
      "Example: twin import-torchtitan llama3_8b.toml --nodes 16 --profile h100-sxm --out "
      "llama3-8b.json\n         twin import-torchtitan llama3_70b.toml --nodes 32 --run");
  imp->add_option("scenario", common.scenario, "TorchTitan job file (.toml)")->required();
  imp->add_option("--set", common.sets, "override a scenario value when checking or running it")
      ->take_all()
      ->allow_extra_args(false);
  imp->add_option("--nodes", a->nodes, "nodes the job runs on")
      ->required()
      ->check(positive_finite());
  imp->add_option("--gpus-per-node", a->gpus_per_node, "GPUs per node (default: the profile's)")
      ->check(positive_finite());
  imp->add_option("--profile", a->profile, "hardware profile (hardware/profiles/NAME.json)")
      ->capture_default_str();
  imp->add_option("--out", a->out, "write the scenario here (default: print it)");
  imp->add_flag("--run", a->run, "simulate one step of it (twin run) instead of printing it");
  imp->add_flag("--json", common.json, "with --run: the run's JSON");
  imp->add_flag("--quiet", common.quiet, "no mapping notes on stderr");
  return {imp, [a, &common] { return cmd_import_torchtitan(common, *a, std::cout); }};
}

}  // namespace

std::vector<Command> add_tool_commands(CLI::App& app, CommonArgs& common) {
  return {add_compare(app, common), add_replay(app, common), add_collective(app, common),
          add_resolve(app, common), add_kernel(app, common), add_report(app, common),
          add_import(app, common),  add_help_params(app)};
}

}  // namespace twin::scenarios
