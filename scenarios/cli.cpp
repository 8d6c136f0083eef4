// The commands of `twin` on the command line (scenarios/cli.hpp): their options, bound to each
// command's arguments, and the call that runs it.
#include "scenarios/cli.hpp"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <tuple>

#ifndef TWIN_VERSION
#define TWIN_VERSION "unknown"
#endif

namespace twin::scenarios {

namespace {

// What each command takes: the scenario and overrides always; --json where it has a readable
// form too; the simulation limits where it simulates; --quiet where it reports progress.
enum Takes : unsigned { kJson = 1, kLimits = 2, kQuiet = 4 };

void add_common(CLI::App* sub, CommonArgs& a, unsigned takes) {
  sub->add_option("scenario", a.scenario, "scenario JSON file")->required();
  sub->add_option("--set", a.sets, "override a scenario value: KEY=VALUE (repeatable)")
      ->take_all()
      ->allow_extra_args(false);
  if (takes & kJson)
    sub->add_flag("--json", a.json, "machine-readable JSON instead of the readable summary");
  if (takes & kLimits) {
    sub->add_option("--max-events", a.max_events,
                    "stop a simulation that needs more events than this, with an error")
        ->check(CLI::Validator(
            [](const std::string& v) {
              return v.find_first_not_of("0123456789") == std::string::npos &&
                             v.find_first_not_of('0') != std::string::npos
                         ? std::string()
                         : "expected a whole number of at least 1";
            },
            "N ≥ 1"));
    sub->add_option(
           "--max-memory-GiB", a.max_memory_GiB,
           "refuse a run estimated to need more memory than this (default: 3/4 of this machine's)")
        ->check(CLI::PositiveNumber);
  }
  if (takes & kQuiet) sub->add_flag("--quiet", a.quiet, "no progress lines on stderr");
}

// A real step to read: the trace and its step (`twin compare`, `twin replay`).
void add_trace_options(CLI::App* sub, std::string& trace, std::string& step) {
  sub->add_option("--kineto", trace, "the trace torch.profiler exported (.json or .json.gz)")
      ->required();
  sub->add_option("--step", step, "its ProfilerStep#N to read (default: the last)");
}

Command add_model(CLI::App& app, CommonArgs& common) {
  auto* model = app.add_subcommand("model", "parameters, FLOPs per step and per-rank memory");
  model->footer("Example: twin model scenarios/europa.json --set training.optimizer=adamw");
  add_common(model, common, kJson);
  return {model, [&common] { return cmd_model(common, std::cout); }};
}

Command add_run(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<RunArgs>();
  auto* run = app.add_subcommand("run", "simulate one training step of a scenario");
  run->footer(
      "Example: twin run scenarios/europa.json --set nccl.max_ctas=0 --trace t.json --trace-ranks "
      "0,163");
  add_common(run, common, kJson | kLimits);
  run->add_option(
      "--trace", a->trace_file,
      "write a Chrome trace (Perfetto) of the step; gzip-compressed if FILE ends in .gz");
  run->add_option(
         "--trace-ranks", a->trace_ranks,
         "ranks in the trace, e.g. 0,163, or all (every simulated rank: large) (default 0)")
      ->delimiter(',')
      ->transform(CLI::Validator(
          [a](std::string& v) {
            if (v == "all") a->trace_all_ranks = true, v = "0";  // rank 0 is simulated: harmless
            return std::string();
          },
          "RANK|all"));
  run->add_option("--plan", a->plan_file,
                  "write one rank's forward+backward launch plan (for calibrate/micro_step.py)");
  run->add_option("--plan-rank", a->plan_rank, "rank of --plan (default 0)");
  run->add_option("--plan-ranks", a->plan_all_ranks,
                  "all: --plan is a folder, one plan per simulated rank (rank-N.json), for a "
                  "multi-GPU run of the plans")
      ->transform(CLI::Validator(
          [](std::string& v) {
            if (v != "all") return std::string("expected all");
            v = "true";
            return std::string();
          },
          "all"));
  run->add_option(
         "--samples", a->samples,
         "also run N draws of the shared machine (shared.sample 0 … N−1: busy nodes, other "
         "jobs' traffic, stragglers) and report p10/p50/p90 of the step")
      ->check(CLI::Range(1, 100000));
  run->add_option("--jobs", a->jobs, "threads for --samples (default 1)")
      ->check(CLI::Range(1, 1024));
  return {run, [a, &common] { return cmd_run(common, *a, std::cout); }};
}

Command add_memory(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<MemoryArgs>();
  auto* memory = app.add_subcommand("memory", "HBM per allocator pool and host memory per rank");
  memory->footer(
      "Example: twin memory scenarios/europa.json --set training.seq_len=98304 --events ev.json");
  add_common(memory, common, kJson | kLimits);
  memory->add_option(
      "--events", a->events_file,
      "write one rank's allocation sequence (JSON) for calibrate/allocator_replay.py");
  memory->add_option(
      "--snapshot", a->snapshot_file,
      "write one rank's allocator over the step as torch.cuda.memory._snapshot() does "
      "(JSON; calibrate/snapshot_pickle.py makes the pickle pytorch.org/memory_viz reads)");
  memory->add_option("--events-rank", a->events_rank, "rank of --events and --snapshot (default 0)")
      ->check(CLI::NonNegativeNumber);
  return {memory, [a, &common] { return cmd_memory(common, *a, std::cout); }};
}

// A finite positive number (CLI11's PositiveNumber lets inf through).
CLI::Validator finite() {
  return CLI::Validator(
      [](const std::string& v) {
        const double d = std::strtod(v.c_str(), nullptr);
        return std::isfinite(d) ? std::string() : "expected a finite number, got " + v;
      },
      "FINITE");
}

// A finite number above 0, in words a user reads (CLI11's PositiveNumber prints its range).
CLI::Validator positive_finite() {
  return CLI::Validator(
      [](const std::string& v) {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        return std::isfinite(d) && d > 0 && end && *end == '\0'
                   ? std::string()
                   : "expected a positive finite number, got " + v;
      },
      "POSITIVE");
}

Command add_plan_dp(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<PlanDpArgs>();
  auto* plan = app.add_subcommand("plan-dp", "throughput per data-parallel replica count");
  plan->footer(
      "Example: twin plan-dp scenarios/europa.json --replicas 1,2,4,8,16,32,61 --placement spread "
      "--jobs 2");
  add_common(plan, common, kJson | kLimits | kQuiet);
  plan->add_option("--replicas", a->replicas, "replica counts, e.g. 1,2,4,8 (DP=1 always runs)")
      ->delimiter(',')
      ->check(CLI::Range(1, 100000));
  plan->add_option(
      "--placement", a->placement,
      "packed | spread | random | slurm | FILE (a Slurm node list), or several comma-separated "
      "to compare them (e.g. packed,slurm,spread); default: the scenario's");
  plan->add_option(
          "--samples", a->samples,
          "draws of the shared machine per replica count (busy nodes, other jobs' traffic, "
          "stragglers: the scenario's shared.*): report p10/p50/p90")
      ->check(CLI::Range(1, 100000));
  plan->add_option("--seed", a->seed, "seed of the draws (placement.seed)")
      ->check(CLI::NonNegativeNumber);
  plan->add_flag(
      "--split", a->split,
      "the shared machine's effects added one at a time: idle (packed), + placement, + other "
      "jobs' traffic, + stragglers (4× the runs; tok/s/GPU medians per stage)");
  plan->add_option("--tokens", a->tokens, "token budget for days_to_tokens (default 15e12)")
      ->check(CLI::PositiveNumber)
      ->check(finite());
  plan->add_option("--jobs", a->jobs, "threads")->check(CLI::Range(1, 256));
  return {plan, [a, &common] { return cmd_plan_dp(common, *a, std::cout); }};
}

Command add_ladder(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<LadderArgs>();
  auto quiet = std::make_shared<bool>(false);
  auto* ladder = app.add_subcommand(
      "ladder",
      "every rung of the published tuning ladder (scenarios/ladder/) beside its published figures");
  ladder->footer("Example: twin ladder --jobs 2 --json > ladder.json");
  ladder->add_option("--jobs", a->jobs, "threads")->check(CLI::Range(1, 256));
  ladder->add_flag("--json", a->json, "as JSON");
  ladder->add_flag("--quiet", *quiet, "no progress lines on stderr");
  ladder->add_option("--set", a->sets,
                     "override a value in every rung: KEY=VALUE (repeatable), e.g. "
                     "training.fsdp_streams=fsdp2");
  return {ladder, [a, quiet, &common] {
            a->progress = !*quiet;
            a->data_dir = common.data_dir;
            return cmd_ladder(*a, std::cout);
          }};
}

Command add_sweep(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<SweepArgs>();
  auto shard = std::make_shared<std::string>();
  auto* sweep = app.add_subcommand("sweep", "run every combination of --grid values");
  sweep->footer(
      "Example: twin sweep scenarios/europa.json --grid nccl.max_ctas=8,16,32 --grid "
      "training.seq_len=32768,65536 --jobs 2 --out sweep.csv");
  add_common(sweep, common, kJson | kLimits | kQuiet);
  sweep->add_option("--grid", a->grid, "KEY=V1,V2,... (repeatable)")->required();
  sweep->add_option("--jobs", a->jobs, "threads")->check(CLI::Range(1, 256));
  sweep->add_option("--out", a->out, "FILE.csv or FILE.json (default: CSV on stdout)");
  sweep->add_option("--shard", *shard,
                    "I/N: run only the points i with i mod N = I and write them to --out as a part "
                    "for `twin merge` (one task of a Slurm job array or srun step each)");
  sweep->add_flag("--skip-oom", a->skip_certain_oom,
                  "do not simulate points out of HBM in every schedule (found from the step's "
                  "graph): their rows say oom, fits false and certain_oom, without step metrics");
  return {sweep, [a, shard, &common] {
            if (!shard->empty()) std::tie(a->shard, a->shards) = parse_shard(*shard);
            return cmd_sweep(common, *a, std::cout);
          }};
}

Command add_tune(CLI::App& app, CommonArgs& common) {
  auto a = std::make_shared<TuneArgs>();
  auto* tune =
      app.add_subcommand("tune", "search the plan space for the best configuration that fits");
  tune->footer(
      "Example: twin tune scenarios/europa.json --jobs 2   (the default space: NCCL CTAs, sequence "
      "length, offload fraction, checkpointing, tile scheduler)\n         twin tune "
      "scenarios/europa.json "
      "--vary nccl.max_ctas=8,16,32 --vary parallel.dp=1,2,4 --objective tokens_per_day");
  add_common(tune, common, kJson | kLimits | kQuiet);
  tune->add_option("--vary", a->vary, "KEY=V1,V2,... (repeatable; none: the default space)");
  tune->add_option("--objective", a->objective, "tokens_per_s_per_gpu or tokens_per_day")
      ->default_str(a->objective);
  tune->add_flag("--any", a->any, "rank configurations that do not fit HBM or host memory too");
  tune->add_option("--top", a->top, "configurations to show")
      ->check(CLI::Range(1, 1000))
      ->default_str("5");
  tune->add_option("--budget-points", a->budget_points,
                   "simulate at most this many configurations: a larger space is searched by "
                   "coordinates (one axis at a time from the scenario's values), a smaller one "
                   "exhaustively")
      ->default_str("1000");
  tune->add_option("--jobs", a->jobs, "threads")->check(CLI::Range(1, 256));
  return {tune, [a, &common] { return cmd_tune(common, *a, std::cout); }};
}

Command add_merge(CLI::App& app) {
  auto a = std::make_shared<MergeArgs>();
  auto* merge = app.add_subcommand(
      "merge", "join the parts of a sharded sweep into the file one sweep writes");
  merge->footer(
      "Example: twin merge part-0.json part-1.json part-2.json part-3.json --out sweep.csv");
  merge
      ->add_option("parts", a->parts,
                   "the parts (twin sweep --shard I/N --out PART), every shard once")
      ->required();
  merge->add_option("--out", a->out, "FILE.csv or FILE.json (default: CSV on stdout)");
  merge->add_flag("--json", a->json, "JSON rather than CSV");
  return {merge, [a] { return cmd_merge(*a, std::cout); }};
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

}  // namespace

void describe(CLI::App& app, CommonArgs& common) {
  app.option_defaults()->always_capture_default();  // --help shows every option's default
  app.footer(
      "Examples:\n  twin run scenarios/europa.json\n  twin sweep scenarios/europa.json --grid "
      "nccl.max_ctas=8,16,32 --out sweep.csv\n  twin report scenarios/europa.json --sweep "
      "sweep.csv "
      "-o report.html\n  twin help-params\nREADME.md explains every command; twin COMMAND --help "
      "its options.");
  app.set_version_flag("--version", std::string("twin ") + TWIN_VERSION);
  app.require_subcommand(1);
  app.add_option("--data-dir", common.data_dir,
                 "folder holding scenarios/models/ and hardware/profiles/ (default: $TWIN_DATA_DIR "
                 "or the source tree twin was built from)");
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
      ->check(CLI::PositiveNumber);
  imp->add_option("--gpus-per-node", a->gpus_per_node, "GPUs per node (default: the profile's)")
      ->check(CLI::PositiveNumber);
  imp->add_option("--profile", a->profile, "hardware profile (hardware/profiles/NAME.json)")
      ->capture_default_str();
  imp->add_option("--out", a->out, "write the scenario here (default: print it)");
  imp->add_flag("--run", a->run, "simulate one step of it (twin run) instead of printing it");
  imp->add_flag("--json", common.json, "with --run: the run's JSON");
  imp->add_flag("--quiet", common.quiet, "no mapping notes on stderr");
  return {imp, [a, &common] { return cmd_import_torchtitan(common, *a, std::cout); }};
}

std::vector<Command> add_commands(CLI::App& app, CommonArgs& common) {
  return {add_model(app, common),      add_run(app, common),
          add_memory(app, common),     add_plan_dp(app, common),
          add_ladder(app, common),     add_sweep(app, common),
          add_tune(app, common),       add_merge(app),
          add_compare(app, common),    add_replay(app, common),
          add_collective(app, common), add_resolve(app, common),
          add_kernel(app, common),     add_report(app, common),
          add_import(app, common),     add_help_params(app)};
}

}  // namespace twin::scenarios
