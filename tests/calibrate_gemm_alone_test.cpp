// A cuBLAS bf16 GEMM's time alone (hardware::KernelCost::gemm_s) against GEMMs timed alone with
// the host's enqueue hidden (calibrate/gemm_fit.hpp; reports/calibration/gemm-alone/).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <fstream>

#include "calibrate/gemm_fit.hpp"
#include "hardware/kernel_cost.hpp"
#include "tests/calibrate_rig.hpp"

using namespace twin;
using twin::test::kRoot;

namespace {

std::vector<std::string> h200_files() {
  std::ifstream in(kRoot / "reports/calibration/gemm-alone/h200-files.txt");
  std::vector<std::string> files;
  for (std::string f; in >> f;) files.push_back((kRoot / f).string());
  return files;
}

std::string profile_file(const char* name) {
  return (kRoot / "hardware/profiles" / (std::string(name) + ".json")).string();
}

// Median |error| over the points of [lo, hi) rows.
double median_abs(const std::vector<calibrate::GemmAlone>& pts, const std::vector<double>& err,
                  double lo, double hi) {
  const auto b = calibrate::gemm_band(pts, err, lo, hi);
  REQUIRE(b.points > 0);
  return b.median_abs_error;
}

}  // namespace

TEST_CASE("the GEMM fit recovers f and h from times the cost model made") {
  auto p = calibrate::gemm_profile(profile_file("h200"));
  p.efficiency.gemm_peak_fraction = 0.74, p.efficiency.gemm_half_rows = 120;
  const hardware::KernelCost cost(p);
  std::vector<calibrate::GemmAlone> pts;
  for (double m : {64.0, 256.0, 1024.0, 4096.0, 16384.0})
    for (double n : {3584.0, 6144.0}) pts.push_back({m, n, 6144, cost.gemm_s(m, n, 6144)});
  const auto both = calibrate::fit_gemm_alone(pts, p, true);
  CHECK(both.peak_fraction == doctest::Approx(0.74));
  CHECK(both.half_rows == 120);
  p.efficiency.gemm_peak_fraction = 0.74;
  CHECK(calibrate::fit_gemm_alone(pts, p, false).half_rows == 120);
  // The fixed time with h: made with 3.25 µs, fitted from the profile's other value.
  p.efficiency.gemm_fixed_us = 3.25;
  const hardware::KernelCost fixed(p);
  for (auto& g : pts) g.seconds = fixed.gemm_s(g.m, g.n, g.k);
  p.efficiency.gemm_fixed_us = 7;
  const auto t0 = calibrate::fit_gemm_alone(pts, p, false, true);
  CHECK(t0.fixed_us == 3.25);
  CHECK(t0.half_rows == 120);
  CHECK_THROWS_AS(calibrate::fit_gemm_alone(pts, p, true, true), std::invalid_argument);
}

TEST_CASE("GEMMs timed alone: bad files are refused with the file and the JSON path") {
  using nlohmann::json;
  const json no_m = {{"cases", {{{"class", "gemm"}, {"alone_ms", 0.1}, {"shape", {{"n", 8}}}}}}};
  CHECK_THROWS_WITH(calibrate::recorded_gemms_alone(no_m, "x.json"),
                    "x.json: cases[0].shape.m: expected a positive number");
  CHECK_THROWS_WITH(calibrate::recorded_gemms_alone(json::object(), "y.json"),
                    doctest::Contains("y.json: cases: expected"));
  // twin-calibrate's sweep timed with the host's enqueue is no GEMM's time alone.
  const json enqueue = {{"measurements", {{"gemm_bf16", json::array()}}}};
  CHECK_THROWS_WITH(
      calibrate::recorded_gemms_alone(enqueue, "z.json"),
      doctest::Contains("z.json: measurements.lead_us: timed with the host's enqueue"));
  const json fp8_enqueue = {{"rows", json::array()}};
  CHECK_THROWS_WITH(calibrate::recorded_gemms_alone(fp8_enqueue, "f.json"),
                    doctest::Contains("f.json: lead_us: timed with the host's enqueue"));
  const json batched = {{"cases",
                         {{{"class", "gemm"},
                           {"alone_ms", 0.1},
                           {"shape", {{"m", 8}, {"n", 8}, {"k", 8}, {"batch", 5}}}}}}};
  CHECK(calibrate::recorded_gemms_alone(batched, "b.json").empty());
  CHECK_THROWS_WITH(calibrate::gemm_profile((kRoot / "no-such-profile.json").string()),
                    doctest::Contains("no-such-profile.json: cannot open"));
}

TEST_CASE(
    "the profiles' h and fixed time are twin-fit-gemm's fit on our H200's GEMMs timed alone") {
  const auto pts = calibrate::gemms_alone(h200_files());
  REQUIRE(pts.size() == 146);
  const auto split = calibrate::alternate_shapes(pts);
  for (const char* name : {"h200", "h200-measured"}) {
    CAPTURE(name);
    const auto p = calibrate::gemm_profile(profile_file(name));
    const auto fit = calibrate::fit_gemm_alone(split.fitted, p, false, true);
    CHECK(fit.half_rows == p.efficiency.gemm_half_rows);
    CHECK(fit.fixed_us == p.efficiency.gemm_fixed_us);
  }
  // The JUPITER profile keeps the H200's h and fixed time (same Hopper cuBLAS).
  const auto j = calibrate::gemm_profile(profile_file("jupiter-gh200")).efficiency;
  const auto h = calibrate::gemm_profile(profile_file("h200")).efficiency;
  CHECK(j.gemm_half_rows == h.gemm_half_rows);
  CHECK(j.gemm_fixed_us == h.gemm_fixed_us);
}

TEST_CASE("a GEMM's time alone, fitted and held out, per band of rows (H200; an H100 held out)") {
  // Budgets: what the fit achieves (reports/calibration/gemm-alone/README.md), a little above.
  const auto pts = calibrate::gemms_alone(h200_files());
  const auto split = calibrate::alternate_shapes(pts);
  const auto p = calibrate::gemm_profile(profile_file("h200"));
  const auto held = calibrate::gemm_alone_errors(split.held_out, p);
  CHECK(median_abs(split.held_out, held, 0, 256) < 0.12);
  CHECK(median_abs(split.held_out, held, 256, 4096) < 0.07);
  CHECK(median_abs(split.held_out, held, 4096, INFINITY) < 0.04);
  // With the per-kernel 8 µs [est] as the GEMM's fixed time, h refitted (44 rows): the 256-4,095
  // band missed by 16%.
  auto per_kernel = p;
  per_kernel.efficiency.gemm_fixed_us = 0, per_kernel.efficiency.gemm_half_rows = 44;
  CHECK(median_abs(split.held_out, calibrate::gemm_alone_errors(split.held_out, per_kernel), 256,
                   4096) > 0.15);
  // Before (h = 327, from a sweep that timed the enqueue): the small-row GEMMs cost twice what
  // they measure.
  auto old = per_kernel;
  old.efficiency.gemm_half_rows = 327;
  CHECK(median_abs(pts, calibrate::gemm_alone_errors(pts, old), 0, 256) > 0.8);
  // Another GPU, nothing of it fitted: an H100's small-row launches (contention_bench.py) and
  // twin-calibrate's sweep timed with --lead-us 100, against the h100-sxm profile.
  const std::string d = (kRoot / "reports/calibration").string();
  const auto h100 =
      calibrate::gemms_alone({d + "/contention/h100-2026-12-05-contention-cluster-pad.json",
                              d + "/contention/h100-2026-12-05-contention-split-k-more.json",
                              d + "/gemm-alone/h100-2026-12-05-gemm-lead100.json"});
  const auto e =
      calibrate::gemm_alone_errors(h100, calibrate::gemm_profile(profile_file("h100-sxm")));
  CHECK(median_abs(h100, e, 0, 256) < 0.18);
  CHECK(median_abs(h100, e, 256, INFINITY) < 0.06);
  // Our H200 again (2026-12-06), twin-calibrate's own sweep of 256-16,384 rows timed with
  // --lead-us 100, after the fit and not in it: 6.0% / 4.4% median (README).
  const auto sweep = calibrate::gemms_alone({d + "/gemm-alone/h200-2026-12-06-gemm-alone.json"});
  REQUIRE(sweep.size() == 19);
  const auto s = calibrate::gemm_alone_errors(sweep, p);
  CHECK(median_abs(sweep, s, 256, 4096) < 0.07);
  CHECK(median_abs(sweep, s, 4096, INFINITY) < 0.05);
}

namespace {
// A file's FP8 GEMMs (fp8_gemm_bench.py --lead-us 100: torch._scaled_mm, 13 shapes).
std::vector<calibrate::GemmAlone> fp8_gemms(const char* file) {
  std::vector<calibrate::GemmAlone> fp8;
  for (const auto& g :
       calibrate::gemms_alone({(kRoot / "reports/calibration/gemm-alone" / file).string()}))
    if (g.fp8) fp8.push_back(g);
  return fp8;
}
}  // namespace

TEST_CASE("FP8 GEMMs timed alone, each card its own fit, and the enqueue it replaced") {
  // Each profile holds its card's fit on alternate shapes (f 0.7125, h 33 on our H200 since
  // 2026-12-06; f 0.72, h 46 on an H100): budgets a little above what each fit achieves held out.
  // The H200's 1,024-2,048-row down projections (k = 1,792) run 19% slower than one curve of rows
  // gives (reports/calibration/gemm-alone/README.md, "FP8 GEMMs").
  struct Card {
    const char* file;
    const char* profile;
    double small_rows, large_rows;  // held-out median budgets below and from 4,096 rows
  };
  for (const auto& c : {Card{"h200-2026-12-06-fp8-gemm.json", "h200-measured", 0.20, 0.06},
                        Card{"h100-2026-12-05-fp8-lead100.json", "h100-sxm", 0.15, 0.08}}) {
    CAPTURE(c.file);
    const auto fp8 = fp8_gemms(c.file);
    REQUIRE(fp8.size() == 13);
    const auto split = calibrate::alternate_shapes(fp8);
    const auto p = calibrate::gemm_profile(profile_file(c.profile));
    const auto fit = calibrate::fit_gemm_alone(split.fitted, p, true);
    CHECK(fit.peak_fraction == doctest::Approx(p.efficiency.gemm_fp8_peak_fraction));
    CHECK(fit.half_rows == p.efficiency.gemm_fp8_half_rows);
    const auto held = calibrate::gemm_alone_errors(split.held_out, p);
    CHECK(median_abs(split.held_out, held, 0, 4096) < c.small_rows);
    CHECK(median_abs(split.held_out, held, 4096, INFINITY) < c.large_rows);
    // The H200's sweep of 2026-11-29, timed with the enqueue: f 0.7025, h 1,620 rows.
    auto old = p;
    old.efficiency.gemm_fp8_peak_fraction = 0.7025, old.efficiency.gemm_fp8_half_rows = 1620;
    CHECK(median_abs(fp8, calibrate::gemm_alone_errors(fp8, old), 0, 4096) > 0.5);
  }
}
