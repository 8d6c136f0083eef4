#include "hardware/profile.hpp"

// The `power` section of a profile: the power cap's controller (power.hpp states the model;
// calibrate/fit_power.py fits it). Absent: no power model, every kernel at its calibrated time.
namespace twin::hardware {

namespace {

void add_class_keys(sim::Schema<PowerModel>& s, const std::string& n,
                    PowerClass PowerModel::*member) {
  s.real(
       n + ".demand_W", "W", 0, 1e4, 0.0,
       "what " + n + " kernels draw at the full clock, back to back (above the limit: capped)",
       [member](auto& m) -> auto& { return (m.*member).demand_W; })
      .real(
          n + ".clock_sensitivity", "", 0, 2, 0.0,
          "how much of a " + n + " kernel's time scales with the clock (1: all of it)",
          [member](auto& m) -> auto& { return (m.*member).clock_sensitivity; });
}

}  // namespace

sim::Schema<PowerModel> power_schema() {
  sim::Schema<PowerModel> s;
  s.real(
       "step_s", "s", 0, 0.1, 0.0, "the controller's tick (0: no power model)",
       [](auto& m) -> auto& { return m.step_s; })
      .real(
          "idle_W", "W", 0, 1e4, 0.0, "an idle GPU's draw (copies and NCCL's kernels count so)",
          [](auto& m) -> auto& { return m.idle_W; })
      .real(
          "bandwidth_W", "W", 0, 1e4, 0.0, "a bandwidth-bound (elementwise) kernel's draw",
          [](auto& m) -> auto& { return m.bandwidth_W; })
      .real(
          "filter_s", "s", 0, 10, 0.0, "time constant of the power reading's filter",
          [](auto& m) -> auto& { return m.filter_s; })
      .real(
          "delay_s", "s", 0, 10, 0.0, "how late the controller reads that power",
          [](auto& m) -> auto& { return m.delay_s; })
      .real(
          "gain_up_per_s", "1/s", 0, 1e4, 0.0,
          "how fast the clock climbs: per second, per unit of (limit − reading)/limit",
          [](auto& m) -> auto& { return m.gain_up_per_s; })
      .real(
          "gain_down_per_s", "1/s", 0, 1e4, 0.0, "the same above the limit: how fast it falls",
          [](auto& m) -> auto& { return m.gain_down_per_s; });
  add_class_keys(s, "gemm", &PowerModel::gemm);
  add_class_keys(s, "grouped_gemm", &PowerModel::grouped_gemm);
  add_class_keys(s, "attention_fwd", &PowerModel::attention_fwd);
  add_class_keys(s, "attention_bwd", &PowerModel::attention_bwd);
  return s;
}

void finish_power(Profile& p) {
  p.power.limit_W = p.gpu.board_limit_W();
  p.gpu.limit_held_by_controller = p.power.enabled();
}

}  // namespace twin::hardware
