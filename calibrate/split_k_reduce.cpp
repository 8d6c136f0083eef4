#include "calibrate/split_k_reduce.hpp"

#include <fmt/format.h>

#include <cmath>
#include <stdexcept>
#include <tuple>

#include "calibrate/contention_data.hpp"
#include "calibrate/launch_records.hpp"
#include "calibrate/line_fit.hpp"

namespace twin::calibrate {

using Json = nlohmann::json;

namespace {
bool is_reduce(const Json& l) {
  return l.value("name", "").find("splitKreduce_kernel") != std::string::npos;
}

// The durations (s) of a launch list's split-K slices and reduction; {0, 0} if it lacks either.
std::pair<double, double> split_k_durations(const Json& launches) {
  double slices = 0, reduce = 0;
  for (const auto& l : launches) {
    if (is_reduce(l))
      reduce += l.value("dur_us", 0.0) * 1e-6;
    else if (split_k_launch(l))  // nvjet's kernel: "splitK" in its name too
      slices += l.value("dur_us", 0.0) * 1e-6;
  }
  return reduce > 0 ? std::pair{slices, reduce} : std::pair{0.0, 0.0};
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
      out.push_back({m * n * (4.0 * g.split_k + 2), reduce->value("dur_us", 0.0) * 1e-6});
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

std::vector<SplitKBeside> split_k_beside(const std::string& file) {
  const Json doc = read_measurement(file);
  if (!doc.contains("cases") || !doc["cases"].is_array())
    throw std::runtime_error(file + ": expected a contention_bench.py result (cases)");
  std::vector<SplitKBeside> out;
  for (const auto& c : doc["cases"]) {
    if (!c.contains("launches") || !c.contains("points")) continue;
    const auto [slices_alone, reduce_alone] = split_k_durations(c["launches"]);
    if (reduce_alone <= 0 || slices_alone <= 0) continue;
    const Json& s = c["shape"];
    SplitKBeside r{fmt::format("{}[m={},n={},k={}]", c.value("kernel", ""), s.value("m", 0),
                               s.value("n", 0), s.value("k", 0)),
                   recorded_gemm_shape(c), c.value("alone_ms", 0.0) * 1e-3};
    r.slices_alone_s = slices_alone, r.reduce_alone_s = reduce_alone;
    r.shape_n = s.value("n", 0);
    for (const auto& p : c["points"]) {
      if (!p.contains("launches")) continue;
      std::tie(r.slices_s, r.reduce_s) = split_k_durations(p["launches"]);
      r.held = p.value("held_sms", 0);
      if (r.reduce_s > 0 && r.slices_s > 0) out.push_back(r);
    }
  }
  if (out.empty())
    throw std::runtime_error(file +
                             ": no split-K case recorded its launches beside held SMs "
                             "(contention_bench.py --launches-held)");
  return out;
}

std::pair<double, double> fit_split_k_waves(const std::vector<SplitKBeside>& rows,
                                            hardware::ContentionModel m) {
  if (rows.empty() || m.split_k_reduce.GBps <= 0)
    throw std::runtime_error("fit_split_k_waves: no measured reduction or no reduction model");
  double best = INFINITY, best_beta = 0, best_fixed = 0;
  for (int b = 5; b <= 20; ++b)  // β = 0.25 … 1: at least a block's share of four to an SM
    for (int f = 0; f <= static_cast<int>(10 * m.split_k_reduce.setup_us + 1e-9); ++f) {
      m.split_k_reduce.lone_block = 0.05 * b, m.split_k_reduce.fixed_us = 0.1 * f;
      double sum = 0;
      for (const auto& r : rows) {
        const auto split = m.split_k(r.shape, r.alone_s);
        if (!split) throw std::runtime_error(r.name + ": not a split-K launch in the model");
        const double e = std::log(m.slowdown(split->reduce.shape, r.held, split->reduce.alone_s) /
                                  (r.reduce_s / r.reduce_alone_s));
        sum += e * e;
      }
      if (sum < best) best = sum, best_beta = 0.05 * b, best_fixed = 0.1 * f;
    }
  return {best_beta, best_fixed};
}

std::pair<double, double> fit_split_k_waves(const std::string& file, int columns,
                                            const hardware::ContentionModel& m) {
  auto rows = split_k_beside(file);
  std::erase_if(rows, [&](const SplitKBeside& r) { return r.shape_n != columns; });
  if (rows.empty())
    throw std::runtime_error(fmt::format("{}: no split-K GEMM of {} columns", file, columns));
  return fit_split_k_waves(rows, m);
}

hardware::ContentionModel::SplitKReduce fit_split_k_reduce(const std::vector<ReduceRecord>& r) {
  const auto f = fit_line(
      r, [](const ReduceRecord& x) { return x.bytes; },
      [](const ReduceRecord& x) { return x.seconds; });
  if (f.sxx <= 0 || f.sxy <= 0)
    throw std::runtime_error("the split-K reductions' times do not grow with their bytes");
  return {f.a * 1e6, 1e-9 / f.b};
}

}  // namespace twin::calibrate
