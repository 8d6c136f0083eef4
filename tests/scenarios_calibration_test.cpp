// Tier 4: the engine's kernel classes against the SM-contention curves measured on our H200 by
// twin-calibrate (hardware/profiles/h200-measured.json, "measurements.contention"): a kernel
// whose time alone is T runs beside a holder of k SMs that lasts 3T; the engine replays each
// experiment and its slowdown is compared with the measured one.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>

#include "hardware/collective.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"
#include "model/data.hpp"
#include "scenarios/loader.hpp"
#include "scenarios/simulate.hpp"

using namespace twin;

namespace {

// One H200 as on our GPU machine: HBM and the host link (PCIe) bandwidths given.
hardware::Profile one_h200(double hbm_GBps, double host_GBps) {
  hardware::Profile p;
  p.gpu = {132, 228, 139, hbm_GBps, 989, 1979, 0};
  p.host = {16, 120, 200, 1, 50};
  p.node = {1, host_GBps, host_GBps, 450, 450, 47};
  p.network = {1, 1, 1};
  p.nccl = {47, 12, 8, 5, 6, 2.5};
  return p;
}

double engine_slowdown(hardware::KernelClass cls, int held) {
  const hardware::Profile p = one_h200(4000, 55);
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  hardware::Cluster c(e, f, p, 1, {});
  if (held > 0) {
    c.gpu(0).request(held, hardware::Gpu::Holder::nccl, [](int) {});
    e.at(sim::Time::s(3), [&c, held] { c.gpu(0).release(held, hardware::Gpu::Holder::nccl); });
  }
  auto& t = g.add("kernel");
  hardware::run_kernel(t, c, 0, {1.0, 0, cls});
  g.start();
  e.run();
  return t.end_time().to_s();
}

}  // namespace

TEST_CASE(
    "FlexAttention priced by its mask blocks: the flex profile against the measured layouts") {
  // calibrate/attention_bench.py --lead-us 1000 on our H200
  // (reports/calibration/gemm-alone/h200-2026-12-06-attention.json, the host's enqueue hidden):
  // FlexAttention forward and backward at EUROPA's attention shape over documents of 512 … 65,536
  // tokens, with and without a 128-token window. The profile's block fractions and query-block
  // times were fitted on all 20 layouts (worst 6.0% / 7.1%; 9.8% / 7.0% on the sweep of
  // 2026-11-29, which timed the enqueue of its short forward calls); the 16 of equal documents
  // are re-priced here through the twin's own block count and cost (forward worst 6.6%).
  const auto root = std::filesystem::path(TWIN_SOURCE_DIR);
  const auto loaded = scenarios::load_scenario(root / "scenarios/micro-step.json", {root, {}});
  const hardware::KernelCost cost(loaded.scenario.hw);
  REQUIRE(cost.block_attention());
  const auto raw = scenarios::read_json_file(
      root / "reports/calibration/gemm-alone/h200-2026-12-06-attention.json");
  const double block_flops = 2.0 * 64 * (192 + 128) * 128 * 128, heads = 64;
  int n = 0;
  for (const auto& r : raw["rows"]) {
    const std::string layout = r["layout"];
    if (r["backend"] != "flex" || layout.rfind("docs_", 0) != 0) continue;
    const std::int64_t tokens = r["tokens"], doc = std::stoll(layout.substr(5));
    const double blocks =
        model::mask_blocks(std::vector<std::int64_t>(tokens / doc, doc), r["window"], 128);
    for (const bool bwd : {false, true}) {
      const double t = cost.block_attention_s(
          twin::sim::Flops{block_flops * blocks * (bwd ? 2.5 : 1)}, tokens / 128.0 * heads, bwd);
      const double measured = r[bwd ? "bwd_ms" : "fwd_ms"].get<double>() * 1e-3;
      CAPTURE(layout);
      CAPTURE(tokens);
      CAPTURE(bwd);
      CHECK(std::abs(t / measured - 1) <= (bwd ? 0.072 : 0.07));
      ++n;
    }
  }
  CHECK(n == 32);
}

TEST_CASE("engine kernel classes reproduce the measured SM-contention curves") {
  const auto j = scenarios::read_json_file(std::filesystem::path(TWIN_SOURCE_DIR) /
                                           "hardware/profiles/h200-measured.json");
  const auto& rows = j["measurements"]["contention"];
  REQUIRE(rows.size() >= 9);
  double worst_persistent = 0, worst_grid = 0;
  // TWIN_CALIBRATION_TABLE=1 prints the comparison as a Markdown table (reports/calibration/).
  const bool table = std::getenv("TWIN_CALIBRATION_TABLE") != nullptr;
  if (table)
    fmt::print(
        "| kernel | SMs held | measured slowdown | engine | error |\n|---|---:|---:|---:|---:|\n");
  for (const auto& r : rows) {
    const std::string k = r["kernel"];
    const int held = r["held_sms"];
    // The measured time with nothing held is the reference (it includes the holder's launch).
    double base = 0;
    for (const auto& q : rows)
      if (q["kernel"] == k && q["held_sms"] == 0) base = q["median_ms"];
    const double measured = r["median_ms"].get<double>() / base;
    const auto cls = k == "grouped_static"    ? hardware::KernelClass::persistent_static
                     : k == "grouped_dynamic" ? hardware::KernelClass::persistent_dynamic
                                              : hardware::KernelClass::grid;
    const double model = engine_slowdown(cls, held);
    const double err = std::abs(model - measured) / measured;
    if (table)
      fmt::print("| {} | {} | {:.3f} | {:.3f} | {:+.1f}% |\n", k, held, measured, model,
                 100 * (model - measured) / measured);
    CAPTURE(k);
    CAPTURE(held);
    CAPTURE(measured);
    CAPTURE(model);
    if (cls == hardware::KernelClass::grid) {
      // cuBLAS on Hopper launches about one wave of CTAs, so a few held SMs cost more than
      // their share (measured ×1.22 at 8 SMs against the grid model's ×1.06): a known gap.
      CHECK(err <= 0.20);
      worst_grid = std::max(worst_grid, err);
    } else {
      CHECK(err <= 0.05);
      worst_persistent = std::max(worst_persistent, err);
    }
  }
  MESSAGE(fmt::format("worst error: persistent classes {:.1f}%, grid (cuBLAS) {:.1f}%",
                      100 * worst_persistent, 100 * worst_grid));
}

namespace {

// The engine's time for one collective of `bytes` over GPUs 0 … gpus−1 of one node of `hw`.
double engine_collective_ms(const hardware::Profile& hw, hardware::CollKind kind, double bytes,
                            int max_ctas, int gpus = 2) {
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  hardware::Cluster c(e, f, hw, static_cast<int>(hw.node.gpus));
  // NCCL's own channels on this machine (from the run's log): 24 collective, 32 p2p.
  const int def = kind == hardware::CollKind::all_to_all ? 32 : 24;
  std::vector<sim::Task*> ts;
  std::vector<int> ranks;
  for (int r = 0; r < gpus; ++r) ts.push_back(&g.add("c")), ranks.push_back(r);
  const int ctas = hardware::channels(kind, def, {max_ctas, {}}, static_cast<int>(hw.gpu.sm_count));
  hardware::run_collective(ts, c, {kind, ranks, bytes, ctas});
  g.start();
  e.run();
  return ts[0]->end_time().to_s() * 1e3;
}

// One NCCL measurement of twin-calibrate beside the engine's time for it.
struct CollectivePoint {
  std::string name;
  int max_ctas;
  double bytes, measured_ms, engine_ms, err;
};

// Every point of a twin-calibrate NCCL table below `max_bytes`, replayed by the engine on `gpus`
// GPUs of one node of the h200-measured profile. TWIN_CALIBRATION_TABLE=1 prints them as the
// Markdown tables of reports/calibration/.
std::vector<CollectivePoint> engine_vs_nccl(const scenarios::Json& rows, int gpus,
                                            double max_bytes) {
  const auto root = std::filesystem::path(TWIN_SOURCE_DIR);
  const auto loaded = scenarios::load_scenario(root / "scenarios/europa.json",
                                               {root, {"hardware.profile=h200-measured"}});
  const auto& hw = loaded.scenario.hw;
  const bool table = std::getenv("TWIN_CALIBRATION_TABLE") != nullptr;
  if (table)
    fmt::print(
        "| collective | maxCTAs | bytes | measured ms | engine ms | error "
        "|\n|---|---:|---:|---:|---:|---:|\n");
  std::vector<CollectivePoint> out;
  for (const auto& r : rows) {
    const double bytes = r["bytes"];
    if (bytes >= max_bytes) continue;
    const std::string name = r["collective"];
    const auto kind = hardware::coll_kind_named(name).value();
    const int ctas = r["max_ctas"];
    const double measured = r["median_ms"],
                 model = engine_collective_ms(hw, kind, bytes, ctas, gpus);
    out.push_back({name, ctas, bytes, measured, model, (model - measured) / measured});
    if (table)
      fmt::print("| {} | {} | {} | {:.3f} | {:.3f} | {:+.1f}% |\n", name, ctas,
                 static_cast<long long>(bytes), measured, model, 100 * out.back().err);
  }
  return out;
}

}  // namespace

TEST_CASE("engine collectives against NCCL measured on 2 H200 (sizes not used for fitting)") {
  const auto j = scenarios::read_json_file(std::filesystem::path(TWIN_SOURCE_DIR) /
                                           "hardware/profiles/h200-measured.json");
  const auto& rows = j["measurements"]["nccl"]["results"];
  REQUIRE(rows.size() >= 100);
  double worst = 0;
  // The 4 GiB points were used for the fit: left out.
  for (const auto& p : engine_vs_nccl(rows, 2, 4294967296.0)) {
    CAPTURE(p.name);
    CAPTURE(p.bytes);
    CAPTURE(p.max_ctas);
    // Bandwidth regime (1 GiB): within 30% — the engine has one per-CTA rate for every kind of
    // collective, while NCCL's all-reduce moves ~1.3× and its send/recv ~0.9× the all-gather's
    // per CTA. Smaller messages carry pipeline start-up the latency model lacks (256 MiB: up to
    // −31%) and a host synchronisation in the measurement: reported, not asserted.
    if (p.bytes >= 1073741824.0) {
      CHECK(std::abs(p.err) <= 0.30);
      worst = std::max(worst, std::abs(p.err));
    }
  }
  MESSAGE(fmt::format("worst error at 1 GiB: {:.1f}%", 100 * worst));
}

TEST_CASE("engine collectives against NCCL measured on 4 H200 (no point used for fitting)") {
  // twin-calibrate --only nccl on nvidia-h200-x4 (NVSwitch, every pair NV18, NCCL 2.28.3; NCCL
  // launched at most 24 collective / 32 p2p channels, as on 2 GPUs), 2026-11-29:
  // reports/calibration/h200x4-2026-11-29-nccl.json. The engine's per-CTA rate and NVLink
  // bandwidth were fitted on 2 GPUs; on 4 every point is a prediction.
  const auto j = scenarios::read_json_file(std::filesystem::path(TWIN_SOURCE_DIR) /
                                           "reports/calibration/h200x4-2026-11-29-nccl.json");
  REQUIRE(j["measurements"]["nccl"]["gpus"] == 4);
  const auto& rows = j["measurements"]["nccl"]["results"];
  REQUIRE(rows.size() >= 100);
  double worst = 0;
  for (const auto& p : engine_vs_nccl(rows, 4, std::numeric_limits<double>::infinity())) {
    CAPTURE(p.name);
    CAPTURE(p.bytes);
    CAPTURE(p.max_ctas);
    // ≥ 1 GiB: NVLink-bound (≥ 24 CTAs) within 15%. With fewer CTAs the engine's one per-CTA
    // rate (fitted on 2 GPUs) is slow: on 4 GPUs NCCL moves 1.2× (all-gather, all-to-all) to
    // 1.55× (reduce-scatter, all-reduce) of it per CTA — within 60%, a budget, not a fit.
    if (p.bytes >= 1073741824.0) {
      CHECK(std::abs(p.err) <= (p.max_ctas >= 24 ? 0.15 : 0.60));
      if (p.max_ctas >= 24) worst = std::max(worst, std::abs(p.err));
    }
  }
  MESSAGE(fmt::format("4 GPUs: worst error at >= 1 GiB and >= 24 CTAs: {:.1f}%", 100 * worst));
}

TEST_CASE("a host copy beside a long GEMM: engine against the H200 measurement") {
  // twin-calibrate --only copy_gemm on our H200 (reports/calibration/
  // h200-2026-11-29-copy-beside-gemm.json): 30 cuBLAS GEMMs of 8192³ (48.6 ms) on one stream,
  // 1 GiB pinned copies on another. Measured: the copy keeps ≥ 98% of its bandwidth, the GEMMs
  // ≥ 99% of their speed. The engine shares HBM between them (hardware/ops.hpp): 55 GB/s of copy
  // and ~250 GB/s of GEMM traffic are far from 4 TB/s, so it predicts no slowdown either.
  const auto j =
      scenarios::read_json_file(std::filesystem::path(TWIN_SOURCE_DIR) /
                                "reports/calibration/h200-2026-11-29-copy-beside-gemm.json");
  const auto& m = j["measurements"]["copy_beside_gemm"];
  const double gemm_ms = m["gemm"]["alone_ms"];
  for (const char* dir : {"h2d_pinned", "d2h_pinned"}) {
    CAPTURE(dir);
    const auto& r = m[dir];
    const hardware::Profile p = one_h200(4200, r["alone_GBps"].get<double>());
    sim::Engine e;
    sim::Fluid f(e);
    sim::TaskGraph g(e);
    hardware::Cluster c(e, f, p, 1, {});
    auto& gemm = g.add("gemm");
    const double traffic = 30 * 3 * 8192.0 * 8192 * 2;  // A, B read and C written per GEMM
    hardware::run_kernel(gemm, c, 0, {gemm_ms * 1e-3, traffic, hardware::KernelClass::grid});
    const double bytes = r["bytes"].get<double>() * r["copies"].get<double>();
    auto& copy = g.add("copy");
    hardware::run_copy(
        copy, c, 0,
        std::string(dir) == "h2d_pinned" ? hardware::CopyDir::h2d : hardware::CopyDir::d2h, bytes);
    g.start();
    e.run();
    const double copy_ratio = bytes / copy.end_time().to_s() / 1e9 / r["alone_GBps"].get<double>();
    const double gemm_ratio = gemm.end_time().to_s() * 1e3 / gemm_ms;
    CHECK(copy_ratio ==
          doctest::Approx(r["beside_gemm_GBps"].get<double>() / r["alone_GBps"].get<double>())
              .epsilon(0.03));
    CHECK(gemm_ratio == doctest::Approx(r["gemm_slowdown"].get<double>()).epsilon(0.02));
  }
}
