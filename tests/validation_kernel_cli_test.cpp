// Issue #15: `twin kernel` reproduces a measured point on request. Given a cuBLAS GEMM's time
// alone as measured (--alone-us), the CLI runs it in the engine beside the held SMs, as the
// calibration fit's model slows it. Checked on every point of the H200's cuBLAS curves of the fit
// (file a, half of them held out) against the 15%, and on launches the fit never saw.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <sstream>

#include "scenarios/commands.hpp"
#include "scenarios/loader.hpp"

using namespace twin::scenarios;

namespace {

struct Agreement {
  int cases = 0, points = 0, blocked = 0;
  double worst = 0;  // |twin / measured − 1| over the points that ran
};

// `twin kernel` on the H200 profile, JSON out.
CommonArgs h200_args() {
  CommonArgs args;
  args.scenario = std::string(TWIN_SOURCE_DIR) + "/tests/golden/small.json";
  args.sets = {"hardware.profile=h200"};
  args.data_dir = TWIN_SOURCE_DIR;
  args.json = true;
  return args;
}

// Every cuBLAS case of a contention_bench.py file through `twin kernel --alone-us` on the H200
// profile, each point checked against `budget`; `named`: on the launch nvjet made (--nvjet,
// --grid: its longest kernel's name and grid as the file recorded them).
Agreement cli_against(const std::string& file, double budget, bool named = false) {
  const Json doc =
      read_json_file(std::string(TWIN_SOURCE_DIR) + "/reports/calibration/contention/" + file);
  const CommonArgs args = h200_args();
  Agreement a;
  for (const auto& c : doc["cases"]) {
    if (c["class"] != "gemm") continue;
    const auto& s = c["shape"];
    KernelArgs k;
    k.kernel = "gemm";
    k.shape = {s["m"].get<double>(), s["n"].get<double>(), s["k"].get<double>()};
    k.alone_us = c["alone_ms"].get<double>() * 1e3;
    if (named) {
      const Json* big = nullptr;
      for (const auto& l : c["launches"])
        if (!big || l["dur_us"].get<double>() > (*big)["dur_us"].get<double>()) big = &l;
      REQUIRE(big);
      k.nvjet = (*big)["name"];
      k.grid = 1;
      for (const auto& g : (*big)["grid"]) k.grid *= g.get<double>();
    }
    k.held_sms.clear();
    std::vector<double> measured;
    for (const auto& p : c["points"])
      if (p["held_sms"].get<int>() > 0 && p.contains("slowdown") && p["slowdown"].is_number())
        k.held_sms.push_back(p["held_sms"]), measured.push_back(p["slowdown"]);
    std::ostringstream out;
    REQUIRE(cmd_kernel(args, k, out) == 0);
    const Json twin = Json::parse(out.str());
    CHECK(twin["alone_ms"].get<double>() == doctest::Approx(c["alone_ms"].get<double>()));
    REQUIRE(twin["points"].size() == measured.size());
    double most = 0;
    for (std::size_t i = 0; i < measured.size(); ++i) {
      const auto& p = twin["points"][i];
      CAPTURE(file);
      CAPTURE(s.dump());
      CAPTURE(p.dump());
      most = std::max(most, measured[i]);
      // No cluster can start beside the held SMs: the kernel ran after the holders gave up, so
      // the measured "slowdown" collapses (the fit drops these points alike).
      if (p.value("blocked", false)) {
        CHECK(measured[i] < 0.6 * most);
        ++a.blocked;
        continue;
      }
      const double err = p["slowdown"].get<double>() / measured[i] - 1;
      CHECK(std::abs(err) <= budget);
      a.worst = std::max(a.worst, std::abs(err));
      ++a.points;
    }
    ++a.cases;
  }
  MESSAGE(fmt::format("{}: {} cuBLAS cases, {} points: worst {:.1f}% ({} blocked, as measured)",
                      file, a.cases, a.points, 100 * a.worst, a.blocked));
  return a;
}

// `twin kernel` on a GEMM of shape (m, n, k) timed `alone_us` alone, with `held` SMs held.
Json gemm_json(std::vector<double> shape, double alone_us, std::vector<int> held) {
  KernelArgs k;
  k.kernel = "gemm";
  k.shape = std::move(shape);
  k.alone_us = alone_us;
  k.held_sms = std::move(held);
  std::ostringstream out;
  REQUIRE(cmd_kernel(h200_args(), k, out) == 0);
  return Json::parse(out.str());
}

}  // namespace

TEST_CASE("twin kernel --alone-us reproduces the measured cuBLAS contention curves") {
  const auto a = cli_against("h200-2026-11-30-contention-a.json", 0.15);
  CHECK(a.cases == 17);
  CHECK(a.points > 250);
  CHECK(a.blocked == 8);  // the 128- and 352-row up projections (clusters of 8) from 88 held
}

TEST_CASE("twin kernel: small-row launches saturate where their lone CTA says (file p, held out)") {
  // The 32 small-row GEMMs of file p as the twin launches them (hardware::gemm_launch), each
  // slowed from its measured time alone: a launch of one tile per CTA saturates where its lone
  // CTA takes its share of the full round (contention.hpp, mechanism 3). Before that mechanism
  // the worst point was +110% (30% with one form for every lone CTA, 19.9% with a line per
  // measured kernel); the CLI shows why a launch saturates early.
  const auto a = cli_against("h200-2026-12-03-contention-p.json", 0.21);
  CHECK(a.cases == 32);
  // File p again on a second H200 (2026-12-06): the same launches miss (README, "File p on a
  // second H200").
  const auto again = cli_against("h200-2026-12-06-contention-p2.json", 0.24);
  CHECK(again.cases == 32);
  const Json twin = gemm_json({32, 8192, 4096}, 21.2, {4, 100});  // file p's time alone
  const auto& l = twin["launch"];
  CHECK(l["ctas"].get<double>() == 128);
  // Its kernel (64×32 in 2×1 pairs) has its own measured line: 1.41 µs + 4,096 · 1.406 ns.
  CHECK(l["lone_cta_measured"].get<bool>());
  CHECK(l["lone_cta_us"].get<double>() == doctest::Approx(7.2).epsilon(0.05));
  // Its full round is bound by what its CTAs stream: it saturates with under half of them.
  CHECK(l["sat_sms"].get<double>() < 0.5 * l["ctas"].get<double>());
  // Measured (file p): ×1.20 with 4 held, ×1.63 with 100.
  CHECK(twin["points"][0]["slowdown"].get<double>() == doctest::Approx(1.20).epsilon(0.1));
  CHECK(twin["points"][1]["slowdown"].get<double>() == doctest::Approx(1.63).epsilon(0.1));
}

TEST_CASE("twin kernel: a split-K launch's reduction runs on cuBLASLt's grid (file p, held out)") {
  // 96 × 4,096 × 4,096: nvjet's 64×96 pairs in two slices of k, then cuBLASLt's reduction, one
  // 512-thread block per 32 × 16 outputs (768), none beside an NCCL CTA. Measured (file p): ×2.15
  // with 100 SMs held, ×3.70 with 112; an elementwise grid for the reduction gave ×3.08 at 112.
  const Json twin = gemm_json({96, 4096, 4096}, 16.8, {100, 112});  // file p's time alone
  CHECK(twin["launch"]["split_k"].get<int>() == 2);
  CHECK(twin["launch"]["split_k_reduce_blocks"].get<double>() == 768);
  CHECK(twin["points"][0]["slowdown"].get<double>() == doctest::Approx(2.15).epsilon(0.1));
  CHECK(twin["points"][1]["slowdown"].get<double>() == doctest::Approx(3.70).epsilon(0.1));
}

TEST_CASE("twin kernel --nvjet prices the launch a trace names (files cluster-pad, split-k-more)") {
  // Small-row GEMMs an H100 ran on other kernels than the twin's choice (README of
  // reports/calibration/contention, "Held out on an H100"): given each launch's kernel name and
  // grid as the profiler recorded them, the CLI reproduces the model's held-out figures on the
  // launches nvjet made (test_calibrate) — the padded 2×4 clusters of 96 × 3,072 included.
  const auto pad = cli_against("h100-2026-12-05-contention-cluster-pad.json", 0.22, true);
  CHECK(pad.cases == 10);
  const auto split = cli_against("h100-2026-12-05-contention-split-k-more.json", 0.16, true);
  CHECK(split.cases == 19);
  KernelArgs k;
  k.kernel = "gemm";
  k.shape = {96, 3072, 6144};
  k.nvjet = "nvjet_sm90_tst_128x32_64x10_2x4_h_bz_NNT";
  k.alone_us = 19.0;  // file split-k-more's time alone
  k.held_sms = {16};
  std::ostringstream out;
  REQUIRE(cmd_kernel(h200_args(), k, out) == 0);
  const Json twin = Json::parse(out.str());
  CHECK(twin["launch"]["ctas"].get<double>() == 96);  // 3 rows of tiles padded to the cluster's 4
  CHECK(twin["launch"]["tiles"].get<double>() == 72);
  // Measured ×1.59: a second round of clusters (×1.00 counted without the padding).
  CHECK(twin["points"][0]["slowdown"].get<double>() == doctest::Approx(1.59).epsilon(0.1));
}
