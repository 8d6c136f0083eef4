#include "scenarios/memory_snapshot.hpp"

namespace twin::scenarios {

namespace {

using Action = model::CachingAllocator::TraceEvent::Action;

Json frames(const char* buffer) {
  return Json::array({{{"filename", "twin"}, {"line", 0}, {"name", buffer}}});
}

Json segment_json(const model::CachingAllocator::SegmentView& seg, const model::AllocatorTrace& t) {
  Json blocks = Json::array();
  std::int64_t allocated = 0;
  for (const auto& b : seg.blocks) {
    const auto id = static_cast<std::size_t>(b.id);
    const char* name = b.allocated && id < t.block_buffer.size() ? t.block_buffer[id] : "";
    allocated += b.allocated ? b.size : 0;
    blocks.push_back({{"address", b.addr},
                      {"size", b.size},
                      {"requested_size", b.allocated ? b.size : 0},
                      {"state", b.allocated ? "active_allocated" : "inactive"},
                      {"frames", b.allocated ? frames(name) : Json::array()}});
  }
  return {{"device", 0},
          {"address", seg.addr},
          {"total_size", seg.size},
          {"stream", seg.stream},
          {"segment_type", seg.small ? "small" : "large"},
          {"segment_pool_id", {0, 0}},
          {"allocated_size", allocated},
          {"active_size", allocated},
          {"requested_size", allocated},
          {"is_expandable", false},
          {"frames", Json::array()},
          {"blocks", std::move(blocks)}};
}

Json action_json(const char* action, const model::AllocatorTrace::Event& e) {
  return {{"action", action},          {"addr", e.action.addr},       {"size", e.action.size},
          {"stream", e.action.stream}, {"time_us", e.time_ns / 1000}, {"frames", frames(e.buffer)}};
}

}  // namespace

Json memory_snapshot_json(const model::AllocatorTrace& t, const Scenario& s, int rank,
                          double capacity_bytes) {
  Json segments = Json::array(), trace = Json::array(), streams = Json::array();
  for (int k = 0; k < model::kPoolCount; ++k) streams.push_back(model::pool_name(k));
  for (const auto& seg : t.segments) segments.push_back(segment_json(seg, t));
  for (const auto& e : t.events) {
    switch (e.action.action) {
      case Action::segment_alloc:
        trace.push_back(action_json("segment_alloc", e));
        break;
      case Action::alloc:
        trace.push_back(action_json("alloc", e));
        break;
      case Action::free:  // no cross-stream use in the twin: the free completes at once
        trace.push_back(action_json("free_requested", e));
        trace.push_back(action_json("free_completed", e));
        break;
      case Action::segment_free:
        trace.push_back(action_json("segment_free", e));
        break;
      case Action::oom: {
        Json o = action_json("oom", e);
        o["device_free"] = 0;
        trace.push_back(std::move(o));
        break;
      }
    }
  }
  return {{"segments", std::move(segments)},
          {"device_traces", Json::array({std::move(trace)})},
          {"allocator_settings", {{"expandable_segments", s.job.training.expandable_segments}}},
          {"twin",
           {{"scenario", s.name},
            {"rank", rank},
            {"capacity_bytes", static_cast<std::int64_t>(capacity_bytes)},
            {"allocator_warm_steps", s.job.training.allocator_warm_steps},
            {"streams", std::move(streams)}}}};
}

}  // namespace twin::scenarios
