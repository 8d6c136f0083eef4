#include "hardware/power.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

namespace twin::hardware {

const PowerClass* PowerModel::tensor_class(Family f) const {
  switch (f) {
    case Family::gemm:
    case Family::gemm_fp8:
      return &gemm;
    case Family::grouped_gemm:
      return &grouped_gemm;
    case Family::attention:
      return &attention_fwd;
    case Family::attention_bwd:
      return &attention_bwd;
    default:
      return nullptr;
  }
}

std::pair<std::string, std::string> PowerModel::problem() const {
  if (!enabled()) return {};
  const std::pair<const char*, double> positive[] = {{"filter_s", filter_s},
                                                     {"gain_up_per_s", gain_up_per_s},
                                                     {"gain_down_per_s", gain_down_per_s}};
  for (const auto& [key, v] : positive)
    if (v <= 0)
      return {std::string("power.") + key,
              "must be > 0 when power.step_s is set (0 turns the model off)"};
  if (delay_s < step_s) return {"power.delay_s", "must be at least one tick (power.step_s)"};
  // An idle GPU must read below the limit, or the clock would never come back.
  if (idle_W >= limit_W)
    return {"gpu.power_limit_W",
            fmt::format("{} W is not above an idle GPU's draw (power.idle_W {} W), which the "
                        "power controller needs",
                        limit_W, idle_W)};
  return {};
}

PowerState::PowerState(const PowerModel& m)
    : m_(&m),
      filtered_W_(m.idle_W),
      delayed_W_(static_cast<std::size_t>(std::max(1.0, std::round(m.delay_s / m.step_s))),
                 m.idle_W) {}

void PowerState::tick(double power_W) {
  // Euler steps of the filter, as calibrate/fit_power.py fitted them.
  filtered_W_ += (power_W - filtered_W_) * m_->step_s / m_->filter_s;
  const double seen = delayed_W_[head_];
  delayed_W_[head_] = filtered_W_;
  head_ = (head_ + 1) % delayed_W_.size();
  const double err = (m_->limit_W - seen) / m_->limit_W;
  const double gain = err > 0 ? m_->gain_up_per_s : m_->gain_down_per_s;
  clock_ = std::clamp(clock_ + gain * err * m_->step_s, PowerModel::kMinClock, 1.0);
  tick_s_ += m_->step_s;
}

void PowerState::advance(double dt_s, double power_W) {
  while (dt_s > 0) {
    const double take = std::min(dt_s, m_->step_s - pending_s_);
    pending_J_ += power_W * take;
    pending_s_ += take;
    dt_s -= take;
    if (pending_s_ >= m_->step_s * (1 - 1e-9)) {
      tick(pending_J_ / pending_s_);
      pending_s_ = pending_J_ = 0;
    }
  }
}

void PowerState::idle_until(double t_s) {
  // After many time constants of an idle GPU the state is at rest: no need to tick through.
  // The clock climbs at least gain_up·(limit − idle)/limit per second back to 1.
  const double climb_s = 1 / (m_->gain_up_per_s * (m_->limit_W - m_->idle_W) / m_->limit_W);
  const double rest_s = 20 * (m_->filter_s + m_->delay_s) + climb_s;
  if (t_s - now_s() > rest_s) {
    std::fill(delayed_W_.begin(), delayed_W_.end(), m_->idle_W);
    filtered_W_ = m_->idle_W;
    clock_ = 1;
    tick_s_ = t_s;
    pending_s_ = pending_J_ = 0;
    return;
  }
  if (t_s > now_s()) advance(t_s - now_s(), m_->idle_W);
}

double PowerState::run(double start_s, Family f, double alone_s) {
  if (alone_s <= 0) return 1;
  idle_until(start_s);
  const PowerClass* c = m_->tensor_class(f);
  double done = 0, took = 0;
  for (;;) {  // to the next tick (the clock changes only there) or the kernel's end
    const double rate = c ? 1 / (1 + c->clock_sensitivity * (1 / clock_ - 1)) : 1.0;
    const double power =
        c ? m_->idle_W + (c->demand_W - m_->idle_W) * clock_ * clock_ : m_->bandwidth_W;
    const double to_tick = m_->step_s - pending_s_, left = (alone_s - done) / rate;
    if (left <= to_tick) {
      advance(left, power);
      added_s_ += took + left - alone_s;
      return (took + left) / alone_s;
    }
    done += rate * to_tick;
    took += to_tick;
    advance(to_tick, power);
  }
}

}  // namespace twin::hardware
