// Tier 4: the SM-contention model against the curves measured on our H200, with the residual
// budgets of issue #15 where they are met and the known gaps where not (README, Calibration).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <regex>
#include <set>

#include "calibrate/contention_data.hpp"
#include "calibrate/contention_fit.hpp"
#include "calibrate/gemm_fit.hpp"
#include "calibrate/launch_records.hpp"
#include "calibrate/split_k_reduce.hpp"
#include "hardware/kernel_shapes.hpp"
#include "hardware/profile.hpp"
#include "tests/calibrate_rig.hpp"

using namespace twin;
using twin::test::kRoot;
using twin::test::profile_model;

namespace {

std::vector<calibrate::ContentionCase> measured() {
  const auto dir = kRoot / "reports/calibration/contention";
  return calibrate::read_contention_cases({(dir / "h200-2026-11-30-contention-a.json").string(),
                                           (dir / "h200-2026-11-30-contention-b.json").string(),
                                           (dir / "h200-2026-12-01-contention-c.json").string()});
}

// The SM clocks measured beside the holders (contention_bench.py --clock).
std::map<std::string, double> clock_gains() {
  const auto dir = kRoot / "reports/calibration/contention";
  return calibrate::measured_clock_gains({(dir / "h200-2026-12-01-contention-d.json").string(),
                                          (dir / "h200-2026-12-01-contention-e.json").string(),
                                          (dir / "h200-2026-12-01-contention-f.json").string()});
}

hardware::ContentionModel fit_base() {
  const auto dir = kRoot / "reports/calibration/contention";
  return calibrate::fit_base(
      {(kRoot / "reports/calibration/clusters/h200-2026-12-01-clusters.json").string(),
       {(dir / "h200-2026-12-04-contention-y.json").string(),
        (dir / "h200-2026-12-04-contention-lone-wide.json").string(),
        (dir / "h200-2026-12-05-contention-lone-more.json").string()},
       {(dir / "h200-2026-12-03-contention-s.json").string()},
       {(dir / "h200-2026-12-03-contention-p.json").string()}});
}

}  // namespace

TEST_CASE("the H200 profile's contention section is the fit of the committed measurements") {
  const auto cases = measured();
  const auto fit = calibrate::fit_contention(cases, fit_base(), clock_gains());
  const auto prof = profile_model("h200");
  CHECK(prof.cluster_held_sms == fit.cluster_held_sms);
  for (int t = 0; t < 4; ++t) CHECK(prof.cluster_usable_sms[t] == fit.cluster_usable_sms[t]);
  CHECK(prof.lone_cta.setup_us == doctest::Approx(fit.lone_cta.setup_us).epsilon(0.01));
  CHECK(prof.lone_cta.stream_GBps == doctest::Approx(fit.lone_cta.stream_GBps).epsilon(0.01));
  CHECK(prof.lone_cta.TMACps == doctest::Approx(fit.lone_cta.TMACps).epsilon(0.01));
  CHECK(prof.split_k_reduce.setup_us == doctest::Approx(fit.split_k_reduce.setup_us).epsilon(0.01));
  CHECK(prof.split_k_reduce.GBps == doctest::Approx(fit.split_k_reduce.GBps).epsilon(0.01));
  // The reduction's waves beside held SMs, fitted on file reduce's 2,048-column GEMMs.
  const auto reduce =
      (kRoot / "reports/calibration/contention/h200-2026-12-05-contention-reduce.json").string();
  const auto rows = calibrate::split_k_beside(reduce);
  REQUIRE(std::count_if(rows.begin(), rows.end(),
                        [](const calibrate::SplitKBeside& r) { return r.shape_n == 2048; }) == 48);
  const auto [beta, fixed_us] = calibrate::fit_split_k_waves(reduce, 2048, fit);
  CHECK(prof.split_k_reduce.lone_block == doctest::Approx(beta));
  CHECK(prof.split_k_reduce.fixed_us == doctest::Approx(fixed_us));
  for (int i = 0; i < hardware::kFamilies; ++i) {
    CAPTURE(hardware::family_name(static_cast<hardware::Family>(i)));
    CHECK(prof.family[i].boost_max == doctest::Approx(fit.family[i].boost_max).epsilon(0.01));
    CHECK(prof.family[i].gpc_queue == doctest::Approx(fit.family[i].gpc_queue).epsilon(0.01));
    CHECK(prof.family[i].sat_sms == doctest::Approx(fit.family[i].sat_sms).epsilon(0.01));
    CHECK(prof.family[i].knee == fit.family[i].knee);
    CHECK(prof.family[i].lone_block == fit.family[i].lone_block);
    CHECK(prof.family[i].fixed_us == fit.family[i].fixed_us);
    CHECK(prof.family[i].block.threads == fit.family[i].block.threads);
    CHECK(prof.family[i].block.registers == fit.family[i].block.registers);
  }
}

TEST_CASE("measured clocks: elementwise kernels keep their top clock, compute kernels gain some") {
  // Mechanism 2 (hardware/contention.hpp) is a power-capped clock: true of GEMMs and attention
  // (1,342–1,850 MHz alone, ~1,812 MHz with 56–112 SMs held), not of elementwise kernels, which
  // run at 1,960–1,980 MHz whatever is held — their per-SM gain is memory-side.
  const auto gains = clock_gains();
  for (const auto& [group, gain] : gains) {
    CAPTURE(group);
    if (group.rfind("ew_", 0) == 0 || group == "elementwise" || group == "copy_engine")
      CHECK(gain == doctest::Approx(1.0).epsilon(0.02));
  }
  for (const char* g : {"gemm", "gemm_fp8", "grouped_gemm", "attention", "attention_bwd"}) {
    CAPTURE(g);
    REQUIRE(gains.count(g) == 1);
    CHECK(gains.at(g) > 1.04);
    CHECK(gains.at(g) < 1.3);
  }
  // The profile's compute families take them as b_max rather than fitting it.
  const auto prof = profile_model("h200");
  CHECK(prof.of(hardware::Family::grouped_gemm).boost_max ==
        doctest::Approx(gains.at("grouped_gemm")));
  CHECK(prof.of(hardware::Family::gemm).boost_max == doctest::Approx(gains.at("gemm")));
}

TEST_CASE("a measurement file without clock readings is refused by name") {
  const auto file =
      (kRoot / "reports/calibration/contention/h200-2026-11-30-contention-a.json").string();
  CHECK_THROWS_WITH(calibrate::measured_clock_gains({file}),
                    doctest::Contains("h200-2026-11-30-contention-a.json"));
}

TEST_CASE("the measured profile keeps the raw curves the fit reads") {
  // calibrate/contention_tables.py copies them into h200-measured.json (issue #15): every point
  // of every fitted case is there, with its slowdown.
  std::ifstream in(kRoot / "hardware/profiles/h200-measured.json");
  const auto j = nlohmann::json::parse(
      in)["measurements"]["contention_curves"];  // keys sorted, as the fit names cases
  std::map<std::string, std::map<int, double>> kept;
  for (const auto& c : j["cases"]) {
    std::string name = c["kernel"].get<std::string>() + "[";
    bool first = true;
    for (const auto& [k, v] : c["shape"].items())
      name += (first ? "" : ",") + k + "=" + v.dump(), first = false;
    for (std::size_t i = 0; i < c["held_sms"].size(); ++i)
      kept[name + "]"][c["held_sms"][i].get<int>()] = c["slowdown"][i].get<double>();
  }
  int points = 0;
  for (const auto& c : measured())
    for (const auto& p : c.points) {
      CAPTURE(c.name);
      CAPTURE(p.held);
      REQUIRE(kept[c.name].count(p.held) == 1);
      CHECK(kept[c.name][p.held] == doctest::Approx(p.measured).epsilon(1e-3));
      ++points;
    }
  CHECK(points > 1000);
}

TEST_CASE("held-out residuals of the contention model stay within their budgets") {
  const auto res = calibrate::contention_residuals(measured(), profile_model("h200"));
  // Per family: the worst (over SMs held) median over cases of |model/measured − 1| on held-out
  // points, and the worst held-out point. Issue #15 asks 10% and 15%; the families that miss it
  // are budgeted at what they reach today, so that they cannot get worse unseen.
  const std::map<std::string, std::pair<double, double>> budget = {
      {"attention", {0.10, 0.15}},      {"attention_bwd", {0.10, 0.15}},
      {"grouped_gemm", {0.10, 0.15}},   {"twin_grouped", {0.10, 0.15}},
      {"gemm_fp8", {0.10, 0.15}},       {"gemm", {0.10, 0.15}},
      {"ew_add", {0.10, 0.15}},         {"ew_gather", {0.10, 0.15}},
      {"ew_sum_fp32", {0.10, 0.15}},    {"ew_fp8_quant", {0.10, 0.15}},
      {"ew_norm", {0.10, 0.15}},        {"ew_norm_bwd", {0.10, 0.15}},
      {"ew_swiglu", {0.10, 0.15}},      {"ew_swiglu_bwd", {0.10, 0.15}},
      {"ew_loss", {0.10, 0.15}},        {"ew_loss_bwd", {0.10, 0.15}},
      {"ew_scatter_add", {0.10, 0.15}}, {"ew_widen", {0.10, 0.15}},
      {"ew_fp8_dequant", {0.10, 0.15}}};
  for (const auto& item : res.items()) {
    const std::string group = item.key();  // CAPTURE cannot take a structured binding (clang 14)
    const auto& r = item.value();
    CAPTURE(group);
    const double median = r["held_out_worst_median"], worst = r["held_out_worst"];
    MESSAGE(fmt::format("{}: held-out worst median {:.1f}%, worst point {:.1f}%", group,
                        100 * median, 100 * worst));
    REQUIRE(budget.count(group) == 1);
    CHECK(median <= budget.at(group).first);
    CHECK(worst <= budget.at(group).second);
  }
  CHECK(res.size() == budget.size());
  // cuBLAS's worst points: the largest GEMMs (65,536 rows) from 64 held on (+13–14.5%: their
  // clock alone is the lowest, contention.hpp mechanism 2). The 128-row expert down projection
  // (+15.5/16.4% with 112–124 held under one a_sat for the family) is within 9.1% since each
  // launch saturates at its tiles' load intensity (mechanism 3). o_proj at 4,096 rows (−16% with
  // 4 held on 192×192 tiles) is within 6% on nvjet's
  // 256×128 (gemm_launch's large tiles, 2026-12-03). The router at 16,384 tokens (−25% at 4–8 held
  // with the longer lists on the last CTAs) is within 4% since nvjet's pairs (ListOrder).
  // Newton–Schulz, a run of three nvjet GEMMs and five elementwise kernels per iteration, is
  // modelled as that run (its launches as recorded, each slowed as its own shape): within 15% at
  // every point (it was +59% modelled as one 1,792 × 6,144 GEMM).
  double ns = 0;
  for (const auto& p : res["gemm"]["points"])
    if (p["case"].get<std::string>().rfind("newton_schulz", 0) == 0)
      ns = std::max(ns, std::abs(p["error"].get<double>()));
  MESSAGE(fmt::format("gemm, Newton–Schulz: worst point {:.1f}%", 100 * ns));
  CHECK(ns <= 0.15);
}

TEST_CASE("Newton–Schulz is three GEMMs and five elementwise kernels per iteration") {
  // X·Xᵀ (m×m over n), A·A (m×m over m), B·X (m×n over m): 5·(4m²n + 2m³) FLOPs in all.
  const double m = 1792, n = 6144;
  double flops = 0;
  for (const auto& d : hardware::newton_schulz_gemms(n, m)) flops += 2 * d.m * d.n * d.k;
  CHECK(5 * flops == doctest::Approx(5 * (4 * m * m * n + 2 * m * m * m)));
  // The H200 profile's GEMM and elementwise costs.
  std::ifstream in(kRoot / "hardware/profiles/h200.json");
  const auto j = nlohmann::json::parse(in);
  auto hp = calibrate::gemm_profile((kRoot / "hardware/profiles/h200.json").string());
  hp.contention.family[static_cast<int>(hardware::Family::ew_add)].hbm_fraction =
      j["contention"]["ew_add"]["hbm_fraction"]["value"];
  const hardware::KernelCost cost(hp);
  const auto parts = hardware::newton_schulz_parts(cost, m, n, 16);
  REQUIRE(parts.size() == 40);
  double gemm = 0, all = 0;
  for (const auto& p : parts) (p.shape.family == hardware::Family::gemm ? gemm : all) += p.alone_s;
  all += gemm;
  // Measured on our H200 (file b, 16 matrices): the elementwise kernels are 24% of the time alone.
  MESSAGE(fmt::format("Newton–Schulz of 16 matrices: elementwise {:.0f}% of the time alone",
                      100 * (1 - gemm / all)));
  CHECK(1 - gemm / all == doctest::Approx(0.24).epsilon(0.25));
}

TEST_CASE("the blocks beside a holder are read from each file's holder and each launch") {
  // Files b and c held SMs with NCCL-sized holders (640 threads × 96 registers: 4,096
  // registers left), file a with light ones (32 threads): the FP8 dequantization's 256-thread,
  // 16-register blocks fit once beside the first and 7 times beside the second; index_add_'s
  // 128 × 32 once; a 40-register multiply not at all.
  const auto dir = kRoot / "reports/calibration/contention";
  auto beside = [&](const std::string& file, const std::string& name) {
    for (const auto& c : calibrate::read_contention_cases({(dir / file).string()}))
      if (c.name.rfind(name, 0) == 0) return static_cast<int>(c.shape.beside);
    FAIL("no case " << name << " in " << file);
    return -1;
  };
  CHECK(beside("h200-2026-12-01-contention-c.json", "fp8_block_dequantize") == 1);
  CHECK(beside("h200-2026-11-30-contention-a.json", "fp8_block_dequantize") == 7);
  CHECK(beside("h200-2026-12-01-contention-c.json", "unpermute_index_add") == 1);
  CHECK(beside("h200-2026-12-01-contention-c.json", "mul[") == 0);
}

namespace {
// A measurement file's cases (those of at least min_alone_s alone), every point held out: what
// the profile's model predicts of them.
std::vector<calibrate::ContentionCase> all_held_out(const std::string& name,
                                                    double min_alone_s = 0) {
  auto cases = calibrate::read_contention_cases(
      {(kRoot / "reports/calibration/contention" / name).string()});
  std::erase_if(cases, [&](const auto& c) { return c.alone_s < min_alone_s; });
  for (auto& c : cases)
    for (auto& p : c.points) p.fitted = false;
  return cases;
}

// The profile's residuals on a file of kernels kept busy: with each family's clock gain, then
// with each case's own (its measured clocks).
std::pair<nlohmann::json, nlohmann::json> busy_residuals(const std::string& name,
                                                         double min_alone_s,
                                                         std::size_t expect_cases) {
  auto cases = all_held_out(name, min_alone_s);
  REQUIRE(cases.size() == expect_cases);
  const auto model = profile_model("h200");
  auto family = calibrate::contention_residuals(cases, model);
  calibrate::apply_case_clock_gains(cases,
                                    {(kRoot / "reports/calibration/contention" / name).string()});
  return {std::move(family), calibrate::contention_residuals(cases, model)};
}
}  // namespace

TEST_CASE(
    "the fitted model predicts curves beside NCCL Simple-sized holders it was not fitted to") {
  // File g (2026-12-01): five elementwise kernels beside holders of 544 threads × 96 registers,
  // the NCCL CTA of the Simple protocol, where the fit saw 640-thread ones. Every point is
  // held out: a prediction of the profile's model, occupancy beside the holder included.
  const auto cases = all_held_out("h200-2026-12-01-contention-g.json");
  REQUIRE(cases.size() == 13);
  const auto res = calibrate::contention_residuals(cases, profile_model("h200"));
  for (const auto& item : res.items()) {
    const auto& r = item.value();
    const double median = r["held_out_worst_median"], worst = r["held_out_worst"];
    MESSAGE(fmt::format("{} beside 544-thread holders: worst median {:.1f}%, worst point {:.1f}%",
                        item.key(), 100 * median, 100 * worst));
    CHECK(median <= 0.10);
    CHECK(worst <= 0.15);
  }
}

TEST_CASE(
    "in a busy GPU's power state the model predicts the curves from each kernel's clock alone") {
  // File h (2026-12-01): cuBLAS and FP8 GEMMs run back to back for 300 ms before every point
  // (--sustain-ms): alone they run at 1,185–1,477 MHz where the isolated files saw 1,342–1,716,
  // and with 56–112 SMs held at ~1,800 MHz either way. Given each case's own clock gain (its
  // measured clocks), the profile's model predicts the busy curves; with the family's gain (the
  // isolated median) it overestimates them. Kernels under 0.3 ms are left out: 300 ms of them
  // back to back is bound by the host's launches, not a busy GPU.
  const auto [family_gain, own_gain] =
      busy_residuals("h200-2026-12-01-contention-h.json", 3e-4, 11);
  for (const std::string g : {"gemm", "gemm_fp8"}) {
    const double own = own_gain[g]["held_out_worst_median"],
                 fam = family_gain[g]["held_out_worst_median"];
    MESSAGE(fmt::format(
        "{} kept busy: worst median {:.1f}% with its own clock, {:.1f}% with the family's; "
        "worst point {:.1f}%",
        g, 100 * own, 100 * fam, 100 * own_gain[g]["held_out_worst"].get<double>()));
    CHECK(own <= 0.10);
    CHECK(fam > 1.5 * own);  // cuBLAS 7.3% against 12.3%, FP8 4.8% against 15.2%
  }
  // The worst busy point is nvjet's o_proj at 4,096 tokens with 8 held (its scheduling, as in
  // the isolated files).
  CHECK(own_gain["gemm"]["held_out_worst"].get<double>() <= 0.20);
  CHECK(own_gain["gemm_fp8"]["held_out_worst"].get<double>() <= 0.15);
}

TEST_CASE("kept busy, attention slows as its clock alone says; grouped GEMMs hardly throttle") {
  // File i (2026-12-01): cuDNN SDPA and torch._grouped_mm kept busy as in file h. Attention runs
  // alone at 1,500–1,624 MHz (isolated 1,693–1,778) and its busy curves follow its own clock
  // ratio; the grouped GEMMs stay at 1,674–1,796 MHz, so their own ratio changes little.
  const auto [family_gain, own] = busy_residuals("h200-2026-12-01-contention-i.json", 0, 10);
  auto median = [](const nlohmann::json& r, const char* g) {
    return r[g]["held_out_worst_median"].get<double>();
  };
  for (const char* g : {"attention", "attention_bwd", "grouped_gemm"})
    MESSAGE(fmt::format(
        "{} kept busy: worst median {:.1f}% with its own clock, {:.1f}% with the family's", g,
        100 * median(own, g), 100 * median(family_gain, g)));
  CHECK(median(own, "attention") <= 0.10);
  CHECK(median(family_gain, "attention") > median(own, "attention") + 0.05);
  CHECK(median(own, "attention_bwd") <= 0.10);
  CHECK(median(own, "grouped_gemm") <= 0.12);  // the busy rounds of late CTAs, as isolated (7.8%)
}
