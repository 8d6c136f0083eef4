#include "scenarios/memory_metrics.hpp"

#include <algorithm>

#include "sim/units.hpp"

namespace twin::scenarios {

using sim::kGiB;

namespace {

reports::RankMemory rank_memory(const model::HbmReplay& h, std::int64_t rank) {
  reports::RankMemory m{rank,
                        h.total.peak_allocated / kGiB,
                        h.total.peak_reserved / kGiB,
                        static_cast<double>(h.inactive_split_at_peak) / kGiB,
                        h.retries.size(),
                        h.oom,
                        h.failed,
                        {}};
  for (int p = 0; p < model::kPoolCount; ++p) {
    const auto& a = h.pools[static_cast<std::size_t>(p)];
    const auto& k = h.at_peak[static_cast<std::size_t>(p)];
    m.pools.push_back({model::pool_name(p), a.peak_allocated / kGiB, a.peak_reserved / kGiB,
                       k.allocated / kGiB, k.reserved / kGiB, (k.reserved - k.allocated) / kGiB,
                       std::nullopt, std::nullopt});
    if (!h.at_first_retry.empty()) {  // before the first retry released anything
      const auto& f = h.at_first_retry[static_cast<std::size_t>(p)];
      m.pools.back().at_first_retry_allocated_GiB = f.allocated / kGiB;
      m.pools.back().at_first_retry_reserved_GiB = f.reserved / kGiB;
    }
  }
  return m;
}

}  // namespace

reports::MemoryReport memory_report(const Scenario& s, const model::HostMemory& host,
                                    double capacity, const std::vector<model::HbmReplay>& hbm) {
  reports::MemoryReport m;
  std::size_t worst = 0;
  // The worst rank: the first that ran out of memory, else the one with the most reserved.
  for (std::size_t r = 0; r < hbm.size(); ++r) {
    const auto& h = hbm[r];
    const auto& w = hbm[worst];
    if (h.oom != w.oom ? h.oom : !w.oom && h.total.peak_reserved > w.total.peak_reserved) worst = r;
    m.ranks_with_retries += h.retries.empty() ? 0 : 1;
    m.alloc_retries = std::max(m.alloc_retries, h.retries.size());
    m.oom = m.oom || h.oom;
  }
  for (const auto& part : host.parts) m.host_parts_GiB.emplace_back(part.name, part.bytes / kGiB);
  const double sockets = static_cast<double>(s.job.parallel.total_gpus());
  m.hbm_capacity_GiB = capacity / kGiB;
  m.nccl_buffers_GiB = model::nccl_buffer_bytes(s.job, s.hw, s.nccl) / kGiB;
  m.ep_buffers_GiB = model::ep_buffer_bytes(s.job) / kGiB;
  m.hbm_peak_reserved_GiB = hbm[worst].total.peak_reserved / kGiB;
  m.hbm_peak_allocated_GiB = hbm[worst].total.peak_allocated / kGiB;
  m.rank0 = rank_memory(hbm[0], 0);
  m.worst_rank = rank_memory(hbm[worst], static_cast<std::int64_t>(worst));
  m.host_peak_GiB = host.total_bytes / kGiB;
  m.host_capacity_GiB = host.capacity_bytes / kGiB;
  m.host_headroom_GiB = host.headroom_bytes / kGiB;
  m.host_pinned_rounding_GiB = host.pinned_rounding_bytes / kGiB;
  m.host_pages_in_hbm_GiB = host.hbm_spill_bytes / kGiB;
  m.host_unattributed_median_GiB = s.hw.host.unattributed_median_GiB;
  m.host_oom_probability =
      model::host_oom_probability(host.headroom_bytes / kGiB, sockets, s.hw.host);
  m.host_unattributed_kept_fraction = s.hw.host.unattributed_kept_fraction;
  return m;
}

}  // namespace twin::scenarios
