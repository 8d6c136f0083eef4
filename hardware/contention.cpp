#include "hardware/contention.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <utility>

#include "hardware/kernel_shapes.hpp"

namespace twin::hardware {

namespace {
constexpr std::string_view kNames[] = {
    "gemm",        "gemm_fp8",      "grouped_gemm",   "attention",   "attention_bwd",
    "ew_add",      "ew_norm",       "ew_swiglu",      "ew_gather",   "ew_scatter_add",
    "ew_widen",    "ew_fp8_quant",  "ew_fp8_dequant", "ew_sum_fp32", "ew_loss",
    "ew_norm_bwd", "ew_swiglu_bwd", "ew_loss_bwd"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kFamilies);
}  // namespace

std::string_view family_name(Family f) {
  return kNames[static_cast<int>(f)];
}

Family family_of(std::string_view name) {
  for (int i = 0; i < kFamilies; ++i)
    if (kNames[i] == name) return static_cast<Family>(i);
  return Family::count;
}

namespace {
// Hopper (sm_90) per-SM limits. The register file is four partitions of 16,384, one per warp
// scheduler; a block's warps go round-robin over them from the first (as the holder's do), and
// a warp takes its registers per thread rounded up to 8, times 32, in its partition.
constexpr int kThreads = 2048, kSmem = 233472, kSmemReserved = 1024, kBlocks = 32;
constexpr int kPartitions = 4, kPartitionRegisters = 16384;

int warps_in(const BlockResources& b, int partition) {
  const int warps = (b.threads + 31) / 32;
  return warps / kPartitions + (partition < warps % kPartitions ? 1 : 0);
}
int warp_registers(const BlockResources& b) {
  return (std::max(b.registers, 1) + 7) / 8 * 8 * 32;
}
}  // namespace

int blocks_beside(const BlockResources& b, const BlockResources& beside) {
  if (b.threads <= 0) return 0;
  const bool other = beside.threads > 0;
  int n = std::min(
      {kBlocks - (other ? 1 : 0), (kThreads - (other ? beside.threads : 0)) / b.threads,
       (kSmem - (other ? beside.smem_bytes + kSmemReserved : 0)) / (b.smem_bytes + kSmemReserved)});
  for (int p = 0; p < kPartitions; ++p) {
    const int need = warps_in(b, p) * warp_registers(b);
    const int used = other ? warps_in(beside, p) * warp_registers(beside) : 0;
    if (need > 0) n = std::min(n, (kPartitionRegisters - used) / need);
  }
  return std::max(0, n);
}

int ContentionModel::beside(const KernelShape& k) const {
  if (k.beside >= 0) return k.beside;
  return holder.threads > 0 ? blocks_beside(of(k.family).block, holder) : 0;
}

double ContentionModel::boost(Family f, double active, double gain) const {
  if (active >= sm_count) return 1.0;
  if (f >= Family::ew_add) {  // the memory side: loads queue at their GPC's port (mechanism 2)
    const double lambda = of(f).gpc_queue, g = std::max(1, gpcs);
    const double per_gpc = std::max(1.0, active / g);
    return (1 + lambda * (1 - g / sm_count)) / (1 + lambda * (1 - 1 / per_gpc));
  }
  return std::min(gain > 0 ? gain : of(f).boost_max, std::cbrt(sm_count / std::max(active, 1.0)));
}

double ContentionModel::throughput(Family f, double active) const {
  const auto a = static_cast<std::size_t>(active);
  if (!table_.empty() && static_cast<double>(a) == active &&
      a <= static_cast<std::size_t>(sm_count))
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

double ContentionModel::throughput_spread(Family f, double work, double active, double gain,
                                          double sat_scale) const {
  const auto& p = of(f);
  const double x = work * boost(f, active, gain);
  if (p.sat_sms <= 0) return x;
  // x / (1 + (x/a_sat)^p)^(1/p), written so that no power overflows for a sharp knee.
  const double sat = p.sat_sms * sat_scale * (f >= Family::ew_add ? hbm_scale : 1.0), r = x / sat;
  return r <= 1 ? x / std::pow(1 + std::pow(r, p.knee), 1 / p.knee)
                : sat / std::pow(1 + std::pow(1 / r, p.knee), 1 / p.knee);
}

int ContentionModel::usable_sms(Family f, int held, int cluster) const {
  const int c = std::max(1, cluster > 0 ? cluster : of(f).cluster_sms);
  const int s = sm_count - held;
  if (c == 1 || cluster_held_sms.empty()) return std::max(c, s / c * c);
  held = std::max(held, 0);
  // The smallest measured size that holds c (a cluster of 3 needs what one of 4 needs, at most).
  int t = 0;
  while (t < 3 && kClusterSizes[t] < c) ++t;
  const auto& held_at = cluster_held_sms;
  const auto& u = cluster_usable_sms[t];
  const auto hi = std::upper_bound(held_at.begin(), held_at.end(), static_cast<double>(held));
  double usable;
  if (hi == held_at.end()) {  // beyond the last measured k: down to none at all SMs held
    const double k0 = held_at.back(), u0 = u.back();
    usable = u0 * (sm_count - held) / std::max(1.0, sm_count - k0);
  } else {
    const auto i = static_cast<std::size_t>(hi - held_at.begin());
    const double k0 = held_at[i - 1], k1 = held_at[i];
    usable = u[i - 1] + (u[i] - u[i - 1]) * (held - k0) / (k1 - k0);
  }
  return std::min(s / c * c, static_cast<int>(usable + 1e-9) / c * c);
}

std::string ContentionModel::cluster_table_problem() const {
  if (cluster_held_sms.empty()) return "";
  if (cluster_held_sms.front() != 0) return "cluster_held_sms must start at 0";
  for (std::size_t i = 1; i < cluster_held_sms.size(); ++i)
    if (cluster_held_sms[i] <= cluster_held_sms[i - 1]) return "cluster_held_sms must be ascending";
  for (const auto& u : cluster_usable_sms)
    if (u.size() != cluster_held_sms.size())
      return "every cluster_usable_sms table needs one value per cluster_held_sms entry";
  return "";
}

namespace {

// Mechanism 4 for each schedule, in units of one block's (or tile list's) work at one SM's
// nominal rate; only ratios are used.
// u SMs free and `lending` held ones each lending h of its o slots (mechanism 5).
double grid_time(const ContentionModel& m, const KernelShape& k, int free, int lending) {
  const double o = std::max<double>(1, k.blocks_per_sm);
  const double u = free + lending * std::min<double>(o, m.beside(k)) / o;
  const double slots = u * o;
  const double blocks = std::max<double>(1, k.blocks);
  const double waves = std::floor(blocks / slots);
  const double rest = blocks - waves * slots;
  const double full = waves * u * o / m.throughput(k, u);
  if (rest <= 0) return full;
  const double beta = k.is_reduce ? m.split_k_reduce.lone_block : m.of(k.family).lone_block;
  const double lone = std::max(beta, 1 / o), at = std::min(rest, u);
  return full + rest / m.throughput_spread(k.family, std::min(rest * lone, at), at, k.clock_gain,
                                           ContentionModel::sat_scale(k));
}

// The number (in the kernel's own numbering, static lists: CTA j takes tiles j, j + G, …) of the
// CTA launched p-th (ListOrder, contention.hpp).
int cta_number(ListOrder o, int p, int ctas) {
  switch (o) {
    case ListOrder::launch:
      return p;
    case ListOrder::last:
      return ctas - 1 - p;
    case ListOrder::nvjet_pairs:
      return ctas % 2 ? p : ctas / 2 * (p / 2 % 2) + p / 4 * 2 + p % 2;
  }
  return p;
}

// Static tile lists: CTAs start in order on free slots; all running ones progress alike, so
// they finish in batches (at most two list lengths): a short list of (progress at which a batch
// ends, CTAs in it) replaces an event queue.
double static_time(const ContentionModel& m, const KernelShape& k, int u) {
  const int ctas =
      static_cast<int>(std::min<double>(m.sm_count, std::max<double>(1, std::round(k.blocks))));
  // Fewer tiles than CTAs: the CTAs without one end at once (measured: the tile-schedule probe).
  const double tiles = k.tiles > 0 ? std::max<double>(1, std::round(k.tiles)) : ctas;
  const double q = std::floor(tiles / ctas);
  const int longer = static_cast<int>(tiles - q * ctas);  // CTAs carrying q + 1 tiles
  std::vector<std::pair<double, int>> batches;            // (progress at its end, CTAs)
  int next = 0, running = 0;
  auto start = [&](int n, double at) {
    int l = 0;  // of the CTAs launched now, those carrying q + 1 tiles
    for (int p = next; p < next + n; ++p) l += cta_number(k.order, p, ctas) < longer;
    if (l > 0) batches.emplace_back(at + q + 1, l);
    if (n - l > 0) batches.emplace_back(at + q, n - l);
    next += n, running += n;
  };
  start(std::min(u, ctas), 0);
  double t = 0, progress = 0;
  while (running > 0) {
    const auto first = std::min_element(batches.begin(), batches.end());
    const auto [end, n] = *first;
    batches.erase(first);
    t += (end - progress) * running / m.throughput(k, running);
    progress = end, running -= n;
    start(std::min(n, ctas - next), progress);
  }
  return t;
}

// n tiles taken from a shared counter by u CTAs: whole waves of u, the last r on r SMs at their
// clock.
double waves_time(const ContentionModel& m, const KernelShape& k, double n, int u) {
  const double waves = std::floor(n / u), rest = n - waves * u;
  return waves * u / m.throughput(k, u) +
         (rest > 0 ? rest / m.throughput(k, static_cast<int>(rest)) : 0);
}

// Dynamic tiles: whole waves of u tiles, the last r on r SMs at their clock.
double dynamic_time(const ContentionModel& m, const KernelShape& k, int u) {
  if (k.tiles <= 0) return 1.0 / m.throughput(k, u);
  return waves_time(m, k, k.tiles, u);
}

// First tile static, the rest dynamic: CTA j starts with tile j and then takes tiles from a
// shared counter. The L = G − u CTAs without an SM keep their first tile until the running ones
// have drained the counter, then run it: nvjet's behaviour as measured, not the GPU's (a generic
// first-static kernel's late clusters start as soon as CTAs exit: contention.hpp, mechanism 4).
double first_static_time(const ContentionModel& m, const KernelShape& k, int u) {
  if (k.tiles <= 0) return dynamic_time(m, k, u);
  const double ctas = std::min<double>(m.sm_count, std::max<double>(1, std::round(k.blocks)));
  const double late = std::max(0.0, std::min<double>(ctas, k.tiles) - u);
  return waves_time(m, k, k.tiles - late, u) + (late > 0 ? waves_time(m, k, late, u) : 0);
}

double time_at(const ContentionModel& m, const KernelShape& k, int held, int lending) {
  const int u = m.usable_sms(k.family, held, k.cluster);
  if (u <= 0) return INFINITY;  // no cluster can start until SMs free
  switch (k.schedule) {
    case Schedule::grid:
      return grid_time(m, k, u, lending);
    case Schedule::persistent_static:
      return static_time(m, k, u);
    case Schedule::persistent_dynamic:
      return dynamic_time(m, k, u);
    case Schedule::persistent_first_static:
      return first_static_time(m, k, u);
  }
  return 1.0;
}

}  // namespace

int ContentionModel::LoneCta::measured(int m, int n, int cm, int cn) const {
  for (std::size_t i = 0; i < tile_m.size(); ++i)
    if (tile_m[i] == m && tile_n[i] == n && tile_cluster_m[i] == cm && tile_cluster_n[i] == cn)
      return static_cast<int>(i);
  return -1;
}

double ContentionModel::LoneCta::seconds(int m, int n, int cm, int cn, double k) const {
  if (const int i = measured(m, n, cm, cn); i >= 0)
    return (tile_setup_us[i] * 1e3 + k * tile_per_k_ns[i]) * 1e-9;
  if (stream_GBps <= 0 || TMACps <= 0) return 0;
  const double bytes = 2.0 * (m + n) * k, macs = double(m) * n * k;  // bf16 operands
  return setup_us * 1e-6 + std::max(bytes / (stream_GBps * 1e9), macs / (TMACps * 1e12));
}

std::string ContentionModel::LoneCta::tile_table_problem() const {
  const std::size_t n = tile_m.size();
  for (const auto* v : {&tile_n, &tile_cluster_m, &tile_cluster_n, &tile_setup_us, &tile_per_k_ns})
    if (v->size() != n)
      return "lone_cta_tiles.tile_m, tile_n, cluster_m, cluster_n, setup_us and per_k_ns need one "
             "value per kernel each";
  for (std::size_t i = 0; i < n; ++i)
    if (measured(tile_m[i], tile_n[i], tile_cluster_m[i], tile_cluster_n[i]) != int(i))
      return fmt::format("lone_cta_tiles: the kernel {}x{} in {}x{} is given twice", tile_m[i],
                         tile_n[i], tile_cluster_m[i], tile_cluster_n[i]);
  return "";
}

double ContentionModel::lone_cta_s(const KernelShape& k) const {
  const int cm = std::max(1, int(k.cluster_m)), cn = std::max(1, int(k.cluster) / cm);
  return k.cta_k > 0 ? lone_cta.seconds(k.tile_m, k.tile_n, cm, cn, k.cta_k) : 0.0;
}

KernelShape ContentionModel::own_saturation(KernelShape k, double alone_s) const {
  const auto& p = of(k.family);
  const bool one_tile = k.blocks > 0 && k.tiles <= k.blocks;
  const double tau = one_tile ? lone_cta_s(k) : 0.0;
  k.cta_k = 0;
  // One tile per CTA: a single round alone, near the top clock, so a lone CTA's time compares
  // with its share of the round (longer launches run at a lower clock than t_s, r, F's).
  const double stretched = alone_s - p.fixed_us * 1e-6;
  if (tau <= 0 || p.sat_sms <= 0 || stretched <= 0) return k;
  const double g = std::min<double>(k.blocks, sm_count);
  const double rho = tau / stretched;
  // Θ(G) = ρ·G·b(1): (1 + (x/a_sat)^p)^(1/p) = b(G) / (ρ·b(1)) = q, x = G·b(G).
  const double bg = boost(k.family, g, k.clock_gain),
               q = bg / (rho * boost(k.family, 1, k.clock_gain));
  // τ at least the full round's share (q ≤ 1): the lone CTA's form, fitted on other tiles, says
  // nothing Θ can follow (a round slower than unsaturated); the load intensity's a_sat stands.
  if (q <= 1) return k;
  const double own =
      g * bg / std::pow(std::pow(q, p.knee) - 1, 1 / p.knee) / p.sat_sms * kReferenceLoadIntensity;
  k.load_intensity = static_cast<std::uint8_t>(std::clamp(std::round(own), 1.0, 255.0));
  return k;
}

std::optional<ContentionModel::SplitK> ContentionModel::split_k(const KernelShape& k,
                                                                double alone_s) const {
  if (k.reduce_bytes <= 0 || split_k_reduce.GBps <= 0 || alone_s <= 0) return std::nullopt;
  // A cost model's time alone shorter than twice the reduction's is not split further: the
  // reduction takes at most half of it.
  const double reduce_s = std::min(
      0.5 * alone_s, split_k_reduce.setup_us * 1e-6 + k.reduce_bytes / (split_k_reduce.GBps * 1e9));
  KernelShape slices = k, reduce = elementwise_shape(Family::ew_widen, k.reduce_bytes);
  slices.reduce_bytes = 0;
  if (k.reduce_blocks > 0) {
    // cuBLASLt's splitKreduce_kernel as every recorded launch ran it (files s, p, l): 512
    // threads of 32 registers, no shared memory — four to an SM, and beside a holder only what
    // its registers leave (none beside NCCL's 96-register CTAs).
    constexpr BlockResources kReduceBlock{512, 32, 0};
    reduce.blocks = k.reduce_blocks;
    reduce.is_reduce = true;
    reduce.blocks_per_sm = static_cast<std::uint16_t>(blocks_beside(kReduceBlock));
    reduce.beside =
        static_cast<std::int8_t>(holder.threads > 0 ? blocks_beside(kReduceBlock, holder) : 0);
  }
  return SplitK{{slices, alone_s - reduce_s}, {reduce, reduce_s, k.reduce_bytes}};
}

double ContentionModel::slowdown(const KernelShape& k, int held, double alone_s) const {
  if (const auto s = split_k(k, alone_s))
    return s->slowdown([&](const KernelPart& p) { return slowdown(p.shape, held, p.alone_s); });
  return stretch(k, slowdown(own_saturation(k, alone_s), held), alone_s);
}

double ContentionModel::time_units(const KernelShape& k, int held, int lending) const {
  held = std::clamp(held, 0, sm_count - 1);
  return time_at(*this, k, held, lending < 0 ? held : std::min(lending, held));
}

double ContentionMemo::time_units(const KernelShape& k, int held, int lending) {
  // Beyond the key's 8 bits, or a launch's own clock gain (the fit's measured cases): unkeyed.
  if (held < 0 || held > 255 || k.clock_gain != 0 || k.blocks_per_sm > 255)
    return m_.time_units(k, held, lending);
  if (lending < 0 || lending > held) lending = held;  // as time_units reads it: one key per case
  std::uint32_t blocks, tiles;
  static_assert(sizeof(blocks) == sizeof(k.blocks) && sizeof(tiles) == sizeof(k.tiles));
  std::memcpy(&blocks, &k.blocks, sizeof(blocks));
  std::memcpy(&tiles, &k.tiles, sizeof(tiles));
  const std::uint64_t key =
      (std::uint64_t{blocks} << 32) | (std::uint64_t{k.load_intensity} << 24) |
      (std::uint64_t{k.blocks_per_sm} << 16) | (static_cast<std::uint64_t>(k.family) << 10) |
      (static_cast<std::uint64_t>(k.schedule) << 8) | static_cast<std::uint8_t>(held);
  const std::uint64_t key2 =
      (std::uint64_t{static_cast<std::uint8_t>(lending)} << 48) |
      (std::uint64_t{static_cast<std::uint8_t>(k.beside)} << 40) | (std::uint64_t{tiles} << 8) |
      k.cluster | (static_cast<std::uint64_t>(k.order) << 56) | (std::uint64_t{k.is_reduce} << 62);
  Slot& s =
      slots_[((key ^ key2 * 0xC2B2AE3D27D4EB4Full) * 0x9E3779B97F4A7C15ull) >> 52 & (kSlots - 1)];
  if (s.key != key || s.key2 != key2) s = {key, key2, m_.time_units(k, held, lending)};
  return s.units;
}

}  // namespace twin::hardware
