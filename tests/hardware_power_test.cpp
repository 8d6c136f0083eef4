// The power cap's controller (hardware/power.hpp) on hand-made cases: what it must do whatever
// its fitted values (calibrate/fit_power.py fits them; test_validation holds the fit).
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>

#include "hardware/ops.hpp"
#include "hardware/power.hpp"
#include "tests/hardware_rig.hpp"

using namespace twin;
using namespace twin::hardware;
using namespace twin::hardware::test;

namespace {

// Round numbers near the fitted H100's: GEMMs ask more than the limit, attention less, a
// bandwidth-bound kernel less still; a filter long enough that an idle GPU's low reading delays
// the onset.
PowerModel model() {
  PowerModel m;
  m.step_s = 0.25e-3;
  m.idle_W = 70;
  m.bandwidth_W = 500;
  m.limit_W = 700;
  m.filter_s = 0.02;
  m.delay_s = 0.02;
  m.gain_up_per_s = 5;
  m.gain_down_per_s = 12;
  m.gemm = {1100, 0.4};
  m.grouped_gemm = {1100, 0.35};
  m.attention_fwd = {650, 1.2};
  m.attention_bwd = {550, 0.8};
  return m;
}

// Slowdowns of n back-to-back grouped GEMMs of 8.5 ms after half a second of `before`.
std::vector<double> burst(const PowerModel& m, Family before, int n) {
  PowerState s(m);
  double t = s.run(0, before, 0.5) * 0.5;
  std::vector<double> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(s.run(t, Family::grouped_gemm, 8.5e-3));
    t += out.back() * 8.5e-3;
  }
  return out;
}

// Where the controller must settle under back-to-back grouped GEMMs: the clock whose power
// meets the limit, idle + (demand − idle)·c² = limit, and the slowdown it gives.
double balance_clock(const PowerModel& m) {
  return std::sqrt((m.limit_W - m.idle_W) / (m.grouped_gemm.demand_W - m.idle_W));
}
double slowdown_at(const PowerClass& c, double clock) {
  return 1 + c.clock_sensitivity * (1 / clock - 1);
}

int first_slow(const std::vector<double>& v) {
  for (std::size_t i = 0; i < v.size(); ++i)
    if (v[i] > 1.01) return static_cast<int>(i);
  return -1;
}

}  // namespace

TEST_SUITE("hardware.power") {
  TEST_CASE("bandwidth-bound kernels and light tensor-core work never slow") {
    const auto m = model();
    PowerState s(m);
    double t = 0;
    for (int i = 0; i < 200; ++i) {  // one second of each, alternating
      CHECK(s.run(t, Family::ew_add, 2.5e-3) == 1.0);
      t += 2.5e-3;
      CHECK(s.run(t, Family::attention_bwd, 2.5e-3) == 1.0);  // draws under the limit
      t += 2.5e-3;
    }
  }

  TEST_CASE("heavy load slows only after a delay, later after an idle GPU than after light load") {
    const auto m = model();
    const auto after_light = burst(m, Family::ew_add, 40);
    PowerState idle(m);  // half a second of empty GPU: the state at rest
    std::vector<double> from_idle;
    double t = 0.5;
    for (int i = 0; i < 40; ++i) {
      from_idle.push_back(idle.run(t, Family::grouped_gemm, 8.5e-3));
      t += from_idle.back() * 8.5e-3;
    }
    const int light_onset = first_slow(after_light), idle_onset = first_slow(from_idle);
    CAPTURE(light_onset);
    CAPTURE(idle_onset);
    CHECK(after_light.front() == 1.0);
    CHECK(light_onset >= 2);
    CHECK(idle_onset > light_onset);
    // The delay hides the excess, so the clock falls below the balance (the dip), then settles
    // at it.
    const double settled = slowdown_at(m.grouped_gemm, balance_clock(m));
    const auto longest = burst(m, Family::ew_add, 120);  // a second
    CHECK(*std::max_element(longest.begin(), longest.end()) > settled * 1.01);
    CHECK(longest.back() == doctest::Approx(settled).epsilon(0.01));
  }

  TEST_CASE(
      "a GEMM alternated with lighter work settles where the mix's mean power meets the limit") {
    const auto m = model();
    // 4 ms GEMMs, each followed by 4 ms of a bandwidth-bound kernel, for a second.
    PowerState s(m);
    double t = 0, last = 1;
    for (int i = 0; i < 125; ++i) {
      last = s.run(t, Family::gemm, 4e-3);
      t += last * 4e-3;
      t += s.run(t, Family::ew_add, 4e-3) * 4e-3;
    }
    // Mean power over a period: half GEMM at clock c, half bandwidth-bound: equal to the limit.
    const double c =
        std::sqrt((2 * m.limit_W - m.bandwidth_W - m.idle_W) / (m.gemm.demand_W - m.idle_W));
    CAPTURE(c);
    CHECK(c > balance_clock(m));  // lighter than back to back: a higher clock
    CHECK(last == doctest::Approx(slowdown_at(m.gemm, c)).epsilon(0.02));
  }

  TEST_CASE("a kernel behind a burst pays more than the burst; an idle gap gives the clock back") {
    const auto m = model();
    auto behind = [&](double gap_s) {
      PowerState s(m);
      double t = s.run(0, Family::ew_add, 0.5) * 0.5;
      for (int i = 0; i < 12; ++i) t += s.run(t, Family::grouped_gemm, 8.5e-3) * 8.5e-3;
      return s.run(t + gap_s, Family::attention, 5e-3);
    };
    const double right_behind = behind(0), after_gap = behind(0.3);
    CHECK(right_behind > 1.15);  // its sensitivity 1.2 at the GEMMs' clock
    CHECK(after_gap == doctest::Approx(1.0).epsilon(0.002));
    CHECK(behind(0.02) > behind(0.08));
  }

  TEST_CASE("a cluster without a power model leaves kernels at their time alone") {
    Rig r(4);
    CHECK(r.cluster.power(0) == nullptr);
    Profile p = test_profile();
    p.power = model();
    Rig powered(4, p);
    REQUIRE(powered.cluster.power(3) != nullptr);
    // Two seconds of grouped GEMMs on GPU 0 of each: the capped one takes longer.
    auto run = [](Rig& rig) {
      auto& t = rig.graph.add("gemms");
      KernelWork w{2.0, 0, KernelClass::grid};
      w.shape.family = Family::grouped_gemm;
      run_kernel(t, rig.cluster, 0, w);
      rig.graph.start();
      rig.engine.run();
      return t.end_time().to_s();
    };
    CHECK(run(r) == doctest::Approx(2.0).epsilon(1e-6));
    const double capped = run(powered);
    const auto& pm = p.power;
    CHECK(capped ==
          doctest::Approx(2.0 * slowdown_at(pm.grouped_gemm, balance_clock(pm))).epsilon(0.02));
    CHECK(powered.cluster.power(0)->added_s() == doctest::Approx(capped - 2.0));  // power_cap_s
    CHECK(powered.cluster.power(1)->added_s() == 0);
  }

  // A what-if power cap (gpu.power_limit_W below the TDP) acts through the controller alone:
  // GEMMs settle where their power meets the lower limit, a kernel drawing less than it keeps
  // its speed, and no static clock scales the peaks on top. Without a controller the static
  // clock is the fallback (GpuSpec::clock_under_power_limit).
  TEST_CASE("a lower power limit is the controller's, not a static clock's") {
    Profile p = test_profile();
    p.gpu.tdp_W = 700;
    p.gpu.power_limit_W = 550;
    p.power = model();
    finish_power(p);
    CHECK(p.power.limit_W == 550);
    CHECK(p.gpu.clock_under_power_limit() == 1);
    auto two_seconds_of = [&p](Family f) {
      Rig rig(4, p);
      auto& t = rig.graph.add("kernels");
      KernelWork w{2.0, 0, KernelClass::grid};
      w.shape.family = f;
      run_kernel(t, rig.cluster, 0, w);
      rig.graph.start();
      rig.engine.run();
      return t.end_time().to_s();
    };
    const double capped = two_seconds_of(Family::grouped_gemm);
    CHECK(capped == doctest::Approx(2.0 * slowdown_at(p.power.grouped_gemm, balance_clock(p.power)))
                        .epsilon(0.02));
    CHECK(capped > 2.0 * slowdown_at(p.power.grouped_gemm, balance_clock(model())) + 0.05);
    CHECK(two_seconds_of(Family::ew_add) == doctest::Approx(2.0).epsilon(1e-6));  // 500 W < 550

    p.gpu.power_limit_W = 900;  // above the TDP: the board holds its TDP
    finish_power(p);
    CHECK(p.power.limit_W == 700);
    p.power.step_s = 0;  // no controller: the static clock again
    p.gpu.power_limit_W = 550;
    finish_power(p);
    CHECK_FALSE(p.gpu.limit_held_by_controller);
    CHECK(p.gpu.clock_under_power_limit() == doctest::Approx(std::cbrt(550.0 / 700)));
  }
}
