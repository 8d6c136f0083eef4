// Issue #15: `twin kernel` reproduces a measured point on request. Given a cuBLAS GEMM's time
// alone as measured (--alone-us), the CLI runs it in the engine beside the held SMs, as the
// calibration fit's model slows it; checked on every point of the H200's cuBLAS curves (file a,
// the fit's cuBLAS data, half of them held out) against the 15%.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "scenarios/commands.hpp"
#include "scenarios/loader.hpp"

using namespace twin::scenarios;

TEST_CASE("twin kernel --alone-us reproduces the measured cuBLAS contention curves") {
  const std::string root = TWIN_SOURCE_DIR;
  const Json doc = read_json_file(root + "/reports/calibration/contention/" +
                                  "h200-2026-11-30-contention-a.json");
  CommonArgs args;
  args.scenario = root + "/tests/golden/small.json";
  args.sets = {"hardware.profile=h200"};
  args.data_dir = root;
  args.json = true;
  int cases = 0, points = 0, blocked = 0;
  double worst = 0;
  for (const auto& c : doc["cases"]) {
    if (c["class"] != "gemm") continue;
    const auto& s = c["shape"];
    KernelArgs k;
    k.kernel = "gemm";
    k.shape = {s["m"].get<double>(), s["n"].get<double>(), s["k"].get<double>()};
    k.alone_us = c["alone_ms"].get<double>() * 1e3;
    k.held_sms.clear();
    std::vector<double> measured;
    for (const auto& p : c["points"])
      if (p["held_sms"].get<int>() > 0 && p["slowdown"].is_number())
        k.held_sms.push_back(p["held_sms"]), measured.push_back(p["slowdown"]);
    std::ostringstream out;
    REQUIRE(cmd_kernel(args, k, out) == 0);
    const Json twin = Json::parse(out.str());
    CHECK(twin["alone_ms"].get<double>() == doctest::Approx(c["alone_ms"].get<double>()));
    REQUIRE(twin["points"].size() == measured.size());
    double most = 0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const auto& p = twin["points"][i];
      CAPTURE(s.dump());
      CAPTURE(p.dump());
      most = std::max(most, measured[i]);
      // No cluster can start beside the held SMs: the kernel ran after the holders gave up, so
      // the measured "slowdown" collapses (the fit drops these points alike).
      if (p.value("blocked", false)) {
        CHECK(measured[i] < 0.6 * most);
        ++blocked;
        continue;
      }
      const double err = p["slowdown"].get<double>() / measured[i] - 1;
      CHECK(std::abs(err) <= 0.15);
      worst = std::max(worst, std::abs(err));
      ++points;
    }
    ++cases;
  }
  MESSAGE(fmt::format("{} cuBLAS cases, {} points: worst {:.1f}% ({} blocked, as measured)", cases,
                      points, 100 * worst, blocked));
  CHECK(cases == 17);
  CHECK(points > 250);
  CHECK(blocked == 8);  // the 128- and 352-row up projections (clusters of 8) from 88 held
}
