// Who gets an SM (hardware/gpu.hpp): the block scheduler's rules as measured on our H200
// (reports/calibration/contention/, "Who gets an SM"), on hand-solvable cases and replayed.
#include <doctest/doctest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <string>

#include "hardware/ops.hpp"
#include "tests/hardware_rig.hpp"

using namespace twin;
using namespace twin::hardware;
using namespace twin::hardware::test;

namespace {

// A task that ends at t seconds (what starts another kernel then).
sim::Task& at_time(Rig& r, double t) {
  auto& d = r.graph.add("delay");
  run_delay(d, r.cluster, Time::s(t));
  return d;
}

struct Pair {
  sim::Task &a, &b;
};
// Kernel a from 0 and kernel b arriving at b_at seconds (0: with a) on GPU 0, run to the end.
Pair run_pair(Rig& r, KernelWork a, KernelWork b, double b_at = 0) {
  auto& ta = r.graph.add("a");
  auto& tb = r.graph.add("b");
  run_kernel(ta, r.cluster, 0, a);
  run_kernel(tb, r.cluster, 0, b);
  if (b_at > 0) tb.after(at_time(r, b_at));
  r.graph.start();
  r.engine.run();
  return {ta, tb};
}

}  // namespace

TEST_SUITE("hardware.arbitration") {
  TEST_CASE(
      "two grid kernels of one priority run in arrival order; the second's interval starts late") {
    Rig r(4);
    auto [a, b] = run_pair(r, {1.0}, {1.0});
    CHECK(a.end_time().to_s() == doctest::Approx(1.0));
    CHECK(b.start_time().to_s() == doctest::Approx(1.0));  // its first block, as a profiler has it
    CHECK(b.end_time().to_s() == doctest::Approx(2.0));
  }
  TEST_CASE("work of a high-priority stream goes before a running grid kernel of normal priority") {
    for (auto cls : {KernelClass::grid, KernelClass::persistent_static}) {
      CAPTURE(static_cast<int>(cls));
      Rig r(4);
      auto [a, b] = run_pair(r, {1.0}, {1.0, 0, cls, {}, Gpu::Priority::high}, 0.5);
      CHECK(b.start_time().to_s() == doctest::Approx(0.5));
      CHECK(b.end_time().to_s() == doctest::Approx(1.5));
      CHECK(a.end_time().to_s() == doctest::Approx(2.0));  // it waited while b ran
    }
  }
  TEST_CASE("a persistent kernel of normal priority waits for the grid kernel that arrived first") {
    Rig r(4);
    auto [a, b] = run_pair(r, {1.0}, {1.0, 0, KernelClass::persistent_static}, 0.25);
    CHECK(a.end_time().to_s() == doctest::Approx(1.0));
    CHECK(b.start_time().to_s() == doctest::Approx(1.0));
    CHECK(b.end_time().to_s() == doctest::Approx(2.0));
  }
  TEST_CASE("SMs freed go to the waiting request before a grid kernel that arrived after it") {
    // 32 SMs held by another persistent kernel until 0.5 s (no room beside it); a static kernel
    // (1 s) takes the other 100 at 0 and waits for those 32; a grid kernel arriving at 0.1 s
    // waits behind it. At 0.5 s the 32 go to the static kernel's late blocks (0.5 → 1.5 s); the
    // grid kernel's first block runs when the first 100 blocks end at 1 s, not at 0.5 s.
    Rig r(4);
    auto& g = r.cluster.gpu(0);
    g.request(32, Gpu::Holder::persistent, [](int) {});
    r.engine.at(Time::s(0.5), [&g] { g.release(32, Gpu::Holder::persistent); });
    auto [a, b] = run_pair(r, {1.0, 0, KernelClass::persistent_static}, {1.0}, 0.1);
    CHECK(a.end_time().to_s() == doctest::Approx(1.5));
    CHECK(b.start_time().to_s() == doctest::Approx(1.0));
  }
  TEST_CASE("a grid kernel waits behind a request still waiting, even beside NCCL's room") {
    // NCCL holds 32 SMs throughout (its CTAs leave room for small blocks); a static kernel (1 s)
    // takes the other 100 at 0 and waits for 32 more, which free when its first blocks end at
    // 1 s. A grid kernel of normal priority arriving at 0.1 s waits behind those pending blocks
    // (head-of-line, measured), one of high priority runs in the room beside NCCL's CTAs at once.
    for (auto p : {Gpu::Priority::normal, Gpu::Priority::high}) {
      CAPTURE(static_cast<int>(p));
      Rig r(4);
      hold_sms(r, 0, 32, Time::s(10));
      auto [a, b] = run_pair(r, {1.0, 0, KernelClass::persistent_static},
                             {1.0, 0, KernelClass::grid, {}, p}, 0.1);
      CHECK(b.start_time().to_s() == doctest::Approx(p == Gpu::Priority::high ? 0.1 : 1.0));
    }
  }
  TEST_CASE("a grid kernel finding every SM held by a persistent kernel waits, then runs") {
    Rig r(4);
    auto [a, b] = run_pair(r, {1.0, 0, KernelClass::persistent_static},
                           {1.0, 0, KernelClass::grid, {}, Gpu::Priority::high}, 0.5);
    CHECK(b.start_time().to_s() == doctest::Approx(1.0));
    CHECK(b.end_time().to_s() == doctest::Approx(2.0));
  }
  TEST_CASE("the arbitration measured with cuBLAS's GEMM and PyTorch's add, replayed") {
    // calibrate/sm_arbitration_torch.py on our H200: X, then Y on another stream while X runs.
    // Y arrives at its measured start when it is of high priority (it starts at once), at
    // 100 µs otherwise (it waits for X whenever it arrives). The twin hands SMs over at a
    // GEMM's end, where nvjet's CTAs exit over its last ~110 µs: Y starts up to 9% late there.
    std::ifstream f(std::string(TWIN_SOURCE_DIR) +
                    "/reports/calibration/contention/h200-2026-12-04-sm-arbitration-torch.json");
    const auto doc = nlohmann::json::parse(f);
    const auto alone = doc["alone_us"];
    for (const auto& c : doc["cases"]) {
      CAPTURE(c["name"].get<std::string>());
      const bool high = c["y_priority"] == "high";
      const auto work = [&](const std::string& kind, bool hi) {
        return KernelWork{alone[kind].get<double>() * 1e-6,
                          0,
                          kind == "gemm" ? KernelClass::persistent_static : KernelClass::grid,
                          {},
                          hi ? Gpu::Priority::high : Gpu::Priority::normal};
      };
      Rig r(4);
      auto& x = r.graph.add("x");
      auto& y = r.graph.add("y");
      run_kernel(x, r.cluster, 0, work(c["x"], false));
      run_kernel(y, r.cluster, 0, work(c["y"], high));
      y.after(at_time(r, (high ? c["y_start_us"].get<double>() : 100) * 1e-6));
      r.graph.start();
      r.engine.run();
      const auto near = [](sim::Time t, const nlohmann::json& us) {
        return doctest::Approx(us.get<double>() * 1e-6).epsilon(0.10) == t.to_s();
      };
      MESSAGE("twin µs: X ends ", x.end_time().to_s() * 1e6, ", Y ", y.start_time().to_s() * 1e6,
              "…", y.end_time().to_s() * 1e6);
      CHECK(near(x.end_time(), c["x_end_us"]));
      CHECK(near(y.start_time(), c["y_start_us"]));
      CHECK(near(y.end_time(), c["y_end_us"]));
    }
  }
}
