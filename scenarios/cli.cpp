// The commands of `twin` on the command line (scenarios/cli.hpp): their options, bound to each
// command's arguments, and the call that runs it. Here the commands that simulate scenarios;
// cli_tools.cpp the others (traces, collectives, kernels, reports, imports).
#include "scenarios/cli.hpp"

#include <cmath>
#include <cstdlib>
#include <iostream>
#include <memory>
#include <tuple>

#include "scenarios/cli_options.hpp"

#ifndef TWIN_VERSION
#define TWIN_VERSION "unknown"
#endif

namespace twin::scenarios {

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
        ->check(positive_finite());
  }
  if (takes & kQuiet) sub->add_flag("--quiet", a.quiet, "no progress lines on stderr");
}

namespace {
// A number that passes `ok`, or the message that says what was expected.
CLI::Validator number_check(bool (*ok)(double), const char* expected, const char* name) {
  return CLI::Validator(
      [ok, expected](const std::string& v) {
        char* end = nullptr;
        const double d = std::strtod(v.c_str(), &end);
        return std::isfinite(d) && ok(d) && end != v.c_str() && *end == '\0'
                   ? std::string()
                   : std::string("expected ") + expected + ", got " + v;
      },
      name);
}
}  // namespace

CLI::Validator positive_finite() {
  return number_check([](double d) { return d > 0; }, "a positive finite number", "POSITIVE");
}
CLI::Validator non_negative_finite() {
  return number_check([](double d) { return d >= 0; }, "a finite number of at least 0",
                      "NONNEGATIVE");
}

namespace {

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
      ->check(non_negative_finite());
  return {memory, [a, &common] { return cmd_memory(common, *a, std::cout); }};
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
      ->check(non_negative_finite());
  plan->add_flag(
      "--split", a->split,
      "the shared machine's effects added one at a time: idle (packed), + placement, + other "
      "jobs' traffic, + stragglers (4× the runs; tok/s/GPU medians per stage)");
  plan->add_option("--tokens", a->tokens, "token budget for days_to_tokens (default 15e12)")
      ->check(positive_finite());
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

std::vector<Command> add_commands(CLI::App& app, CommonArgs& common) {
  std::vector<Command> all{add_model(app, common),  add_run(app, common),
                           add_memory(app, common), add_plan_dp(app, common),
                           add_ladder(app, common), add_sweep(app, common),
                           add_tune(app, common),   add_merge(app)};
  for (auto& c : add_tool_commands(app, common)) all.push_back(std::move(c));
  return all;
}

}  // namespace twin::scenarios
