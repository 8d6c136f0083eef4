// Tier 4: the ladder against every figure SPEC.md marks (cal), with an error budget that fails
// the build. Budget: ±10% for the figures the twin is meant to predict at this stage. Figures
// the twin still misses by more are listed in `known_gaps` with a wider budget, so that they
// are visible, cannot silently get worse, and fail the test if they are fixed without the
// budget being tightened (README "Validation" explains each gap).
#include <doctest/doctest.h>

#include <cmath>
#include <map>

#include "scenarios/commands.hpp"

using namespace twin::scenarios;

TEST_CASE("ladder: published figures within their error budget") {
  LadderArgs a;
  a.data_dir = TWIN_SOURCE_DIR;
  a.jobs = 2;
  const Json rows = ladder_json(a);
  REQUIRE(rows.size() == 14);
  // (rung, metric) → budget in percent, for the figures outside ±10% today.
  const std::map<std::pair<std::string, std::string>, std::pair<double, double>> known_gaps = {
      {{"00-baseline", "breakdown_s.rank0.compute"}, {-60, -40}},
      // Rung 0's compute is half the real one's (above, issue #17), so less of its collectives'
      // time is hidden: +10.04% since cuBLAS's measured launches (2026-12-01).
      {{"00-baseline", "exposed_comm_s"}, {5, 15}},
      {{"04-muon-gpu", "optimizer_step_s"}, {10, 25}},
      {{"08-fp8-gather", "exposed_comm_s"}, {-45, -25}},
      {{"09-bf16-grad-all-to-all", "exposed_comm_s"}, {-35, -15}},
      {{"09-bf16-grad-all-to-all", "gpu_time_s.expert_grad_reduce+dense_reduce_scatter"}, {30, 50}},
      // Since the grouped GEMMs' measured tile padding and per-tile cost (2026-12-01): the twin
      // gains less from rungs 10–13 than the real job (README, Validation).
      {{"13-nccl-max-ctas", "tokens_per_s_per_gpu"}, {-15, -5}},
  };
  int checked = 0;
  for (const auto& r : rows)
    for (const auto& c : r["published"]) {
      const std::string rung = r["rung"], metric = c["metric"];
      const double err = c["error_pct"].get<double>();
      CAPTURE(rung);
      CAPTURE(metric);
      CAPTURE(err);
      if (auto it = known_gaps.find({rung, metric}); it != known_gaps.end()) {
        CHECK(err >= it->second.first);
        CHECK(err <= it->second.second);
      } else {
        CHECK(std::abs(err) <= 10.0);
      }
      ++checked;
    }
  CHECK(checked == 19);  // every figure of scenarios/ladder/published.json
}
