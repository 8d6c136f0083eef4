// The readable form of a run's result (`twin run` without --json): reports/metrics.hpp's figures.
#include <fmt/format.h>

#include <map>

#include "scenarios/simulate.hpp"

namespace twin::scenarios {

std::string host_risk_caveat(const Json& memory) {
  return memory.value("host_unattributed_kept_fraction", 1.0) >= 1
             ? " if no socket releases its unattributed memory (most do: "
               "host.unattributed_kept_fraction)"
             : "";
}

std::string summary(const Json& r) {
  std::string s;
  if (!r["runnable"]["ok"].get<bool>())
    s = fmt::format("NOT RUNNABLE: {}. Were there room, it would run as follows.\n",
                    r["runnable"]["why"].get<std::string>());
  s += fmt::format(
      "scenario {}: step {:.2f} s, {:.0f} tokens/s per GPU, {:.1f} billion tokens/day\n",
      r["scenario"].get<std::string>(), r["step_time_s"].get<double>(),
      r["tokens_per_s_per_gpu"].get<double>(), r["tokens_per_day"].get<double>() / 1e9);
  const auto& f = r["flops"];
  s += fmt::format("  {:.0f} model TFLOP/s per GPU: MFU {:.1f}% ({:.1f}% counting recomputation)\n",
                   f["model_TFLOPs_per_gpu"].get<double>(), 100 * f["mfu"].get<double>(),
                   100 * f["hfu"].get<double>());
  for (const char* who : {"rank0", "slowest"}) {
    const auto& b = r["breakdown_s"][who];
    s += fmt::format(
        "  {:<8} compute_overlapped {:6.2f} s | compute_only {:6.2f} s | comm_wait "
        "{:6.2f} s | idle {:6.2f} s\n",
        who, b["compute_overlapped"].get<double>(), b["compute_only"].get<double>(),
        b["comm_wait"].get<double>(), b["idle"].get<double>());
  }
  s += fmt::format("  slowest rank {}: {}\n", r["slowest_rank"]["rank"].get<std::size_t>(),
                   r["slowest_rank"]["why"].get<std::string>());
  s += fmt::format(
      "  optimizer step {:.2f} s; NCCL SMs: mean {:.1f} while a collective runs, max "
      "{}, ≥64 for {:.1f} s\n",
      r["optimizer_step_s"].get<double>(), r["nccl_sms"]["mean_while_collective"].get<double>(),
      r["nccl_sms"]["max"].get<int>(), r["nccl_sms"]["seconds_at_or_above_64"].get<double>());
  const auto& m = r["memory"];
  s += fmt::format(
      "  memory: HBM peak reserved {:.1f} of {:.1f} GiB (allocated {:.1f}), {} allocator "
      "retries on {} ranks{}; Grace {:.1f} of {:.1f} GiB per rank, P(a socket lacks "
      "room at start) {:.2g}{}\n",
      m["hbm_peak_reserved_GiB"].get<double>(), m["hbm_capacity_GiB"].get<double>(),
      m["hbm_peak_allocated_GiB"].get<double>(), m["alloc_retries"].get<std::size_t>(),
      m["ranks_with_retries"].get<std::size_t>(), m["oom"].get<bool>() ? ", OUT OF MEMORY" : "",
      m["host_peak_GiB"].get<double>(), m["host_capacity_GiB"].get<double>(),
      m["host_oom_probability"].get<double>(), host_risk_caveat(m));
  // gpu_time_s by what runs it: collectives (NCCL kernels), copies, the host, compute kernels.
  std::map<std::string, std::string> lines;
  for (const auto& [k, v] : r["gpu_time_s"].items()) {
    const bool coll =
        k.find("gather") != std::string::npos || k.find("scatter") != std::string::npos ||
        k.find("all_to_all") != std::string::npos || k.find("all_reduce") != std::string::npos ||
        k.find("grad_reduce") != std::string::npos;
    const char* group = k.rfind("cpu_", 0) == 0    ? "3 on the CPU"
                        : k.rfind("copy_", 0) == 0 ? "2 copies"
                        : coll                     ? "1 collectives"
                                                   : "0 compute kernels";
    lines[group] +=
        fmt::format("{}{} {:.2f}", lines[group].empty() ? "" : ", ", k, v.get<double>());
  }
  s += "  time per kind, rank 0 (s; overlapping tasks each counted):\n";
  for (const auto& [group, text] : lines) s += fmt::format("    {}: {}\n", group.substr(2), text);
  return s;
}

}  // namespace twin::scenarios
