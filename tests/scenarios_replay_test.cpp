// Tier 3: a real step re-simulated (issue #20, item 3) — dependencies inferred from a trace's
// timing, the step replayed by the engine on the machine it ran on and on another.
#include <doctest/doctest.h>

#include <cmath>
#include <filesystem>

#include "hardware/kernel_cost.hpp"
#include "real_traces.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/trace_replay.hpp"

using namespace twin::scenarios;
namespace fs = std::filesystem;

namespace {
const fs::path kTraces = fs::path(TWIN_SOURCE_DIR) / "tests/data/traces";

TraceActivity act(std::int64_t stream, double start_us, double dur_us, double launch_us,
                  const char* category = "elementwise") {
  TraceActivity a;
  a.name = category, a.category = category, a.stream = stream;
  a.start_us = start_us, a.dur_us = dur_us, a.launch_us = launch_us, a.ctas = 1024;
  return a;
}

Json replay_of(const char* trace, std::vector<std::string> to = {},
               std::vector<std::string> sets = {}) {
  CommonArgs args;
  args.scenario = (fs::path(TWIN_SOURCE_DIR) / "scenarios/micro-step.json").string();
  args.data_dir = TWIN_SOURCE_DIR;
  args.sets = std::move(sets);
  ReplayArgs rp;
  rp.kineto = (kTraces / trace).string();
  rp.to = std::move(to);
  return replay_json(args, rp);
}

double category_change(const Json& j, const char* cat) {
  const auto& c = j["categories"][cat];
  return c["replayed_s"].get<double>() / c["real_s"].get<double>();
}
}  // namespace

TEST_SUITE("scenarios.replay") {
  TEST_CASE(
      "dependencies from timing: stream order, a wait on another stream, the host, a front-end "
      "gap") {
    KinetoStep s;
    s.activities = {
        act(7, 0, 100, -20),     // 0: the first
        act(9, 0, 300, -15),     // 1: another stream, at once
        act(7, 100, 50, 0),      // 2: queued behind 0
        act(7, 300, 20, 5),      // 3: launched long before, starts as 1 ends: waits on 1
        act(7, 1000, 10, 988),   // 4: launched late: the host held it back (12 µs)
        act(7, 1030, 10, 989),   // 5: 20 µs after 4 with nothing ending between: front end
        act(7, 2000, 10, 990)};  // 6: 960 µs of idle time nothing explains
    const auto d = infer_dependencies(s);
    CHECK(d.stream_pred == std::vector<int>{-1, -1, 0, 2, 3, 4, 5});
    CHECK(d.waits_on == std::vector<int>{-1, -1, -1, 1, -1, -1, -1});
    CHECK(d.cross_stream == 1);
    CHECK(d.host_bound == 3);  // 4, and the first of each stream: nothing but the host before them
    CHECK(d.launch_latency_us == doctest::Approx(15));  // the median of 20, 15 and 12 µs
    CHECK(d.gap_us[5] == doctest::Approx(20));
    CHECK(d.front_end_us == doctest::Approx(20));
    CHECK(d.unexplained_us == doctest::Approx(960));
  }

  TEST_CASE("every real trace re-simulated on its own machine gives its step back within 5%") {
    for (const auto& t : twin::test::kRealTraces) {
      const std::string trace = t.file;
      CAPTURE(trace);
      const Json j = replay_of(t.file, {}, t.sets());
      const double err = j["replayed_step_s"].get<double>() / j["real_step_s"].get<double>() - 1;
      MESSAGE(trace, ": replayed step ", 100 * err, "% of the real");
      CHECK(std::abs(err) < 0.05);
      // Kernels keep their measured times: what the held SMs took is removed and given back.
      for (const char* cat : {"other_gemm", "expert_gemm", "attention", "elementwise"})
        CHECK(category_change(j, cat) == doctest::Approx(1).epsilon(0.02));
      CHECK(replay_of(t.file, {}, t.sets()).dump() ==
            j.dump());  // the same inputs, the same answer
    }
    const Json micro = replay_of("micro-step-max-ctas-16.trace.json.gz");
    CHECK(micro["dependencies"]["cross_stream"].get<int>() > 20);  // the plan's event waits, found
  }

  TEST_CASE(
      "what-ifs: fewer CTAs held speed the kernels beside them; another GPU rescales each "
      "category") {
    const Json base = replay_of("micro-step-max-ctas-16.trace.json.gz");
    const Json fewer = replay_of("micro-step-max-ctas-16.trace.json.gz", {"nccl.max_ctas=4"});
    for (const char* cat : {"other_gemm", "attention"}) {
      CAPTURE(cat);
      CHECK(fewer["categories"][cat]["replayed_s"].get<double>() <
            base["categories"][cat]["replayed_s"].get<double>());
    }
    // The MoE step holds no SMs for collectives: its GEMMs scale exactly as the cost model's
    // reference GEMM does between the two profiles.
    const Json gh = replay_of("moe-step.trace.json.gz", {"hardware.profile=jupiter-gh200"});
    CommonArgs args;
    args.data_dir = TWIN_SOURCE_DIR;
    args.sets = {"hardware.profile=jupiter-gh200"};
    const auto path = fs::path(TWIN_SOURCE_DIR) / "scenarios/micro-step.json";
    const auto h200 = load_scenario(path, {TWIN_SOURCE_DIR, {}}).scenario;
    const auto gh200 =
        load_scenario(path, {TWIN_SOURCE_DIR, {"hardware.profile=jupiter-gh200"}}).scenario;
    const double ratio = twin::hardware::KernelCost(gh200.hw).gemm_s(8192, 8192, 8192) /
                         twin::hardware::KernelCost(h200.hw).gemm_s(8192, 8192, 8192);
    CHECK(category_change(gh, "other_gemm") == doctest::Approx(ratio).epsilon(1e-6));
    CHECK(category_change(gh, "copy_h2d") ==
          doctest::Approx(h200.hw.node.host_h2d_GBps / gh200.hw.node.host_h2d_GBps));
    CHECK_THROWS_AS(replay_of("moe-step.trace.json.gz", {"nccl.no_such_key=1"}), InputError);
  }

  TEST_CASE("NCCL_MAX_CTAS from a trace, held out: one setting's step replayed at another's") {
    // The micro-step ran on our H200 at NCCL_MAX_CTAS = 64, 16 and 8 (tests/data/traces/).
    // Replayed from one trace at a lower setting, its cuBLAS GEMMs come within 2% of what the
    // trace at that setting measured, where keeping the source's times misses by up to +10%
    // (README, "Re-simulating a real step"). Raising the setting is not predicted: a trace's
    // collectives keep their CTAs (never raised), so 16 -> 64 stays at the source's time.
    struct Case {
      const char *from, *from_set, *to_set, *target;
    };
    for (const auto& c : {Case{"micro-step-max-ctas-64.trace.json.gz", "nccl.max_ctas=64",
                               "nccl.max_ctas=16", "micro-step-max-ctas-16.trace.json.gz"},
                          Case{"micro-step-max-ctas-16.trace.json.gz", "nccl.max_ctas=16",
                               "nccl.max_ctas=8", "micro-step-max-ctas-8.trace.json.gz"}}) {
      CAPTURE(c.from);
      CAPTURE(c.to_set);
      const Json replayed = replay_of(c.from, {c.to_set}, {c.from_set});
      const Json target = replay_of(c.target, {}, {c.to_set});
      const auto& r = replayed["categories"]["other_gemm"];
      const double real = target["categories"]["other_gemm"]["real_s"];
      CHECK(std::abs(r["replayed_s"].get<double>() / real - 1) < 0.02);
    }
    // From 64 to 16 the source's own time would have missed by 10%: the replay is the change.
    const Json from64 = replay_of("micro-step-max-ctas-64.trace.json.gz", {}, {"nccl.max_ctas=64"});
    const Json at16 = replay_of("micro-step-max-ctas-16.trace.json.gz", {}, {"nccl.max_ctas=16"});
    CHECK(from64["categories"]["other_gemm"]["real_s"].get<double>() /
              at16["categories"]["other_gemm"]["real_s"].get<double>() >
          1.08);
  }
}
