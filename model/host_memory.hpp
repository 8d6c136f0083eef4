// Grace (host) memory of one rank (JOB.md §4 CPU offload, §7): what FSDP2's CPU offload and
// the optimizer keep there, the pinned allocator's rounding, the activation-offload arena, the
// failure modes of §7 as options, and the risk that a job finds a socket without room.
#pragma once

#include <string>
#include <vector>

#include "hardware/profile.hpp"
#include "model/job.hpp"

namespace twin::model {

struct HostPart {
  std::string name;
  double bytes = 0;
};

struct HostMemory {
  std::vector<HostPart> parts;  // each component, in bytes (pinned rounding is its own part)
  double total_bytes = 0;       // Σ parts
  double capacity_bytes = 0;    // host.memory_per_gpu_GiB
  double headroom_bytes = 0;    // capacity − total (before memory unattributed at job start)
  double pinned_rounding_bytes = 0;
  // Offload-arena pages that land in HBM (arena not prefaulted and Grace short of room).
  double hbm_spill_bytes = 0;
};

// The pinned host allocator's size for a request: the next power of two, unless a threshold
// is set and the request is above it (then its own size).
double pinned_size(double bytes, double threshold_MiB);

HostMemory host_memory(const Job& job, const hardware::Profile& p);

// Memory unattributed at job start, per socket, is log-normal with the profile's median and
// 90th percentile: σ = ln(p90/median)/z₀.₉, z₀.₉ = 1.2816. Most sockets release it under
// pressure, some do not (JOB.md §7): a socket lacks room when it keeps that memory (a share q,
// host.unattributed_kept_fraction) and the memory exceeds the rank's headroom; a job of
// `sockets` independent sockets fails if any one does:
//     p = q · P(U > headroom),  P(job) = 1 − (1 − p)^sockets.
double socket_short_probability(double headroom_GiB, const hardware::HostSpec& h);
double host_oom_probability(double headroom_GiB, double sockets, const hardware::HostSpec& h);

}  // namespace twin::model
