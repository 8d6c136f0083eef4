// The charts of what-ifs and calibration in `twin report`: the ladder beside the published
// figures, a sweep's heatmap, a plan-dp run, the contention fit (report_charts.hpp).
#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>

#include "scenarios/report_charts.hpp"
#include "scenarios/report_vega.hpp"

namespace twin::scenarios {

using namespace vega;

Chart ladder_chart(const Json& ladder) {
  Json values = Json::array();
  for (const auto& r : ladder) {
    values.push_back(
        {{"rung", r["rung"]}, {"source", "twin"}, {"tokens", r["tokens_per_s_per_gpu"]}});
    for (const auto& p : r["published"])
      if (p["metric"] == "tokens_per_s_per_gpu")
        values.push_back(
            {{"rung", r["rung"]}, {"source", "published"}, {"tokens", p["published"]}});
  }
  Json enc{
      {"x", field("rung", "nominal", "")},
      {"xOffset", field("source", "nominal", "")},
      {"y", field("tokens", "quantitative", "tokens/s per GPU")},
      {"color", field("source", "nominal", "")},
      {"tooltip", Json::array({field("rung", "nominal", "rung"), field("source", "nominal", ""),
                               field("tokens", "quantitative", "tokens/s/GPU")})}};
  return {"The tuning ladder",
          "Each rung of the published tuning ladder (scenarios/ladder/) as the twin predicts it "
          "(JUPITER profile, no per-rung factor) beside the "
          "published figure where there is one.",
          spec(std::move(values), "bar", std::move(enc), 260)};
}

namespace {

std::vector<std::string> grid_keys(const Json& rows) {
  std::vector<std::string> keys;
  for (const auto& r : rows)
    for (const auto& [k, _] : r.items())
      if (k.find('.') != std::string::npos && std::find(keys.begin(), keys.end(), k) == keys.end())
        keys.push_back(k);
  return keys;
}

std::string text_of(const Json& v) {
  return v.is_string() ? v.get<std::string>() : v.dump();
}
// A grid value's number for ordering (0 for a value that is not one).
double number_of(const Json& v) {
  if (v.is_number()) return v.get<double>();
  const std::string t = text_of(v);
  char* end = nullptr;
  const double d = std::strtod(t.c_str(), &end);
  return !t.empty() && end == t.c_str() + t.size() ? d : 0.0;
}

// A row's true/false, or `otherwise` (a row that could not run has none: in CSV an empty cell).
bool flag(const Json& r, const char* key, bool otherwise) {
  return r.contains(key) && r[key].is_boolean() ? r[key].get<bool>() : otherwise;
}

// A row's number, or `otherwise` (a CSV cell a row lacks reads as empty text).
double number_or(const Json& r, const char* key, double otherwise) {
  return r.contains(key) && r[key].is_number() ? r[key].get<double>() : otherwise;
}

// Why a sweep row has no figure: its error; or out of HBM, found before simulating by `twin
// sweep --skip-oom` (`certain_oom`: an object in JSON, its text in CSV, where the other rows'
// cells are empty) or by the simulated allocator; or the host memory's headroom.
std::string why_not(const Json& r) {
  const std::string error = r.value("error", "");
  if (!error.empty()) return error;
  if (r.contains("certain_oom")) {
    const Json& cell = r["certain_oom"];
    const Json c =
        cell.is_string() ? Json::parse(cell.get<std::string>(), nullptr, false) : Json(cell);
    if (c.is_object() && c.contains("live_GiB") && c["live_GiB"].is_number() &&
        c.contains("capacity_GiB") && c["capacity_GiB"].is_number())
      return fmt::format(
          "out of HBM in every schedule (not simulated): {:.2f} GiB live at once, more than the "
          "allocator's {:.2f} GiB",
          c["live_GiB"].get<double>(), c["capacity_GiB"].get<double>());
  }
  if (flag(r, "oom", false))
    return fmt::format("out of HBM after {:.0f} allocator retries (peak reserved {:.2f} GiB)",
                       number_or(r, "alloc_retries", 0), number_or(r, "hbm_peak_reserved_GiB", 0));
  if (!flag(r, "fits", true))
    return fmt::format(
        "host memory: {:.1f} GiB per rank at peak leaves less room than the memory a socket "
        "holds unattributed at job start (median)",
        number_or(r, "host_peak_GiB", 0));
  return "";
}

// A row that did not run at all (its error), as opposed to one that ran out of memory.
bool cannot_run(const Json& r) {
  return !flag(r, "oom", false) && !r.value("error", "").empty();
}

// One sweep row as the heat map's datum: the first grid key across, the second down, the rest
// naming the panel.
Json sweep_datum(const Json& r, const std::vector<std::string>& keys) {
  const bool fits = flag(r, "fits", false) && r.contains("tokens_per_s_per_gpu") &&
                    r["tokens_per_s_per_gpu"].is_number();
  Json v{{"x", text_of(r.value(keys[0], Json("")))},
         {"xn", number_of(r.value(keys[0], Json("")))},
         {"yn", keys.size() > 1 ? number_of(r.value(keys[1], Json(""))) : 0.0},
         {"fits", fits},
         {"label", fits            ? fmt::format("{:.0f}", r["tokens_per_s_per_gpu"].get<double>())
                   : cannot_run(r) ? "×"
                                   : "OOM"},
         {"why", why_not(r)}};
  if (fits) v["tokens"] = r["tokens_per_s_per_gpu"];
  v["y"] = keys.size() > 1 ? text_of(r.value(keys[1], Json(""))) : "";
  std::string panel;
  for (std::size_t i = 2; i < keys.size(); ++i)
    panel += (panel.empty() ? "" : ", ") + keys[i] + "=" + text_of(r.value(keys[i], Json("")));
  v["panel"] = panel;
  return v;
}

}  // namespace

Chart sweep_chart(const Json& rows, const std::string& file) {
  const auto keys = grid_keys(rows);
  if (rows.empty() || keys.empty())
    throw InputError(file, "", "expected the rows of `twin sweep` (grid keys and metrics)");
  Json values = Json::array();
  for (const auto& r : rows) values.push_back(sweep_datum(r, keys));
  // Grid values in numeric order (they are written as text: "8" < "16").
  const auto axis = [](const char* f, const char* by, const std::string& title) {
    return Json{{"field", f},
                {"type", "ordinal"},
                {"title", title},
                {"sort", {{"field", by}, {"op", "min"}}}};
  };
  const Json x = axis("x", "xn", keys[0]), y = axis("y", "yn", keys.size() > 1 ? keys[1] : "");
  Json color{{"field", "tokens"},
             {"type", "quantitative"},
             {"title", "tokens/s/GPU"},
             {"scale", {{"scheme", "viridis"}}}};
  Json tooltip = Json::array({field("x", "ordinal", keys[0])});
  if (keys.size() > 1) tooltip.push_back(field("y", "ordinal", keys[1]));
  if (keys.size() > 2) tooltip.push_back(field("panel", "nominal", "panel"));
  tooltip.push_back(field("label", "nominal", "tokens/s/GPU"));
  tooltip.push_back(field("why", "nominal", "why not"));
  Json rect{{"mark", "rect"},
            {"encoding", {{"x", x}, {"y", y}, {"color", color}, {"tooltip", tooltip}}}};
  // The label carries the tooltip too: a point without a figure has no rect to hover (a null
  // colour is not drawn), and its "why not" is what the caption sends the reader to.
  Json text{
      {"mark", {{"type", "text"}, {"fontSize", 10}}},
      {"encoding",
       {{"x", x},
        {"y", y},
        {"text", {{"field", "label"}}},
        {"tooltip", tooltip},
        {"color",
         {{"condition", {{"test", "datum.fits"}, {"value", "white"}}}, {"value", "black"}}}}}};
  Json inner{{"width", keys.size() > 2 ? 260 : kWidth}, {"layer", Json::array({rect, text})}};
  Json s = data_spec(std::move(values));
  if (keys.size() > 2) {
    s["facet"] = {{"field", "panel"}, {"type", "nominal"}, {"title", ""}};
    s["columns"] = 3;
    s["spec"] = inner;
  } else {
    for (auto& [k, v] : inner.items()) s[k] = v;
  }
  return {"Sweep: " + file,
          "tokens/s per GPU at every point of the grid; OOM: the point does not fit HBM or host "
          "memory, ×: it cannot run (hover either for why). Rows of `twin sweep`.",
          std::move(s)};
}

Chart plan_dp_chart(const Json& plan_dp) {
  Json values = Json::array();
  for (const auto& r : plan_dp["rows"])
    values.push_back({{"replicas", r["replicas"]},
                      {"gpus", r["gpus"]},
                      {"tokens", r["tokens_per_s_per_gpu"]},
                      {"relative", r["relative_to_dp1"]},
                      {"days", r.value("days_to_tokens", 0.0)}});
  Json enc{{"x", {{"field", "replicas"}, {"type", "ordinal"}, {"title", "data-parallel replicas"}}},
           {"y", field("tokens", "quantitative", "tokens/s per GPU")},
           {"tooltip", Json::array({field("replicas", "quantitative", "replicas"),
                                    field("gpus", "quantitative", "GPUs"),
                                    field("relative", "quantitative", "vs DP=1"),
                                    field("days", "quantitative", "days to the token budget")})}};
  return {
      "Data-parallel scaling",
      "tokens/s per GPU as replicas are added (twin plan-dp: placement, shared global links, the "
      "replicas' all-reduce); hover for the ratio to one replica and the days to the token budget.",
      spec(std::move(values), {{"type", "line"}, {"point", true}}, std::move(enc), 220)};
}

Chart contention_chart(const Json& fit) {
  Json values = Json::array();
  for (const auto& [family, r] : fit["residuals"].items())
    for (const auto& p : r["points"])
      values.push_back({{"family", family},
                        {"case", p["case"]},
                        {"held", p["held_sms"]},
                        {"measured", p["measured"]},
                        {"model", p["model"]}});
  const Json x = field("held", "quantitative", "SMs held");
  const auto y = [](const char* f) {
    return Json{{"field", f},
                {"type", "quantitative"},
                {"scale", {{"type", "log"}}},
                {"title", "slowdown"}};
  };
  Json model{{"mark", {{"type", "line"}, {"strokeWidth", 1}}},
             {"encoding",
              {{"x", x},
               {"y", y("model")},
               {"detail", field("case", "nominal", "")},
               {"color", {{"value", "#4c78a8"}}}}}};
  Json measured{{"mark", {{"type", "point"}, {"size", 12}, {"filled", true}}},
                {"encoding",
                 {{"x", x},
                  {"y", y("measured")},
                  {"color", {{"value", "#e45756"}}},
                  {"tooltip", Json::array({field("case", "nominal", "case"),
                                           field("held", "quantitative", "held"),
                                           field("measured", "quantitative", "measured"),
                                           field("model", "quantitative", "model")})}}}};
  Json s = data_spec(
      std::move(values),
      {{"facet", {{"field", "family"}, {"type", "nominal"}, {"title", ""}}},
       {"columns", 4},
       {"spec", {{"width", 190}, {"height", 130}, {"layer", Json::array({model, measured})}}}});
  return {"SM contention: measured and modelled",
          "Each kernel family's slowdown with k SMs held on our H200 (red: measured; blue: the "
          "model, one "
          "line per case; reports/calibration/contention/).",
          std::move(s)};
}

}  // namespace twin::scenarios
