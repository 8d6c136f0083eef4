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
  const std::size_t n = g.size();
  const auto order = topological_order(g);
  if (order.size() != n) return {};
  std::vector<std::int32_t> rank(n, kNone);
  std::vector<bool> on_compute(n, false);
  for (std::size_t t = 0; t < n; ++t)
    if (const std::int32_t lane = g[t].lane; lane >= 0)
      rank[t] = lane / lanes_per_rank, on_compute[t] = lane % lanes_per_rank == compute;
  // Forward, in topological order: last_before[t], the last chain position (t's rank) that
  // precedes t. A compute-stream task joins its rank's chain when the chain's last task precedes
  // it, and is left out otherwise (it could run beside the chain's tasks). Edges between ranks
  // are not followed.
  std::vector<std::int32_t> last_before(n, kNone), position(n, kNone);
  std::vector<std::vector<std::uint32_t>> chain(static_cast<std::size_t>(log.ranks()));
  for (const std::uint32_t t : order) {
    if (on_compute[t] && static_cast<std::size_t>(rank[t]) < chain.size()) {
      auto& c = chain[static_cast<std::size_t>(rank[t])];
      if (last_before[t] == static_cast<std::int32_t>(c.size()) - 1)
        position[t] = static_cast<std::int32_t>(c.size()), c.push_back(t);
    }
    const std::int32_t here = std::max(last_before[t], position[t]);
    for (const std::uint32_t s : g.successor_ids(t))
      if (rank[s] == rank[t]) last_before[s] = std::max(last_before[s], here);
  }
  // Backward: first_after[t], the first chain position that t precedes.
  std::vector<std::int32_t> first_after(n, kAfterAll);
  for (auto it = order.rbegin(); it != order.rend(); ++it) {
    const std::uint32_t t = *it;
    for (const std::uint32_t s : g.successor_ids(t))
      if (rank[s] == rank[t])
        first_after[t] = std::min(
            {first_after[t], first_after[s], position[s] == kNone ? kAfterAll : position[s]});
  }
  const auto timed = timed_tasks(ops, n);
  CertainLive best;
  std::vector<std::int64_t> diff;  // whole bytes: the replay allocates ⌊bytes⌋ rounded up
  for (std::int64_t r = 0; r < log.ranks(); ++r) {
    const auto& c = chain[static_cast<std::size_t>(r)];
    if (c.empty()) continue;
    const auto last = static_cast<std::int32_t>(c.size()) - 1;
    diff.assign(c.size() + 1, 0);
    const auto bufs = log.rank(r);
    for (std::size_t i = 0; i < bufs.size(); ++i) {
      const Buffer& b = bufs[i];
      if (b.bytes <= 0 || rank[b.alloc_task] != r || (b.freed() && rank[b.free_task] != r))
        continue;
      const std::int32_t at = position[b.alloc_task];
      const std::int32_t lo = at != kNone && !b.alloc_at_end ? at : first_after[b.alloc_task];
      std::int32_t hi = last;
      if (b.freed()) {
        const std::int32_t ft = position[b.free_task];
        hi = ft != kNone && b.free_at_end ? ft : last_before[b.free_task];
      }
      if (lo > hi) continue;
      const auto bytes = static_cast<std::int64_t>(b.bytes);
      diff[static_cast<std::size_t>(lo)] += bytes;
      diff[static_cast<std::size_t>(hi) + 1] -= bytes;
    }
    std::int64_t live = 0;
    for (std::size_t p = 0; p < c.size(); ++p) {
      live += diff[p];
      if (timed[c[p]] && live > best.bytes) best = {live, r, static_cast<std::int64_t>(c[p])};
    }
  }
  return best;
}

}  // namespace twin::model
