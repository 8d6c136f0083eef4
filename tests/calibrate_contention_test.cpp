// Tier 4: the SM-contention model against the curves measured on our H200, with the residual
// budgets of issue #15 where they are met and the known gaps where not (README, Calibration).
#include <doctest/doctest.h>
#include <fmt/format.h>

#include <filesystem>
#include <fstream>
#include <map>

#include "calibrate/contention_fit.hpp"

using namespace twin;

namespace {

const std::filesystem::path kRoot(TWIN_SOURCE_DIR);

std::vector<calibrate::ContentionCase> measured() {
  const auto dir = kRoot / "reports/calibration/contention";
  return calibrate::read_contention_cases({(dir / "h200-2026-11-30-contention-a.json").string(),
                                           (dir / "h200-2026-11-30-contention-b.json").string(),
                                           (dir / "h200-2026-12-01-contention-c.json").string()});
}

// The `contention` section of a profile, read the way the loader does (value per key).
hardware::ContentionModel profile_model(const std::string& name) {
  std::ifstream in(kRoot / "hardware/profiles" / (name + ".json"));
  const auto j = nlohmann::json::parse(in)["contention"];
  hardware::ContentionModel m;
  m.cluster_waste_sms = j["cluster_waste_sms"]["value"];
  for (int i = 0; i < hardware::kFamilies; ++i) {
    auto& p = m.family[i];
    const auto& f = j[std::string(hardware::family_name(static_cast<hardware::Family>(i)))];
    p.boost_max = f["boost_max"]["value"];
    if (f.contains("cluster_sms")) p.cluster_sms = f["cluster_sms"]["value"];
    if (f.contains("sat_sms")) {
      p.sat_sms = f["sat_sms"]["value"], p.knee = f["knee"]["value"];
      p.lone_block = f["lone_block"]["value"];
    }
  }
  m.prepare();
  return m;
}

}  // namespace

TEST_CASE("the H200 profile's contention section is the fit of the committed measurements") {
  const auto cases = measured();
  hardware::ContentionModel base;
  for (const auto f : {hardware::Family::gemm, hardware::Family::grouped_gemm})
    base.family[static_cast<int>(f)].cluster_sms = 2;
  const auto fit = calibrate::fit_contention(cases, base);
  const auto prof = profile_model("h200");
  CHECK(prof.cluster_waste_sms == fit.cluster_waste_sms);
  for (int i = 0; i < hardware::kFamilies; ++i) {
    CAPTURE(hardware::family_name(static_cast<hardware::Family>(i)));
    CHECK(prof.family[i].boost_max == doctest::Approx(fit.family[i].boost_max).epsilon(0.01));
    CHECK(prof.family[i].sat_sms == doctest::Approx(fit.family[i].sat_sms).epsilon(0.01));
    CHECK(prof.family[i].knee == fit.family[i].knee);
    CHECK(prof.family[i].lone_block == fit.family[i].lone_block);
  }
}

TEST_CASE("the measured profile keeps the raw curves the fit reads") {
  // calibrate/contention_tables.py copies them into h200-measured.json (issue #15): every point
  // of every fitted case is there, with its slowdown.
  std::ifstream in(kRoot / "hardware/profiles/h200-measured.json");
  const auto j = nlohmann::json::parse(in)["measurements"]["contention_curves"];  // keys sorted, as the fit names cases
  std::map<std::string, std::map<int, double>> kept;
  for (const auto& c : j["cases"]) {
    std::string name = c["kernel"].get<std::string>() + "[";
    bool first = true;
    for (const auto& [k, v] : c["shape"].items()) name += (first ? "" : ",") + k + "=" + v.dump(), first = false;
    for (std::size_t i = 0; i < c["held_sms"].size(); ++i)
      kept[name + "]"][c["held_sms"][i].get<int>()] = c["slowdown"][i].get<double>();
  }
  int points = 0;
  for (const auto& c : measured())
    for (const auto& p : c.points) {
      CAPTURE(c.name);
      CAPTURE(p.held);
      REQUIRE(kept[c.name].count(p.held) == 1);
      CHECK(kept[c.name][p.held] == doctest::Approx(p.measured).epsilon(1e-3));
      ++points;
    }
  CHECK(points > 1000);
}

TEST_CASE("held-out residuals of the contention model stay within their budgets") {
  const auto res = calibrate::contention_residuals(measured(), profile_model("h200"));
  // Per family: the worst (over SMs held) median over cases of |model/measured − 1| on held-out
  // points, and the worst held-out point. Issue #15 asks 10% and 15%; the families that miss it
  // are budgeted at what they reach today, so that they cannot get worse unseen.
  const std::map<std::string, std::pair<double, double>> budget = {
      {"attention", {0.10, 0.16}},      {"grouped_gemm", {0.10, 0.16}},   {"twin_grouped", {0.10, 0.15}},
      {"gemm_fp8", {0.12, 0.21}},       {"gemm", {0.19, 0.82}},           {"ew_add", {0.10, 0.15}},
      {"ew_gather", {0.10, 0.15}},      {"ew_sum_fp32", {0.13, 0.13}},    {"ew_fp8_quant", {0.10, 0.15}},
      {"ew_norm", {0.11, 0.15}},        {"ew_norm_bwd", {0.10, 0.15}},    {"ew_swiglu", {0.10, 0.15}},
      {"ew_swiglu_bwd", {0.11, 0.15}},  {"ew_loss", {0.12, 0.15}},        {"ew_loss_bwd", {0.10, 0.15}},
      {"ew_scatter_add", {0.41, 0.41}}, {"ew_widen", {0.14, 0.19}},       {"ew_fp8_dequant", {0.30, 0.30}}};
  for (const auto& item : res.items()) {
    const std::string group = item.key();  // CAPTURE cannot take a structured binding (clang 14)
    const auto& r = item.value();
    CAPTURE(group);
    const double median = r["held_out_worst_median"], worst = r["held_out_worst"];
    MESSAGE(fmt::format("{}: held-out worst median {:.1f}%, worst point {:.1f}%", group, 100 * median, 100 * worst));
    REQUIRE(budget.count(group) == 1);
    CHECK(median <= budget.at(group).first);
    CHECK(worst <= budget.at(group).second);
  }
  CHECK(res.size() == budget.size());
}
