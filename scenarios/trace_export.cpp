#include "scenarios/trace_export.hpp"

#include <fmt/format.h>

#include <array>

#include "model/memory_replay.hpp"
#include "reports/trace.hpp"
#include "scenarios/plan.hpp"
#include "sim/units.hpp"

namespace twin::scenarios {

namespace {

int rank_of(const sim::Task& t) {
  return t.lane / model::kStreamCount;
}
int stream_of(const sim::Task& t) {
  return t.lane % model::kStreamCount;
}

// Every task of the traced ranks: complete events with their launches, instants at phase ends,
// and arrows for what a task waited for on another stream or rank.
void task_events(reports::ChromeTrace& tr, const sim::TaskGraph& graph,
                 const model::StepBuilder& builder, const std::vector<bool>& traced,
                 std::uint64_t& flows) {
  for (std::size_t i = 0; i < graph.size(); ++i) {
    const auto& t = graph[i];
    const int rank = rank_of(t), stream = stream_of(t);
    if (!traced[static_cast<std::size_t>(rank)]) continue;
    if (t.category == model::kMarker) {  // a phase's end
      tr.instant(rank, stream, t.name, t.end_time().count_ns());
      continue;
    }
    Json args{{"layer", t.index}};  // and what the GPU launches, where recorded
    if (Json l = task_launches(graph, builder, i); !l.empty()) args["launches"] = std::move(l);
    tr.complete(rank, stream, t.name, model::category_name(t.category), t.start_time().count_ns(),
                t.end_time().count_ns(), args.dump());
    t.each_successor([&](const sim::Task& succ) {
      if ((rank_of(succ) != rank || stream_of(succ) != stream) &&
          traced[static_cast<std::size_t>(rank_of(succ))])
        tr.flow(++flows, rank, stream, t.end_time().count_ns(), rank_of(succ), stream_of(succ),
                succ.start_time().count_ns());
    });
  }
}

// Who a collective waited for: an arrow from the peer that arrived last to each other peer.
void peer_arrows(reports::ChromeTrace& tr, const sim::TaskGraph& graph,
                 const model::StepBuilder& builder, const std::vector<bool>& traced,
                 std::uint64_t& flows) {
  for (const auto& peers : builder.collective_peers()) {
    std::size_t last = peers.front();
    for (const auto id : peers)
      if (graph.start_of(id) > graph.start_of(last)) last = id;
    const auto& lt = graph[last];
    if (!traced[static_cast<std::size_t>(rank_of(lt))]) continue;
    const auto at = graph.start_of(last).count_ns();
    for (const auto id : peers)
      if (id != last && traced[static_cast<std::size_t>(rank_of(graph[id]))])
        tr.flow(++flows, rank_of(lt), stream_of(lt), at, rank_of(graph[id]), stream_of(graph[id]),
                at, "collective peer");
  }
}

// HBM allocated and reserved per caching-allocator pool over the step, as two counter tracks
// of one series per pool (GiB), a sample wherever an action changes them. The step starts with
// what the steps before left cached (memory_replay.hpp): its end state less the step's actions.
void pool_counters(reports::ChromeTrace& tr, const model::AllocatorTrace& t, int r) {
  using Action = model::CachingAllocator::TraceEvent::Action;
  std::array<std::int64_t, model::kPoolCount> allocated{}, reserved{};
  for (const auto& seg : t.segments)
    for (const auto& b : seg.blocks) {
      reserved[static_cast<std::size_t>(seg.stream)] += b.size;
      allocated[static_cast<std::size_t>(seg.stream)] += b.allocated ? b.size : 0;
    }
  auto apply = [&](const model::AllocatorTrace::Event& e, std::int64_t sign) {
    const auto k = static_cast<std::size_t>(e.action.stream);
    const std::int64_t n = sign * e.action.size;
    switch (e.action.action) {
      case Action::alloc:
        allocated[k] += n;
        break;
      case Action::free:
        allocated[k] -= n;
        break;
      case Action::segment_alloc:
        reserved[k] += n;
        break;
      case Action::segment_free:
        reserved[k] -= n;
        break;
      case Action::oom:
        break;
    }
  };
  for (const auto& e : t.events) apply(e, -1);  // back to the step's start
  auto sample = [&](std::int64_t t_ns) {
    for (const auto& [name, v] :
         {std::pair{"hbm_allocated_GiB", &allocated}, std::pair{"hbm_reserved_GiB", &reserved}}) {
      std::vector<std::pair<std::string, double>> series;
      for (int k = 0; k < model::kPoolCount; ++k)
        series.emplace_back(model::pool_name(k),
                            static_cast<double>((*v)[static_cast<std::size_t>(k)]) / sim::kGiB);
      tr.counter(r, name, t_ns, series);
    }
  };
  if (t.events.empty() || t.events.front().time_ns > 0) sample(0);
  for (std::size_t i = 0; i < t.events.size(); ++i) {
    apply(t.events[i], 1);
    if (i + 1 < t.events.size() && t.events[i + 1].time_ns == t.events[i].time_ns)
      continue;  // one sample per moment
    sample(t.events[i].time_ns);
  }
}

}  // namespace

std::string trace_text(const sim::TaskGraph& graph, const model::StepBuilder& builder,
                       const std::map<int, reports::SmTimeline>& sms,
                       const std::map<int, model::AllocatorTrace>& alloc,
                       const std::vector<int>& asked, int gpus, double step_s,
                       const Json& provenance) {
  reports::ChromeTrace tr;
  tr.metadata(provenance.dump());
  std::vector<int> ranks;
  std::vector<bool> traced(static_cast<std::size_t>(gpus), false);
  for (int r : asked.empty() ? std::vector<int>{0} : asked)
    if (r >= 0 && r < gpus) ranks.push_back(r), traced[static_cast<std::size_t>(r)] = true;
  for (int r : ranks) {
    tr.process(r, fmt::format("rank {}", r));
    for (int st = 0; st < model::kStreamCount; ++st) tr.thread(r, st, model::stream_name(st));
  }
  for (int r : ranks) {  // the step as PyTorch's profiler names it, on a track of its own
    tr.thread(r, model::kStreamCount, "step");
    tr.complete(r, model::kStreamCount, "ProfilerStep#0", "step", 0,
                sim::Time::s(step_s).count_ns(), "{}");
  }
  std::uint64_t flows = 0;
  task_events(tr, graph, builder, traced, flows);
  peer_arrows(tr, graph, builder, traced, flows);
  for (int r : ranks) {
    if (const auto it = sms.find(r); it != sms.end())
      for (const auto& [t, held] : it->second.points())
        tr.counter(r, "nccl_sms", t, {{"SMs", held}});
    if (const auto it = alloc.find(r); it != alloc.end()) pool_counters(tr, it->second, r);
  }
  return tr.str();
}

}  // namespace twin::scenarios
