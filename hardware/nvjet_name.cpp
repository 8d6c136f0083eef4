#include "hardware/nvjet_name.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <stdexcept>
#include <string>

namespace twin::hardware {

GemmLaunch nvjet_named_launch(std::string_view name, const GemmDims& d, double batch, double grid,
                              int sms) {
  const std::string kernel(name), prefix = "nvjet_sm90_tst_";
  // The first three "<a>x<b>" fields after the prefix: tile, k tile × stages, cluster.
  int v[3][2] = {};
  std::size_t at = kernel.rfind(prefix, 0) == 0 ? prefix.size() : std::string::npos;
  for (auto& f : v) {
    int x = 0, y = 0, used = 0;
    if (at == std::string::npos ||
        std::sscanf(kernel.c_str() + at, "%dx%d_%n", &x, &y, &used) != 2 || used == 0 || x <= 0 ||
        y <= 0)
      throw std::invalid_argument("\"" + kernel +
                                  "\" is not an nvjet kernel name: expected "
                                  "nvjet_sm90_tst_<tile_m>x<tile_n>_<k tile>x<stages>_<cluster "
                                  "m>x<cluster n>_…");
    f[0] = x, f[1] = y, at += static_cast<std::size_t>(used);
  }
  GemmLaunch g{v[0][0], v[0][1], v[2][0] * v[2][1]};
  g.cluster_m = v[2][0];
  g.k = d.k, g.m = d.m, g.n = d.n;
  const double cols = std::ceil(d.n / g.tile_m), rows = std::ceil(d.m / g.tile_n);
  g.tiles = cols * rows * std::max(1.0, batch);
  if (kernel.find("splitK") != std::string::npos) {
    if (!(grid > 0))
      throw std::invalid_argument("\"" + kernel +
                                  "\" splits k: its slices need the launch's grid (CTAs)");
    g.split_k = static_cast<int>(std::max(1.0, std::round(grid / g.tiles)));
    g.tiles = g.ctas = grid;  // the output tiles once per slice of k
  } else if (grid > 0) {
    // In clusters the grid is the tiles padded to whole clusters (kernel_shapes.hpp).
    g.ctas = g.cluster > 1 ? grid : std::min(grid, g.tiles);
  } else {
    g.ctas = g.tiles > sms ? sms : g.cluster > 1 ? padded_grid(g, cols, rows, batch) : g.tiles;
  }
  return g;
}

}  // namespace twin::hardware
