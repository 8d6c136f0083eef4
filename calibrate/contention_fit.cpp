#include "calibrate/contention_fit.hpp"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <regex>
#include <set>
#include <stdexcept>

#include "hardware/kernel_shapes.hpp"

namespace twin::calibrate {

using hardware::Family;
using hardware::KernelShape;
using hardware::Schedule;
using Json = nlohmann::json;

namespace {

constexpr int kSms = 132;            // the measured H200
constexpr int kSmemPerSm = 233472;   // bytes (228 KiB)

// The launch that took longest: the kernel that decides the curve.
const Json* major_launch(const Json& c) {
  const Json* best = nullptr;
  for (const auto& l : c["launches"])
    if (l.contains("grid") && l["grid"].is_array() && (!best || l.value("dur_us", 0.0) > best->value("dur_us", 0.0)))
      best = &l;
  return best;
}

double product(const Json& v) {
  double p = 1;
  for (const auto& x : v) p *= x.get<double>();
  return p;
}

KernelShape grid_shape(Family f, const Json* l) {
  if (!l) throw std::runtime_error("an elementwise case without launch records");
  const double threads = product((*l)["block"]);
  const double smem = (*l).value("smem_bytes", 0.0);
  const double per_sm = std::min({32.0, std::floor(2048 / threads), std::floor(kSmemPerSm / (smem + 1024))});
  return {f, Schedule::grid, static_cast<std::uint16_t>(std::max(1.0, per_sm)),
          static_cast<float>(product((*l)["grid"]))};
}

// The twin's cuBLAS shapes (kernel_shapes.hpp: tiles and CTAs as nvjet chooses them).
KernelShape gemm_case_shape(const Json& shape) {
  return hardware::gemm_shape(kSms, shape.value("m", 1792.0), shape.value("n", 6144.0), shape.value("batch", 1.0));
}

// Elementwise kernels of the bench → the family of their implementation.
const std::map<std::string, Family>& elementwise_families() {
  static const std::map<std::string, Family> m = {
      {"add", Family::ew_add},          {"mul", Family::ew_add},
      {"rmsnorm_fwd", Family::ew_norm},
      {"rmsnorm_bwd", Family::ew_norm_bwd}, {"swiglu_fwd", Family::ew_swiglu},
      {"swiglu_bwd", Family::ew_swiglu_bwd}, {"permute_gather", Family::ew_gather},
      {"unpermute_index_add", Family::ew_scatter_add}, {"fp32_accumulate_bf16", Family::ew_widen},
      {"cast_bf16_fp32", Family::ew_widen}, {"copy_strided", Family::ew_widen},
      {"fp8_block_quantize", Family::ew_fp8_quant}, {"fp8_block_dequantize", Family::ew_fp8_dequant},
      {"bf16_sum_fp32", Family::ew_sum_fp32}, {"cross_entropy_fwd", Family::ew_loss},
      {"cross_entropy_bwd", Family::ew_loss_bwd}};
  return m;
}

// group name and shape of one measured case; group "" = not modelled (reported as measured).
std::pair<std::string, KernelShape> classify(const Json& c) {
  const std::string cls = c["class"], kernel = c["kernel"];
  const Json* l = major_launch(c);
  if (cls == "elementwise") {
    const auto it = elementwise_families().find(kernel);
    if (it == elementwise_families().end()) return {"", {}};
    return {std::string(hardware::family_name(it->second)), grid_shape(it->second, l)};
  }
  if (cls == "gemm" || cls == "newton_schulz") return {"gemm", gemm_case_shape(c["shape"])};
  if (cls == "gemm_fp8")
    return {"gemm_fp8", hardware::gemm_fp8_shape(kSms, c["shape"].value("m", 0.0), c["shape"].value("n", 0.0))};
  if (cls == "attention" && (kernel.rfind("sdpa", 0) == 0 || kernel.rfind("flex", 0) == 0))
    return kernel.find("_bwd") != std::string::npos
               ? std::pair{std::string("attention_bwd"), hardware::attention_shape(kSms, true)}
               : std::pair{std::string("attention"), hardware::attention_shape(kSms, false)};
  if (cls == "grouped_gemm") {
    const bool dyn = kernel.find("dynamic") != std::string::npos;
    const KernelShape s{Family::grouped_gemm, dyn ? Schedule::persistent_dynamic : Schedule::persistent_static, 1, kSms};
    return {kernel.rfind("twin_", 0) == 0 ? "twin_grouped" : "grouped_gemm", s};
  }
  return {"", {}};
}

// A measurement file's JSON (std::runtime_error naming the file if it cannot be read).
Json read_measurement(const std::string& file) {
  std::ifstream in(file);
  if (!in) throw std::runtime_error(file + ": cannot open");
  try {
    return Json::parse(in);
  } catch (const std::exception& e) {
    throw std::runtime_error(file + ": invalid JSON: " + e.what());
  }
}

std::string case_name(const Json& c) {
  std::string s = c["kernel"].get<std::string>() + "[";
  bool first = true;
  for (const auto& [k, v] : c["shape"].items()) s += (first ? "" : ",") + k + "=" + v.dump(), first = false;
  return s + "]";
}

}  // namespace

hardware::ContentionModel model_for(const std::string& group, hardware::ContentionModel m) {
  if (group == "twin_grouped") {
    auto& p = m.family[static_cast<int>(Family::grouped_gemm)];
    p.boost_max = 1.0, p.cluster_sms = 1, p.sat_sms = 0;
    m.prepare();  // the table follows the parameters
  }
  return m;
}

namespace {

double sq_log_error(const std::vector<ContentionCase>& cases, const std::set<std::string>& groups,
                    const hardware::ContentionModel& m) {
  double e = 0;
  for (const auto& c : cases) {
    if (!groups.count(c.group)) continue;
    for (const auto& p : c.points)
      if (p.fitted) {
        const double r = std::log(m.slowdown(c.shape, p.held, c.alone_s) / p.measured);
        e += r * r;
      }
  }
  return e;
}

// Sets the parameter `ref` of `m` to the candidate with the least error over `groups`.
template <class Ref>
double best_of(const std::vector<ContentionCase>& cases, const std::set<std::string>& groups,
               hardware::ContentionModel& m, const std::vector<double>& candidates, Ref ref) {
  double best = ref(m), best_e = INFINITY;
  for (const double v : candidates) {
    ref(m) = v;
    const double e = sq_log_error(cases, groups, m);
    if (e < best_e) best_e = e, best = v;
  }
  ref(m) = best;
  return best_e;
}

std::vector<double> range(double lo, double hi, double step) {
  std::vector<double> v;
  for (double x = lo; x <= hi + 1e-9; x += step) v.push_back(x);
  return v;
}

}  // namespace

std::vector<ContentionCase> read_contention_cases(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<ContentionCase>> by_class;  // a later file's class replaces
  for (const auto& f : files) {
    const Json j = read_measurement(f);
    if (!j.contains("cases") || !j.contains("held_sms"))
      throw std::runtime_error(f + ": expected a contention_bench.py result (cases, held_sms)");
    std::vector<int> held = j["held_sms"].get<std::vector<int>>();
    std::set<int> fit_k;
    for (std::size_t i = 1; i < held.size(); i += 2) fit_k.insert(held[i]);
    std::map<std::string, std::vector<ContentionCase>> here;
    std::map<std::string, int> index;  // per group: alternate cases between fit and hold-out
    for (const auto& c : j["cases"]) {
      auto [group, shape] = classify(c);
      ContentionCase cc{case_name(c), group.empty() ? c["class"].get<std::string>() + ":unmodelled" : group, shape, {}};
      cc.bytes = c.value("bytes", 0.0);
      cc.alone_s = c.value("alone_ms", 0.0) * 1e-3;
      const double copy_GBps = j.contains("copy_engine_check") ? j["copy_engine_check"].value("alone_GBps", 0.0) : 0.0;
      if (copy_GBps > 0 && cc.bytes > 0)
        cc.copy_share = cc.bytes / (c["alone_ms"].get<double>() * 1e-3) / (copy_GBps * 1e9);
      const bool fit_case = !group.empty() && index[group]++ % 2 == 0;
      double most = 0;
      for (const auto& p : c["points"]) {
        // Blocked: the kernel could not start beside the holders (a cluster found no GPC with
        // room) and ran after they gave up — recorded as such since the holder reports time-outs;
        // before, seen as a slowdown that collapses while more SMs are held (no kernel gets 40%
        // faster with fewer SMs).
        if (!p.contains("slowdown")) continue;
        const double y = p["slowdown"].get<double>();
        most = std::max(most, y);
        if (y < 0.6 * most) continue;
        const int k = p["held_sms"];
        cc.points.push_back({k, y, fit_case && fit_k.count(k) > 0});
      }
      here[c["class"].get<std::string>()].push_back(std::move(cc));
    }
    for (auto& [cls, v] : here) by_class[cls] = std::move(v);
  }
  std::vector<ContentionCase> out;
  for (auto& [cls, v] : by_class)
    for (auto& c : v) out.push_back(std::move(c));
  return out;
}

void read_cluster_tables(const std::string& file, hardware::ContentionModel& m) {
  const Json j = read_measurement(file);
  if (!j.contains("held_sms") || !j.contains("clusters"))
    throw std::runtime_error(file + ": expected a cluster_probe.py result (held_sms, clusters)");
  m.cluster_held_sms = j["held_sms"].get<std::vector<double>>();
  for (int t = 0; t < 4; ++t) {
    const auto size = std::to_string(hardware::ContentionModel::kClusterSizes[t]);
    if (!j["clusters"].contains(size)) throw std::runtime_error(file + ": clusters." + size + " missing");
    std::map<double, double> at;
    for (const auto& r : j["clusters"][size]) {
      if (!r.contains("resident_ctas")) continue;  // blocked: 0
      auto v = r["resident_ctas"].get<std::vector<double>>();
      std::sort(v.begin(), v.end());
      at[r["held_sms"].get<double>()] = v[v.size() / 2];
    }
    auto& u = m.cluster_usable_sms[t];
    u.clear();
    for (const double k : m.cluster_held_sms) u.push_back(at.count(k) ? at[k] : 0.0);
  }
}

hardware::ContentionModel fit_base(const std::string& clusters_file) {
  hardware::ContentionModel base;
  for (const auto f : {Family::gemm, Family::grouped_gemm}) base.family[static_cast<int>(f)].cluster_sms = 2;
  base.gpcs = 8;  // the SM ids of clusters of 8 and 16 (reports/calibration/clusters/README.md)
  read_cluster_tables(clusters_file, base);
  return base;
}

namespace {
double copy_share(const std::vector<ContentionCase>& cases, const std::string& group) {
  std::map<std::string, const ContentionCase*> largest;  // kernel → its case with the most bytes
  for (const auto& c : cases) {
    if (c.group != group || c.copy_share <= 0) continue;
    auto& l = largest[c.name.substr(0, c.name.find('['))];
    if (!l || c.bytes > l->bytes) l = &c;
  }
  double sum = 0;
  for (const auto& [k, c] : largest) sum += c->copy_share;
  return largest.empty() ? 0 : std::round(sum / static_cast<double>(largest.size()) * 1000) / 1000;
}
}  // namespace

std::map<std::string, double> measured_clock_gains(const std::vector<std::string>& files) {
  std::map<std::string, std::vector<double>> gains;
  for (const auto& f : files) {
    const Json j = read_measurement(f);
    std::map<std::string, std::vector<double>> here;  // a later file's group replaces an earlier's
    bool any = false;
    for (const auto& c : j.value("cases", Json::array())) {
      double alone = 0;
      std::vector<double> plateau;
      for (const auto& p : c["points"]) {
        if (!p.contains("sm_clock_MHz") || !p["sm_clock_MHz"].is_number()) continue;
        const int k = p["held_sms"];
        const double mhz = p["sm_clock_MHz"];
        if (k == 0) alone = mhz;
        if (k >= 56 && k <= 112) plateau.push_back(mhz);
      }
      if (alone <= 0 || plateau.empty()) continue;
      any = true;
      const auto group = classify(c).first;
      std::nth_element(plateau.begin(), plateau.begin() + plateau.size() / 2, plateau.end());
      here[group.empty() ? c["class"].get<std::string>() : group].push_back(plateau[plateau.size() / 2] / alone);
    }
    if (!any) throw std::runtime_error(f + ": no sm_clock_MHz readings (contention_bench.py --clock)");
    for (auto& [g, v] : here) gains[g] = std::move(v);
  }
  std::map<std::string, double> out;
  for (auto& [g, v] : gains) {
    std::nth_element(v.begin(), v.begin() + v.size() / 2, v.end());
    out[g] = std::round(v[v.size() / 2] * 100) / 100;
  }
  return out;
}

hardware::ContentionModel fit_contention(const std::vector<ContentionCase>& cases,
                                         hardware::ContentionModel m,
                                         const std::map<std::string, double>& clock_gains) {
  m.sm_count = kSms;
  auto fam = [&](Family f) -> hardware::FamilyParams& { return m.family[static_cast<int>(f)]; };
  const auto boosts = range(0.9, 1.6, 0.01);
  // b_max: the measured clock gain where there is one, else fitted.
  auto fit_boost = [&](Family f) {
    const std::string g(hardware::family_name(f));
    if (const auto it = clock_gains.find(g); it != clock_gains.end()) {
      fam(f).boost_max = it->second;
      return sq_log_error(cases, {g}, m);
    }
    return best_of(cases, {g}, m, boosts,
                   [&](auto& mm) -> double& { return mm.family[static_cast<int>(f)].boost_max; });
  };
  std::vector<double> sats;
  for (double s = 8; s <= 400; s *= 1.04) sats.push_back(std::round(s * 10) / 10);
  // A compute family whose clock gain is measured: what else a CTA gains with fewer CTAs running
  // is memory-side (mechanism 3: its tiles' loads share L2 and HBM), fitted as a_sat and p;
  // compute-bound (a_sat = 0) stays a candidate. Without measured clocks, the clock gain is
  // fitted and a_sat stays 0.
  std::vector<double> compute_sats{0};
  compute_sats.insert(compute_sats.end(), sats.begin(), sats.end());
  auto fit_compute = [&](Family f) {
    double e = fit_boost(f);
    const std::string g(hardware::family_name(f));
    if (!clock_gains.count(g)) return e;
    auto& p = fam(f);
    double best_e = INFINITY, best_knee = p.knee;
    for (const double knee : {1.5, 2.0, 3.0, 4.0, 6.0, 8.0}) {
      p.knee = knee;
      e = best_of(cases, {g}, m, compute_sats, [&](auto& mm) -> double& { return mm.family[static_cast<int>(f)].sat_sms; });
      if (e < best_e) best_e = e, best_knee = knee;
    }
    p.knee = best_knee;
    e = best_of(cases, {g}, m, compute_sats, [&](auto& mm) -> double& { return mm.family[static_cast<int>(f)].sat_sms; });
    if (p.sat_sms == 0) p.knee = hardware::FamilyParams{}.knee;  // no saturation: the knee means nothing
    return e;
  };
  for (const Family f : {Family::grouped_gemm, Family::gemm_fp8, Family::attention, Family::attention_bwd})
    fit_compute(f);
  // cuBLAS's fixed time with its boost: only its cases include kernels short enough (6–30 µs) to
  // show it; the other compute families' measured kernels run ≥ 50 µs and keep t_f = 0.
  double best_fixed = 0, best_e = INFINITY;
  for (const double t : range(0, 10, 0.5)) {
    fam(Family::gemm).fixed_us = t;
    if (const double e = fit_compute(Family::gemm); e < best_e) best_e = e, best_fixed = t;
  }
  fam(Family::gemm).fixed_us = best_fixed;
  fit_compute(Family::gemm);
  // Elementwise: per family the SMs that saturate HBM and the per-SM gain with few SMs busy —
  // not the clock (measured: it stays at its top whatever the SMs held), but the memory side:
  // an SM's loads queue at its GPC's port behind the other busy SMs' (λ).
  const auto queues = range(0, 3, 0.25);
  auto fit_family = [&](int i) {
    const std::set<std::string> g{std::string(hardware::family_name(static_cast<Family>(i)))};
    double best = INFINITY, best_q = 0;
    for (const double q : queues) {
      m.family[i].gpc_queue = q;
      const double e = best_of(cases, g, m, sats, [&](auto& mm) -> double& { return mm.family[i].sat_sms; });
      if (e < best) best = e, best_q = q;
    }
    m.family[i].gpc_queue = best_q;
    return best_of(cases, g, m, sats, [&](auto& mm) -> double& { return mm.family[i].sat_sms; });
  };
  // The knee and the lone block's share too, per family: how sharply a kernel's memory latency
  // rises near saturation depends on its access pattern (a gather's random rows, a widening
  // cast's fp32 writes), and what one block reaches alone on its own (its warps' loads in flight).
  for (int i = static_cast<int>(Family::ew_add); i < hardware::kFamilies; ++i) {
    auto& p = fam(static_cast<Family>(i));
    double best_e = INFINITY, best_knee = 3, best_lone = 0;
    for (const double knee : {1.5, 2.0, 3.0, 4.0, 6.0, 8.0})
      for (const double lone : {0.0, 0.125, 0.25, 0.5, 1.0}) {
        p.knee = knee, p.lone_block = lone;
        const double e = fit_family(i);
        if (e < best_e) best_e = e, best_knee = knee, best_lone = lone;
      }
    p.knee = best_knee, p.lone_block = best_lone;
    fit_family(i);
    p.hbm_fraction = copy_share(cases, std::string(hardware::family_name(static_cast<Family>(i))));
  }
  return m;
}

Json contention_residuals(const std::vector<ContentionCase>& cases, const hardware::ContentionModel& m) {
  std::map<std::string, std::vector<const ContentionCase*>> groups;
  for (const auto& c : cases) groups[c.group].push_back(&c);
  Json out = Json::object();
  for (const auto& [g, cs] : groups) {
    if (g.find(":unmodelled") != std::string::npos) continue;
    const auto model = model_for(g, m);
    std::map<int, std::vector<double>> held_out;  // SMs held → |error| of each case
    double worst_out = 0, worst_fit = 0;
    Json rows = Json::array();
    for (const auto* c : cs)
      for (const auto& p : c->points) {
        if (p.held == 0) continue;
        const double pred = model.slowdown(c->shape, p.held, c->alone_s), err = pred / p.measured - 1;
        rows.push_back({{"case", c->name}, {"held_sms", p.held}, {"measured", p.measured},
                        {"model", pred}, {"error", err}, {"fitted", p.fitted}});
        if (p.fitted) {
          worst_fit = std::max(worst_fit, std::abs(err));
        } else {
          held_out[p.held].push_back(std::abs(err));
          worst_out = std::max(worst_out, std::abs(err));
        }
      }
    Json medians = Json::object();
    double worst_median = 0;
    for (auto& [k, v] : held_out) {
      std::sort(v.begin(), v.end());
      const double med = v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
      medians[std::to_string(k)] = med;
      worst_median = std::max(worst_median, med);
    }
    out[g] = {{"cases", cs.size()}, {"held_out_median_by_sms", medians},
              {"held_out_worst_median", worst_median}, {"held_out_worst", worst_out},
              {"fitted_worst", worst_fit}, {"points", rows}};
  }
  return out;
}

}  // namespace twin::calibrate
