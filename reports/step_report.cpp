#include "reports/step_report.hpp"

#include <fmt/format.h>

#include <cmath>
#include <map>

namespace twin::reports {

Runnable runnable(const MemoryReport& m) {
  std::string why;
  if (m.oom)
    why = fmt::format("out of HBM on rank {} (allocating {})", m.worst_rank.rank,
                      m.worst_rank.failed_allocation);
  if (m.host_headroom_GiB < 0)
    why += fmt::format("{}host memory needs {:.1f} of {:.1f} GiB per rank", why.empty() ? "" : "; ",
                       m.host_peak_GiB, m.host_capacity_GiB);
  return {why.empty(), why};
}

double StepReport::gpu_time(const std::string& category) const {
  for (const auto& [k, v] : gpu_time_s)
    if (k == category) return v;
  return 0;
}

Json to_json(const Breakdown& b) {
  return {{"compute_overlapped", b.compute_overlapped},
          {"compute_only", b.compute_only},
          {"comm_wait", b.comm_wait},
          {"idle", b.idle}};
}

namespace {

Json to_json(const PoolMemory& p) {
  Json j{{"pool", p.pool},
         {"peak_allocated_GiB", p.peak_allocated_GiB},
         {"peak_reserved_GiB", p.peak_reserved_GiB},
         {"at_peak_allocated_GiB", p.at_peak_allocated_GiB},
         {"at_peak_reserved_GiB", p.at_peak_reserved_GiB},
         {"cached_unused_at_peak_GiB", p.cached_unused_at_peak_GiB}};
  if (p.at_first_retry_allocated_GiB)
    j["at_first_retry_allocated_GiB"] = *p.at_first_retry_allocated_GiB;
  if (p.at_first_retry_reserved_GiB)
    j["at_first_retry_reserved_GiB"] = *p.at_first_retry_reserved_GiB;
  return j;
}

Json to_json(const RankMemory& r) {
  Json pools = Json::array();
  for (const auto& p : r.pools) pools.push_back(to_json(p));
  return {{"rank", r.rank},
          {"peak_allocated_GiB", r.peak_allocated_GiB},
          {"peak_reserved_GiB", r.peak_reserved_GiB},
          {"inactive_split_at_peak_GiB", r.inactive_split_at_peak_GiB},
          {"alloc_retries", r.alloc_retries},
          {"oom", r.oom},
          {"failed_allocation", r.failed_allocation},
          {"pools", pools}};
}

Json to_json(const NetworkReport& n) {
  Json top = Json::array();
  for (const auto& l : n.busiest_links)
    top.push_back({{"link", l.link},
                   {"bytes_GB", l.bytes_GB},
                   {"busy_s", l.busy_s},
                   {"saturated_s", l.saturated_s},
                   {"utilization_while_busy", l.utilization_while_busy},
                   {"mean_utilization", l.mean_utilization}});
  return {{"placement", n.placement},
          {"routing", n.routing},
          {"nodes", n.nodes},
          {"groups", n.groups},
          {"groups_per_replica_max", n.groups_per_replica_max},
          {"groups_per_replica_all_reduce", n.groups_per_replica_all_reduce},
          {"slowest_replica", n.slowest_replica},
          {"slowest_gpu_speed", n.slowest_gpu_speed},
          {"simulated_replicas", n.simulated_replicas},
          {"links_saturating", n.links_saturating},
          {"busiest_links", top}};
}

}  // namespace

Json to_json(const MemoryReport& m) {
  Json parts = Json::object();
  for (const auto& [name, GiB] : m.host_parts_GiB) parts[name] = GiB;
  return {{"hbm_capacity_GiB", m.hbm_capacity_GiB},
          {"nccl_buffers_GiB", m.nccl_buffers_GiB},
          {"ep_buffers_GiB", m.ep_buffers_GiB},
          {"hbm_peak_reserved_GiB", m.hbm_peak_reserved_GiB},
          {"hbm_peak_allocated_GiB", m.hbm_peak_allocated_GiB},
          {"alloc_retries", m.alloc_retries},
          {"ranks_with_retries", m.ranks_with_retries},
          {"oom", m.oom},
          {"rank0", to_json(m.rank0)},
          {"worst_rank", to_json(m.worst_rank)},
          {"host_peak_GiB", m.host_peak_GiB},
          {"host_capacity_GiB", m.host_capacity_GiB},
          {"host_headroom_GiB", m.host_headroom_GiB},
          {"host_pinned_rounding_GiB", m.host_pinned_rounding_GiB},
          {"host_pages_in_hbm_GiB", m.host_pages_in_hbm_GiB},
          {"host_unattributed_median_GiB", m.host_unattributed_median_GiB},
          {"host_oom_probability", m.host_oom_probability},
          {"host_unattributed_kept_fraction", m.host_unattributed_kept_fraction},
          {"host_parts_GiB", parts}};
}

Json to_json(const StepReport& r) {
  Json j;
  j["scenario"] = r.scenario;
  j["step_time_s"] = r.step_time_s;
  j["tokens_per_s_per_gpu"] = r.tokens_per_s_per_gpu;
  j["tokens_per_day"] = r.tokens_per_day;
  j["slowest_rank"] = {{"rank", r.slowest_rank.rank},
                       {"gpu_compute_s", r.slowest_rank.gpu_compute_s},
                       {"why", r.slowest_rank.why}};
  j["breakdown_s"] = {{"rank0", to_json(r.rank0)}, {"slowest", to_json(r.slowest)}};
  Json gt = Json::object();
  for (const auto& [k, v] : r.gpu_time_s) gt[k] = v;
  j["gpu_time_s"] = gt;
  Json parts = Json::object();
  for (const auto& [k, v] : r.optimizer_parts_s) parts[k] = v;
  j["optimizer_parts_s"] = parts;
  j["optimizer_step_s"] = r.optimizer_step_s;
  j["power_cap_s"] = r.power_cap_s;
  j["exposed_comm_s"] = r.exposed_comm_s();
  j["node_compute_spread"] = r.node_compute_spread;
  j["node_comm_wait_ratio"] = r.node_comm_wait_ratio;
  j["nccl_sms"] = {{"mean_while_collective", r.nccl_sms.mean_while_collective},
                   {"max", r.nccl_sms.max},
                   {"seconds_at_or_above_64", r.nccl_sms.seconds_at_or_above_64}};
  j["memory"] = to_json(r.memory);
  j["network"] = to_json(r.network);
  j["simulation"] = {{"tasks", r.simulation.tasks},
                     {"events", r.simulation.events},
                     {"fluid_solves", r.simulation.fluid_solves},
                     {"passes", r.simulation.passes}};
  j["runnable"] = {{"ok", r.runnable.ok}, {"why", r.runnable.why}};
  j["flops"] = {{"model_per_step", r.flops.model_per_step},
                {"with_recompute_per_step", r.flops.with_recompute_per_step},
                {"model_TFLOPs_per_gpu", r.flops.model_TFLOPs_per_gpu},
                {"mfu", r.flops.mfu},
                {"hfu", r.flops.hfu}};
  j["provenance"] = r.provenance;
  return j;
}

std::string host_risk_caveat(const MemoryReport& m) {
  return m.host_unattributed_kept_fraction >= 1
             ? " if no socket releases its unattributed memory (most do: "
               "host.unattributed_kept_fraction)"
             : "";
}

namespace {

// gpu_time_s by what runs it: collectives (NCCL kernels), copies, the host, compute kernels.
std::string time_per_kind(const StepReport& r) {
  std::map<std::string, std::string> lines;
  for (const auto& [k, v] : r.gpu_time_s) {
    const bool coll =
        k.find("gather") != std::string::npos || k.find("scatter") != std::string::npos ||
        k.find("all_to_all") != std::string::npos || k.find("all_reduce") != std::string::npos ||
        k.find("grad_reduce") != std::string::npos;
    const char* group = k.rfind("cpu_", 0) == 0    ? "3 on the CPU"
                        : k.rfind("copy_", 0) == 0 ? "2 copies"
                        : coll                     ? "1 collectives"
                                                   : "0 compute kernels";
    lines[group] += fmt::format("{}{} {:.2f}", lines[group].empty() ? "" : ", ", k, v);
  }
  std::string s = "  time per kind, rank 0 (s; overlapping tasks each counted):\n";
  for (const auto& [group, text] : lines) s += fmt::format("    {}: {}\n", group.substr(2), text);
  return s;
}

// A rate for people: whole units where they are many, three significant digits where few (a
// 1-token row runs at 0.0233 tokens/s per GPU, not "0").
std::string rate(double x) {
  return std::abs(x) >= 100 ? fmt::format("{:.0f}", x) : fmt::format("{:.3g}", x);
}

}  // namespace

std::string summary(const StepReport& r) {
  std::string s;
  if (!r.runnable.ok)
    s = fmt::format("NOT RUNNABLE: {}. Were there room, it would run as follows.\n",
                    r.runnable.why);
  s += fmt::format("scenario {}: step {:.2f} s, {} tokens/s per GPU, {} billion tokens/day\n",
                   r.scenario, r.step_time_s, rate(r.tokens_per_s_per_gpu),
                   rate(r.tokens_per_day / 1e9));
  s += fmt::format("  {} model TFLOP/s per GPU: MFU {:.3g}% ({:.3g}% counting recomputation)\n",
                   rate(r.flops.model_TFLOPs_per_gpu), 100 * r.flops.mfu, 100 * r.flops.hfu);
  for (const auto& [who, b] : {std::pair{"rank0", &r.rank0}, {"slowest", &r.slowest}})
    s += fmt::format(
        "  {:<8} compute_overlapped {:6.2f} s | compute_only {:6.2f} s | comm_wait "
        "{:6.2f} s | idle {:6.2f} s\n",
        who, b->compute_overlapped, b->compute_only, b->comm_wait, b->idle);
  s += fmt::format("  slowest rank {}: {}\n", r.slowest_rank.rank, r.slowest_rank.why);
  s += fmt::format(
      "  optimizer step {:.2f} s; NCCL SMs: mean {:.1f} while a collective runs, max "
      "{}, ≥64 for {:.1f} s\n",
      r.optimizer_step_s, r.nccl_sms.mean_while_collective, r.nccl_sms.max,
      r.nccl_sms.seconds_at_or_above_64);
  if (r.power_cap_s > 0)
    s += fmt::format(
        "  power cap (hardware.power): rank 0's kernels {:.3f} s longer than at full clock\n",
        r.power_cap_s);
  const auto& m = r.memory;
  s += fmt::format(
      "  memory: HBM peak reserved {:.1f} of {:.1f} GiB (allocated {:.1f}), {} allocator "
      "retries on {} ranks{}; host {:.1f} of {:.1f} GiB per rank, P(a socket lacks "
      "room at start) {:.2g}{}\n",
      m.hbm_peak_reserved_GiB, m.hbm_capacity_GiB, m.hbm_peak_allocated_GiB, m.alloc_retries,
      m.ranks_with_retries, m.oom ? ", OUT OF MEMORY" : "", m.host_peak_GiB, m.host_capacity_GiB,
      m.host_oom_probability, host_risk_caveat(m));
  return s + time_per_kind(r);
}

}  // namespace twin::reports
