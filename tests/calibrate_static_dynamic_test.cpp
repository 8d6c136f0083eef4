// Static against dynamic tile lists in one persistent grouped GEMM (file static-dynamic, one H100,
// 2026-12-07; calibrate/static_dynamic_probe.py): the mechanism under rung 5 (JOB.md §6.5) on a
// kernel the contention fit never saw — a Triton tensor-core grouped GEMM of 128×128 tiles, one
// block per SM, no clusters, with either scheduler — and what a dynamic scheduler gains on an
// idle GPU (reports/calibration/contention/README.md, "Static and dynamic tile lists").
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>

#include "tests/calibrate_rig.hpp"

using namespace twin;
using twin::test::kRoot;

namespace {
nlohmann::json read(const char* file) {
  std::ifstream in(kRoot / "reports/calibration/contention" / file);
  REQUIRE(in);
  return nlohmann::json::parse(in);
}
}  // namespace

// Beside 16 and 40 held SMs (every point held out), static lists lose the late blocks' whole
// lists (×1.90–2.00) and a shared counter only the held SMs' share (×1.09–1.15 at 16, ×1.36–1.43
// at 40): the model's rounds (mechanism 4) on the kernel's own grid and tile count, in a family
// that neither saturates memory nor gains clock (the kernel's dynamic lists slow by S/u, no less).
TEST_CASE("held-out kernel: a Triton persistent grouped GEMM, static and dynamic tile lists") {
  const auto fitted = twin::test::profile_model("h200");
  auto neutral = fitted;
  auto& g = neutral.family[static_cast<int>(hardware::Family::grouped_gemm)];
  g.boost_max = 1, g.sat_sms = 0;
  neutral.prepare();
  const auto d = read("h100-2026-12-07-static-dynamic.json");
  REQUIRE(d["gpu"].get<std::string>().find("H100") != std::string::npos);
  double worst = 0, fitted_low = 0, fitted_high = -1;
  int points = 0;
  for (const auto& c : d["cases"]) {
    std::map<std::pair<std::string, int>, double> ms;
    for (const auto& p : c["points"]) ms[{p["kernel"], p["held_sms"]}] = p["ms"];
    for (const bool dynamic : {false, true}) {
      hardware::KernelShape k;
      k.family = hardware::Family::grouped_gemm;
      k.schedule =
          dynamic ? hardware::Schedule::persistent_dynamic : hardware::Schedule::persistent_static;
      k.blocks = d["blocks"].get<float>();
      k.tiles = c["tiles"].get<float>();
      k.cluster = 1;
      const std::string name = dynamic ? "dynamic" : "static";
      for (const int held : {16, 40}) {
        const double measured = ms.at({name, held}) / ms.at({name, 0});
        const double alone_s = ms.at({name, 0}) * 1e-3;
        const double predicted = neutral.slowdown(k, held, alone_s);
        const double with_fit = fitted.slowdown(k, held, alone_s) / measured - 1;
        const double err = predicted / measured - 1;
        MESSAGE(
            fmt::format("{} {} rows/expert (cv {}), {} held, {}: measured ×{:.3f}, twin ×{:.3f} "
                        "({:+.1f}%; with _grouped_mm's saturation and clock {:+.1f}%)",
                        c["proj"].get<std::string>(), c["rows_per_expert"].get<int>(),
                        c["imbalance_cv"].get<double>(), held, name, measured, predicted, 100 * err,
                        100 * with_fit));
        worst = std::max(worst, std::abs(err));
        fitted_low = std::min(fitted_low, with_fit), fitted_high = std::max(fitted_high, with_fit);
        ++points;
      }
    }
  }
  MESSAGE(fmt::format("rounds alone: worst {:.1f}%; with _grouped_mm's family {:+.1f}…{:+.1f}%",
                      100 * worst, 100 * fitted_low, 100 * fitted_high));
  CHECK(points == 24);
  CHECK(worst <= 0.06);
  // The grouped family's saturation and clock gain are CUTLASS's (_grouped_mm, fitted): this
  // kernel, at 27% of its speed alone, draws neither memory nor power enough to gain from fewer
  // busy SMs (its dynamic lists slow by exactly S/u), and the family's fit predicts too little
  // slowdown at every point.
  CHECK(fitted_high < 0);
  CHECK(fitted_low > -0.21);
}

// On an idle GPU the two schedulers run the same kernel within 3% (median 1.8%): its SMs run its
// tiles at rates within 1.3% of each other (cv), so a static list ends with its SM hardly later
// than a shared counter would end it. The twin gives the two the same time alone; what the
// published idle gain (3–32% per GEMM, JOB.md §6.5) came from is not this.
TEST_CASE("an idle GPU: static lists end within 3% of dynamic ones (file static-dynamic)") {
  const auto d = read("h100-2026-12-07-static-dynamic.json");
  for (const auto& c : d["cases"]) {
    double s = 0, dy = 0, rate_cv = 0;
    for (const auto& p : c["points"]) {
      if (p["held_sms"] != 0) continue;
      if (p["kernel"] == "static") s = p["ms"], rate_cv = p["blocks"]["rate_cv"];
      if (p["kernel"] == "dynamic") dy = p["ms"];
    }
    CAPTURE(c["proj"].get<std::string>());
    CAPTURE(c["rows_per_expert"].get<int>());
    CHECK(std::abs(s / dy - 1) <= 0.03);
    CHECK(rate_cv <= 0.02);
  }
}

// torch._grouped_mm (CUTLASS's static scheduler) at the same shapes (file cta-ends-grouped): its
// last CTA ends 1.5–3.4% of the launch after the mean one (medians over three runs; 4.7% at
// most) — the most a counter could take back,
// and about one tile of a CTA's 30–230 (the lists' N mod G remainder, which the model gives both
// schedulers alike).
TEST_CASE("torch._grouped_mm's CTAs end within 5% of each other's mean on an idle GPU") {
  const auto d = read("h100-2026-12-07-cta-ends-grouped.json");
  REQUIRE(d["cases"].size() == 4);
  for (const auto& c : d["cases"]) {
    const double t = c["gemm_us"];
    for (const auto& rep : c["reps"]) {
      double sum = 0;
      for (const double e : rep["ends_us"]) sum += e;
      const double last_minus_mean = -sum / static_cast<double>(rep["ends_us"].size());
      CHECK(last_minus_mean / t >= 0.005);
      CHECK(last_minus_mean / t <= 0.05);
    }
  }
}
