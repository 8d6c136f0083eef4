// Draws of the shared machine (hardware/shared_machine.hpp): a scenario run for shared.sample =
// 0 … N−1, and the percentiles of a metric over them (reports/metrics.hpp defines them).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "reports/step_report.hpp"
#include "scenarios/loader.hpp"

namespace twin::scenarios {

// `lo` with shared.sample = i for i = 0 … n−1.
std::vector<LoadOptions> sample_loads(const LoadOptions& lo, int n);
// Runs f(i) for each of `n` points of `draws` consecutive draws each, in parallel, except for the
// draws of a point whose scenario draws nothing (SharedMachine::draws_matter): those are its first
// draw's result, not simulated again (identical inputs give identical outputs).
std::vector<reports::StepReport> run_draws(const std::vector<Loaded>& loaded, std::size_t draws,
                                           int jobs,
                                           const std::function<reports::StepReport(std::size_t)>& f,
                                           const char* what, bool progress);
// A metric of a run, named as in its JSON (the percentiles' names are built from it).
struct RunMetric {
  const char* key;
  double reports::StepReport::*field;
};
inline constexpr RunMetric kStepTime{"step_time_s", &reports::StepReport::step_time_s};
inline constexpr RunMetric kTokensPerGpu{"tokens_per_s_per_gpu",
                                         &reports::StepReport::tokens_per_s_per_gpu};
inline constexpr RunMetric kNodeComputeSpread{"node_compute_spread",
                                              &reports::StepReport::node_compute_spread};
inline constexpr RunMetric kNodeCommWaitRatio{"node_comm_wait_ratio",
                                              &reports::StepReport::node_comm_wait_ratio};
inline constexpr RunMetric kTokensPerDay{"tokens_per_day", &reports::StepReport::tokens_per_day};
// Sets row[key + "_p10" | "_p50" | "_p90"] over the runs' metric; returns the median.
double add_percentiles(Json& row, RunMetric m, const std::vector<const reports::StepReport*>& runs);

}  // namespace twin::scenarios
