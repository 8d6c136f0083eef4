// The power cap's controller, per GPU (issue #15): why a kernel queued behind tens of
// milliseconds of tensor-core work runs slower than the same kernel fresh, and why a burst of
// GEMMs keeps its speed longer after an idle GPU than after a bandwidth-bound one.
//
// Measured (reports/calibration/grouped-gemm/README.md, "The power cap's slow controller" and
// "How long heavy load lasts before the clock falls"; ../micro-step/README.md, "What it is"):
// every tensor-core class alone asks more than the 700 W limit, a bandwidth-bound kernel draws
// under it; the clock falls a few tens of milliseconds into heavy load — later after an idle GPU
// than after a bandwidth-bound half second —, dips, settles, and comes back within 30–100 ms of
// lighter load; a GEMM alternated with lighter work settles where the mix's average power meets
// the limit (nvidia-smi beside power_mix_probe.py: 0.85–0.97 of the top clock, deeper the larger
// the GEMM's share). A kernel's time scales with the clock by its class's sensitivity (a
// tensor-core loop by 1, a GEMM partly bound by memory by less).
//
// The model, a discrete integral controller ticking every `step_s` (what calibrate/fit_power.py
// fits, tick for tick the same): the GPU draws `idle_W` between kernels, `bandwidth_W` in a
// bandwidth-bound kernel and idle + (demand − idle)·clock² in a tensor-core one; the controller
// reads that power through a first-order filter (`filter_s`) and a delay (`delay_s`) and moves
// the clock by gain·(limit − reading)/limit per second — `gain_down_per_s` above the limit,
// `gain_up_per_s` below it —, between kMinClock and 1. So the clock falls as fast as the reading
// exceeds the limit, overshoots by what the delay hides (the dip), and holds where the load's
// mean power meets the limit. A kernel of time alone t then takes t·(1 + s·(1/clock − 1)) per
// tick, s its class's sensitivity. The fit leaves the filter at a tick (the delay carries the
// lag), so an idle GPU's onset comes no later than a lightly loaded one's, unlike the data.
// (Until 2026-12-06 the clock jumped to fitted plateau and settled levels whatever the excess:
// 4.6% on the H100's files, but +8…+14% on a GEMM beside a bandwidth-bound kernel that measured
// −3…+6%; the README compares the two.)
//
// Every kernel's time alone is calibrated fresh (after light load: the profiles' sources), so the
// model only ever slows kernels. Copies and NCCL's kernels draw no more than an idle GPU here.
// The limit is the board's (gpu.power_limit_W, at most its TDP: a what-if power cap). A
// bandwidth-bound kernel keeps its speed and its measured draw whatever the clock, so under a
// cap below `bandwidth_W` it lowers the clock of the tensor-core kernels after it but is not
// slowed itself [est: its SM part's draw falling with the clock is not modelled].
#pragma once

#include <cstddef>
#include <string>
#include <utility>
#include <vector>

#include "hardware/contention.hpp"

namespace twin::hardware {

struct PowerClass {
  double demand_W = 0;           // what the class draws at the full clock, back to back
  double clock_sensitivity = 0;  // d(time)/d(1/clock) over time: 0 unaffected, 1 all clock
};

struct PowerModel {
  double step_s = 0;  // the controller's tick; 0: no power model (kernels run at their fit)
  double idle_W = 0;
  double bandwidth_W = 0;  // a bandwidth-bound (elementwise) kernel's draw
  double limit_W = 0;  // the board's (gpu.power_limit_W; finish_power sets it, no key of its own)
  double filter_s = 0;
  double delay_s = 0;
  double gain_up_per_s = 0;    // clock per second per unit of (limit − reading)/limit, below it
  double gain_down_per_s = 0;  // the same above the limit
  // A floor the data never reach (the H200's sustained GEMM settles near 0.72 of its top
  // clock), so that an integral wound down by a long excess cannot stall a kernel.
  static constexpr double kMinClock = 0.3;
  PowerClass gemm, grouped_gemm, attention_fwd, attention_bwd;
  bool enabled() const { return step_s > 0; }
  // What makes an enabled model unusable ("" if nothing): its key under `hardware.` and why.
  std::pair<std::string, std::string> problem() const;
  // The class of a tensor-core family; null for bandwidth-bound ones.
  const PowerClass* tensor_class(Family f) const;
};

class PowerState {
 public:
  explicit PowerState(const PowerModel& m);
  // A kernel of family f taking alone_s at the full clock, starting at start_s: its time over
  // alone_s (≥ 1) under the clock the controller sets while it runs. The state moves to the
  // kernel's end; a kernel starting before the previous one's end starts at that end (the
  // compute stream's kernels follow each other).
  double run(double start_s, Family f, double alone_s);
  double clock() const { return clock_; }
  // Σ over the kernels run of (time under the controller's clock − time alone at full clock).
  double added_s() const { return added_s_; }

 private:
  void idle_until(double t_s);
  void advance(double dt_s, double power_W);  // the GPU drawing power_W for dt_s
  void tick(double power_W);                  // one controller period at that mean power
  double now_s() const { return tick_s_ + pending_s_; }
  const PowerModel* m_;
  double tick_s_ = 0;     // the last tick's time
  double pending_s_ = 0;  // since then, and the energy drawn in it
  double pending_J_ = 0;
  double filtered_W_;
  double clock_ = 1;
  std::vector<double> delayed_W_;  // the filter's output over the last delay_s, a ring
  std::size_t head_ = 0;
  double added_s_ = 0;
};

}  // namespace twin::hardware
