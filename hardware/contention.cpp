#include "hardware/contention.hpp"

#include <algorithm>
#include <cmath>
#include <cstring>

namespace twin::hardware {

namespace {
constexpr std::string_view kNames[] = {
    "gemm",   "gemm_fp8",  "grouped_gemm",   "attention", "ew_add",       "ew_norm",
    "ew_swiglu", "ew_gather", "ew_scatter_add", "ew_widen", "ew_fp8_quant", "ew_fp8_dequant",
    "ew_sum_fp32", "ew_loss", "ew_norm_bwd", "ew_swiglu_bwd", "ew_loss_bwd"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kFamilies);
}  // namespace

std::string_view family_name(Family f) { return kNames[static_cast<int>(f)]; }

Family family_of(std::string_view name) {
  for (int i = 0; i < kFamilies; ++i)
    if (kNames[i] == name) return static_cast<Family>(i);
  return Family::count;
}

double ContentionModel::boost(Family f, double active) const {
  if (active >= sm_count) return 1.0;
  return std::min(of(f).boost_max, std::cbrt(sm_count / std::max(active, 1.0)));
}

double ContentionModel::throughput(Family f, double active) const {
  const auto a = static_cast<std::size_t>(active);
  if (!table_.empty() && static_cast<double>(a) == active && a <= static_cast<std::size_t>(sm_count))
    return table_[static_cast<std::size_t>(f) * static_cast<std::size_t>(sm_count + 1) + a];
  return compute_throughput(f, active);
}

void ContentionModel::prepare() {
  table_.clear();
  std::vector<double> t;
  t.reserve(static_cast<std::size_t>(kFamilies) * static_cast<std::size_t>(sm_count + 1));
  for (int f = 0; f < kFamilies; ++f)
    for (int a = 0; a <= sm_count; ++a) t.push_back(compute_throughput(static_cast<Family>(f), a));
  table_ = std::move(t);
}

double ContentionModel::compute_throughput(Family f, double active) const {
  return throughput_spread(f, active, active);
}

double ContentionModel::throughput_spread(Family f, double work, double active) const {
  const auto& p = of(f);
  const double x = work * boost(f, active);
  if (p.sat_sms <= 0) return x;
  // x / (1 + (x/a_sat)^p)^(1/p), written so that no power overflows for a sharp knee.
  const double r = x / p.sat_sms;
  return r <= 1 ? x / std::pow(1 + std::pow(r, p.knee), 1 / p.knee)
                : p.sat_sms / std::pow(1 + std::pow(1 / r, p.knee), 1 / p.knee);
}

int ContentionModel::usable_sms(Family f, int held) const {
  const int c = std::max(1, of(f).cluster_sms);
  int s = sm_count - held;
  if (c > 1 && held > 0) s -= std::min(held, static_cast<int>(std::lround(cluster_waste_sms)));
  return std::max(c, s / c * c);
}

namespace {

// Mechanism 4 for each schedule, in units of one block's (or tile list's) work at one SM's
// nominal rate; only ratios are used.
double grid_time(const ContentionModel& m, const KernelShape& k, int u) {
  const double o = std::max<double>(1, k.blocks_per_sm);
  const double slots = u * o;
  const double blocks = std::max<double>(1, k.blocks);
  const double waves = std::floor(blocks / slots);
  const double rest = blocks - waves * slots;
  const double full = waves * u * o / m.throughput(k.family, u);
  if (rest <= 0) return full;
  const double lone = std::max(m.of(k.family).lone_block, 1 / o), at = std::min(rest, static_cast<double>(u));
  return full + rest / m.throughput_spread(k.family, std::min(rest * lone, at), at);
}

double static_time(const ContentionModel& m, const KernelShape& k, int u) {
  double left = std::min<double>(m.sm_count, std::max<double>(1, k.blocks)), t = 0;
  while (left > 0) {
    const double a = std::min<double>(u, left);
    t += a / m.throughput(k.family, a);
    left -= a;
  }
  return t;
}

double time_at(const ContentionModel& m, const KernelShape& k, int held) {
  const int u = m.usable_sms(k.family, held);
  switch (k.schedule) {
    case Schedule::grid: return grid_time(m, k, u);
    case Schedule::persistent_static: return static_time(m, k, u);
    case Schedule::persistent_dynamic: return 1.0 / m.throughput(k.family, u);
  }
  return 1.0;
}

}  // namespace

double ContentionModel::time_units(const KernelShape& k, int held) const {
  return time_at(*this, k, std::clamp(held, 0, sm_count - 1));
}

double ContentionMemo::time_units(const KernelShape& k, int held) {
  if (held < 0 || held > 255) return m_.time_units(k, held);  // beyond the key's 8 bits
  std::uint32_t blocks;
  static_assert(sizeof(blocks) == sizeof(k.blocks));
  std::memcpy(&blocks, &k.blocks, sizeof(blocks));
  const std::uint64_t key = (std::uint64_t{blocks} << 32) | (std::uint64_t{k.blocks_per_sm} << 16) |
                            (static_cast<std::uint64_t>(k.family) << 10) |
                            (static_cast<std::uint64_t>(k.schedule) << 8) | static_cast<std::uint8_t>(held);
  Slot& s = slots_[(key * 0x9E3779B97F4A7C15ull) >> 52 & (kSlots - 1)];
  if (s.key != key) s = {key, m_.time_units(k, held)};
  return s.units;
}

}  // namespace twin::hardware
