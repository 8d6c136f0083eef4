#include "model/memory_replay.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <bit>
#include <cstring>
#include <stdexcept>
#include <tuple>
#include <unordered_map>

#include "hardware/cluster.hpp"
#include "hardware/collective.hpp"
#include "hardware/ops.hpp"
#include "model/comm_plan.hpp"
#include "model/step_costs.hpp"
#include "sim/task.hpp"
#include "sim/units.hpp"

namespace twin::model {

using sim::kGiB;

namespace {
// One allocation or free of a rank: its time, its record number, buffer index · 2 + (1:
// allocation, 0: free).
struct Timed {
  std::int64_t t;
  std::uint32_t seq, code;
};

// `ev` by (time, record number), which is unique per rank: as one 64-bit key, (t − t_min)·2^b +
// seq (b bits hold every record number), by least-significant-digit radix sort, a few linear
// passes over a rank's ~2,500 events where comparing them in random order mispredicts most
// branches (issue #21: the sort had become most of the allocator replay). std::sort where the
// key would not fit: a step longer than 2^(64 − b) ns (with 2^24 records, 2^40 ns, ~18 min).
std::vector<AllocEvent> sorted_by_time(const std::vector<Timed>& ev) {
  std::vector<AllocEvent> out;
  out.reserve(ev.size());
  if (ev.empty()) return out;
  std::int64_t t_min = ev[0].t, t_max = ev[0].t;
  std::uint32_t seq_max = 0;
  for (const Timed& e : ev)
    t_min = std::min(t_min, e.t), t_max = std::max(t_max, e.t), seq_max = std::max(seq_max, e.seq);
  const int b = std::bit_width(seq_max);
  const auto range = static_cast<std::uint64_t>(t_max) - static_cast<std::uint64_t>(t_min);
  if (std::bit_width(range) + b > 64) {
    auto sorted = ev;
    std::sort(sorted.begin(), sorted.end(), [](const Timed& x, const Timed& y) {
      return x.t != y.t ? x.t < y.t : x.seq < y.seq;
    });
    for (const Timed& e : sorted) out.push_back({e.t, e.code / 2, (e.code & 1) != 0});
    return out;
  }
  struct Packed {
    std::uint64_t key;
    std::uint32_t code;
  };
  std::vector<Packed> a, tmp(ev.size());
  a.reserve(ev.size());
  for (const Timed& e : ev)
    a.push_back(
        {((static_cast<std::uint64_t>(e.t) - static_cast<std::uint64_t>(t_min)) << b) | e.seq,
         e.code});
  const int bits = std::bit_width((range << b) | seq_max);
  for (int shift = 0; shift < bits; shift += 8) {
    std::array<std::size_t, 257> at{};
    for (const Packed& x : a) ++at[((x.key >> shift) & 0xff) + 1];
    for (std::size_t d = 1; d < at.size(); ++d) at[d] += at[d - 1];
    for (const Packed& x : a) tmp[at[(x.key >> shift) & 0xff]++] = x;
    a.swap(tmp);
  }
  for (const Packed& x : a)
    out.push_back({static_cast<std::int64_t>((x.key >> b) + static_cast<std::uint64_t>(t_min)),
                   x.code / 2, (x.code & 1) != 0});
  return out;
}
}  // namespace

std::vector<AllocEvent> alloc_sequence(const BufferLog& log, std::int64_t rank) {
  const auto bufs = log.rank(rank);
  if (bufs.size() >= (std::size_t{1} << 31))
    throw std::length_error("too many buffers on one rank");
  std::vector<Timed> ev;
  ev.reserve(2 * bufs.size());
  for (std::size_t i = 0; i < bufs.size(); ++i) {
    const Buffer& b = bufs[i];
    if (b.bytes <= 0) continue;
    const auto code = static_cast<std::uint32_t>(2 * i);
    ev.push_back({log.alloc_ns(b), b.alloc_seq, code + 1});
    if (b.freed()) ev.push_back({log.free_ns(b), b.free_seq, code});
  }
  return sorted_by_time(ev);
}

namespace {
// Tags the allocator's actions since `from` with the event's time and buffer.
void tag_actions(AllocatorTrace& t, const std::vector<CachingAllocator::TraceEvent>& actions,
                 std::size_t from, std::int64_t time_ns, const char* buffer) {
  for (std::size_t i = from; i < actions.size(); ++i)
    t.events.push_back({actions[i], time_ns, buffer});
}

HbmReplay replay_events(const BufferLog& log, std::int64_t rank,
                        const std::vector<AllocEvent>& events,
                        const CachingAllocator::Options& opts, std::int64_t warm_steps,
                        AllocatorTrace* trace) {
  const auto bufs = log.rank(rank);
  CachingAllocator a(opts, kPoolCount);
  std::vector<CachingAllocator::TraceEvent> actions;
  if (trace) *trace = AllocatorTrace{};
  std::vector<std::int64_t> block(bufs.size(), -1);
  HbmReplay out;
  for (std::int64_t step = 0; step <= warm_steps && !out.oom; ++step) {  // a job stops at its OOM
    out = HbmReplay{};  // only the last step is reported
    a.reset_peaks();
    const bool traced = trace != nullptr;  // every step: the last one run stays
    if (traced) {
      trace->events.clear();
      actions.clear();
      a.record(&actions);
    }
    for (std::size_t i = 0; i < events.size(); ++i) {
      const AllocEvent& e = events[i];
      const Buffer& b = bufs[e.buffer];
      const std::size_t from = actions.size();
      if (!e.alloc) {
        if (block[e.buffer] >= 0) a.free(block[e.buffer]);
        if (traced) tag_actions(*trace, actions, from, e.time_ns, b.name);
        continue;
      }
      if (step > 0 && !b.freed()) continue;  // kept from the step before
      std::array<PoolStats, kPoolCount> before;
      if (out.retries.empty())
        for (int p = 0; p < kPoolCount; ++p) before[static_cast<std::size_t>(p)] = a.stream(p);
      const auto r = a.malloc(static_cast<std::int64_t>(b.bytes), b.pool);
      if (r.retried) {
        if (out.retries.empty()) out.at_first_retry.assign(before.begin(), before.end());
        out.retries.push_back({b.alloc_task, e.time_ns, i, r.segments_released, r.bytes_released});
      }
      if (r.block < 0 && !out.oom) {
        out.oom = true;
        out.failed =
            fmt::format("{} ({:.2f} GiB, {} pool)", b.name, b.bytes / kGiB, pool_name(b.pool));
      }
      block[e.buffer] = r.block;
      if (traced) {
        tag_actions(*trace, actions, from, e.time_ns, b.name);
        if (r.block >= 0) {
          trace->block_buffer.resize(
              std::max(trace->block_buffer.size(), static_cast<std::size_t>(r.block) + 1), "");
          trace->block_buffer[static_cast<std::size_t>(r.block)] = b.name;
        }
      }
      if (a.total().allocated == a.total().peak_allocated) {
        for (int p = 0; p < kPoolCount; ++p) out.at_peak[static_cast<std::size_t>(p)] = a.stream(p);
        out.inactive_split_at_peak = a.inactive_split();
      }
    }
  }
  out.total = a.total();
  for (int p = 0; p < kPoolCount; ++p) out.pools[static_cast<std::size_t>(p)] = a.stream(p);
  if (trace) trace->segments = a.segments();
  return out;
}

// Whether two ranks' sequences ask the allocator for the same things in the same order.
bool same_requests(const BufferLog& log, std::int64_t r, const std::vector<AllocEvent>& x,
                   std::int64_t q, const std::vector<AllocEvent>& y) {
  if (x.size() != y.size()) return false;
  const auto bx = log.rank(r), by = log.rank(q);
  for (std::size_t i = 0; i < x.size(); ++i) {
    const Buffer &a = bx[x[i].buffer], &b = by[y[i].buffer];
    if (x[i].alloc != y[i].alloc || a.bytes != b.bytes || a.pool != b.pool ||
        a.freed() != b.freed() || a.name != b.name)
      return false;
  }
  return true;
}

std::uint64_t requests_hash(const BufferLog& log, std::int64_t r,
                            const std::vector<AllocEvent>& x) {
  std::uint64_t h = 1469598103934665603ULL;  // FNV-1a over the fields same_requests compares
  auto mix = [&h](std::uint64_t v) { h = (h ^ v) * 1099511628211ULL; };
  const auto bufs = log.rank(r);
  for (const AllocEvent& e : x) {
    const Buffer& b = bufs[e.buffer];
    std::uint64_t bytes;
    std::memcpy(&bytes, &b.bytes, sizeof bytes);
    mix(bytes ^ (static_cast<std::uint64_t>(b.pool) << 1) ^ (e.alloc ? 1 : 0));
    mix(reinterpret_cast<std::uintptr_t>(b.name) ^ (b.freed() ? 1 : 0));
  }
  return h;
}
}  // namespace

HbmReplay replay_hbm(const BufferLog& log, std::int64_t rank, const CachingAllocator::Options& opts,
                     std::int64_t warm_steps, AllocatorTrace* trace) {
  return replay_events(log, rank, alloc_sequence(log, rank), opts, warm_steps, trace);
}

std::vector<HbmReplay> replay_hbm_ranks(const BufferLog& log, std::int64_t ranks,
                                        const CachingAllocator::Options& opts,
                                        std::int64_t warm_steps) {
  std::vector<HbmReplay> out;
  out.reserve(static_cast<std::size_t>(ranks));
  std::vector<std::vector<AllocEvent>> events;  // of the ranks replayed
  std::vector<std::int64_t> replayed;
  std::unordered_multimap<std::uint64_t, std::size_t> by_hash;  // → index into replayed
  for (std::int64_t r = 0; r < ranks; ++r) {
    auto ev = alloc_sequence(log, r);
    const std::uint64_t h = requests_hash(log, r, ev);
    const auto [lo, hi] = by_hash.equal_range(h);
    const auto same = std::find_if(lo, hi, [&](const auto& kv) {
      return same_requests(log, r, ev, replayed[kv.second], events[kv.second]);
    });
    if (same == hi) {
      out.push_back(replay_events(log, r, ev, opts, warm_steps, nullptr));
      by_hash.emplace(h, replayed.size());
      replayed.push_back(r);
      events.push_back(std::move(ev));
      continue;
    }
    HbmReplay h_r = out[static_cast<std::size_t>(replayed[same->second])];
    const auto bufs = log.rank(r);
    for (AllocRetry& a : h_r.retries)  // the same request, this rank's task and time
      a.task = bufs[ev[a.event].buffer].alloc_task, a.time_ns = ev[a.event].time_ns;
    out.push_back(std::move(h_r));
  }
  return out;
}

double nccl_buffer_bytes(const Job& job, const hardware::Profile& p,
                         const hardware::NcclOptions& n) {
  const auto comms = plan_comms(job, n, static_cast<int>(p.gpu.sm_count));
  return comms.buffered_channels() * p.nccl.buffer_per_channel_MiB * 1024 * 1024;
}

double ep_buffer_bytes(const Job& job) {
  const auto& t = job.training;
  if (!job.model.moe() || t.ep_dispatch != EpDispatch::per_rank || !t.ep_worst_case_buffer)
    return 0;
  const double ep = static_cast<double>(job.parallel.ep);
  const double tokens = static_cast<double>(job.training.seq_len * job.training.rows_per_gpu) * ep;
  const double group_experts = static_cast<double>(job.model.experts / job.parallel.ep) * ep;
  return tokens * (static_cast<double>(job.model.hidden) * 2 + group_experts * 4);
}

double allocator_capacity_bytes(const Job& job, const hardware::Profile& p,
                                const hardware::NcclOptions& n, double host_spill_bytes) {
  return (p.gpu.hbm_usable_GiB - p.gpu.cuda_context_GiB) * kGiB - nccl_buffer_bytes(job, p, n) -
         ep_buffer_bytes(job) - host_spill_bytes;
}

void resolve_retries(const sim::TaskGraph& g, std::int32_t lanes_per_rank,
                     std::vector<std::vector<AllocRetry>>& retries_by_rank) {
  // Tasks per lane in stream order (a lane is an in-order chain, so also in time order).
  const auto L = static_cast<std::size_t>(lanes_per_rank);
  std::vector<std::vector<std::size_t>> by_lane(retries_by_rank.size() * L);
  for (std::size_t i = 0; i < g.size(); ++i)
    if (g[i].lane >= 0 && static_cast<std::size_t>(g[i].lane) < by_lane.size())
      by_lane[static_cast<std::size_t>(g[i].lane)].push_back(i);
  for (std::size_t rank = 0; rank < retries_by_rank.size(); ++rank)
    for (AllocRetry& a : retries_by_rank[rank]) {
      const auto& x = g[a.task];
      for (std::size_t l = 0; l < L; ++l) {
        const auto& lane = by_lane[rank * L + l];
        // The last task of the lane, other than x, that started before the retry.
        auto it = std::partition_point(lane.begin(), lane.end(), [&](std::size_t id) {
          return g[id].start_time().count_ns() < a.time_ns;
        });
        while (it != lane.begin() && *(it - 1) == a.task) --it;
        if (it == lane.begin()) continue;
        const auto& prev = g[*(it - 1)];
        if (prev.lane == x.lane)
          a.stream_prev = prev.id();
        else
          a.sync_ns = std::max(a.sync_ns, prev.end_time().count_ns() - a.time_ns);
      }
    }
}

void inject_retries(sim::TaskGraph& g, hardware::Cluster& c,
                    const std::vector<std::vector<AllocRetry>>& retries_by_rank) {
  const auto& gpu = c.profile().gpu;
  for (const auto& rank : retries_by_rank)
    for (const AllocRetry& a : rank) {
      sim::Task& x = g[a.task];
      sim::Task& r = g.add("alloc_retry", x.lane, kAllocRetry, x.index);
      const double free_ms =
          gpu.cuda_free_ms_per_segment * a.segments_released +
          gpu.cuda_free_ms_per_GiB * static_cast<double>(a.bytes_released) / kGiB;
      hardware::run_delay(r, c, sim::Time::ns(a.sync_ns) + sim::Time::ms(free_ms));
      if (a.stream_prev != AllocRetry::kNone) r.after(g[a.stream_prev]);
      x.after(r);
    }
}

}  // namespace twin::model
