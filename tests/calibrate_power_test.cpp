// What the power cap does to a tensor-core kernel's time on our H200 and on H100s (calibrate/
// power_transient_probe.py, reports/calibration/grouped-gemm/README.md, "The power cap's slow
// controller", and reports/calibration/micro-step/README.md): the committed measurements must
// keep saying what the READMEs read off them.
#include <algorithm>
#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tests/calibrate_rig.hpp"

using namespace twin::test;

namespace {
// A committed file under reports/calibration/ (folder/name).
nlohmann::json calibration_file(const std::string& path) {
  std::ifstream in(kRoot / "reports/calibration" / path);
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}
nlohmann::json grouped_gemm_file(const std::string& name) {
  return calibration_file("grouped-gemm/" + name);
}

// The measured ms of every launch of a micro-step plan that `pick(task, launch)` selects, from
// a micro_step.py run of that plan (its tasks by id, their measured_launch_s in launch order).
std::vector<double> launch_ms(
    const nlohmann::json& plan, const nlohmann::json& run,
    const std::function<bool(const nlohmann::json&, const nlohmann::json&)>& pick) {
  std::map<int, const nlohmann::json*> measured;  // by task id
  for (const auto& t : run["tasks"]) measured[t["id"].get<int>()] = &t;
  std::vector<double> ms;
  for (const auto& t : plan["tasks"])
    for (std::size_t j = 0; j < t["launches"].size(); ++j)
      if (pick(t, t["launches"][j]))
        ms.push_back(1e3 *
                     (*measured.at(t["id"].get<int>()))["measured_launch_s"][j].get<double>());
  return ms;
}

double median(std::vector<double> v) {
  REQUIRE(!v.empty());
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}
}  // namespace

TEST_CASE("a tensor-core kernel's time is its fixed cycles over an SM clock the power cap sets") {
  const auto d = grouped_gemm_file("h200-2026-12-04-power-transient.json");
  double lo = 1e30, hi = 0, ms_lo = 1e30, ms_hi = 0, fma_lo = 1e30;
  double cycles_lo = 1e30, cycles_hi = 0;
  for (const auto& c : d["calls"]) {
    if (!c.contains("trace")) continue;
    std::vector<double> mhz = c["trace"]["MHz"].get<std::vector<double>>();
    const double clock = median(mhz);
    if (c["kernel"] == "fma_loop") {
      fma_lo = std::min(fma_lo, clock);
      continue;
    }
    double cycles = 0;
    for (double x : c["trace"]["cycles"].get<std::vector<double>>()) cycles += x;
    lo = std::min(lo, clock), hi = std::max(hi, clock);
    ms_lo = std::min(ms_lo, c["ms"].get<double>()), ms_hi = std::max(ms_hi, c["ms"].get<double>());
    cycles_lo = std::min(cycles_lo, cycles), cycles_hi = std::max(cycles_hi, cycles);
  }
  // The MMA loop ran at 1,271–1,815 MHz as the preceding work left the controller, in 8.9 to
  // 12.5 ms, while its SM cycles per launch stayed within 0.03%: only the clock moved.
  CHECK(hi / lo > 1.35);
  CHECK(ms_hi / ms_lo > 1.35);
  CHECK(cycles_hi / cycles_lo - 1 < 0.001);
  // The tensor-core clock never exceeds ~1,815 MHz; FMA-only work runs at the 1,980 MHz top.
  CHECK(hi < 1830);
  CHECK(fma_lo > 1970);
}

TEST_CASE("the grouped GEMM slows under sustained load and runs faster inside the micro-step") {
  const auto s = grouped_gemm_file("h200-2026-12-04-sustained.json");
  std::vector<double> steady;
  const double t0 = s["calls"][0]["end_unix_s"];
  for (const auto& c : s["calls"])
    if (c["end_unix_s"].get<double>() - t0 > 0.5) steady.push_back(c["ms"]);  // past the ramp
  const double first = s["calls"][0]["ms"], sustained = median(steady);
  // 8.5 ms at first, 9.64 ms (median) once the power cap holds the clock down.
  CHECK(sustained / first > 1.10);
  // The same up projection inside the micro-step, measured twice the same minutes: 8.1–8.5 ms.
  const auto plan = calibration_file("micro-step/plan-max-ctas-64.json");
  for (const char* run : {"a", "b"}) {
    CAPTURE(run);
    const auto m = calibration_file(std::string("micro-step/micro-step-max-ctas-64-2026-12-04") +
                                    run + ".json");
    const auto up = launch_ms(plan, m, [](const nlohmann::json& t, const nlohmann::json& l) {
      return t["name"] == "expert_up" && l["kind"] == "grouped_gemm";
    });
    REQUIRE(up.size() == 4);
    CHECK(*std::max_element(up.begin(), up.end()) < 0.9 * sustained);
  }
}

TEST_CASE("the H200 profile's GEMM calibrations are of one power state: below the cap") {
  // power_transient_probe.py --states: a long cuBLAS GEMM runs 13% slower sustained than fresh,
  // and the profile's cuBLAS time (twin-calibrate) is the fresh one.
  const auto st = grouped_gemm_file("h200-2026-12-04-states.json");
  for (const auto& r : st["rows"]) {
    if (r["kernel"] != "cublas_65536x3584x6144") continue;
    const double fresh = median(r["fresh_ms"].get<std::vector<double>>());
    const double sustained = median(r["sustained_ms"].get<std::vector<double>>());
    CHECK(sustained / fresh > 1.10);
    std::ifstream in(kRoot / "hardware/profiles/h200-measured.json");
    const auto eff = nlohmann::json::parse(in)["efficiency"];
    const double f = eff["gemm_peak_fraction"]["value"], h = eff["gemm_half_rows"]["value"];
    const double profile_ms = 2.0 * 65536 * 3584 * 6144 / (989e12 * f * 65536 / (65536 + h)) * 1e3;
    CHECK(std::abs(profile_ms / fresh - 1) < 0.05);
  }
  // The grouped GEMMs measured the same way (grouped_gemm_bench.py --fresh), and the profile
  // holds that fit.
  const auto fresh = grouped_gemm_file("h200-2026-12-04-grouped-gemm-fresh.json");
  const auto capped = grouped_gemm_file("h200-2026-12-04-grouped-gemm-sustained.json");
  REQUIRE(fresh["rows"].size() == capped["rows"].size());
  for (std::size_t i = 0; i < fresh["rows"].size(); ++i)
    if (fresh["rows"][i]["rows_per_expert"].get<int>() >= 352)
      CHECK(capped["rows"][i]["median_ms"].get<double>() /
                fresh["rows"][i]["median_ms"].get<double>() >
            1.07);
  std::ifstream in(kRoot / "hardware/profiles/h200.json");
  const auto eff = nlohmann::json::parse(in)["efficiency"];
  CHECK(eff["grouped_gemm_peak_fraction"]["value"].get<double>() ==
        doctest::Approx(fresh["fit"]["peak_fraction"].get<double>()).epsilon(1e-4));
  CHECK(eff["grouped_gemm_half_k"]["value"].get<double>() == fresh["fit"]["half_k"].get<double>());
  CHECK(eff["grouped_gemm_tile_rows"]["value"].get<double>() ==
        fresh["fit"]["tile_rows"].get<double>());
}

TEST_CASE("a long GEMM is capped only when tensor-core work fills nearly all the time") {
  // power_mix_probe.py: back to back ×1.16 of its fresh time; with a third of the time empty or
  // copying, its fresh speed; a third of bandwidth-bound work (614 W alone) costs ~6%.
  const auto d = grouped_gemm_file("h200-2026-12-04-power-mix.json");
  for (const auto& r : d["rows"]) {
    const std::string other = r["other"];
    const double x = r["slowdown"];
    CAPTURE(other);
    if (other == "none")
      CHECK(x > 1.10);
    else if (other == "bandwidth-bound kernel" && r["ratio"].get<double>() < 1)
      CHECK((x > 1.02 && x < 1.10));
    else
      CHECK(x < 1.02);
  }
}

TEST_CASE(
    "the micro-step's attention backward runs in the state the expert GEMMs before it leave") {
  // On H100s and our H200 (reports/calibration/micro-step/README.md, "What it is"): the full
  // layer's FlexAttention backward alone fresh, right behind ~60 ms of grouped GEMMs, and after
  // 1.5 s of itself (power_transient_probe.py --states); in the step; and after the GEMMs and an
  // empty gap (--recovery, two H100s and the H200).
  const auto read = [](const std::string& name) { return calibration_file("micro-step/" + name); };
  struct Card {
    std::string states, plan, step;
  };
  for (const auto& c :
       {Card{"h100-2026-12-06-states-flex-after-gemms.json", "plan-h100-max-ctas-16.json",
             "micro-step-h100-max-ctas-16-2026-12-06-traced.json"},
        Card{"h200-2026-12-06-states-flex-after-gemms.json", "plan-max-ctas-16.json",
             "micro-step-max-ctas-16-2026-12-04.json"}}) {
    CAPTURE(c.states);
    double fresh = 0, after = 0, sustained = 0;
    const auto states = read(c.states);  // named: a range-for over a temporary's member dangles
    for (const auto& r : states["rows"])
      if (r["kernel"] == "flex_full_bwd") {
        fresh = median(r["fresh_ms"].get<std::vector<double>>());
        after = median(r["after_gemms_ms"].get<std::vector<double>>());
        sustained = median(r["sustained_ms"].get<std::vector<double>>());
      }
    REQUIRE(fresh > 0);
    CHECK(sustained < fresh);     // its own steady load is the faster: not the cap's steady state
    CHECK(after / fresh > 1.15);  // 31.5 → 37.6 ms (H100), 31.6 → 38.6 (H200) behind the GEMMs
    // In the step (the plan's timed runs): slower than either state alone, as fast as behind the
    // GEMMs at most.
    const auto bwd =
        launch_ms(read(c.plan), read(c.step), [](const nlohmann::json&, const nlohmann::json& l) {
          return l["kind"] == "attention" && l["backward"].get<bool>() && !l["sliding"].get<bool>();
        });
    CHECK(bwd.size() == 1);
    for (const double ms : bwd) {
      CHECK(ms / sustained > 1.05);
      CHECK(ms < after);
    }
  }
  // The clock comes back over 30–100 ms of empty GPU.
  for (const char* name : {"h100-2026-12-06-recovery.json", "h100-2026-12-06-recovery-b.json",
                           "h200-2026-12-06-recovery.json"}) {
    CAPTURE(name);
    std::map<double, double> by_gap;
    const auto rec = read(name);
    for (const auto& r : rec["rows"])
      if (r["kernel"] == "flex_full_bwd")
        by_gap[r["gap_ms"].get<double>()] = median(r["ms"].get<std::vector<double>>());
    REQUIRE(by_gap.size() == 6);
    const double rested = by_gap.at(300);
    CHECK(by_gap.at(0) / rested > 1.10);
    CHECK(by_gap.at(30) / rested > 1.03);
    CHECK(std::abs(by_gap.at(100) / rested - 1) < 0.03);
  }
}

namespace {
// A --bursts file: the projections' own times call by call, and the FlexAttention backward's
// median ms behind N projections.
std::pair<std::vector<double>, std::map<int, double>> burst_file(const std::string& name) {
  const auto file = grouped_gemm_file(name);
  std::pair<std::vector<double>, std::map<int, double>> out;
  for (const auto& r : file["rows"]) {
    if (r.contains("burst_calls_ms")) out.first = r["burst_calls_ms"].get<std::vector<double>>();
    if (r["kernel"] == "flex_full_bwd")
      out.second[r["gemms_before"].get<int>()] = median(r["ms"].get<std::vector<double>>());
  }
  return out;
}
}  // namespace

TEST_CASE(
    "the clock falls ~26 ms into heavy load after light load, ~52 ms after an idle GPU, then "
    "overshoots") {
  // power_transient_probe.py --bursts on an H100 (grouped-gemm README, "How long heavy load
  // lasts before the clock falls") and --sustained on our H200: back to back from the fresh
  // state, the grouped up projections keep their speed for three calls and slow from the
  // fourth; on the H100 they slow most at 26–129 ms, then partly recover (the overshoot).
  const auto [h100, bwd] = burst_file("h100-2026-12-06-bursts.json");
  REQUIRE(h100.size() == 45);
  const auto sustained = grouped_gemm_file("h200-2026-12-04-sustained.json");
  std::vector<double> h200;
  for (const auto& c : sustained["calls"]) h200.push_back(c["ms"]);
  for (const std::vector<double>* calls : {&h100, &std::as_const(h200)}) {
    const double fresh = *std::max_element(calls->begin(), calls->begin() + 3);
    for (std::size_t i = 3; i < 14; ++i) CHECK((*calls)[i] > 1.05 * fresh);
  }
  const double peak = median({h100.begin() + 3, h100.begin() + 14}),
               settled = median({h100.begin() + 15, h100.begin() + 36});
  CHECK(settled < 0.96 * peak);  // 9.45 → 8.88 ms
  // A kernel behind the burst pays more the longer the burst, over its first ~60 ms, then less.
  REQUIRE(bwd.size() == 12);
  CHECK(bwd.at(7) / bwd.at(1) > 1.15);
  CHECK(bwd.at(2) < bwd.at(4));
  CHECK(bwd.at(4) < bwd.at(7));
  CHECK(bwd.at(30) < bwd.at(10));
  // After half a second of empty GPU instead, the onset comes later: six projections keep their
  // fresh speed (three after the light load), and the backward behind three runs fresh.
  const auto [calm, calm_bwd] = burst_file("h100-2026-12-06-bursts-idle-before.json");
  REQUIRE(calm.size() == 45);
  const double calm_fresh = *std::min_element(calm.begin(), calm.begin() + 6);
  for (std::size_t i = 0; i < 6; ++i) CHECK(calm[i] < 1.04 * calm_fresh);
  CHECK(calm[8] > 1.05 * calm_fresh);
  CHECK(calm_bwd.at(3) < 1.03 * calm_bwd.at(1));
  CHECK(bwd.at(3) > 1.05 * bwd.at(1));
  CHECK(calm_bwd.at(7) / calm_bwd.at(1) > 1.15);
}

TEST_CASE(
    "a grouped GEMM right behind the light kernel pays a fixed ~0.12 ms (grouped_gemm_bench)") {
  // grouped_gemm_bench.py --fresh 0.5, with and without --behind-one, on an H100 (grouped-gemm
  // README, "The controller as a model"): the fresh calibration's call right behind the
  // bandwidth-bound kernel against one behind a call of itself.
  const auto right_behind = grouped_gemm_file("h100-2026-12-06-grouped-fresh.json");
  const auto behind_one = grouped_gemm_file("h100-2026-12-06-grouped-fresh-behind-one.json");
  const auto& a = right_behind["rows"];
  const auto& b = behind_one["rows"];
  REQUIRE(a.size() == 26);
  REQUIRE(b.size() == a.size());
  for (std::size_t i = 0; i < a.size(); ++i) {
    const int rows = a[i]["rows_per_expert"];
    const double extra_ms = a[i]["median_ms"].get<double>() - b[i]["median_ms"].get<double>();
    CAPTURE(rows);
    CAPTURE(extra_ms);
    if (rows <= 2048) {
      CHECK(extra_ms > 0.05);
      CHECK(extra_ms < 0.2);
    } else {
      CHECK(std::abs(extra_ms / a[i]["median_ms"].get<double>()) < 0.02);
    }
  }
}
