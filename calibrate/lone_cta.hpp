// A lone CTA of nvjet's tiles, measured (contention.hpp, mechanism 3's own saturation): its
// set-up and rates read off rounds of lone CTAs, the numbers `twin-fit-contention --lone-cta`
// writes into the profile.
#pragma once

#include <string>
#include <vector>

#include "hardware/contention.hpp"

namespace twin::calibrate {

// A lone CTA of nvjet's tiles (contention.hpp, mechanism 3), from contention_bench.py's
// `lone_cta` cases (file y): with 124 SMs held (pairs) or 112 (clusters of 4) a round is a few
// lone CTAs, so per tile the launch's time over its rounds (m's cluster tables) against k is a
// line t_s + k·s. t_s: the median over the tiles; F: the median multiply-add rate of the tiles
// at ≥ 3.5 TMAC/s (bound by their SM's tensor cores), r: the median byte rate of the others
// (operands, bf16). Throws std::runtime_error naming the file on bad input.
struct LoneCtaTile {
  std::string tile;  // "<tile_m>x<tile_n> in <cluster> (n=…)"
  double setup_s = 0, per_k_s = 0, macs_per_k = 0, bytes_per_k = 0;
  double rms_s = 0, mean_s = 0;  // the line's residual and the rounds' mean time
  int points = 0;
};
std::vector<LoneCtaTile> lone_cta_tiles(const std::string& file,
                                        const hardware::ContentionModel& m);
hardware::ContentionModel::LoneCta fit_lone_cta(const std::vector<LoneCtaTile>& tiles);

}  // namespace twin::calibrate
