// A lone CTA of nvjet's tiles, measured (contention.hpp, mechanism 3's own saturation): its
// set-up and rates read off rounds of lone CTAs, the numbers `twin-fit-contention --lone-cta`
// writes into the profile.
#pragma once

#include <array>
#include <set>
#include <string>
#include <vector>

#include "hardware/contention.hpp"

namespace twin::calibrate {

// A lone CTA of nvjet's tiles (contention.hpp, mechanism 3), from contention_bench.py's
// `lone_cta`, `lone_cta_wide` and `lone_cta_more` cases (files y, lone-wide, lone-more): with
// 124 SMs held (pairs) or 112 (clusters of 4) a round is a few lone CTAs, so per kernel (nvjet's
// tile in its cluster shape) the launch's time over its rounds (m's cluster tables) against k is
// a line t_s + k·s, pooled over the files and the GEMMs' shapes that ran the kernel. Split-K
// launches are left out: their time holds fp32 partials and cuBLASLt's reduction, which the
// model charges apart (ContentionModel::split_k). A case whose shape
// (m, n, k) is in `held_out` is left out: those files stay held out. Throws std::runtime_error
// naming the file on bad input.
struct LoneCtaTile {
  int tile_m = 0, tile_n = 0, cluster_m = 1, cluster_n = 1;
  double setup_s = 0, per_k_s = 0;
  double rms_s = 0, mean_s = 0;  // the line's residual and the rounds' mean time
  int points = 0;
  std::string name() const;  // "<tile_m>x<tile_n> in <cluster_m>x<cluster_n>"
  double macs_per_k() const { return double(tile_m) * tile_n; }
  double bytes_per_k() const { return 2.0 * (tile_m + tile_n); }  // bf16 operands
};
using GemmShapes = std::set<std::array<double, 3>>;  // (m, n, k)
// The GEMM shapes of contention_bench.py results (cases with a shape m, n, k).
GemmShapes gemm_shapes(const std::vector<std::string>& files);
std::vector<LoneCtaTile> lone_cta_tiles(const std::vector<std::string>& files,
                                        const hardware::ContentionModel& m,
                                        const GemmShapes& held_out = {});
// The profile's lone CTA: every kernel's line (the table), and the form for kernels not measured
// — t_s the median over the kernels, F the median multiply-add rate of those at ≥ 3.5 TMAC/s
// (bound by their SM's tensor cores), r the median byte rate of the others (operands, bf16).
hardware::ContentionModel::LoneCta fit_lone_cta(const std::vector<LoneCtaTile>& tiles);

}  // namespace twin::calibrate
