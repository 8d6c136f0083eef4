#include "scenarios/samples.hpp"

#include <fmt/format.h>

#include "reports/metrics.hpp"
#include "reports/progress.hpp"
#include "scenarios/parallel.hpp"

namespace twin::scenarios {

std::vector<LoadOptions> sample_loads(const LoadOptions& lo, int n) {
  std::vector<LoadOptions> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(lo);
    out.back().sets.push_back(fmt::format("shared.sample={}", i));
  }
  return out;
}

std::vector<reports::StepReport> run_draws(const std::vector<Loaded>& loaded, std::size_t draws,
                                           int jobs,
                                           const std::function<reports::StepReport(std::size_t)>& f,
                                           const char* what, bool progress) {
  std::vector<std::size_t> run;                  // the points' draws that are simulated
  std::vector<std::size_t> from(loaded.size());  // each draw's run, by index into `run`
  for (std::size_t i = 0; i < loaded.size(); ++i) {
    const bool same =
        draws > 1 && i % draws != 0 && !loaded[i].scenario.placement.shared.draws_matter();
    if (!same) run.push_back(i);
    from[i] = run.size() - 1;  // a repeated draw: its point's first draw, the last one run
  }
  reports::Progress p(what, run.size(), progress ? stderr : nullptr);
  const auto runs = run_parallel<reports::StepReport>(
      run.size(), jobs, [&](std::size_t k) { return f(run[k]); }, &p);
  std::vector<reports::StepReport> out;
  out.reserve(loaded.size());
  for (std::size_t i = 0; i < loaded.size(); ++i) out.push_back(runs[from[i]]);
  return out;
}

double add_percentiles(Json& row, RunMetric m,
                       const std::vector<const reports::StepReport*>& runs) {
  std::vector<double> v;
  for (const auto* r : runs) v.push_back(r->*m.field);
  for (const auto& [q, tag] : {std::pair{0.1, "_p10"}, {0.5, "_p50"}, {0.9, "_p90"}})
    row[std::string(m.key) + tag] = reports::percentile(v, q);
  return reports::percentile(v, 0.5);
}

}  // namespace twin::scenarios
