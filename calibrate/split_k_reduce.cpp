#include "calibrate/split_k_reduce.hpp"

#include <cmath>
#include <stdexcept>

#include "calibrate/launch_records.hpp"

namespace twin::calibrate {

using Json = nlohmann::json;

namespace {
bool is_reduce(const Json& l) {
  return l.value("name", "").find("splitKreduce_kernel") != std::string::npos;
}
}  // namespace

std::vector<ReduceRecord> split_k_reduce_records(const std::vector<std::string>& files) {
  std::vector<ReduceRecord> out;
  for (const auto& file : files) {
    const Json doc = read_measurement(file);
    if (!doc.contains("cases") || !doc["cases"].is_array())
      throw std::runtime_error(file + ": expected a contention_bench.py result (cases)");
    for (const auto& c : doc["cases"]) {
      if (!c.contains("launches") || !c["launches"].is_array()) continue;
      const Json* reduce = nullptr;
      for (const auto& l : c["launches"])
        if (is_reduce(l)) reduce = &l;
      const Json* slices = major_launch(c);  // nvjet's slices: the longer kernel
      if (!reduce || !slices || slices == reduce) continue;
      const Json& s = c["shape"];
      const double m = s.value("m", 0.0), n = s.value("n", 0.0);
      const auto g = nvjet_launch(*slices, {m, n, s.value("k", 0.0)}, 1);
      const double split = std::round(product((*slices)["grid"]) / g.tiles);
      out.push_back({m * n * (4 * split + 2), reduce->value("dur_us", 0.0) * 1e-6});
    }
  }
  if (out.size() < 2) {
    std::string names;
    for (const auto& f : files) names += (names.empty() ? "" : ", ") + f;
    throw std::runtime_error(names +
                             ": fewer than two split-K reductions (cases whose launches "
                             "include cublasLt::splitKreduce_kernel)");
  }
  return out;
}

hardware::ContentionModel::SplitKReduce fit_split_k_reduce(const std::vector<ReduceRecord>& r) {
  double mb = 0, mt = 0, sxy = 0, sxx = 0;
  for (const auto& x : r) mb += x.bytes / r.size(), mt += x.seconds / r.size();
  for (const auto& x : r)
    sxy += (x.bytes - mb) * (x.seconds - mt), sxx += (x.bytes - mb) * (x.bytes - mb);
  if (sxx <= 0 || sxy <= 0)
    throw std::runtime_error("the split-K reductions' times do not grow with their bytes");
  const double per_byte = sxy / sxx;
  return {(mt - per_byte * mb) * 1e6, 1e-9 / per_byte};
}

}  // namespace twin::calibrate
