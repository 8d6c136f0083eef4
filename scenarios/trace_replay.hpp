// A real step re-simulated (issue #20, item 3): the GPU work of one profiled step (kineto.hpp)
// turned into the twin's task graph — every activity a task on its stream, in its stream's order,
// no earlier than the host launched it, and after the activity of another stream it was seen to
// wait for — and run by the engine on a hardware profile, NCCL's CTAs holding SMs as they did.
// Re-simulated on the machine it was recorded on it should give back the trace's step; on
// another profile or with other NCCL settings it answers "what would this profiled step do on a
// GH200 with NCCL_MAX_CTAS=16".
//
// What a trace cannot tell, and how this fills it in:
// - Dependencies between streams. The profiler records cudaStreamWaitEvent calls but not which
//   event or stream they wait on. An activity that starts more than `slack_us` after both its
//   stream's previous activity ended and its launch allowed is taken to wait for the activity of
//   another stream that ended last before it started — only if the host had launched it before
//   that one ended (otherwise the host was late: the launch explains the gap). Gaps that neither
//   explains are counted (`unexplained_us`) and left to the launch bound.
// - When the GPU starts a launched kernel: the host call's start plus the launch latency, the
//   median of start − call over the activities the host held back (found as above).
// - A kernel's time alone. Its measured time with what the collectives' CTAs took removed by the
//   contention model (hardware/contention.hpp): alone = Σ dt / slowdown(held SMs) over the parts
//   of its run with a constant number held. Compute kernels of different streams slowing one
//   another are not removed (the engine shares SMs among them again).
// - A kernel's shape: its family from its category (cuBLAS GEMMs, grouped GEMMs with static tile
//   lists, attention forward or backward by name, anything else a vectorized elementwise kernel
//   with the trace's grid).
// - Another machine: a category's times scale by the twin's cost of one reference operation on
//   the target profile over the source's (kernel_cost.hpp: a 8192³ GEMM, the EUROPA expert GEMM,
//   attention, a 1 GB elementwise kernel; host copies by the host link's bandwidth).
// - Collectives. One rank's trace does not say how long its peers kept a collective waiting:
//   each keeps its measured time, holding its CTAs (capped by the target's NCCL_MAX_CTAS).
#pragma once

#include <string>
#include <vector>

#include "scenarios/kineto.hpp"
#include "scenarios/scenario.hpp"

namespace twin::scenarios {

struct TraceDependencies {
  std::vector<int> stream_pred;  // per activity: the previous one on its stream, or −1
  std::vector<int> waits_on;  // per activity: the activity of another stream it waited for, or −1
  double launch_latency_us = 0;  // host call → GPU start, when the GPU waited for the host
  std::vector<double> gap_us;    // per activity: its front-end gap, kept in a replay
  int cross_stream = 0;          // activities with waits_on ≥ 0
  int host_bound = 0;            // activities the host held back
  double front_end_us = 0;       // Σ gap_us
  double unexplained_us = 0;     // idle time before activities that nothing above explains
};
TraceDependencies infer_dependencies(const KinetoStep& step, double slack_us = 5);

struct ReplayedStep {
  std::vector<double> start_s, end_s;  // per activity of the step
  double step_s = 0;                   // first start to last end
};
// Re-simulates `step` (recorded on `source`'s machine with its NCCL settings) on `target`.
ReplayedStep replay_trace(const KinetoStep& step, const TraceDependencies& deps,
                          const Scenario& source, const Scenario& target);

}  // namespace twin::scenarios
