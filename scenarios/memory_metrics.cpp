#include "scenarios/memory_metrics.hpp"

#include <fmt/format.h>

#include <algorithm>

#include "sim/units.hpp"

namespace twin::scenarios {

using sim::kGiB;

namespace {

Json rank_memory_json(const model::HbmReplay& h, std::int64_t rank) {
  Json pools = Json::array();
  for (int p = 0; p < model::kPoolCount; ++p) {
    const auto& a = h.pools[static_cast<std::size_t>(p)];
    const auto& k = h.at_peak[static_cast<std::size_t>(p)];
    pools.push_back({{"pool", model::pool_name(p)},
                     {"peak_allocated_GiB", a.peak_allocated / kGiB},
                     {"peak_reserved_GiB", a.peak_reserved / kGiB},
                     {"at_peak_allocated_GiB", k.allocated / kGiB},
                     {"at_peak_reserved_GiB", k.reserved / kGiB},
                     {"cached_unused_at_peak_GiB", (k.reserved - k.allocated) / kGiB}});
    if (!h.at_first_retry.empty()) {  // before the first retry released anything
      const auto& f = h.at_first_retry[static_cast<std::size_t>(p)];
      pools.back()["at_first_retry_allocated_GiB"] = f.allocated / kGiB;
      pools.back()["at_first_retry_reserved_GiB"] = f.reserved / kGiB;
    }
  }
  return {{"rank", rank},
          {"peak_allocated_GiB", h.total.peak_allocated / kGiB},
          {"peak_reserved_GiB", h.total.peak_reserved / kGiB},
          {"inactive_split_at_peak_GiB", static_cast<double>(h.inactive_split_at_peak) / kGiB},
          {"alloc_retries", h.retries.size()},
          {"oom", h.oom},
          {"failed_allocation", h.failed},
          {"pools", pools}};
}

}  // namespace

Json memory_json(const Scenario& s, const model::HostMemory& host, double capacity,
                 const std::vector<model::HbmReplay>& hbm) {
  std::size_t worst = 0, with_retries = 0, retries = 0;
  bool oom = false;
  // The worst rank: the first that ran out of memory, else the one with the most reserved.
  for (std::size_t r = 0; r < hbm.size(); ++r) {
    const auto& h = hbm[r];
    const auto& w = hbm[worst];
    if (h.oom != w.oom ? h.oom : !w.oom && h.total.peak_reserved > w.total.peak_reserved) worst = r;
    with_retries += h.retries.empty() ? 0 : 1;
    retries = std::max(retries, h.retries.size());
    oom = oom || h.oom;
  }
  Json parts = Json::object();
  for (const auto& part : host.parts) parts[part.name] = part.bytes / kGiB;
  const double sockets = static_cast<double>(s.job.parallel.total_gpus());
  return {{"hbm_capacity_GiB", capacity / kGiB},
          {"nccl_buffers_GiB", model::nccl_buffer_bytes(s.job, s.hw, s.nccl) / kGiB},
          {"hbm_peak_reserved_GiB", hbm[worst].total.peak_reserved / kGiB},
          {"hbm_peak_allocated_GiB", hbm[worst].total.peak_allocated / kGiB},
          {"alloc_retries", retries},
          {"ranks_with_retries", with_retries},
          {"oom", oom},
          {"rank0", rank_memory_json(hbm[0], 0)},
          {"worst_rank", rank_memory_json(hbm[worst], static_cast<std::int64_t>(worst))},
          {"host_peak_GiB", host.total_bytes / kGiB},
          {"host_capacity_GiB", host.capacity_bytes / kGiB},
          {"host_headroom_GiB", host.headroom_bytes / kGiB},
          {"host_pinned_rounding_GiB", host.pinned_rounding_bytes / kGiB},
          {"host_pages_in_hbm_GiB", host.hbm_spill_bytes / kGiB},
          {"host_unattributed_median_GiB", s.hw.host.unattributed_median_GiB},
          {"host_oom_probability",
           model::host_oom_probability(host.headroom_bytes / kGiB, sockets, s.hw.host)},
          {"host_unattributed_kept_fraction", s.hw.host.unattributed_kept_fraction},
          {"host_parts_GiB", parts}};
}

// Whether the step can run at all (reports/metrics.hpp): HBM and Grace hold what it needs.
Json runnable_json(const Json& m) {
  std::string why;
  if (m["oom"].get<bool>())
    why = fmt::format("out of HBM on rank {} (allocating {})",
                      m["worst_rank"]["rank"].get<std::int64_t>(),
                      m["worst_rank"]["failed_allocation"].get<std::string>());
  if (m["host_headroom_GiB"].get<double>() < 0)
    why += fmt::format("{}Grace needs {:.1f} of {:.1f} GiB per rank", why.empty() ? "" : "; ",
                       m["host_peak_GiB"].get<double>(), m["host_capacity_GiB"].get<double>());
  return {{"ok", why.empty()}, {"why", why}};
}

}  // namespace twin::scenarios
