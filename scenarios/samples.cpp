#include "scenarios/samples.hpp"

#include <fmt/format.h>

#include "reports/metrics.hpp"

namespace twin::scenarios {

std::vector<LoadOptions> sample_loads(const LoadOptions& lo, int n) {
  std::vector<LoadOptions> out;
  for (int i = 0; i < n; ++i) {
    out.push_back(lo);
    out.back().sets.push_back(fmt::format("shared.sample={}", i));
  }
  return out;
}

double add_percentiles(Json& row, const std::string& key, const std::vector<const Json*>& runs) {
  std::vector<double> v;
  for (const Json* r : runs) v.push_back((*r)[key].get<double>());
  for (const auto& [q, tag] : {std::pair{0.1, "_p10"}, {0.5, "_p50"}, {0.9, "_p90"}})
    row[key + tag] = reports::percentile(v, q);
  return reports::percentile(v, 0.5);
}

}  // namespace twin::scenarios
