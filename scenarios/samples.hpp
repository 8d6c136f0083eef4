// Draws of the shared machine (hardware/shared_machine.hpp): a scenario run for shared.sample =
// 0 … N−1, and the percentiles of a metric over them (reports/metrics.hpp defines them).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "scenarios/loader.hpp"

namespace twin::scenarios {

// `lo` with shared.sample = i for i = 0 … n−1.
std::vector<LoadOptions> sample_loads(const LoadOptions& lo, int n);
// Runs f(i) for each of `n` points of `draws` consecutive draws each, in parallel, except for the
// draws of a point whose scenario draws nothing (SharedMachine::draws_matter): those are its first
// draw's result, not simulated again (identical inputs give identical outputs).
std::vector<Json> run_draws(const std::vector<Loaded>& loaded, std::size_t draws, int jobs,
                            const std::function<Json(std::size_t)>& f, const char* what,
                            bool progress);
// Sets row[key + "_p10" | "_p50" | "_p90"] over the runs' `key` (a top-level number); returns the
// median.
double add_percentiles(Json& row, const std::string& key, const std::vector<const Json*>& runs);

}  // namespace twin::scenarios
