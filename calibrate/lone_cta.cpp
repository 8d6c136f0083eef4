#include "calibrate/lone_cta.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>
#include <utility>

#include "calibrate/launch_records.hpp"

namespace twin::calibrate {

using hardware::Family;
using Json = nlohmann::json;

std::vector<LoneCtaTile> lone_cta_tiles(const std::string& file,
                                        const hardware::ContentionModel& m) {
  const Json doc = read_measurement(file);
  if (!doc.contains("cases") || !doc["cases"].is_array())
    throw std::runtime_error(file + ": expected a contention_bench.py result (cases)");
  std::map<std::string, LoneCtaTile> tiles;
  std::map<std::string, std::vector<std::pair<double, double>>> rounds;  // tile → (k, s)
  for (const auto& c : doc["cases"]) {
    const Json* l = major_launch(c);
    if (!l) throw std::runtime_error(file + ": a lone_cta case without launch records");
    const double k = c["shape"].value("k", 0.0);
    const auto g = nvjet_launch(*l, {c["shape"].value("m", 0.0), c["shape"].value("n", 0.0), k}, 1);
    const int held = g.cluster == 2 ? 124 : 112;  // a few lone clusters at a time
    const int usable = m.usable_sms(Family::gemm, held, g.cluster);
    for (const auto& p : c["points"]) {
      if (p.value("held_sms", -1) != held || !p.contains("median_ms") || usable <= 0) continue;
      const std::string key = fmt::format("{}x{} in {} (n={})", g.tile_m, g.tile_n, g.cluster,
                                          c["shape"].value("n", 0));
      rounds[key].emplace_back(
          k, p["median_ms"].get<double>() * 1e-3 / std::ceil(product((*l)["grid"]) / usable));
      tiles[key] = {key, 0, 0, double(g.tile_m) * g.tile_n, 2.0 * (g.tile_m + g.tile_n)};
    }
  }
  std::vector<LoneCtaTile> out;
  for (auto& [key, t] : tiles) {  // least squares: time = t_s + k·s
    const auto& v = rounds[key];
    if (v.size() < 2) continue;
    double mk = 0, mt = 0, sxy = 0, sxx = 0, syy = 0;
    for (const auto& [k, s] : v) mk += k / v.size(), mt += s / v.size();
    for (const auto& [k, s] : v) sxy += (k - mk) * (s - mt), sxx += (k - mk) * (k - mk);
    if (sxx <= 0) continue;  // one k only: no line
    t.per_k_s = sxy / sxx, t.setup_s = mt - t.per_k_s * mk, t.mean_s = mt;
    for (const auto& [k, s] : v) syy += std::pow(s - t.setup_s - t.per_k_s * k, 2);
    t.rms_s = std::sqrt(syy / v.size()), t.points = static_cast<int>(v.size());
    out.push_back(t);
  }
  if (out.empty())
    throw std::runtime_error(file +
                             ": no tile with lone rounds at two k or more (cases of "
                             "contention_bench.py --only lone_cta, 124 or 112 SMs held)");
  return out;
}

hardware::ContentionModel::LoneCta fit_lone_cta(const std::vector<LoneCtaTile>& tiles) {
  constexpr double kTensorBound = 3.5e12;  // MAC/s: a tile this fast is bound by its SM
  const auto median = [](std::vector<double> v) {
    if (v.empty()) return 0.0;
    std::sort(v.begin(), v.end());
    const std::size_t h = v.size() / 2;
    return v.size() % 2 ? v[h] : 0.5 * (v[h - 1] + v[h]);
  };
  std::vector<double> setup, macs, bytes;
  for (const auto& t : tiles) {
    setup.push_back(t.setup_s);
    const double rate = t.macs_per_k / t.per_k_s;
    (rate >= kTensorBound ? macs : bytes)
        .push_back(rate >= kTensorBound ? rate : t.bytes_per_k / t.per_k_s);
  }
  return {median(setup) * 1e6, median(bytes) * 1e-9, median(macs) * 1e-12};
}

}  // namespace twin::calibrate
