// Engine benchmarks (ns-3 utils/bench-scheduler.cc): events per second on a synthetic workload,
// and the fluid solver's cost per rate update against the number of flows.
#include <benchmark/benchmark.h>

#include "sim/engine.hpp"
#include "sim/fluid.hpp"
#include "sim/large_pages.hpp"
#include "sim/random.hpp"

using namespace twin::sim;

// 1,000 independent event chains; each event schedules its successor a pseudo-random delay
// later, so the heap holds ~1,000 events: 2M events per iteration.
static void EngineEventThroughput(benchmark::State& state) {
  const std::int64_t total = 2'000'000;
  for (auto _ : state) {
    Engine e;
    Rng rng(1);
    std::int64_t left = total;
    std::function<void()> step = [&] {
      if (--left > 0) e.after(Time::ns(1 + static_cast<std::int64_t>(rng.below(1000))), step);
    };
    for (int i = 0; i < 1000; ++i) e.at(Time::ns(i), step);
    benchmark::DoNotOptimize(e.run());
  }
  state.SetItemsProcessed(state.iterations() * total);
}
BENCHMARK(EngineEventThroughput)->Unit(benchmark::kMillisecond);

// N flows over N/4 shared links plus one common resource (a connected component of N flows);
// each iteration ends one flow and starts another: one component solve per iteration.
static void EngineFluidSolve(benchmark::State& state) {
  const int n = static_cast<int>(state.range(0));
  Engine e;
  Fluid f(e);
  const auto common = f.add_resource(1e12, "common");
  std::vector<Fluid::ResourceId> links;
  for (int i = 0; i < n / 4 + 1; ++i) links.push_back(f.add_resource(1e9 * (1 + i % 3), "l"));
  std::vector<Fluid::FlowId> flows;
  for (int i = 0; i < n; ++i)
    flows.push_back(
        f.start(1e18, {{links[i % links.size()], 1}, {common, 1}}, 1e9 * (1 + i % 5), {}));
  f.settle();
  std::size_t k = 0;
  for (auto _ : state) {
    const auto id = f.start(1e18, {{links[k % links.size()], 1}, {common, 1}}, 2e9, {});
    f.settle();
    benchmark::DoNotOptimize(f.rate(id));
    f.cancel(id);  // and its end: another solve
    f.settle();
    ++k;
  }
  state.SetItemsProcessed(state.iterations() * 2);
  state.SetComplexityN(n);
}
BENCHMARK(EngineFluidSolve)->RangeMultiplier(4)->Range(16, 4096)->Complexity();

// BENCHMARK_MAIN, with the heap kept as the twin keeps it (sim/large_pages.hpp).
int main(int argc, char** argv) {
  twin::sim::keep_freed_heap();
  benchmark::Initialize(&argc, argv);
  if (benchmark::ReportUnrecognizedArguments(argc, argv)) return 1;
  benchmark::RunSpecifiedBenchmarks();
  benchmark::Shutdown();
  return 0;
}
