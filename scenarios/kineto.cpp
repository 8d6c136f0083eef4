#include "scenarios/kineto.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <fstream>
#include <map>
#include <sstream>

#include "reports/output.hpp"
#include "scenarios/loader.hpp"

namespace twin::scenarios {

namespace {

bool has(std::string_view s, std::string_view part) {
  return s.find(part) != std::string_view::npos;
}

std::string lower(std::string_view s) {
  std::string out(s);
  for (auto& c : out) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

std::string nccl_kind(std::string_view name) {
  if (has(name, "AllGather")) return "all_gather";
  if (has(name, "ReduceScatter")) return "reduce_scatter";
  if (has(name, "AllReduce")) return "all_reduce";
  if (has(name, "Broadcast")) return "broadcast";
  return "all_to_all";  // SendRecv, Send, Recv: NCCL's all-to-all is grouped point-to-point
}

// The trace's text: gzip-compressed if it says so in its first bytes.
std::string trace_text(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw InputError(file, "", "cannot open the trace");
  std::stringstream ss;
  ss << in.rdbuf();
  std::string text = ss.str();
  if (text.size() >= 2 && static_cast<unsigned char>(text[0]) == 0x1f &&
      static_cast<unsigned char>(text[1]) == 0x8b) {
    try {
      text = reports::gunzip(text);
    } catch (const std::exception& e) {
      throw InputError(file, "", fmt::format("a gzip file that does not decompress: {}", e.what()));
    }
  }
  return text;
}

struct Window {
  std::string name;
  double begin = 0, end = 0;
};

// The CPU step annotations (torch.profiler's ProfilerStep#N), in trace order.
std::vector<Window> step_windows(const Json& events) {
  std::vector<Window> out;
  for (const auto& e : events)
    if (e.value("cat", "") == "user_annotation" &&
        e.value("name", "").rfind("ProfilerStep#", 0) == 0)
      out.push_back({e["name"], e.value("ts", 0.0), e.value("ts", 0.0) + e.value("dur", 0.0)});
  return out;
}

}  // namespace

std::string activity_category(std::string_view cat, std::string_view name,
                              std::string& collective) {
  collective.clear();
  if (cat == "gpu_memcpy")
    return has(name, "DtoH") ? "copy_d2h" : has(name, "HtoD") ? "copy_h2d" : "copy_d2d";
  if (cat == "gpu_memset") return "memset";
  if (has(name, "ncclDevKernel") || has(name, "ncclKernel")) {
    collective = nccl_kind(name);
    return "collective";
  }
  if (has(name, "sm_hold")) {
    collective = "stand_in";
    return "collective";
  }
  const std::string n = lower(name);
  if (has(name, "GroupProblemShape") || has(n, "grouped_gemm") || has(n, "grouped_mm"))
    return "expert_gemm";
  if (has(n, "flash") || has(n, "fmha") || has(n, "sdpa") || has(n, "flex_attention") ||
      has(n, "attention"))
    return "attention";
  if (has(n, "nvjet") || has(n, "gemm") || has(n, "xmma") || has(n, "cutlass")) return "other_gemm";
  if (has(n, "multi_tensor_apply") || has(n, "adam")) return "optimizer_gpu";
  return "elementwise";
}

std::vector<Span> spans_of(const KinetoStep& step) {
  std::vector<Span> out;
  for (const auto& a : step.activities)
    out.push_back({fmt::format("stream {}", a.stream), a.category, a.collective, a.name,
                   a.start_us * 1e-6, a.dur_us * 1e-6, 1, a.collective.empty() ? 0 : a.ctas});
  return out;
}

namespace {
// The twin's collective categories by the kind of collective they run.
std::string twin_kind(const std::string& category, const Json& plan) {
  if (category.find("all_gather") != std::string::npos) return "all_gather";
  if (category == "dense_reduce_scatter") return "reduce_scatter";
  if (category.find("all_reduce") != std::string::npos) return "all_reduce";
  if (category == "expert_grad_reduce")
    return plan.value("grad_reduce", "") == "reduce_scatter" ? "reduce_scatter" : "all_to_all";
  return "all_to_all";
}
}  // namespace

std::vector<Span> spans_of_plan(const Json& plan) {
  std::vector<Span> out;
  double first = 1e300;
  for (const auto& t : plan["tasks"]) first = std::min(first, t.value("start_s", 0.0));
  for (const auto& t : plan["tasks"]) {
    double at = t.value("start_s", first) - first;
    for (const auto& l : t["launches"]) {
      const std::string cat = l.value("category", "other");
      const bool coll = l.value("kind", "") == "collective";
      const double dur = l.value("twin_s", 0.0);
      out.push_back({t.value("stream", "?"), coll ? "collective" : cat,
                     coll ? twin_kind(cat, plan) : "", coll ? cat : t.value("name", ""), at, dur,
                     coll ? 1.0 : l.value("repeat", 1.0), l.value("ctas", 0)});
      at += dur;
    }
  }
  return out;
}

namespace {
KinetoStep read_events(const std::string& file, const Json& doc, const std::string& step);
}  // namespace

KinetoStep read_kineto(const std::string& file, const std::string& step) {
  Json doc;
  try {
    doc = Json::parse(trace_text(file));
  } catch (const Json::parse_error& e) {
    throw InputError(file, "", fmt::format("not JSON: {}", e.what()));
  }
  try {
    return read_events(file, doc, step);
  } catch (const Json::exception& e) {  // an event whose fields have other types than a trace's
    throw InputError(file, "traceEvents",
                     fmt::format("an event of unexpected shape: {}", e.what()));
  }
}

namespace {

// The profiler step named `step` (the last one when empty), or null when the trace has none.
const Window* chosen_window(const std::string& file, const std::vector<Window>& windows,
                            const std::string& step) {
  const Window* w = nullptr;
  for (const auto& x : windows)
    if (step.empty() || x.name == step) w = &x;
  if (!step.empty() && !w) {
    std::string names;
    for (const auto& x : windows) names += (names.empty() ? "" : ", ") + x.name;
    throw InputError(file, "traceEvents",
                     fmt::format("no step \"{}\" (the trace has: {})", step,
                                 names.empty() ? "no ProfilerStep markers" : names));
  }
  return w;
}

// Correlation id → the time of the CUDA runtime or driver call that launched it (CPU).
std::map<std::int64_t, double> launch_times(const Json& events) {
  std::map<std::int64_t, double> launched_at;
  for (const auto& e : events) {
    const auto cat = e.value("cat", "");
    if ((cat == "cuda_runtime" || cat == "cuda_driver") && e.contains("args") &&
        e["args"].is_object() && e["args"].contains("correlation") &&
        e["args"]["correlation"].is_number_integer() && e.contains("ts") && e["ts"].is_number())
      launched_at[e["args"]["correlation"].get<std::int64_t>()] = e["ts"].get<double>();
  }
  return launched_at;
}

// GPU event i as an activity (its launch time filled by the caller).
TraceActivity gpu_activity(const std::string& file, const Json& e, std::size_t i,
                           const std::string& cat) {
  if (!e.contains("ts") || !e.contains("dur") || !e["ts"].is_number() || !e["dur"].is_number())
    throw InputError(file, fmt::format("traceEvents[{}]", i),
                     "expected a GPU event with numbers ts and dur");
  const Json args = e.value("args", Json::object());
  TraceActivity a;
  if (args.contains("bytes") && args["bytes"].is_number()) a.bytes = args["bytes"].get<double>();
  a.name = e.value("name", "");
  a.category = activity_category(cat, a.name, a.collective);
  a.stream = args.value("stream", e.value("tid", std::int64_t{0}));
  a.start_us = e["ts"].get<double>();
  a.dur_us = e["dur"].get<double>();
  if (args.contains("grid") && args["grid"].is_array())
    for (const auto& g : args["grid"]) {
      if (!g.is_number_integer() || g.get<std::int64_t>() < 1)
        throw InputError(file, fmt::format("traceEvents[{}].args.grid", i),
                         "expected positive whole numbers");
      a.ctas = (a.ctas == 0 ? 1 : a.ctas) * g.get<int>();
    }
  return a;
}

KinetoStep read_events(const std::string& file, const Json& doc, const std::string& step) {
  const Json* events =
      doc.is_object() && doc.contains("traceEvents") ? &doc["traceEvents"] : nullptr;
  if (!events || !events->is_array())
    throw InputError(file, "traceEvents",
                     "expected an array of events (a torch.profiler Chrome trace)");
  KinetoStep out;
  const auto windows = step_windows(*events);
  const Window* w = chosen_window(file, windows, step);
  const auto launched_at = launch_times(*events);
  for (std::size_t i = 0; i < events->size(); ++i) {
    const auto& e = (*events)[i];
    const auto cat = e.value("cat", "");
    if (cat != "kernel" && cat != "gpu_memcpy" && cat != "gpu_memset") continue;
    auto a = gpu_activity(file, e, i, cat);
    const auto launch =
        launched_at.find(e.value("args", Json::object()).value("correlation", std::int64_t{-1}));
    if (w && (launch == launched_at.end() || launch->second < w->begin || launch->second > w->end))
      continue;
    if (launch != launched_at.end()) a.launch_us = launch->second;
    out.activities.push_back(std::move(a));
  }
  if (out.activities.empty())
    throw InputError(file, "traceEvents",
                     w ? fmt::format("no GPU activity launched in {}", w->name)
                       : std::string("no GPU activity (was CUDA profiled?)"));
  std::stable_sort(out.activities.begin(), out.activities.end(),
                   [](const auto& a, const auto& b) { return a.start_us < b.start_us; });
  const double t0 = out.activities.front().start_us;
  for (auto& a : out.activities) a.start_us -= t0, a.launch_us -= t0;
  out.step = w ? w->name : "";
  return out;
}
}  // namespace

}  // namespace twin::scenarios
