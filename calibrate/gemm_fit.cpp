#include "calibrate/gemm_fit.hpp"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <map>
#include <stdexcept>
#include <tuple>

#include "calibrate/launch_records.hpp"
#include "hardware/kernel_cost.hpp"

namespace twin::calibrate {

using Json = nlohmann::json;

namespace {

double positive(const Json& c, const char* key, const std::string& where) {
  if (!c.contains(key) || !c[key].is_number() || !(c[key].get<double>() > 0))
    throw std::runtime_error(where + "." + key + ": expected a positive number");
  return c[key].get<double>();
}

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const std::size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

double sum_squared_log(const std::vector<GemmAlone>& pts, const hardware::Profile& p) {
  const hardware::KernelCost cost(p);
  double s = 0;
  for (const auto& g : pts) {
    const double e = std::log(cost.gemm_s(g.m, g.n, g.k, g.fp8) / g.seconds);
    s += e * e;
  }
  return s;
}

// A profile file's value at section.key, following `base` (a name in the same folder).
const Json* find_value(const std::filesystem::path& file, const char* section, const char* key,
                       Json& doc) {
  for (std::filesystem::path f = file; !f.empty();) {
    doc = read_measurement(f.string());
    if (doc.contains(section) && doc[section].contains(key)) {
      const Json& v = doc[section][key];
      if (!v.contains("value") || !v["value"].is_number())
        throw std::runtime_error(f.string() + ": " + section + "." + key +
                                 ".value: expected a number");
      return &v["value"];
    }
    if (!doc.contains("base")) break;
    if (!doc["base"].is_string())
      throw std::runtime_error(f.string() + ": base: expected a profile name");
    f = f.parent_path() / (doc["base"].get<std::string>() + ".json");
  }
  return nullptr;
}

// A sweep is a GEMM's time alone only if timed with the host's enqueue hidden (lead_us > 0).
void require_lead(const Json& j, const std::string& where, const char* tool) {
  if (!(j.value("lead_us", 0.0) > 0))
    throw std::runtime_error(where + "lead_us: timed with the host's enqueue (" + tool +
                             " --lead-us 0, or before 2026-12-05), not a GEMM's time alone");
}

// twin-calibrate's sweep (`measurements.gemm_bf16`), timed with the host's enqueue hidden.
std::vector<GemmAlone> calibrate_gemms(const Json& m, const std::string& file) {
  require_lead(m, file + ": measurements.", "twin-calibrate");
  std::vector<GemmAlone> out;
  for (std::size_t i = 0; i < m["gemm_bf16"].size(); ++i) {
    const Json& r = m["gemm_bf16"][i];
    const std::string where = file + ": measurements.gemm_bf16[" + std::to_string(i) + "]";
    out.push_back({positive(r, "m", where), positive(r, "n", where), positive(r, "k", where),
                   positive(r, "median_ms", where) * 1e-3});
  }
  return out;
}

// fp8_gemm_bench.py's rows: torch.mm (bf16) and torch._scaled_mm with one scale per tensor (FP8).
std::vector<GemmAlone> fp8_bench_gemms(const Json& doc, const std::string& file) {
  require_lead(doc, file + ": ", "fp8_gemm_bench.py");
  std::vector<GemmAlone> out;
  for (std::size_t i = 0; i < doc["rows"].size(); ++i) {
    const Json& r = doc["rows"][i];
    const std::string where = file + ": rows[" + std::to_string(i) + "]";
    const double m = positive(r, "m", where), n = positive(r, "n", where),
                 k = positive(r, "k", where);
    out.push_back({m, n, k, positive(r, "bf16_ms", where) * 1e-3});
    if (r.contains("fp8_tensorwise_ms"))
      out.push_back({m, n, k, positive(r, "fp8_tensorwise_ms", where) * 1e-3, true});
  }
  return out;
}

}  // namespace

std::vector<GemmAlone> recorded_gemms_alone(const Json& doc, const std::string& file) {
  if (doc.contains("measurements") && doc["measurements"].contains("gemm_bf16"))
    return calibrate_gemms(doc["measurements"], file);
  if (doc.contains("rows") && doc["rows"].is_array()) return fp8_bench_gemms(doc, file);
  std::vector<GemmAlone> out;
  if (!doc.contains("cases") || !doc["cases"].is_array())
    throw std::runtime_error(
        file +
        ": cases: expected contention_bench.py's list of cases (or "
        "twin-calibrate's measurements.gemm_bf16, or fp8_gemm_bench.py's rows)");
  for (std::size_t i = 0; i < doc["cases"].size(); ++i) {
    const Json& c = doc["cases"][i];
    const std::string where = file + ": cases[" + std::to_string(i) + "]";
    if (c.value("class", "") != "gemm" || !c.contains("alone_ms") || c["alone_ms"].is_null())
      continue;
    if (!c.contains("shape") || !c["shape"].is_object())
      throw std::runtime_error(where + ".shape: expected {m, n, k}");
    const Json& s = c["shape"];
    if (s.value("batch", 1) != 1) continue;  // batched (Newton–Schulz): not one GEMM
    out.push_back({positive(s, "m", where + ".shape"), positive(s, "n", where + ".shape"),
                   positive(s, "k", where + ".shape"), positive(c, "alone_ms", where) * 1e-3});
  }
  return out;
}

std::vector<GemmAlone> gemms_alone(const std::vector<std::string>& files) {
  std::map<std::tuple<bool, double, double, double>, std::vector<double>> by_shape;
  for (const auto& f : files)
    for (const auto& g : recorded_gemms_alone(read_measurement(f), f))
      by_shape[{g.fp8, g.m, g.n, g.k}].push_back(g.seconds);
  std::vector<GemmAlone> out;
  for (const auto& [key, t] : by_shape) {
    const auto& [fp8, m, n, k] = key;
    out.push_back({m, n, k, median(t), fp8});
  }
  return out;
}

GemmSplit alternate_shapes(const std::vector<GemmAlone>& pts) {
  GemmSplit s;
  for (std::size_t i = 0; i < pts.size(); ++i) (i % 2 ? s.held_out : s.fitted).push_back(pts[i]);
  return s;
}

GemmFit fit_gemm_alone(const std::vector<GemmAlone>& pts, hardware::Profile p,
                       bool fit_peak_fraction, bool fit_fixed) {
  if (pts.empty()) throw std::runtime_error("no GEMM timed alone to fit");
  if (fit_peak_fraction && fit_fixed)
    throw std::invalid_argument("f and the fixed time are fitted apart (one with h at a time)");
  if (fit_fixed && pts.front().fp8)
    throw std::invalid_argument("an FP8 GEMM's fixed time is the per-kernel cost: not fitted");
  const bool fp8 = pts.front().fp8;
  if (std::any_of(pts.begin(), pts.end(), [fp8](const GemmAlone& g) { return g.fp8 != fp8; }))
    throw std::runtime_error("bf16 and FP8 GEMMs are fitted apart");
  auto& e = p.efficiency;
  double& f = fp8 ? e.gemm_fp8_peak_fraction : e.gemm_peak_fraction;
  double& h = fp8 ? e.gemm_fp8_half_rows : e.gemm_half_rows;
  const hardware::KernelCost profile_cost(p);
  GemmFit best{f, 0, profile_cost.gemm_fixed_s(fp8) * 1e6};
  double least = INFINITY;
  // One of f (0.5 to 0.9975) and t_0 (0.25 to 12 µs; 0 would mean the per-kernel cost) on a
  // grid beside h, or neither.
  const int steps = fit_peak_fraction ? 200 : fit_fixed ? 48 : 1;
  for (int i = 0; i < steps; ++i) {
    if (fit_peak_fraction) f = 0.5 + 0.0025 * i;
    if (fit_fixed) e.gemm_fixed_us = 0.25 * (i + 1);
    for (int rows = 0; rows <= 5000; ++rows) {
      h = rows;
      if (const double s = sum_squared_log(pts, p); s < least)
        least = s,
        best = {f, static_cast<double>(rows), fit_fixed ? e.gemm_fixed_us : best.fixed_us};
    }
  }
  return best;
}

std::vector<double> gemm_alone_errors(const std::vector<GemmAlone>& pts,
                                      const hardware::Profile& p) {
  const hardware::KernelCost cost(p);
  std::vector<double> out;
  for (const auto& g : pts) out.push_back(cost.gemm_s(g.m, g.n, g.k, g.fp8) / g.seconds - 1);
  return out;
}

GemmBand gemm_band(const std::vector<GemmAlone>& pts, const std::vector<double>& err, double lo,
                   double hi) {
  GemmBand b;
  std::vector<double> a;
  for (std::size_t i = 0; i < pts.size(); ++i)
    if (pts[i].m >= lo && pts[i].m < hi) {
      a.push_back(std::abs(err[i]));
      if (std::abs(err[i]) > std::abs(b.worst_error)) b.worst_error = err[i];
    }
  std::sort(a.begin(), a.end());
  b.points = a.size();
  b.median_abs_error = a.empty() ? 0 : a[a.size() / 2];
  return b;
}

hardware::Profile gemm_profile(const std::string& profile_file) {
  hardware::Profile p;
  Json doc;
  const auto get = [&](const char* section, const char* key, bool required) {
    const Json* v = find_value(profile_file, section, key, doc);
    if (!v && required)
      throw std::runtime_error(profile_file + ": " + section + "." + key +
                               ": not in the profile or its bases");
    return v ? v->get<double>() : 0.0;
  };
  p.gpu.sm_count = static_cast<std::int64_t>(get("gpu", "sm_count", true));
  p.gpu.hbm_bw_GBps = get("gpu", "hbm_bw_GBps", true);
  p.gpu.bf16_dense_TFLOPs = get("gpu", "bf16_dense_TFLOPs", true);
  p.gpu.tdp_W = get("gpu", "tdp_W", false);
  p.gpu.power_limit_W = get("gpu", "power_limit_W", false);
  p.efficiency.gemm_peak_fraction = get("efficiency", "gemm_peak_fraction", true);
  p.efficiency.gemm_half_rows = get("efficiency", "gemm_half_rows", true);
  p.efficiency.kernel_overhead_us = get("efficiency", "kernel_overhead_us", true);
  p.efficiency.gemm_fixed_us = get("efficiency", "gemm_fixed_us", false);
  p.gpu.fp8_dense_TFLOPs = get("gpu", "fp8_dense_TFLOPs", false);
  p.efficiency.gemm_fp8_peak_fraction = get("efficiency", "gemm_fp8_peak_fraction", false);
  p.efficiency.gemm_fp8_half_rows = get("efficiency", "gemm_fp8_half_rows", false);
  return p;
}

}  // namespace twin::calibrate
