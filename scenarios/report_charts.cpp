#include "scenarios/report_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cstdlib>
#include <map>
#include <set>

namespace twin::scenarios {

namespace {

constexpr int kWidth = 900;

Json field(const char* name, const char* type, const std::string& title) {
  return {{"field", name}, {"type", type}, {"title", title}};
}

// A Vega-Lite spec with `values` as its data and `rest` (mark, encoding, facet, layer, …).
Json data_spec(Json values, Json rest = Json::object()) {
  rest["$schema"] = "https://vega.github.io/schema/vega-lite/v5.json";
  rest["data"] = {{"values", std::move(values)}};
  return rest;
}

// A chart of `values` with the given mark and encoding.
Json spec(Json values, Json mark, Json encoding, int height = 0) {
  Json s =
      data_spec(std::move(values),
                {{"width", kWidth}, {"mark", std::move(mark)}, {"encoding", std::move(encoding)}});
  if (height > 0) s["height"] = height;
  return s;
}

// Bars from start_s to end_s on each stream, one panel per value of `row`, coloured by `color`.
Json stream_timeline(Json values, const char* row, const char* color, const char* x_title,
                     const char* what) {
  Json enc{{"x", field("start_s", "quantitative", x_title)},
           {"x2", {{"field", "end_s"}}},
           {"y", field("stream", "nominal", "")},
           {"color", field(color, "nominal", color)},
           {"tooltip", Json::array({field("name", "nominal", what), field(color, "nominal", color),
                                    field("start_s", "quantitative", "start s"),
                                    field("ms", "quantitative", "ms")})}};
  Json inner{{"width", kWidth}, {"mark", "bar"}, {"encoding", enc}};
  return data_spec(std::move(values), {{"facet", {{"row", field(row, "nominal", "")}}},
                                       {"spec", inner},
                                       {"resolve", {{"scale", {{"y", "independent"}}}}}});
}

}  // namespace

Chart breakdown_chart(const reports::StepReport& result) {
  static const char* kParts[] = {"compute_only", "compute_overlapped", "comm_wait", "idle"};
  static const char* kLabels[] = {"compute only", "compute beside communication",
                                  "waiting on communication", "idle"};
  Json values = Json::array();
  for (const auto& [who, label] :
       {std::pair{&result.rank0, "rank 0"}, std::pair{&result.slowest, "slowest rank"}}) {
    const auto parts = reports::to_json(*who);
    for (int i = 0; i < 4; ++i)
      values.push_back(
          {{"rank", label}, {"part", kLabels[i]}, {"order", i}, {"seconds", parts[kParts[i]]}});
  }
  Json color = field("part", "nominal", "");
  color["sort"] = Json::array({kLabels[0], kLabels[1], kLabels[2], kLabels[3]});
  Json enc{{"y", field("rank", "nominal", "")},
           {"x", field("seconds", "quantitative", "seconds of the step")},
           {"color", color},
           {"order", field("order", "ordinal", "")},
           {"tooltip", Json::array({field("part", "nominal", "part"),
                                    field("seconds", "quantitative", "s")})}};
  return {"Where the step's time goes",
          "Per rank, the step split by what its GPU does (reports/metrics.hpp: compute only, "
          "compute while a "
          "collective runs, collectives with no compute, idle); the four sum to the step time.",
          spec(std::move(values), "bar", std::move(enc), 80)};
}

Chart gpu_time_chart(const reports::StepReport& result) {
  Json values = Json::array();
  for (const auto& [kind, s] : result.gpu_time_s)
    values.push_back({{"kind", kind}, {"seconds", s}});
  Json y = field("kind", "nominal", "");
  y["sort"] = "-x";
  Json enc{{"y", y},
           {"x", field("seconds", "quantitative", "GPU seconds per step (rank 0)")},
           {"tooltip", Json::array({field("kind", "nominal", "kind"),
                                    field("seconds", "quantitative", "s")})}};
  return {"GPU time per kind of work",
          "Rank 0's task time per kind over the step (overlapping tasks counted each; gpu_time_s).",
          spec(std::move(values), "bar", std::move(enc))};
}

Chart host_memory_chart(const reports::MemoryReport& m) {
  Json values = Json::array();
  for (const auto& [part, gib] : m.host_parts_GiB) values.push_back({{"part", part}, {"GiB", gib}});
  Json bars{{"mark", "bar"},
            {"encoding",
             {{"x", field("GiB", "quantitative", "GiB per rank at the host peak")},
              {"color", field("part", "nominal", "")},
              {"order", {{"field", "GiB"}, {"type", "quantitative"}, {"sort", "descending"}}},
              {"tooltip", Json::array({field("part", "nominal", "part"),
                                       field("GiB", "quantitative", "GiB")})}}}};
  Json cap{{"mark", {{"type", "rule"}, {"color", "red"}, {"strokeWidth", 2}}},
           {"encoding", {{"x", {{"datum", m.host_capacity_GiB}, {"type", "quantitative"}}}}}};
  Json s = data_spec(std::move(values),
                     {{"width", kWidth}, {"height", 60}, {"layer", Json::array({bars, cap})}});
  return {
      "Host memory per rank",
      fmt::format("Host memory of one rank at its peak, by component, stacked; the red line is the "
                  "capacity ({:.0f} GiB per rank). Peak {:.1f} GiB.",
                  m.host_capacity_GiB, m.host_peak_GiB),
      std::move(s)};
}

namespace {

// Stream names of each traced rank, from the trace's metadata events.
std::map<std::pair<int, int>, std::string> stream_names(const Json& events) {
  std::map<std::pair<int, int>, std::string> names;
  for (const auto& e : events)
    if (e.value("ph", "") == "M" && e.value("name", "") == "thread_name")
      names[{e["pid"].get<int>(), e["tid"].get<int>()}] = e["args"]["name"].get<std::string>();
  return names;
}

}  // namespace

Chart timeline_chart(const Json& trace) {
  const auto& events = trace["traceEvents"];
  const auto names = stream_names(events);
  Json values = Json::array();
  for (const auto& e : events) {
    if (e.value("ph", "") != "X") continue;
    const int pid = e["pid"], tid = e["tid"];
    const auto it = names.find({pid, tid});
    const double start = e["ts"].get<double>() * 1e-6, dur = e["dur"].get<double>() * 1e-6;
    values.push_back({{"rank", fmt::format("rank {}", pid)},
                      {"stream", it == names.end() ? std::to_string(tid) : it->second},
                      {"name", e["name"]},
                      {"kind", e.value("cat", "")},
                      {"start_s", start},
                      {"end_s", start + dur},
                      {"ms", dur * 1e3}});
  }
  Json s = stream_timeline(std::move(values), "rank", "kind", "seconds into the step", "task");
  return {"Timeline",
          "Every task of the traced ranks on their streams (compute, process groups' NCCL streams, "
          "copies, "
          "host): rank 0 and the slowest rank. Hover for names and durations.",
          std::move(s)};
}

namespace {
void add_spans(Json& values, const char* side, const std::vector<Span>& spans) {
  for (const auto& x : spans)
    values.push_back({{"side", side},
                      {"stream", x.stream},
                      {"category", x.category},
                      {"name", x.name},
                      {"start_s", x.start_s},
                      {"end_s", x.start_s + x.dur_s},
                      {"ms", x.dur_s * 1e3}});
}
}  // namespace

Chart compare_timeline_chart(const std::vector<Span>& real, const std::vector<Span>& twin) {
  Json values = Json::array();
  add_spans(values, "real", real);
  add_spans(values, "twin", twin);
  Json s = stream_timeline(std::move(values), "side", "category",
                           "seconds from the step's first GPU work", "launch");
  return {"Real step and twin, one above the other",
          "The trace's GPU work on its streams (above) and the twin's plan of the same rank on its "
          "streams "
          "(below), coloured by category; a twin task's launches are drawn one after another.",
          std::move(s)};
}

Chart compare_categories_chart(const std::vector<Span>& real, const std::vector<Span>& twin) {
  std::map<std::pair<std::string, std::string>, double> ms;  // (category, side) → ms
  for (const auto& x : real) ms[{x.category, "real"}] += x.dur_s * 1e3;
  for (const auto& x : twin) ms[{x.category, "twin"}] += x.dur_s * 1e3;
  Json values = Json::array();
  for (const auto& [k, v] : ms)
    values.push_back({{"category", k.first}, {"side", k.second}, {"ms", v}});
  Json enc{
      {"y", field("category", "nominal", "")},
      {"yOffset", {{"field", "side"}}},
      {"x", field("ms", "quantitative", "GPU time, ms")},
      {"color", field("side", "nominal", "")},
      {"tooltip", Json::array({field("category", "nominal", "category"),
                               field("side", "nominal", ""), field("ms", "quantitative", "ms")})}};
  return {"GPU time per category, real and twin",
          "Summed launch times of the step per category (`twin compare --kineto` prints the same "
          "with counts).",
          spec(std::move(values), "bar", std::move(enc))};
}

Chart nccl_sms_chart(const Json& trace) {
  Json values = Json::array();
  for (const auto& e : trace["traceEvents"])
    if (e.value("ph", "") == "C" && e.value("name", "") == "nccl_sms")
      values.push_back({{"rank", fmt::format("rank {}", e["pid"].get<int>())},
                        {"t_s", e["ts"].get<double>() * 1e-6},
                        {"sms", e["args"]["SMs"]}});
  Json enc{{"x", field("t_s", "quantitative", "seconds into the step")},
           {"y", field("sms", "quantitative", "SMs held by NCCL")},
           {"color", field("rank", "nominal", "")}};
  return {"SMs held by NCCL",
          "The SMs the collectives' CTAs hold on each traced GPU over the step (132 on a GH200): "
          "what the "
          "compute kernels lose (hardware/contention.hpp).",
          spec(std::move(values), {{"type", "line"}, {"interpolate", "step-after"}}, std::move(enc),
               160)};
}

Chart hbm_pools_chart(const Json& trace, bool reserved) {
  const char* counter = reserved ? "hbm_reserved_GiB" : "hbm_allocated_GiB";
  std::vector<const Json*> samples;  // rank 0's counter: one sample per moment, every pool in each
  for (const auto& e : trace["traceEvents"])
    if (e.value("ph", "") == "C" && e.value("name", "") == counter && e.value("pid", -1) == 0)
      samples.push_back(&e);
  const std::size_t stride = std::max<std::size_t>(1, samples.size() / 2000);
  Json values = Json::array();
  for (std::size_t i = 0; i < samples.size(); ++i) {
    if (i % stride != 0 && i + 1 != samples.size()) continue;
    for (const auto& [pool, gib] : (*samples[i])["args"].items())
      values.push_back(
          {{"t_s", (*samples[i])["ts"].get<double>() * 1e-6}, {"pool", pool}, {"GiB", gib}});
  }
  Json enc{{"x", field("t_s", "quantitative", "time in the step (s)")},
           {"y",
            {{"field", "GiB"},
             {"type", "quantitative"},
             {"stack", "zero"},
             {"title", reserved ? "GiB reserved" : "GiB allocated"}}},
           {"color", field("pool", "nominal", "allocator pool")}};
  if (reserved)
    return {
        "HBM reserved per allocator pool (rank 0)",
        "Segments each caching-allocator pool holds from the device over rank 0's step, its cached "
        "but unused blocks included: a pool keeps them until a retry frees them "
        "(model/memory_replay.hpp).",
        spec(std::move(values), "area", std::move(enc), 220)};
  return {"HBM allocated per allocator pool (rank 0)",
          "Bytes allocated in each caching-allocator pool over rank 0's step, after each "
          "allocation and "
          "free (model/memory_replay.hpp).",
          spec(std::move(values), "area", std::move(enc), 220)};
}

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

// Why a sweep row has no figure: its error, or that `twin sweep --skip-oom` found it out of HBM
// in every schedule and did not simulate it (`certain_oom`: an object in JSON, text in CSV).
std::string why_not(const Json& r) {
  const std::string error = r.value("error", "");
  if (!error.empty() || !r.contains("certain_oom")) return error;
  const Json c = r["certain_oom"].is_string()
                     ? Json::parse(r["certain_oom"].get<std::string>(), nullptr, false)
                     : r["certain_oom"];
  if (!c.is_object() || !c.contains("live_GiB") || !c["live_GiB"].is_number() ||
      !c.contains("capacity_GiB") || !c["capacity_GiB"].is_number())
    return "out of HBM in every schedule (not simulated)";
  return fmt::format(
      "out of HBM in every schedule (not simulated): {:.2f} GiB live at once, more "
      "than the allocator's {:.2f} GiB",
      c["live_GiB"].get<double>(), c["capacity_GiB"].get<double>());
}

// One sweep row as the heat map's datum: the first grid key across, the second down, the rest
// naming the panel.
Json sweep_datum(const Json& r, const std::vector<std::string>& keys) {
  const bool fits = r.value("fits", false) && r.contains("tokens_per_s_per_gpu") &&
                    r["tokens_per_s_per_gpu"].is_number();
  Json v{{"x", text_of(r.value(keys[0], Json("")))},
         {"xn", number_of(r.value(keys[0], Json("")))},
         {"yn", keys.size() > 1 ? number_of(r.value(keys[1], Json(""))) : 0.0},
         {"fits", fits},
         {"label", fits ? fmt::format("{:.0f}", r["tokens_per_s_per_gpu"].get<double>())
                        : (r.value("oom", false) ? "OOM" : "×")},
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
  Json tooltip =
      Json::array({field("x", "ordinal", keys[0]), field("label", "nominal", "tokens/s/GPU"),
                   field("why", "nominal", "why not")});
  Json rect{{"mark", "rect"},
            {"encoding", {{"x", x}, {"y", y}, {"color", color}, {"tooltip", tooltip}}}};
  Json text{
      {"mark", {{"type", "text"}, {"fontSize", 10}}},
      {"encoding",
       {{"x", x},
        {"y", y},
        {"text", {{"field", "label"}}},
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
          "memory, "
          "×: it "
          "cannot run (hover for why). Rows of `twin sweep`.",
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
