// Tier 4: what cuBLAS's GEMMs load and how a lone CTA runs, read off the hardware on our H200
// (Nsight Compute's counters, files n, u, v; lone CTAs, file y) against the contention model's
// load intensity and the small-row launches' reading (reports/calibration/contention/).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "calibrate/lone_cta.hpp"
#include "hardware/kernel_shapes.hpp"
#include "tests/calibrate_rig.hpp"

using namespace twin;
using namespace twin::test;  // kRoot, profile_model and the launch-record helpers

TEST_CASE(
    "a lone CTA of nvjet's small-row kernels: set-up, then k steps (files y, lone-wide, "
    "lone-more)") {
  // Files y, lone-wide (2026-12-04) and lone-more (2026-12-05): small-row GEMMs at k =
  // 1,024–8,192 with 124 SMs held (pairs: two at a time) or 112 (clusters of 4: two at a time); a
  // round there is a few lone CTAs, so its time (the launch's over its rounds, the cluster table's
  // usable SMs) against k is a lone CTA's. Split-K launches are left out (their time holds the
  // fp32 partials and cuBLASLt's reduction, charged apart). Per nvjet kernel (tile and cluster
  // shape): linear in k, a set-up of 0.9–3.3 µs (the least, 64×32 in 1×2 at 0.91 µs, from three k
  // that bend upward: rms 2% of its mean), none faster than an SM's multiply-adds (F ≤ 3.8 TMAC/s;
  // the large tiles reach 3.51–3.72), none streaming more than ~190 GB/s. File p's shapes are
  // left out (it stays held out). The profile holds every kernel's line, and the form's medians
  // for the kernels not measured (mechanism 3).
  const auto model = profile_model("h200");
  const auto dir = kRoot / "reports/calibration/contention";
  const auto tiles = calibrate::lone_cta_tiles(
      {(dir / "h200-2026-12-04-contention-y.json").string(),
       (dir / "h200-2026-12-04-contention-lone-wide.json").string(),
       (dir / "h200-2026-12-05-contention-lone-more.json").string()},
      model, calibrate::gemm_shapes({(dir / "h200-2026-12-03-contention-p.json").string()}));
  double fastest_macs = 0;
  std::map<std::string, calibrate::LoneCtaTile> by_name;
  for (const auto& t : tiles) {
    const double macs_rate = t.macs_per_k() / t.per_k_s, bytes_rate = t.bytes_per_k() / t.per_k_s;
    CAPTURE(t.name());
    MESSAGE(fmt::format(
        "{}: t_s {:.2f} µs, {:.3f} ns per k: {:.2f} TMAC/s, {:.0f} GB/s ({} rounds)", t.name(),
        t.setup_s * 1e6, t.per_k_s * 1e9, macs_rate * 1e-12, bytes_rate * 1e-9, t.points));
    CHECK(t.setup_s >= 0.8e-6);
    CHECK(t.setup_s <= 3.5e-6);
    CHECK(macs_rate <= 3.8e12);
    CHECK(bytes_rate <= 2.0e11);
    if (t.points >= 3) CHECK(t.rms_s <= 0.03 * t.mean_s);  // linear in k
    fastest_macs = std::max(fastest_macs, macs_rate);
    by_name[t.name()] = t;
  }
  CHECK(tiles.size() == 21);
  CHECK(fastest_macs >= 3.5e12);
  // One tile, two kernels: the 96×64 tile of the 192-row launches (2×1 pairs over three rows)
  // streams at ~120 GB/s; the 64×96 tile (same bytes and multiply-adds per k) at its SM's
  // multiply-add rate.
  const auto& wide = by_name.at("96x64 in 2x1");
  CHECK(wide.per_k_s >= 1.4 * by_name.at("64x96 in 2x1").per_k_s);
  const auto fit = calibrate::fit_lone_cta(tiles);
  MESSAGE(fmt::format("median: t_s {:.2f} µs, r {:.0f} GB/s, F {:.2f} TMAC/s", fit.setup_us,
                      fit.stream_GBps, fit.TMACps));
  CHECK(model.lone_cta.setup_us == doctest::Approx(fit.setup_us).epsilon(0.01));
  CHECK(model.lone_cta.stream_GBps == doctest::Approx(fit.stream_GBps).epsilon(0.01));
  CHECK(model.lone_cta.TMACps == doctest::Approx(fit.TMACps).epsilon(0.01));
  CHECK(model.lone_cta.tile_m == fit.tile_m);
  CHECK(model.lone_cta.tile_cluster_m == fit.tile_cluster_m);
  CHECK(model.lone_cta.tile_per_k_ns == fit.tile_per_k_ns);
  // A kernel of the table takes its own line; the same tile in another cluster shape the form.
  const auto& l = model.lone_cta;
  CHECK(l.seconds(96, 64, 2, 1, 4096) ==
        doctest::Approx(wide.setup_s + 4096 * wide.per_k_s).epsilon(0.01));
  const double k = 4096, bytes = 2.0 * (96 + 64) * k, macs = 96.0 * 64 * k;
  CHECK(l.seconds(96, 64, 1, 2, k) ==
        doctest::Approx(l.setup_us * 1e-6 +
                        std::max(bytes / (l.stream_GBps * 1e9), macs / (l.TMACps * 1e12))));
}

TEST_CASE("small-row launches read their operands from HBM once (files u, v)") {
  // Nsight Compute's DRAM bytes read (2026-12-04, gemm_traffic_probe.py --groups …,small_rows)
  // for the 40 cuBLAS GEMMs of at most 192 rows, with L2 kept (u, --cache-control none) and
  // flushed (v): the compulsory bytes (weights and activations, bf16) once, within 2–17%, in
  // both: no launch re-reads its weights from HBM, and none is served from L2 under ncu (its
  // replay saves and restores memory, which evicts them; README, "What file q's flush adds").
  for (const char* f : {"h200-2026-12-04-traffic-u.json", "h200-2026-12-04-traffic-v.json"}) {
    std::ifstream in(kRoot / "reports/calibration/contention" / f);
    const auto doc = nlohmann::json::parse(in);
    int checked = 0;
    for (const auto& c : doc["cases"]) {
      const auto& s = c["shape"];
      const double m = s["m"], n = s["n"], k = s["k"];
      if (m > 192) continue;
      double read = 0;
      for (const auto& l : c["launches"])
        read += l["metrics"]["dram__bytes_read.sum"]["value"].get<double>();
      CAPTURE(f);
      CAPTURE(s.dump());
      const double once = 2 * (m * k + k * n);
      CHECK(read >= 0.95 * once);
      CHECK(read <= 1.2 * once);
      ++checked;
    }
    CHECK(checked == 40);
  }
}

TEST_CASE("the load intensity's multicast count against the L2 reads measured (file n)") {
  // Nsight Compute's L2 sectors read by the SMs (lts__t_sectors_srcunit_tex_op_read: a multicast
  // read counts once) for every cuBLAS GEMM of the contention files, 2026-12-03: measured
  // intensity = multiply-adds of the padded tiles / (bytes read / 2). In clusters of 8 and in 4×1
  // clusters over one row of tiles it is the formula's to 0.1%, the multicast included (without
  // it: 32 where 51 is measured); elsewhere (pairs, 4×1 over three rows of tiles) nvjet reads
  // 9–43% less than the formula counts, never more (README, "What the GEMMs load").
  std::ifstream in(kRoot / "reports/calibration/contention/h200-2026-12-03-traffic-n.json");
  const auto doc = nlohmann::json::parse(in);
  int exact = 0, checked = 0;
  for (const auto& c : doc["cases"]) {
    const auto& big = longest(c["launches"], [](const nlohmann::json& l) {
      return l["metrics"]["gpu__time_duration.sum"]["value"].get<double>();
    });
    const std::string kernel = big["name"];
    const auto launch = nvjet_name_launch(kernel);
    const auto& s = c["shape"];
    const double rows = s["m"], cols = s["n"];
    const double padded_macs = std::ceil(rows / launch.tile_n) * launch.tile_n *
                               std::ceil(cols / launch.tile_m) * launch.tile_m *
                               s["k"].get<double>();
    const double read =
        32 * big["metrics"]["lts__t_sectors_srcunit_tex_op_read.sum"]["value"].get<double>();
    const double ratio = padded_macs / (read / 2) / hardware::load_intensity(launch);
    CAPTURE(kernel);
    CAPTURE(s.dump());
    CHECK(ratio >= 0.999);
    CHECK(ratio <= 1.8);
    if (launch.cluster == 8 || (launch.cluster == 4 && rows <= launch.tile_n)) {
      CHECK(ratio <= 1.001);
      ++exact;
    }
    ++checked;
  }
  CHECK(checked == 42);
  CHECK(exact == 9);
}

namespace {
// File z's parts (calibrate/stream_share_probe.py): "z", "z-same-slice", "z-rounds-p2", …
nlohmann::json stream_file(const std::string& part) {
  std::ifstream in(
      kRoot / ("reports/calibration/contention/h200-2026-12-04-stream-share-" + part + ".json"));
  REQUIRE(in.good());
  return nlohmann::json::parse(in);
}
}  // namespace

TEST_CASE("u streaming SMs beside held ones share HBM with a sharp knee, not as a queue (z)") {
  // File z (2026-12-04, calibrate/stream_share_probe.py): a kernel whose CTAs (one per SM) only
  // stream their own 4 MiB from HBM with cp.async, S copies of 16 bytes in flight per thread
  // (S = 1, 2, 4, 8, 12: a lone CTA's rate r0 of 42–236 GB/s), on u SMs beside 132 − u holders.
  // Mechanism 3's form (hardware/contention.hpp) with a_sat = R / r0 — the knee the elementwise
  // add family was fitted with (file c: p = 4), R the bandwidth of all 132 SMs (4.66 TB/s) —
  // gives every point; the queue that read nvjet's small-row rounds best (p = 1: each CTA at
  // r0 / (1 + u·r0 / R)) misses this kernel by up to −46%. So the chip gives u streaming SMs
  // u·r0 until close to R (README, "How u streaming SMs share HBM").
  const auto doc = stream_file("z");
  std::map<int, double> lone;  // stages → r0
  std::vector<double> all_sms;
  for (const auto& c : doc["cases"]) {
    // The holders were resident on distinct SMs and the streaming CTAs beside them, one per SM.
    CHECK(c["overlap_with_holders"] == 0);
    CHECK(c["held_distinct"] == c["held_sms"]);
    CHECK(c["distinct_sms"] == c["ctas"]);
    if (c["ctas"] == 1 && c["held_sms"] == 131) lone[c["stages"]] = c["GBps"];
    if (c["ctas"] == 132) all_sms.push_back(c["GBps"]);
  }
  REQUIRE(lone.size() == 5);
  REQUIRE(all_sms.size() == 5);
  std::sort(all_sms.begin(), all_sms.end());
  const double R = all_sms[2];
  CHECK(R >= 4400);
  CHECK(R <= 4800);  // the H200's 4.8 TB/s
  const double knee = profile_model("h200").of(hardware::Family::ew_add).knee;
  const auto predicted = [&](double u, double r0, double p) {
    const double ask = u * r0;
    return ask / std::pow(1 + std::pow(ask / R, p), 1 / p);
  };
  double worst = 0, worst_queue = 0;
  std::vector<double> misses;
  for (const auto& c : doc["cases"]) {
    if (c["held_sms"] == 0 && c["ctas"] != 132) continue;  // placed by the scheduler alone
    const double u = c["ctas"], r0 = lone[c["stages"]], y = c["GBps"];
    const double e = predicted(u, r0, knee) / y - 1;
    misses.push_back(std::abs(e));
    worst = std::max(worst, std::abs(e));
    worst_queue = std::max(worst_queue, std::abs(predicted(u, r0, 1) / y - 1));
  }
  std::sort(misses.begin(), misses.end());
  MESSAGE(fmt::format("knee {}: median {:.1f}%, worst {:.1f}%; queue: worst {:.1f}%", knee,
                      100 * misses[misses.size() / 2], 100 * worst, 100 * worst_queue));
  CHECK(misses.size() == 80);
  CHECK(misses[misses.size() / 2] <= 0.05);
  CHECK(worst <= 0.12);
  CHECK(worst_queue >= 0.4);
}

TEST_CASE("where the block scheduler alone puts a few streaming CTAs, they reach less (z)") {
  // Without holders, u ≤ 32 CTAs land on neighbouring SMs (8 CTAs: SMs 124–131) and, at the
  // deepest pipelines, reach 0.64–0.73 of what the same CTAs reach on the SMs holders leave
  // free, one per TPC: their loads share a few GPCs' ports (mechanism 2's memory side). Beside
  // holders — as beside NCCL — the free SMs are spread, so the model's reading of file z holds.
  const auto doc = stream_file("z");
  std::map<std::pair<int, int>, double> spread, packed;  // (stages, u) → GB/s
  for (const auto& c : doc["cases"]) {
    const int u = c["ctas"];
    if (u == 132) continue;
    (c["held_sms"] == 0 ? packed : spread)[{c["stages"], u}] = c["GBps"];
  }
  double lowest = 1;
  for (const auto& [key, gbps] : packed) {
    CHECK(spread.count(key) == 1);
    if (key.second >= 8 && key.second <= 32) lowest = std::min(lowest, gbps / spread[key]);
    if (key.second <= 4 || key.second >= 64) CHECK(std::abs(gbps / spread[key] - 1) <= 0.06);
  }
  CHECK(lowest <= 0.7);
}

TEST_CASE("L2 is no shared limit for streaming SMs: one slice read by u SMs scales to 132 (z)") {
  // Every CTA reads the same 4 MiB (from L2 after its first touch): a CTA's rate is its own
  // (≈ 155 GB/s at S ≥ 4), whatever the number of SMs reading beside it, up to 20 TB/s together.
  const auto doc = stream_file("z-same-slice");
  std::map<int, double> lone;
  for (const auto& c : doc["cases"])
    if (c["ctas"] == 1) lone[c["stages"]] = c["GBps"];
  double most = 0;
  for (const auto& c : doc["cases"]) {
    if (c["stages"] < 4) continue;  // S = 2: latency-bound, and faster from 112 SMs on
    CAPTURE(c["stages"].get<int>());
    CAPTURE(c["ctas"].get<int>());
    CHECK(c["cta_GBps_median"].get<double>() >= 0.9 * lone[c["stages"]]);
    most = std::max(most, c["GBps"].get<double>());
  }
  CHECK(most >= 17000);
}

TEST_CASE("a plain kernel shaped as nvjet's small-row launch gives nvjet's rounds (z, r)") {
  // 128 CTAs of 512 KiB each (nvjet's 32 × 8,192 × 4,096 streams 526 KB a CTA), a 2 µs set-up
  // before streaming and 125–130 GB/s alone (S = 8), on u free SMs: its time against u over its
  // time on 124 (two rounds) is nvjet's, measured on the usable SMs of its pairs (file r), within
  // −3…+13% at 4, 12, 18, 32, 40, 48 and 64 SMs, and −22% at 8, where nvjet's rounds are a third
  // longer than at 4 (its four pairs' placement). Reading a shared 256 KiB operand in every CTA
  // besides (nvjet's activations, as a plain cp.async from L2) makes the kernel slower than nvjet
  // by more than 10% at 7 of 8 counts — nvjet's pairs do not load their activations that way
  // (README, "How u streaming SMs share HBM").
  std::ifstream in(kRoot / "reports/calibration/contention/h200-2026-12-03-contention-r.json");
  const auto r = nlohmann::json::parse(in);
  const auto model = profile_model("h200");
  std::map<int, double> nvjet;  // usable SMs → time (the fewest held giving them)
  for (const auto& c : r["cases"]) {
    if (c["shape"]["m"] != 32 || c["shape"]["n"] != 8192) continue;
    for (const auto& p : c["points"])
      nvjet.emplace(model.usable_sms(hardware::Family::gemm, p["held_sms"], 2),
                    p["median_ms"].get<double>());
  }
  REQUIRE(nvjet.count(124) == 1);
  const auto ratios = [&](const std::string& file, int stages) {
    std::map<int, double> t, out;
    const auto doc = stream_file(file);
    for (const auto& c : doc["cases"])
      if (c["stages"] == stages) t[c["free_sms"]] = c["span_s"];
    REQUIRE(t.count(124) == 1);
    for (const auto& [u, s] : t)
      if (u != 124 && nvjet.count(u)) out[u] = s / t[124] / (nvjet[u] / nvjet[124]) - 1;
    return out;
  };
  const auto plain = ratios("z-rounds-p2", 8);
  CHECK(plain.size() == 8);
  for (const auto& [u, e] : plain) {
    CAPTURE(u);
    CHECK(std::abs(e) <= (u == 8 ? 0.25 : 0.15));
  }
  int slower = 0;
  for (const auto& [u, e] : ratios("z-rounds-p2s", 8)) slower += e > 0.1;
  CHECK(slower == 7);
}
