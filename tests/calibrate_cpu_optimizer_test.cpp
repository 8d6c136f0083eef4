// The CPU optimizer's passes timed on the device tool's 16-core host (file cpu-optimizer,
// 2026-12-07; calibrate/cpu_optimizer_probe.py): why the twin gives PyTorch's CPU gradient norm
// a rate of its own, on one thread (host.norm_GBps), where the clip and AdamW stream on every
// core at one rate (efficiency.cpu_stream_fraction; model/step_optimizer.cpp).
#include <doctest/doctest.h>

#include <algorithm>
#include <fstream>
#include <vector>

#include "tests/calibrate_rig.hpp"

using twin::test::kRoot;

TEST_CASE("measured: the CPU gradient norm runs on one thread, the clip and AdamW on all") {
  std::ifstream in(kRoot /
                   "reports/calibration/cpu-optimizer/cpu-optimizer-threads-2026-12-07.json");
  REQUIRE(in);
  const auto by = nlohmann::json::parse(in)["passes"]["tensor_by_threads"];
  REQUIRE(by.contains("1"));
  REQUIRE(by.contains("16"));
  std::vector<double> norm;
  for (const auto& [n, x] : by.items()) norm.push_back(x["norm_GBps"]);
  const auto [lo, hi] = std::minmax_element(norm.begin(), norm.end());
  CHECK(*hi / *lo < 1.5);  // no gain from threads: 8.4–11.4 GB/s at 1 to 16
  for (const char* pass : {"clip_GBps", "adamw_fused_GBps"}) {
    CAPTURE(pass);
    CHECK(by["16"][pass].get<double>() / by["1"][pass].get<double>() > 4);  // ×5–7
    CHECK(by["16"][pass].get<double>() > 8 * by["16"]["norm_GBps"].get<double>());
  }
}
