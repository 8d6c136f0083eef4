#include "model/memory_bound.hpp"

#include <algorithm>
#include <limits>
#include <vector>

namespace twin::model {

namespace {

constexpr std::int32_t kNone = -1;
constexpr std::int32_t kAfterAll = std::numeric_limits<std::int32_t>::max();
// A kernel this long alone ends at least a nanosecond after it starts, however the engine rounds
// (its clock may run faster than alone under the power model, never 1,000× so).
constexpr double kTimedAloneS = 1e-6;

// Tasks that certainly take time: kernels and fused runs of kernels, by their time alone.
std::vector<bool> timed_tasks(const StepOps& ops, std::size_t n) {
  std::vector<bool> timed(n, false);
  for (std::size_t i = 0; i < ops.kernels.size(); ++i)
    if (ops.kernels[i].work.alone_s >= kTimedAloneS) timed[ops.kernels[i].task] = true;
  for (std::size_t i = 0; i < ops.fused.size(); ++i) {
    const auto& f = ops.fused[i];
    double s = 0;
    for (std::uint32_t k = 0; k < f.count; ++k) s += ops.parts[f.first + k].alone_s;
    if (s >= kTimedAloneS) timed[f.task] = true;
  }
  return timed;
}

// Every task's rank and its place on its rank's compute stream.
struct Lanes {
  std::vector<std::int32_t> rank;      // per task: its rank, or kNone
  std::vector<std::int32_t> position;  // per task: its place on its rank's compute stream
  std::vector<std::vector<std::uint32_t>> chain;  // per rank: its compute-stream tasks, by id
};

Lanes lanes_of(const sim::TaskGraph& g, std::int32_t lanes_per_rank, std::int32_t compute) {
  Lanes l;
  const std::size_t n = g.size();
  l.rank.assign(n, kNone);
  l.position.assign(n, kNone);
  for (std::size_t t = 0; t < n; ++t) {
    const std::int32_t lane = g[t].lane;
    if (lane < 0) continue;
    const std::int32_t r = lane / lanes_per_rank;
    l.rank[t] = r;
    if (lane % lanes_per_rank != compute) continue;
    const auto ri = static_cast<std::size_t>(r);
    if (ri >= l.chain.size()) l.chain.resize(ri + 1);
    l.position[t] = static_cast<std::int32_t>(l.chain[ri].size());
    l.chain[ri].push_back(static_cast<std::uint32_t>(t));
  }
  return l;
}

// Kahn's algorithm: the tasks in an order where every edge points forward (task ids almost are,
// but not quite: a task may be made to wait for one built after it).
std::vector<std::uint32_t> topological_order(const sim::TaskGraph& g) {
  const std::size_t n = g.size();
  std::vector<std::uint32_t> indegree(n, 0), order;
  order.reserve(n);
  for (std::size_t t = 0; t < n; ++t)
    for (const std::uint32_t s : g.successor_ids(t)) ++indegree[s];
  for (std::size_t t = 0; t < n; ++t)
    if (indegree[t] == 0) order.push_back(static_cast<std::uint32_t>(t));
  for (std::size_t i = 0; i < order.size(); ++i)
    for (const std::uint32_t s : g.successor_ids(order[i]))
      if (--indegree[s] == 0) order.push_back(s);
  return order;  // shorter than n only for a cyclic graph, which the engine would deadlock on
}

}  // namespace

CertainLive certain_live(const sim::TaskGraph& g, const BufferLog& log, const StepOps& ops,
                         std::int32_t lanes_per_rank, std::int32_t compute) {
  const Lanes l = lanes_of(g, lanes_per_rank, compute);
  const std::size_t n = g.size();
  const auto order = topological_order(g);
  // last_before[t]: the last compute-stream position (t's rank) that precedes t; first_after[t]:
  // the first that t precedes. Edges between ranks are not followed.
  std::vector<std::int32_t> last_before(n, kNone), first_after(n, kAfterAll);
  for (const std::uint32_t t : order) {
    const std::int32_t here = std::max(last_before[t], l.position[t]);
    for (const std::uint32_t s : g.successor_ids(t))
      if (l.rank[s] == l.rank[t]) last_before[s] = std::max(last_before[s], here);
  }
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::uint32_t t = *it;
    for (const std::uint32_t s : g.successor_ids(t)) {
      if (l.rank[s] != l.rank[t]) continue;
      const std::int32_t p = l.position[s] == kNone ? kAfterAll : l.position[s];
      first_after[t] = std::min({first_after[t], first_after[s], p});
    }
  }
  const auto timed = timed_tasks(ops, n);
  CertainLive best;
  std::vector<std::int64_t> diff;  // whole bytes: the replay allocates ⌊bytes⌋ rounded up
  for (std::int64_t r = 0; r < log.ranks(); ++r) {
    const auto ri = static_cast<std::size_t>(r);
    if (ri >= l.chain.size() || l.chain[ri].empty() || order.size() != n) continue;
    const auto& chain = l.chain[ri];
    // A chain: each compute-stream task preceded by the one before it (by id), and by none after.
    bool chained = true;
    for (std::size_t p = 0; p < chain.size(); ++p)
      chained = chained && last_before[chain[p]] == static_cast<std::int32_t>(p) - 1;
    if (!chained) continue;
    const auto last = static_cast<std::int32_t>(chain.size()) - 1;
    diff.assign(chain.size() + 1, 0);
    const auto bufs = log.rank(r);
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      const Buffer& b = bufs[i];
      if (b.bytes <= 0 || l.rank[b.alloc_task] != r) continue;
      if (b.freed() && l.rank[b.free_task] != r) continue;
      const std::int32_t at = l.position[b.alloc_task];
      const std::int32_t lo = at != kNone && !b.alloc_at_end ? at : first_after[b.alloc_task];
      std::int32_t hi = last;
      if (b.freed()) {
        const std::int32_t ft = l.position[b.free_task];
        hi = ft != kNone && b.free_at_end ? ft : last_before[b.free_task];
      }
      if (lo > hi) continue;
      const auto bytes = static_cast<std::int64_t>(b.bytes);
      diff[static_cast<std::size_t>(lo)] += bytes;
      diff[static_cast<std::size_t>(hi) + 1] -= bytes;
    }
    std::int64_t live = 0;
    for (std::size_t p = 0; p < chain.size(); ++p) {
      live += diff[p];
      if (timed[chain[p]] && live > best.bytes)
        best = {live, r, static_cast<std::int64_t>(chain[p])};
    }
  }
  return best;
}

}  // namespace twin::model
