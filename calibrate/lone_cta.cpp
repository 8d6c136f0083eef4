#include "calibrate/lone_cta.hpp"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

#include "calibrate/launch_records.hpp"
#include "calibrate/line_fit.hpp"

namespace twin::calibrate {

using hardware::Family;
using Json = nlohmann::json;

std::string LoneCtaTile::name() const {
  return fmt::format("{}x{} in {}x{}", tile_m, tile_n, cluster_m, cluster_n);
}

namespace {

std::array<double, 3> shape_of(const Json& c) {
  const Json& s = c.value("shape", Json::object());
  return {s.value("m", 0.0), s.value("n", 0.0), s.value("k", 0.0)};
}

// Least squares time = t_s + k·s over (k, time) rounds; points 0 if fewer than two k.
LoneCtaTile line(LoneCtaTile t, const std::vector<std::pair<double, double>>& v) {
  const auto f = fit_line(
      v, [](const auto& p) { return p.first; }, [](const auto& p) { return p.second; });
  if (f.sxx <= 0) return t;  // one k only: no line
  t.per_k_s = f.b, t.setup_s = f.a, t.mean_s = f.mean_y;
  double syy = 0;
  for (const auto& [k, s] : v) syy += std::pow(s - t.setup_s - t.per_k_s * k, 2);
  t.rms_s = std::sqrt(syy / v.size()), t.points = static_cast<int>(v.size());
  return t;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0.0;
  std::sort(v.begin(), v.end());
  const std::size_t h = v.size() / 2;
  return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
}

}  // namespace

GemmShapes gemm_shapes(const std::vector<std::string>& files) {
  GemmShapes shapes;
  for (const auto& f : files) {
    const Json doc = read_measurement(f);
    if (!doc.contains("cases") || !doc["cases"].is_array())
      throw std::runtime_error(f + ": expected a contention_bench.py result (cases)");
    for (const auto& c : doc["cases"]) shapes.insert(shape_of(c));
  }
  return shapes;
}

std::vector<LoneCtaTile> lone_cta_tiles(const std::vector<std::string>& files,
                                        const hardware::ContentionModel& m,
                                        const GemmShapes& held_out) {
  std::map<std::array<int, 4>, std::vector<std::pair<double, double>>> rounds;  // → (k, s)
  for (const auto& file : files) {
    const Json doc = read_measurement(file);
    if (!doc.contains("cases") || !doc["cases"].is_array())
      throw std::runtime_error(file + ": expected a contention_bench.py result (cases)");
    for (const auto& c : doc["cases"]) {
      const auto [rows, cols, k] = shape_of(c);
      if (held_out.count({rows, cols, k})) continue;
      const Json* l = major_launch(c);
      if (!l) throw std::runtime_error(file + ": a lone_cta case without launch records");
      if (split_k_launch(*l)) continue;  // not a tile's lone rounds (header)
      const auto g = nvjet_launch(*l, {rows, cols, k}, 1);
      const int held = g.cluster == 2 ? 124 : 112;  // a few lone clusters at a time
      const int usable = m.usable_sms(Family::gemm, held, g.cluster);
      for (const auto& p : c["points"]) {
        if (p.value("held_sms", -1) != held || !p.contains("median_ms") || usable <= 0) continue;
        const auto [cm, cn] = g.cluster_shape();
        rounds[{g.tile_m, g.tile_n, cm, cn}].emplace_back(
            k, p["median_ms"].get<double>() * 1e-3 / std::ceil(product((*l)["grid"]) / usable));
      }
    }
  }
  std::vector<LoneCtaTile> out;
  for (const auto& [kernel, v] : rounds)
    if (const auto t = line({kernel[0], kernel[1], kernel[2], kernel[3]}, v); t.points >= 2)
      out.push_back(t);
  if (out.empty())
    throw std::runtime_error(fmt::format(
        "{}: no kernel with lone rounds at two k or more (cases of contention_bench.py --only "
        "lone_cta, 124 or 112 SMs held, not in the held-out files)",
        fmt::join(files, ", ")));
  return out;
}

hardware::ContentionModel::LoneCta fit_lone_cta(const std::vector<LoneCtaTile>& tiles) {
  constexpr double kTensorBound = 3.5e12;  // MAC/s: a tile this fast is bound by its SM
  std::vector<double> setup, macs, bytes;
  hardware::ContentionModel::LoneCta lone;
  for (const auto& t : tiles) {
    setup.push_back(t.setup_s);
    const double rate = t.macs_per_k() / t.per_k_s;
    if (rate >= kTensorBound)
      macs.push_back(rate);
    else
      bytes.push_back(t.bytes_per_k() / t.per_k_s);
    lone.tile_m.push_back(t.tile_m), lone.tile_n.push_back(t.tile_n);
    lone.tile_cluster_m.push_back(t.cluster_m), lone.tile_cluster_n.push_back(t.cluster_n);
    lone.tile_setup_us.push_back(std::round(t.setup_s * 1e8) / 100);   // 0.01 µs
    lone.tile_per_k_ns.push_back(std::round(t.per_k_s * 1e12) / 1e3);  // 0.001 ns
  }
  lone.setup_us = median(setup) * 1e6, lone.stream_GBps = median(bytes) * 1e-9;
  lone.TMACps = median(macs) * 1e-12;
  return lone;
}

}  // namespace twin::calibrate
