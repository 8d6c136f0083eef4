// Tier 4: the engine's kernel classes against the SM-contention curves measured on our H200 by
// twin-calibrate (hardware/profiles/h200-measured.json, "measurements.contention"): a kernel
// whose time alone is T runs beside a holder of k SMs that lasts 3T; the engine replays each
// experiment and its slowdown is compared with the measured one.
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "hardware/collective.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"
#include "hardware/power.hpp"
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

namespace {

// The micro-step's runs (calibrate/micro_step.py on our H200 and H100s,
// reports/calibration/micro-step/): the file, the plan's setting, and the card's profile.
struct MicroStepRun {
  const char* file;
  const char* set;
  const char* profile = "";  // another card's runs: the scenario under that card's profile
};
constexpr MicroStepRun kMicroStepRuns[] = {
    {"micro-step-max-ctas-16.json", "nccl.max_ctas=16"},
    {"micro-step-default-ctas.json", "nccl.max_ctas=0"},
    {"micro-step-max-ctas-8.json", "nccl.max_ctas=8"},
    {"micro-step-max-ctas-64.json", "nccl.max_ctas=64"},
    {"micro-step-max-ctas-64-2026-12-04a.json", "nccl.max_ctas=64"},
    {"micro-step-max-ctas-64-2026-12-04b.json", "nccl.max_ctas=64"},
    {"micro-step-seq-8192.json", "training.seq_len=8192"},
    {"micro-step-seq-32768.json", "training.seq_len=32768"},
    // The same plans on 2026-12-04 (with the power cap's state known: ../grouped-gemm/).
    {"micro-step-max-ctas-16-2026-12-04.json", "nccl.max_ctas=16"},
    {"micro-step-default-ctas-2026-12-04.json", "nccl.max_ctas=0"},
    {"micro-step-max-ctas-8-2026-12-04.json", "nccl.max_ctas=8"},
    {"micro-step-seq-8192-2026-12-04.json", "training.seq_len=8192"},
    {"micro-step-seq-32768-2026-12-04.json", "training.seq_len=32768"},
    // A held-out card: the same plans under h100-sxm-flex on an H100, 2026-12-06,
    // predicted before they ran (reports/calibration/micro-step/README.md).
    {"micro-step-h100-max-ctas-16-2026-12-06.json", "nccl.max_ctas=16", "h100-sxm-flex"},
    {"micro-step-h100-default-ctas-2026-12-06.json", "nccl.max_ctas=0", "h100-sxm-flex"},
    {"micro-step-h100-max-ctas-8-2026-12-06.json", "nccl.max_ctas=8", "h100-sxm-flex"},
    {"micro-step-h100-max-ctas-64-2026-12-06.json", "nccl.max_ctas=64", "h100-sxm-flex"},
    {"micro-step-h100-seq-8192-2026-12-06.json", "training.seq_len=8192", "h100-sxm-flex"},
    {"micro-step-h100-seq-32768-2026-12-06.json", "training.seq_len=32768", "h100-sxm-flex"},
    // The first plan twice more, another H100, the same day: once traced, once with
    // nvidia-smi sampling the clock (the attention backward's power state, README).
    {"micro-step-h100-max-ctas-16-2026-12-06-traced.json", "nccl.max_ctas=16", "h100-sxm-flex"},
    {"micro-step-h100-max-ctas-16-2026-12-06-smi.json", "nccl.max_ctas=16", "h100-sxm-flex"}};

// The twin against one run: the whole step's and the compute stream end's error, and each
// category's (twin / measured − 1), with `extra` settings on top of the run's own.
struct MicroStepErrors {
  double step = 0, compute_end = 0;
  std::map<std::string, double> category;
};
MicroStepErrors micro_step_errors(const MicroStepRun& run, const std::vector<std::string>& extra) {
  const std::filesystem::path root(TWIN_SOURCE_DIR);
  const auto measured =
      scenarios::read_json_file(root / "reports/calibration/micro-step" / run.file);
  scenarios::LoadOptions lo{root, {run.set}};
  if (*run.profile) lo.sets.push_back(std::string("hardware.profile=") + run.profile);
  lo.sets.insert(lo.sets.end(), extra.begin(), extra.end());
  const auto loaded = scenarios::load_scenario(root / "scenarios/micro-step.json", lo);
  scenarios::RunOptions o;
  o.plan_rank = 0;
  const auto plan = scenarios::simulate(loaded, o).plan;
  double begin = 1e30, end = 0, compute_end = 0;
  std::map<std::string, double> twin_s;
  for (const auto& t : plan["tasks"]) {
    begin = std::min(begin, t["start_s"].get<double>());
    end = std::max(end, t["end_s"].get<double>());
    if (t["stream"] == "compute") compute_end = std::max(compute_end, t["end_s"].get<double>());
    for (const auto& l : t["launches"]) twin_s[l["category"]] += l["twin_s"].get<double>();
  }
  double m_begin = 1e30, m_compute_end = 0;
  for (const auto& t : measured["tasks"]) {
    m_begin = std::min(m_begin, t["measured_start_s"].get<double>());
    if (t["stream"] == "compute")
      m_compute_end = std::max(m_compute_end, t["measured_end_s"].get<double>());
  }
  MicroStepErrors e;
  e.step = (end - begin) / measured["step"]["measured_s"].get<double>() - 1;
  e.compute_end = (compute_end - begin) / (m_compute_end - m_begin) - 1;
  const auto& categories = measured["categories"];
  for (const auto& [cat, m] : categories.items())
    if (twin_s.count(cat)) e.category[cat] = twin_s[cat] / m["measured_s"].get<double>() - 1;
  return e;
}

std::string category_line(const MicroStepErrors& e) {
  std::string cats;
  for (const auto& [cat, err] : e.category) cats += fmt::format(" {} {:+.0f}%", cat, 100 * err);
  return cats;
}

}  // namespace

TEST_CASE("the micro-training step: twin against its real execution on our H200 (and an H100)") {
  // calibrate/micro_step.py ran rank 0's plan of scenarios/micro-step.json on our H200
  // (reports/calibration/micro-step/): real cuBLAS, grouped GEMM, FlexAttention, copies, an SM
  // kernel for elementwise work, and an SM holder of the twin's duration for each collective.
  // The twin's step now is compared with that measurement: the whole step within 10%, the
  // compute stream's end (from the first task's start) within 5% (issue #15), and per-category
  // budgets. The scenario runs its elementwise ops and expert rows as the harness does
  // (training.elementwise = stand_in, training.expert_rows = equal).
  // Issue #15 asks 15% per category. Expert GEMMs were +12–16% until the grouped GEMM was
  // calibrated below the power cap, as cuBLAS had been (reports/calibration/grouped-gemm/README.md,
  // "The power cap's slow controller"): +4–8% since. Attention −7…−16%: its kernels run behind
  // ~60 ms of expert GEMMs, whose power state slows them (FlexAttention's backward ×1.22 against
  // fresh on our H200, ×1.16–1.23 on H100s; micro-step README), which the twin does not model
  // by default (the next test turns the power model on);
  // −6…−14% until 2026-12-06, when its forward fit still carried the host's enqueue.
  const std::map<std::string, double> budget{{"attention", 0.17},   {"elementwise", 0.15},
                                             {"expert_gemm", 0.10}, {"other_gemm", 0.10},
                                             {"copy_d2h", 0.10},    {"copy_h2d", 0.10}};
  for (const auto& run : kMicroStepRuns) {
    const std::string file = run.file;
    CAPTURE(file);
    const auto e = micro_step_errors(run, {});
    MESSAGE(fmt::format("{}: whole step {:+.1f}%, compute stream end {:+.1f}%", run.file,
                        100 * e.step, 100 * e.compute_end));
    CHECK(std::abs(e.step) <= 0.10);
    CHECK(std::abs(e.compute_end) <= 0.05);
    for (const auto& entry : budget) {
      const std::string& cat = entry.first;  // CAPTURE cannot take a structured binding (clang 14)
      CAPTURE(cat);
      // The H100 machine's host copies in are slower than the H200 machine's, whose link
      // h100-sxm keeps [est]: −18…−27% (3.6 against 4.5 ms a step).
      const double b = *run.profile && cat == "copy_h2d" ? 0.30 : entry.second;
      CHECK(std::abs(e.category.at(cat)) <= b);
    }
    MESSAGE(fmt::format("{}:{}", run.file, category_line(e)));
  }
}

namespace {

// rms log error of the power controller against one card's burst files
// (calibrate/power_transient_probe.py --bursts, with and without --idle-before), as
// calibrate/fit_power.py computes it: each kernel behind N grouped up projections after half a
// second of light load or of an empty GPU, and the projections call by call; fresh times are
// the light-load file's (behind one projection; the fastest of its first three calls).
double burst_rms(const hardware::PowerModel& m, const std::string& light, const std::string& idle) {
  const std::filesystem::path dir =
      std::filesystem::path(TWIN_SOURCE_DIR) / "reports/calibration/grouped-gemm";
  const std::map<std::string, hardware::Family> family{
      {"grouped_mm_up_96x1360", hardware::Family::grouped_gemm},
      {"cublas_65536x3584x6144", hardware::Family::gemm},
      {"flex_full_fwd", hardware::Family::attention},
      {"flex_full_bwd", hardware::Family::attention_bwd}};
  auto median = [](std::vector<double> v) {
    std::sort(v.begin(), v.end());
    return v[v.size() / 2];
  };
  // Fresh times from the light-load file, for both (as fit_power.py).
  std::map<std::string, double> fresh_s;
  const auto light_file = scenarios::read_json_file(dir / light);
  for (const auto& r : light_file["rows"])
    if (r.contains("burst_calls_ms")) {
      const auto calls = r["burst_calls_ms"].get<std::vector<double>>();
      fresh_s[r["kernel"]] = *std::min_element(calls.begin(), calls.begin() + 3) * 1e-3;
    } else if (r["gemms_before"] == 1) {
      fresh_s[r["kernel"]] = median(r["ms"].get<std::vector<double>>()) * 1e-3;
    }
  double sum = 0;
  int n = 0;
  for (const auto& [name, after_idle] : {std::pair{light, false}, std::pair{idle, true}}) {
    const auto file = scenarios::read_json_file(dir / name);
    const auto& rows = file["rows"];
    const double up_s = fresh_s.at("grouped_mm_up_96x1360");
    // A sequence after half a second of the prior state: each kernel's ms.
    auto run = [&](const std::vector<hardware::Family>& seq, double last_s) {
      hardware::PowerState st(m);
      double t = after_idle ? 0.5 : st.run(0, hardware::Family::ew_add, 0.5) * 0.5;
      std::vector<double> ms;
      for (std::size_t i = 0; i < seq.size(); ++i) {
        const double a = i + 1 == seq.size() ? last_s : up_s;
        ms.push_back(st.run(t, seq[i], a) * a * 1e3);
        t += ms.back() * 1e-3;
      }
      return ms;
    };
    for (const auto& r : rows) {
      if (r.contains("burst_calls_ms")) {
        const auto calls = r["burst_calls_ms"].get<std::vector<double>>();
        const auto got = run(std::vector(calls.size(), hardware::Family::grouped_gemm), up_s);
        for (std::size_t i = 0; i < calls.size(); ++i, ++n)
          sum += std::pow(std::log(got[i] / calls[i]), 2);
      } else if (r["gemms_before"] > 0) {
        std::vector seq(r["gemms_before"].get<std::size_t>(), hardware::Family::grouped_gemm);
        seq.push_back(family.at(r["kernel"]));
        const double got = run(seq, fresh_s.at(r["kernel"])).back();
        sum += std::pow(std::log(got / median(r["ms"].get<std::vector<double>>())), 2);
        ++n;
      }
    }
  }
  CHECK(n == 156);
  return std::sqrt(sum / n);
}

}  // namespace

TEST_CASE(
    "the power controller in h100-sxm reproduces the H100 bursts it was fitted to, and another "
    "H100's") {
  // calibrate/fit_power.py fitted h100-sxm.json's `power` on the first machine's files (with
  // its recovery and states files: 4.6% over 178 points) and held it out on the second's (4.9%,
  // reports/calibration/grouped-gemm/README.md, "The controller as a model"); the engine's
  // controller (hardware/power.hpp) must give the same, tick for tick.
  const std::filesystem::path root(TWIN_SOURCE_DIR);
  const auto loaded = scenarios::load_scenario(
      root / "scenarios/micro-step.json",
      {root, {"hardware.profile=h100-sxm", "hardware.power.step_s=0.00025"}});
  const auto& m = loaded.scenario.hw.power;
  const double fitted = burst_rms(m, "h100-2026-12-06-bursts.json",
                                  "h100-2026-12-06-bursts-idle-before.json"),
               held_out = burst_rms(m, "h100-2026-12-06-bursts-b.json",
                                    "h100-2026-12-06-bursts-b-idle-before.json");
  MESSAGE(fmt::format("power controller rms log error: fitted files {:.4f}, held out {:.4f}",
                      fitted, held_out));
  CHECK(fitted <= 0.05);
  CHECK(held_out <= 0.05);
}

TEST_CASE("power_cap_s is what the controller added to rank 0's kernels") {
  // reports/metrics.hpp: the GPU time rank 0's kernels gain with the model on, against off.
  const std::filesystem::path root(TWIN_SOURCE_DIR);
  auto run = [&](const char* step_s) {
    const auto loaded =
        scenarios::load_scenario(root / "scenarios/micro-step.json",
                                 {root, {std::string("hardware.power.step_s=") + step_s}});
    const auto r = scenarios::simulate(loaded, {}).report;
    double kernels_s = 0;
    for (const char* c : {"attention", "expert_gemm", "other_gemm", "elementwise", "optimizer_gpu"})
      kernels_s += r.gpu_time(c);
    return std::pair{r.power_cap_s, kernels_s};
  };
  const auto [off_cap, off_s] = run("0");
  const auto [on_cap, on_s] = run("0.00025");
  CHECK(off_cap == 0);
  CHECK(on_cap > 0.01);
  CHECK(on_cap == doctest::Approx(on_s - off_s).epsilon(0.05));
}

TEST_CASE("the micro-training step with the power cap's controller on (hardware/power.hpp)") {
  // The controller fitted to one H100's bursts (calibrate/fit_power.py; h100-sxm.json's `power`,
  // which h200.json takes [est]), held out here on every run: the attention launches queued
  // behind the expert GEMMs slow as measured, everywhere but at 8,192 tokens, where the step's
  // runs of GEMMs are half as long and the model leaves the clock up (README: the twin's 7% short
  // on that layout alone, and ~7% more in the step that it does not explain). What it costs: the
  // GEMMs slow too, by 2–5% more than measured, which is why the model is off by default.
  const std::vector<std::string> on{"hardware.power.step_s=0.00025"};
  for (const auto& run : kMicroStepRuns) {
    const std::string file = run.file;
    CAPTURE(file);
    const auto off = micro_step_errors(run, {}), e = micro_step_errors(run, on);
    MESSAGE(
        fmt::format("{} with the power model: whole step {:+.1f}%, compute stream end "
                    "{:+.1f}%,{}",
                    run.file, 100 * e.step, 100 * e.compute_end, category_line(e)));
    const bool short_step = file.find("seq-8192") != std::string::npos;
    CHECK(std::abs(e.category.at("attention")) <= (short_step ? 0.15 : 0.10));
    if (!short_step)
      CHECK(std::abs(e.category.at("attention")) < std::abs(off.category.at("attention")));
    // Bandwidth-bound work draws under the limit and never slows: its share moves only where it
    // runs fused with slowed kernels (a fused run's time is split by each part's time).
    CHECK(std::abs(e.category.at("elementwise") - off.category.at("elementwise")) <= 0.005);
    CHECK(e.category.at("expert_gemm") >= off.category.at("expert_gemm"));
    CHECK(std::abs(e.compute_end) <= 0.07);
  }
}
