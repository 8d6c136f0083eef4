#include "hardware/kernel_shapes.hpp"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <optional>
#include <tuple>
#include <utility>

namespace twin::hardware {

namespace {
// nvjet's output tiles (tile_m × tile_n) in the names of the kernels measured on our H200
// (reports/calibration/contention/h200-2026-11-30-contention-{a,b}.json, `launches`).
constexpr std::pair<int, int> kNvjetTiles[] = {{64, 64},   {96, 64},   {96, 128},  {112, 128},
                                               {128, 96},  {192, 96},  {192, 128}, {256, 128},
                                               {256, 160}, {192, 192}, {320, 128}};
// The most CTAs in clusters of 8 the H200 runs at once (the measured grids of 8-SM clusters).
constexpr double kCluster8Ctas = 112;
// The other tiles nvjet chose for GEMMs of two waves of 192×192 tiles or more (files a, f, k:
// 256×128 at 4,096 rows, 128×256 for the router at 20,480 and 32,768 tokens, 320×128 once).
constexpr std::pair<int, int> kLargeNvjetTiles[] = {{256, 128}, {128, 256}};
// [fit] How much less padded work another tile needs to be chosen over 192×192 (whose operand
// reuse is better: 96 vs 85 multiply-adds per element loaded). Fitted to the tile choices of the
// ten GEMMs of two waves or more recorded in files a, f and k: any value in (1.65%, 3.70%) sorts
// them as nvjet did (192×192 kept at 16,384 × 13,568 where 256×128 needs 1.65% less work; 256×128
// taken at 4,096 × 13,568 for 3.70% less), and 8,192³ leaves 192×192 (for 320×128, which this
// choice lacks: 256×128 instead). The middle of that window.
constexpr double kSquareTileGain = 0.03;
// With fewer tiles per CTA the measured curves follow static tile lists, with more a first tile
// per CTA fixed at launch and the rest from a shared counter (contention.hpp, mechanism 4).
// Clusters of 2 and 4 (and FP8's single CTAs, not measured there): static at up to 2.0 tiles per
// CTA (the router at 16,384 and 24,576 tokens, the 1,376-row down projection), first-static
// from 2.8 (the router at 28,672–49,152 tokens: files k, l and the release probe, nvjet-release-m);
// any switch in (2.0, 2.8) sorts them, the middle taken; held out, file o's B·X at 2.8–3.9 tiles
// per CTA in pairs confirms it. Clusters of 8: static up to 4, as the fitted Newton–Schulz case
// wants (its B·X: 2.8 tiles per CTA on 120 CTAs); the same launch alone (file o) runs first-static
// (3.0% against 17.5%), but switching it too moves the refit's t_f to 2.0 µs and cuBLAS's worst
// held-out point to 16.0% (reports/calibration/contention/README.md, "Held-out launches around the
// switch").
constexpr double kStaticBelowTilesPerCta = 2.4, kStaticBelowTilesPerCta8 = 4;
constexpr double kElementsPerBlock = 1024, kBytesPerElement = 2 * 3;  // bf16, two in, one out
constexpr double kIndexAddThreads = 128;

double tiles_of(double m, double n, double batch, int tile_m, int tile_n) {
  return std::ceil(n / tile_m) * std::ceil(m / tile_n) * std::max(1.0, batch);
}

// nvjet's cluster orientation for a tile: where it runs one CTA per tile, the one that pads its
// grid least (256×160 at 1,376 rows: 9 rows of tiles, clusters along M, 126 CTAs where along N
// would launch 140); then the one whose CTAs load least (the higher load intensity; of two equal,
// the cluster along N).
int cluster_m_of(int tile_m, int tile_n, int cluster, double cols = 0, double rows = 0) {
  const auto key = [&](int cm) {
    const GemmLaunch l{tile_m, tile_n, cluster, 0, 0, cm};
    return std::pair{cols > 0 ? -padded_grid(l, cols, rows, 1) : 0.0, load_intensity(l)};
  };
  int best = 1;
  for (int cm = 1; cm <= cluster; cm *= 2)
    if (cluster % cm == 0 && key(cm) > key(best)) best = cm;
  return best;
}

KernelShape persistent_shape(Family f, double tiles, double ctas, int cluster) {
  const bool few =
      tiles < (cluster == 8 ? kStaticBelowTilesPerCta8 : kStaticBelowTilesPerCta) * ctas;
  KernelShape k{f,
                few ? Schedule::persistent_static : Schedule::persistent_first_static,
                1,
                static_cast<float>(ctas),
                static_cast<float>(tiles),
                static_cast<std::uint8_t>(cluster)};
  if (f == Family::gemm) k.order = cluster == 2 ? ListOrder::nvjet_pairs : ListOrder::last;
  return k;
}

// GEMMs of few rows (files l, p: 32–192 rows on six weight shapes; m = rows, n = columns): nvjet
// runs one row of tiles as high as the rows (rounded up to 16), or rows of 64 where 64 divides
// them, 64–160 columns wide, and splits k where the tiles alone leave SMs idle — the most CTAs
// one wave holds; of those, fewer slices of k, then less padded work, then the wider tile. It
// splits only slices of at least kMinSplitK: [fit] to the recorded launches, any value in (896,
// 1,792] sorts them (k = 1,792 never split, 7,168 in 4); the middle. Clusters: 4 along the
// columns up to 120 CTAs (the most the H200 runs in clusters of 4) — 4×2 (8) over two rows up to
// 112 —, else pairs. At 64 rows, where one row of tiles would need pairs and a split of k, two
// rows of 32 in pairs over the rows and one split fewer (nvjet's 64×32 1x2 launches at 2,048
// and 4,096 columns; at 3,584 it kept one row in clusters of 4, at 8,192 one row unsplit). This
// gives nvjet's cluster size and CTAs on all 38 recorded launches (the grid padded to whole
// clusters along each side: padded_grid) and its tile on 35 (test_calibrate); it was read off
// these launches, none held out.
constexpr double kSmallRows = 192, kMinSplitK = 1344, kCluster4Ctas = 120;
constexpr int kSmallRowTileWidths[] = {64, 96, 128, 160};
constexpr int kSplits[] = {1, 2, 4}, kMaxSplit = kSplits[std::size(kSplits) - 1];

std::optional<GemmLaunch> small_row_launch(int sms, double m, double n, double k) {
  if (m > kSmallRows) return std::nullopt;
  std::optional<GemmLaunch> best;
  std::tuple<double, int, double, int> best_key;  // larger is better: see above
  const auto consider = [&](int tile_n, int max_split) {
    const double rows = std::ceil(m / tile_n);
    for (const int tile_m : kSmallRowTileWidths)
      for (const int split : kSplits) {
        if (split > max_split || (split > 1 && k / split < kMinSplitK)) continue;
        const double tiles = std::ceil(n / tile_m) * rows * split;
        if (tiles > sms) continue;
        const double padded = std::ceil(n / tile_m) * tile_m * rows * tile_n;
        const std::tuple key{tiles, -split, -padded, tile_m};
        if (best && key <= best_key) continue;
        best = GemmLaunch{tile_m, tile_n, 2, tiles, tiles, 1, split};
        best_key = key;
      }
  };
  const int one_row = static_cast<int>(std::ceil(m / 16) * 16);
  consider(one_row, kMaxSplit);
  if (std::fmod(m, 64) == 0) consider(64, kMaxSplit);  // rows of 64 only where they divide m
  // 64 rows whose one row of tiles needs pairs (more CTAs than clusters of 4 hold) and a split
  // of k: two rows of 32 in pairs over the rows, one split fewer (nvjet's 64×32 1x2 launches).
  if (best && m == 64 && best->tile_n == 64 && best->tiles > kCluster4Ctas && best->split_k > 1) {
    const int fewer = best->split_k / 2;
    best.reset();
    consider(32, fewer);
  }
  if (!best) return std::nullopt;
  const double rows = std::ceil(m / best->tile_n);
  if (rows == 2 && best->tiles <= kCluster8Ctas)
    best->cluster = 8, best->cluster_m = 4;
  else if (best->tiles <= kCluster4Ctas)
    best->cluster = 4, best->cluster_m = 4;
  else
    best->cluster_m = rows == 2 ? 1 : 2;  // a pair over the two rows, else along the columns
  // Slices of k lie along the rows of the grid (96 × 1,024 in 4 slices of 3 rows, 2×4 clusters:
  // 8 × 12 CTAs, file split-k-more).
  best->ctas = padded_grid(*best, std::ceil(n / best->tile_m), rows * best->split_k, 1);
  return best;
}

// A GEMM of two waves of 192×192 tiles or more: nvjet's 192×192 tiles unless 256×128 or 128×256
// (the other tiles it chose for such GEMMs here) need clearly less padded work in whole waves.
GemmLaunch large_gemm_launch(int sms, double m, double n, double batch) {
  GemmLaunch best;
  best.tiles = tiles_of(m, n, batch, best.tile_m, best.tile_n);
  best.ctas = sms;
  double best_work =
      std::ceil(best.tiles / sms) * best.tile_m * best.tile_n * (1 - kSquareTileGain);
  for (const auto& [tm, tn] : kLargeNvjetTiles) {
    const double tiles = tiles_of(m, n, batch, tm, tn);
    const double work = std::ceil(tiles / sms) * tm * tn;
    if (work < best_work) best_work = work, best.tile_m = tm, best.tile_n = tn, best.tiles = tiles;
  }
  best.cluster_m = cluster_m_of(best.tile_m, best.tile_n, best.cluster);
  return best;
}

GemmLaunch launch_of(int sms, double m, double n, double k, double batch) {
  if (batch <= 1)
    if (const auto l = small_row_launch(sms, m, n, k)) return *l;
  GemmLaunch best;
  best.tiles = tiles_of(m, n, batch, best.tile_m, best.tile_n);
  if (best.tiles >= 2.0 * sms) return large_gemm_launch(sms, m, n, batch);
  double best_work = INFINITY;
  for (const auto& [tm, tn] : kNvjetTiles) {
    const double tiles = tiles_of(m, n, batch, tm, tn);
    const int cluster = tiles <= kCluster8Ctas ? 8 : 2;
    const double wave = cluster == 8 ? kCluster8Ctas : sms, area = double(tm) * tn;
    const double work = std::ceil(tiles / wave) * area;
    const double best_area = double(best.tile_m) * best.tile_n;
    if (work < best_work ||
        (work == best_work && (area > best_area || (area == best_area && tiles < best.tiles)))) {
      best_work = work;
      best = {tm, tn, cluster, tiles, std::min(tiles, wave)};
    }
  }
  // One CTA per tile up to a wave: the grid padded to whole clusters.
  const double cols = std::ceil(n / best.tile_m), rows = std::ceil(m / best.tile_n);
  const bool one_tile = best.tiles <= best.ctas;
  best.cluster_m = one_tile ? cluster_m_of(best.tile_m, best.tile_n, best.cluster, cols, rows)
                            : cluster_m_of(best.tile_m, best.tile_n, best.cluster);
  if (one_tile) best.ctas = padded_grid(best, cols, rows, batch);
  return best;
}

}  // namespace

GemmLaunch gemm_launch(int sms, double m, double n, double k, double batch) {
  GemmLaunch l = launch_of(sms, m, n, k, batch);
  l.k = k, l.m = m, l.n = n;
  return l;
}

double padded_grid(const GemmLaunch& l, double cols, double rows, double batch) {
  const auto [cm, cn] = l.cluster_shape();
  return std::ceil(cols / cm) * cm * std::ceil(rows / cn) * cn * std::max(1.0, batch);
}

double load_intensity(const GemmLaunch& l) {
  const auto [cm, cn] = l.cluster_shape();
  return double(l.tile_m) * l.tile_n / (double(l.tile_m) / cn + double(l.tile_n) / cm);
}

KernelShape gemm_shape(int sms, double m, double n, double k, double batch) {
  return gemm_shape(gemm_launch(sms, m, n, k, batch));
}

KernelShape gemm_shape(const GemmLaunch& l) {
  // One tile per CTA in clusters: each cluster is placed whole, the CTAs that pad it (no tile,
  // they end at once) with it, so a launch's rounds beside held SMs count its whole grid, as
  // tiles. Measured (an H100, file split-k-more): 96 × 3,072 on nvjet's 128×32 tiles in 2×4
  // clusters, 72 tiles on 96 CTAs, ran ×1.59 of its time alone beside 16 held SMs, where its 72
  // tiles alone would fit the 72 SMs clusters of 8 find there (×1.00). What this overstates: the
  // padded CTAs' load on HBM (mechanism 3's running CTAs), a few percent of such a launch's CTAs.
  const double tiles = l.cluster > 1 && l.tiles <= l.ctas ? l.ctas : l.tiles;
  KernelShape k = persistent_shape(Family::gemm, tiles, l.ctas, l.cluster);
  k.load_intensity =
      static_cast<std::uint8_t>(std::clamp(std::round(load_intensity(l)), 1.0, 255.0));
  if (l.k > 0) {  // a tile and its slice of k, for its lone CTA's time
    k.cta_k = static_cast<float>(l.k / std::max(1, l.split_k));
    k.tile_m = static_cast<std::uint16_t>(l.tile_m);
    k.tile_n = static_cast<std::uint16_t>(l.tile_n);
    k.cluster_m = static_cast<std::uint8_t>(l.cluster_shape()[0]);
  }
  // The reduction reads each slice's fp32 partial sums and writes the bf16 result, one block
  // per 32 columns × 16 rows of it (the grid of every recorded splitKreduce_kernel).
  if (l.split_k > 1) {
    k.reduce_bytes = static_cast<float>(l.m * l.n * (4.0 * l.split_k + 2));
    k.reduce_blocks = static_cast<float>(std::ceil(l.n / 32) * std::ceil(l.m / 16));
  }
  return k;
}

KernelShape gemm_fp8_shape(int sms, double m, double n) {
  return persistent_shape(Family::gemm_fp8, tiles_of(m, n, 1, 128, 128), sms, 1);
}

KernelShape elementwise_shape(Family f, double bytes) {
  const double blocks = std::max(1.0, std::ceil(bytes / (kElementsPerBlock * kBytesPerElement)));
  return {f, Schedule::grid, 16, static_cast<float>(blocks)};
}

KernelShape grid_stride_shape(int sms, Family f) {
  return {f, Schedule::grid, 8, static_cast<float>(sms * 16)};
}

KernelShape index_add_shape(int sms, double bytes) {
  const double blocks =
      std::ceil(bytes / kBytesPerElement / kIndexAddThreads);  // a thread per element
  return {Family::ew_scatter_add, Schedule::grid, 16,
          static_cast<float>(std::clamp(blocks, 1.0, 8.0 * sms))};
}

KernelShape elementwise_kernel_shape(int sms, Family f, double bytes) {
  if (f == Family::ew_scatter_add) return index_add_shape(sms, bytes);
  return f == Family::ew_fp8_dequant || f == Family::ew_sum_fp32 ? grid_stride_shape(sms, f)
                                                                 : elementwise_shape(f, bytes);
}

KernelShape attention_shape(int sms, bool backward) {
  return {backward ? Family::attention_bwd : Family::attention, Schedule::persistent_dynamic, 1,
          static_cast<float>(sms)};
}

KernelShape grouped_shape(int sms, bool dynamic) {
  return {Family::grouped_gemm,
          dynamic ? Schedule::persistent_dynamic : Schedule::persistent_static, 1,
          static_cast<float>(sms)};
}

std::array<GemmDims, 3> newton_schulz_gemms(double rows, double cols) {
  const double m = std::min(rows, cols), n = std::max(rows, cols);
  return {GemmDims{m, m, n}, GemmDims{m, m, m}, GemmDims{m, n, m}};
}

std::vector<KernelPart> newton_schulz_parts(const KernelCost& cost, double rows, double cols,
                                            double batch, bool epilogues) {
  const double m = std::min(rows, cols), n = std::max(rows, cols);
  const auto g = newton_schulz_gemms(m, n);
  auto gemm = [&](const GemmDims& d) {
    return KernelPart{gemm_shape(cost.sm_count(), d.m, d.n, d.k, batch),
                      batch * cost.gemm_s(d.m, d.n, d.k)};
  };
  // bf16: a scale reads and writes 2 bytes per element, a sum reads 4 and writes 2.
  auto ew = [&](double elems, double bytes_per_elem) {
    const auto w = elementwise_work(cost, Family::ew_add, batch * elems * bytes_per_elem);
    return KernelPart{w.shape, w.alone_s, w.hbm_bytes};
  };
  const std::vector<KernelPart> one =
      epilogues ? std::vector{gemm(g[0]), gemm(g[1]), gemm(g[2])}
                : std::vector{gemm(g[0]),   ew(m * m, 4), ew(m * m, 4), gemm(g[1]),
                              ew(m * m, 6), ew(m * n, 4), gemm(g[2]),   ew(m * n, 6)};
  std::vector<KernelPart> parts;
  for (int it = 0; it < 5; ++it) parts.insert(parts.end(), one.begin(), one.end());
  return parts;
}

}  // namespace twin::hardware
