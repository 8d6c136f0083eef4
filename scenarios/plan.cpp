#include "scenarios/plan.hpp"

#include <fmt/format.h>

#include <map>
#include <queue>
#include <stdexcept>

namespace twin::scenarios {

namespace {

using model::Launch;

const char* kind_name(Launch::Kind k) {
  switch (k) {
    case Launch::kGemm:
      return "gemm";
    case Launch::kGroupedGemm:
      return "grouped_gemm";
    case Launch::kAttention:
      return "attention";
    case Launch::kElementwise:
      return "elementwise";
    case Launch::kCollective:
      return "collective";
    case Launch::kCopyH2D:
      return "copy_h2d";
    case Launch::kCopyD2H:
      return "copy_d2h";
    case Launch::kNone:
      break;
  }
  return "none";
}

Json launch_json(const Launch& l, std::int32_t category, double seconds) {
  Json j{{"kind", kind_name(l.kind)}, {"category", model::category_name(category)}};
  switch (l.kind) {
    case Launch::kGemm:
      j.update({{"m", l.m}, {"n", l.n}, {"k", l.k}, {"repeat", l.repeat}});
      break;
    case Launch::kGroupedGemm:
      j.update({{"rows_per_group", l.m},
                {"groups", l.groups},
                {"n", l.n},
                {"k", l.k},
                {"repeat", l.repeat}});
      // The input and weight gradients of that forward GEMM (training.expert_backward).
      if (l.backward) j["backward"] = true;
      break;
    case Launch::kAttention:
      j.update({{"sliding", l.sliding}, {"backward", l.backward}});
      break;
    case Launch::kElementwise:
      j.update({{"bytes", l.bytes}, {"repeat", l.repeat}});
      break;
    case Launch::kCollective:
      j.update({{"ctas", l.ctas},
                {"seconds", seconds},
                {"collective", sim::name_of(l.coll, hardware::kCollKindNames)},
                {"bytes", l.bytes},
                {"comm", sim::name_of(l.comm, model::kCommNames)},
                {"group", l.group_id},
                {"group_ranks", l.group ? Json(*l.group) : Json::array()}});
      break;
    case Launch::kCopyH2D:
    case Launch::kCopyD2H:
      j.update({{"bytes", l.bytes}});
      break;
    case Launch::kNone:
      break;
  }
  return j;
}

Json attention_json(const model::AttentionKind& a) {
  return {{"q_heads", a.q_heads},
          {"kv_heads", a.kv_heads},
          {"qk_head_dim", a.qk_head_dim},
          {"v_head_dim", a.v_head_dim},
          {"window_tokens", a.window_tokens}};
}

}  // namespace

Json task_launches(const sim::TaskGraph& g, const model::StepBuilder& b, std::size_t i) {
  const auto& t = g[i];
  const double dur = (t.end_time() - t.start_time()).to_s();
  Json launches = Json::array();
  if (const auto* ls = b.launches(i)) {
    // Each launch with the twin's seconds for it: a fused task's time split as `twin run`
    // reports GPU time per category.
    const auto parts = b.parts(i);
    std::vector<double> twin_s(ls->size(), dur);
    if (parts) {
      std::size_t k = 0;
      parts->split(dur, [&](std::int32_t, double share) { twin_s[k++] = share; });
    }
    for (std::size_t k = 0; k < ls->size(); ++k) {
      launches.push_back(launch_json((*ls)[k], parts ? parts->parts[k].first : t.category, dur));
      launches.back()["twin_s"] = twin_s[k];
    }
  } else if (t.category == model::kAllocRetry) {
    // A caching-allocator retry (model/memory_replay.hpp): a device synchronisation and frees.
    launches.push_back({{"kind", "alloc_retry"},
                        {"category", model::category_name(t.category)},
                        {"seconds", dur}});
  }
  return launches;  // empty: a marker, or a task whose launches were not recorded
}

namespace {

// The rank's tasks of the plan in a topological order, smallest graph id first among the ready
// ones; `in` maps every exported graph id to its plan id, `preds` to its exported predecessors.
std::vector<std::size_t> plan_order(const sim::TaskGraph& g, std::map<std::size_t, std::size_t>& in,
                                    std::map<std::size_t, std::vector<std::size_t>>& preds) {
  std::map<std::size_t, int> pending;
  for (const auto& entry : in) {
    const std::size_t i = entry.first;  // not a structured binding: clang < 16 cannot capture one
    g[i].each_successor([&](const sim::Task& succ) {
      if (in.count(succ.id())) ++pending[succ.id()], preds[succ.id()].push_back(i);
    });
  }
  std::priority_queue<std::size_t, std::vector<std::size_t>, std::greater<>> ready;
  for (const auto& [i, _] : in)
    if (!pending.count(i)) ready.push(i);
  std::vector<std::size_t> order;
  while (!ready.empty()) {
    const auto i = ready.top();
    ready.pop();
    in[i] = order.size();
    order.push_back(i);
    g[i].each_successor([&](const sim::Task& succ) {
      if (in.count(succ.id()) && --pending[succ.id()] == 0) ready.push(succ.id());
    });
  }
  return order;
}

}  // namespace

Json step_plan(const Scenario& s, const sim::TaskGraph& g, const model::StepBuilder& b,
               const model::StepMarks& marks, int rank) {
  const auto end = marks.backward_end.at(static_cast<std::size_t>(rank))->end_time();
  // The exported tasks, by graph id → plan id (ids in a topological order, smallest id first).
  std::map<std::size_t, std::size_t> in;
  for (std::size_t i = 0; i < g.size(); ++i) {
    const auto& t = g[i];
    if (t.lane / model::kStreamCount != rank || t.lane % model::kStreamCount == model::kCpu)
      continue;
    if (t.start_time() < end || &t == marks.backward_end[static_cast<std::size_t>(rank)]) in[i] = 0;
  }
  std::map<std::size_t, std::vector<std::size_t>> preds;
  const auto order = plan_order(g, in, preds);
  Json tasks = Json::array();
  for (const auto i : order) {
    const auto& t = g[i];
    Json after = Json::array();
    for (const auto p : preds[i]) after.push_back(in[p]);
    Json launches = task_launches(g, b, i);
    if (launches.empty() && t.category != model::kMarker)
      throw std::logic_error(fmt::format("plan: task {} ({}) has no launch", i, t.name));
    tasks.push_back({{"id", in[i]},
                     {"name", t.name},
                     {"stream", model::stream_name(t.lane % model::kStreamCount)},
                     {"category", model::category_name(t.category)},
                     {"layer", t.index},
                     {"start_s", t.start_time().to_s()},
                     {"end_s", t.end_time().to_s()},
                     {"after", after},
                     {"launches", launches}});
  }
  const auto& m = s.job.model;
  const auto& w = b.workload().at(static_cast<std::size_t>(rank));
  return {{"scenario", s.name},
          {"profile", s.hw.name},
          {"rank", rank},
          {"tokens", w.tokens},
          {"documents", w.segments},
          {"attention", {{"full", attention_json(m.full)}, {"sliding", attention_json(m.sliding)}}},
          {"moe",
           {{"kernel", sim::name_of(s.job.training.moe_kernel, model::kMoeKernelNames)},
            {"tile_scheduler",
             sim::name_of(s.job.training.moe_tile_scheduler, model::kTileSchedulerNames)}}},
          {"step_end_s", end.to_s()},
          {"tasks", tasks}};
}

}  // namespace twin::scenarios
