// Step benchmarks: the 384-GPU EUROPA step (target ≤ 1 s on one core) and its graph build alone,
// the whole machine, plan-dp and tune.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include "hardware/cluster.hpp"
#include "model/step_graph.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/simulate.hpp"

using namespace twin;

namespace {
const scenarios::Loaded& europa() {
  static const auto l = scenarios::load_scenario(
      std::string(TWIN_SOURCE_DIR) + "/scenarios/europa.json", {TWIN_SOURCE_DIR, {}});
  return l;
}
// The commands' arguments for europa.json, without a progress meter.
scenarios::CommonArgs europa_args() {
  scenarios::CommonArgs args;
  args.scenario = std::string(TWIN_SOURCE_DIR) + "/scenarios/europa.json";
  args.data_dir = TWIN_SOURCE_DIR;
  args.progress = false;
  return args;
}
}  // namespace

static void StepEuropaSimulate(benchmark::State& state) {
  for (auto _ : state) benchmark::DoNotOptimize(scenarios::simulate(europa(), {}));
  state.SetLabel("384 GPUs, one step");
}
BENCHMARK(StepEuropaSimulate)->Unit(benchmark::kMillisecond)->Iterations(3);

static void StepEuropaBuildGraph(benchmark::State& state) {
  const auto& s = europa().scenario;
  for (auto _ : state) {
    sim::Engine e;
    sim::Fluid f(e);
    sim::TaskGraph g(e);
    hardware::Cluster c(e, f, s.hw, static_cast<int>(s.job.parallel.total_gpus()),
                        static_cast<int>(s.nccl.reserved_sms));
    model::StepBuilder b(s.job, s.nccl, c, g);
    benchmark::DoNotOptimize(b.build());
    model::bind_step(b.ops(), g, c);
    state.counters["tasks"] = static_cast<double>(g.size());
  }
}
BENCHMARK(StepEuropaBuildGraph)->Unit(benchmark::kMillisecond)->Iterations(3);

// The whole machine: DP = 61 replicas of 96 nodes (5,856 nodes), one replica simulated and
// standing for the others on the fabric. Targets (issue: ≤ 30 s and ≤ 4 GiB on the 2-core
// machine): the time is the benchmark's; peak_rss_GiB is the process's peak resident memory.
static void StepWholeMachineDp61(benchmark::State& state) {
  static const auto l =
      scenarios::load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/europa.json",
                               {TWIN_SOURCE_DIR, {"parallel.dp=61"}});
  for (auto _ : state) benchmark::DoNotOptimize(scenarios::simulate(l, {}));
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  state.counters["peak_rss_GiB"] = static_cast<double>(u.ru_maxrss) / (1024.0 * 1024.0);
  state.SetLabel("23,424 GPUs, DP = 61, one step");
}
BENCHMARK(StepWholeMachineDp61)->Unit(benchmark::kMillisecond)->Iterations(1);

// Issue #16's planning target (≤ 60 s on the 2-core machine): plan-dp over 7 replica counts with
// 32 draws of the shared machine each, two jobs. europa.json leaves every shared effect off, so a
// count's draws are one simulation (scenarios/samples.hpp run_draws).
static void PlanDpEuropa7Counts32Samples(benchmark::State& state) {
  const auto args = europa_args();
  scenarios::PlanDpArgs plan;
  plan.replicas = {1, 2, 4, 8, 16, 32, 61};
  plan.samples = 32;
  plan.jobs = 2;
  for (auto _ : state) benchmark::DoNotOptimize(scenarios::plan_dp_json(args, plan));
  state.SetLabel("7 replica counts x 32 samples, 2 jobs");
}
BENCHMARK(PlanDpEuropa7Counts32Samples)->Unit(benchmark::kMillisecond)->Iterations(1);

// Issue #21's search target (≤ 2 min on the 2-core machine): `twin tune scenarios/europa.json
// --jobs 2`, its default space of 144 configurations (72 of them out of HBM in every schedule,
// found before simulating: model/memory_bound.hpp).
static void TuneEuropaDefault(benchmark::State& state) {
  const auto args = europa_args();
  scenarios::TuneArgs t;
  t.jobs = 2;
  for (auto _ : state) benchmark::DoNotOptimize(scenarios::tune_json(args, t));
  state.SetLabel("144 configurations, 2 jobs");
}
BENCHMARK(TuneEuropaDefault)->Unit(benchmark::kMillisecond)->Iterations(1);

// What tune pays for a configuration out of HBM in every schedule (europa.json with selective
// checkpointing): the step's graph and the bound, against StepEuropaSimulate's whole step (and the
// two passes, with retries, that simulating this configuration takes).
static void StepEuropaOutOfHbmBeforeSimulating(benchmark::State& state) {
  static const auto l =
      scenarios::load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/europa.json",
                               {TWIN_SOURCE_DIR, {"training.activation_checkpointing=selective"}});
  scenarios::RunOptions stop;
  stop.stop_if_certain_oom = true;
  for (auto _ : state) {
    const auto r = scenarios::simulate(l, stop);
    if (!r.certain_oom) state.SkipWithError("not found out of HBM before simulating");
  }
  state.SetLabel("384 GPUs, selective checkpointing");
}
BENCHMARK(StepEuropaOutOfHbmBeforeSimulating)->Unit(benchmark::kMillisecond)->Iterations(3);
