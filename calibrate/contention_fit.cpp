#include "calibrate/contention_fit.hpp"

#include <algorithm>
#include <cmath>
#include <map>
#include <set>
#include <tuple>

#include "calibrate/lone_cta.hpp"
#include "calibrate/split_k_reduce.hpp"

namespace twin::calibrate {

using hardware::Family;
using Json = nlohmann::json;

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
        const double r = std::log(c.slowdown(m, p.held) / p.measured);
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

hardware::ContentionModel fit_base(const BaseFiles& files) {
  hardware::ContentionModel base;
  for (const auto f : {Family::gemm, Family::grouped_gemm})
    base.family[static_cast<int>(f)].cluster_sms = 2;
  base.gpcs = 8;  // the SM ids of clusters of 8 and 16 (reports/calibration/clusters/README.md)
  read_cluster_tables(files.clusters, base);
  if (!files.lone_cta.empty())
    base.lone_cta = fit_lone_cta(lone_cta_tiles(files.lone_cta, base, gemm_shapes(files.held_out)));
  if (!files.split_k.empty())
    base.split_k_reduce = fit_split_k_reduce(split_k_reduce_records(files.split_k));
  return base;
}

namespace {
// The family's typical block: the median by registers (then threads, shared memory) of its
// cases' longest kernels (mechanism 5 at run time, beside the profile's NCCL CTA).
hardware::BlockResources typical_block(const std::vector<ContentionCase>& cases,
                                       const std::string& group) {
  std::vector<hardware::BlockResources> v;
  for (const auto& c : cases)
    if (c.group == group && c.block.threads > 0) v.push_back(c.block);
  if (v.empty()) return {};
  std::sort(v.begin(), v.end(), [](const auto& a, const auto& b) {
    return std::tie(a.registers, a.threads, a.smem_bytes) <
           std::tie(b.registers, b.threads, b.smem_bytes);
  });
  return v[v.size() / 2];
}

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
      e = best_of(cases, {g}, m, compute_sats,
                  [&](auto& mm) -> double& { return mm.family[static_cast<int>(f)].sat_sms; });
      if (e < best_e) best_e = e, best_knee = knee;
    }
    p.knee = best_knee;
    e = best_of(cases, {g}, m, compute_sats,
                [&](auto& mm) -> double& { return mm.family[static_cast<int>(f)].sat_sms; });
    if (p.sat_sms == 0)
      p.knee = hardware::FamilyParams{}.knee;  // no saturation: the knee means nothing
    return e;
  };
  // Elementwise first (Newton–Schulz, a cuBLAS case, runs elementwise kernels too): per family the
  // SMs that saturate HBM and the per-SM gain with few SMs busy — not the clock (measured: it stays
  // at its top whatever the SMs held), but the memory side: an SM's loads queue at its GPC's port
  // behind the other busy SMs' (λ).
  const auto queues = range(0, 3, 0.25);
  auto fit_family = [&](int i) {
    const std::set<std::string> g{std::string(hardware::family_name(static_cast<Family>(i)))};
    double best = INFINITY, best_q = 0;
    for (const double q : queues) {
      m.family[i].gpc_queue = q;
      const double e =
          best_of(cases, g, m, sats, [&](auto& mm) -> double& { return mm.family[i].sat_sms; });
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
    p.block = typical_block(cases, std::string(hardware::family_name(static_cast<Family>(i))));
  }
  for (const Family f :
       {Family::grouped_gemm, Family::gemm_fp8, Family::attention, Family::attention_bwd})
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
  return m;
}

Json contention_residuals(const std::vector<ContentionCase>& cases,
                          const hardware::ContentionModel& m) {
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
        const double pred = c->slowdown(model, p.held), err = pred / p.measured - 1;
        rows.push_back({{"case", c->name},
                        {"held_sms", p.held},
                        {"measured", p.measured},
                        {"model", pred},
                        {"error", err},
                        {"fitted", p.fitted}});
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
      const double med =
          v.size() % 2 ? v[v.size() / 2] : (v[v.size() / 2 - 1] + v[v.size() / 2]) / 2;
      medians[std::to_string(k)] = med;
      worst_median = std::max(worst_median, med);
    }
    out[g] = {{"cases", cs.size()},
              {"held_out_median_by_sms", medians},
              {"held_out_worst_median", worst_median},
              {"held_out_worst", worst_out},
              {"fitted_worst", worst_fit},
              {"points", rows}};
  }
  return out;
}

}  // namespace twin::calibrate
