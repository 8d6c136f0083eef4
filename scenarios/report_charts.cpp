// The charts of a run: its step, GPU time, host memory, timeline, NCCL SMs, HBM pools, and a
// real step beside the twin's (report_what_if_charts.cpp: the ladder, sweeps, plan-dp, the fit).
#include "scenarios/report_charts.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>

#include "scenarios/report_vega.hpp"

namespace twin::scenarios {

using namespace vega;

namespace {

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

}  // namespace twin::scenarios
