#include "scenarios/trace_replay.hpp"

#include <algorithm>
#include <cmath>
#include <map>

#include "hardware/cluster.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/kernel_shapes.hpp"
#include "hardware/ops.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

namespace {

// Idle time before an activity up to this, that nothing in the trace explains, is the GPU's front
// end between dependent launches (event records and waits between kernels: measured 8–14 µs in
// the micro-step's trace) and is kept as it was; longer idle time is not (unexplained_us).
constexpr double kFrontEndGapUs = 50;

double end_us(const TraceActivity& a) {
  return a.start_us + a.dur_us;
}

double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(v.size() / 2), v.end());
  return v[v.size() / 2];
}

// The activities seen so far by their end (µs → index), to find the one that ended last before a
// start: a step has up to ~10⁵ activities, so no pass over all earlier ones per activity.
using Ends = std::multimap<double, int>;

// The activity of another stream that ended last at or before `start` (+ slack) and after
// `after`, or −1. An activity of the same stream ended by `after` at the latest (after ≥ the end
// of the stream's previous one), so the latest end in (after, start + slack] is another stream's.
int last_ended_elsewhere(const Ends& ends, double start, double after, double slack_us) {
  auto it = ends.upper_bound(start + slack_us);
  if (it == ends.begin()) return -1;
  --it;
  return it->first > after ? it->second : -1;
}

}  // namespace

TraceDependencies infer_dependencies(const KinetoStep& step, double slack_us) {
  const auto& acts = step.activities;
  TraceDependencies d;
  d.stream_pred.assign(acts.size(), -1);
  d.waits_on.assign(acts.size(), -1);
  d.gap_us.assign(acts.size(), 0);
  std::map<std::int64_t, int> last;  // stream → its latest activity so far
  std::vector<double> held_back;     // start − launch of the activities the host held back
  std::vector<double> ready(acts.size(), -INFINITY);
  Ends ends;
  for (std::size_t i = 0; i < acts.size(); ++i) {
    const auto& a = acts[i];
    const auto seen = [&] { ends.emplace(end_us(a), static_cast<int>(i)); };
    if (const auto it = last.find(a.stream); it != last.end()) {
      d.stream_pred[i] = it->second;
      ready[i] = end_us(acts[static_cast<std::size_t>(it->second)]);
    }
    last[a.stream] = static_cast<int>(i);
    if (a.start_us <= ready[i] + slack_us) {  // queued behind its own stream
      seen();
      continue;
    }
    // Waiting for j needs j to end after the stream was free and after the launch.
    const double after = std::isnan(a.launch_us) ? ready[i] : std::max(ready[i], a.launch_us);
    if (const int j = last_ended_elsewhere(ends, a.start_us, after, slack_us); j >= 0) {
      d.waits_on[i] = j, ++d.cross_stream;
    } else if (a.launch_us >
               ready[i] - slack_us) {  // launched after its stream was free: the host held it
      held_back.push_back(a.start_us - a.launch_us), ++d.host_bound;
    }
    seen();
  }
  d.launch_latency_us = std::max(0.0, median(held_back));
  for (std::size_t i = 0; i < acts.size();
       ++i) {  // what neither the stream, the launch nor a wait explains
    double bound = ready[i];
    if (!std::isnan(acts[i].launch_us))
      bound = std::max(bound, acts[i].launch_us + d.launch_latency_us);
    if (d.waits_on[i] >= 0)
      bound = std::max(bound, end_us(acts[static_cast<std::size_t>(d.waits_on[i])]));
    const double gap =
        std::isfinite(bound) ? acts[i].start_us - std::max(bound, 0.0) : 0;  // 0: the step's start
    if (gap <= 0) continue;
    if (gap <= kFrontEndGapUs)
      d.gap_us[i] = gap, d.front_end_us += gap;
    else
      d.unexplained_us += gap;
  }
  return d;
}

namespace {

using hardware::Family;
using hardware::KernelShape;

bool is_backward(const std::string& name) {
  return name.find("backward") != std::string::npos || name.find("bwd") != std::string::npos ||
         name.find("Bwd") != std::string::npos;
}

KernelShape shape_of(const TraceActivity& a, int sms) {
  if (a.category == "other_gemm") {
    const int ctas = a.ctas > 0 ? std::min(a.ctas, sms) : sms;
    return {Family::gemm, hardware::Schedule::persistent_dynamic, 1, static_cast<float>(ctas)};
  }
  if (a.category == "expert_gemm") return hardware::grouped_shape(sms, false);
  if (a.category == "attention") return hardware::attention_shape(sms, is_backward(a.name));
  return {Family::ew_add, hardware::Schedule::grid, 16, static_cast<float>(std::max(1, a.ctas))};
}

bool on_sms(const TraceActivity& a) {
  return a.category != "collective" && a.category.rfind("copy_", 0) != 0 && a.category != "memset";
}

// How much longer a category takes on `to` than on `from`: the cost model's time of one
// reference operation on each (kernel_cost.hpp).
double category_ratio(const std::string& category, bool backward, const hardware::Profile& from,
                      const hardware::Profile& to) {
  const hardware::KernelCost a(from), b(to);
  if (category == "other_gemm") return b.gemm_s(8192, 8192, 8192) / a.gemm_s(8192, 8192, 8192);
  if (category == "expert_gemm")  // EUROPA's expert up-projection, 96 experts of 1,376 rows
    return b.grouped_gemm_s(1376, 3584, 6144, 96, false) /
           a.grouped_gemm_s(1376, 3584, 6144, 96, false);
  if (category == "attention")
    return b.attention_s(sim::Flops{1e12}, backward) / a.attention_s(sim::Flops{1e12}, backward);
  if (category == "copy_h2d") return from.node.host_h2d_GBps / to.node.host_h2d_GBps;
  if (category == "copy_d2h") return from.node.host_d2h_GBps / to.node.host_d2h_GBps;
  if (category == "collective") return 1;
  return b.elementwise_s(sim::bytes(1e9), Family::ew_add) /
         a.elementwise_s(sim::bytes(1e9), Family::ew_add);
}

// The SMs the trace's collectives held over time: (time, change) edges, sorted.
std::vector<std::pair<double, int>> held_edges(const std::vector<TraceActivity>& acts, int sms) {
  std::vector<std::pair<double, int>> e;
  for (const auto& a : acts)
    if (a.category == "collective" && a.ctas > 0) {
      const int n = std::min(a.ctas, sms - 1);
      e.emplace_back(a.start_us, n), e.emplace_back(end_us(a), -n);
    }
  std::sort(e.begin(), e.end());
  return e;
}

// A kernel's time alone on `source`: its measured time with the SMs the collectives held taken
// out, part by part (a constant number held in each).
double alone_s(const TraceActivity& a, const KernelShape& shape,
               const std::vector<std::pair<double, int>>& edges, hardware::Cluster& source) {
  int held = 0;
  double t = a.start_us, alone = 0;
  auto add = [&](double until) {
    if (until <= t) return;
    alone += (until - t) / source.contention_slowdown(shape, held, a.dur_us * 1e-6, held);
    t = until;
  };
  for (const auto& [at, change] : edges) {
    if (at >= end_us(a)) break;
    add(at);
    held += change;
  }
  add(end_us(a));
  return alone * 1e-6;
}

// A collective of the trace: its CTAs held (one SM each) for its measured time.
struct HoldRun {
  sim::Task* t;
  hardware::Cluster* c;
  int ctas, granted;
  double dur_s;
};

void run_hold(sim::Task& t, hardware::Cluster& c, int ctas, double dur_s) {
  t.on_ready = [h = c.make<HoldRun>(&t, &c, ctas, 0, dur_s)](sim::Task&) {
    h->c->gpu(0).request(h->ctas, hardware::Gpu::Holder::nccl, [h](int k) {
      if ((h->granted += k) < h->ctas) return;
      h->c->engine().after(
          sim::Time::s(h->dur_s),
          [h] {
            h->c->gpu(0).release(h->ctas, hardware::Gpu::Holder::nccl);
            h->t->finish();
          },
          sim::Priority::completion);
    });
  };
}

}  // namespace

namespace {

// Each activity after its stream predecessor, the event it waits on and its launch; a front-end
// gap, when it has one, stands between them and it.
void wire_dependencies(sim::TaskGraph& g, hardware::Cluster& to, std::vector<sim::Task*>& tasks,
                       const std::vector<TraceActivity>& acts, const TraceDependencies& deps) {
  for (std::size_t i = 0; i < acts.size(); ++i) {
    sim::Task* gate = tasks[i];  // what the predecessors hold back: it, or its front-end gap
    if (deps.gap_us[i] > 0) {
      gate = &g.add("front-end gap");
      hardware::run_delay(*gate, to, sim::Time::s(deps.gap_us[i] * 1e-6));
      tasks[i]->after(*gate);
    }
    if (deps.stream_pred[i] >= 0)
      gate->after(*tasks[static_cast<std::size_t>(deps.stream_pred[i])]);
    if (deps.waits_on[i] >= 0) gate->after(*tasks[static_cast<std::size_t>(deps.waits_on[i])]);
    if (const double at = acts[i].launch_us + deps.launch_latency_us;
        at > 0) {  // NaN: no launch bound
      auto& launch = g.add("launch");
      hardware::run_delay(launch, to, sim::Time::s(at * 1e-6));
      gate->after(launch);
    }
  }
}

}  // namespace

ReplayedStep replay_trace(const KinetoStep& step, const TraceDependencies& deps,
                          const Scenario& source, const Scenario& target) {
  const auto& acts = step.activities;
  sim::Engine e;
  sim::Fluid f(e);
  sim::TaskGraph g(e);
  // One node of each (the trace is of GPU 0) at the nominal speed (no GPU's draw of the spread);
  // the source's is only asked for slowdowns.
  hardware::Profile nominal = target.hw;
  nominal.gpu.speed_spread = 0;
  // A recorded kernel's time already carries the power state it ran in: no controller on top
  // (a limit below the TDP then scales peaks statically, as on a profile without one).
  nominal.power.step_s = 0;
  hardware::finish_power(nominal);
  hardware::Cluster from(e, f, source.hw, static_cast<int>(source.hw.node.gpus),
                         static_cast<int>(source.nccl.reserved_sms));
  hardware::Cluster to(e, f, nominal, static_cast<int>(nominal.node.gpus),
                       static_cast<int>(target.nccl.reserved_sms));
  const int sms = static_cast<int>(source.hw.gpu.sm_count);
  const auto edges = held_edges(acts, sms);
  std::vector<sim::Task*> tasks;
  for (const auto& a : acts) {
    auto& t = g.add("activity");
    const double ratio = category_ratio(a.category, is_backward(a.name), source.hw, target.hw);
    if (a.category == "collective") {
      int ctas = std::clamp(a.ctas, 1, static_cast<int>(target.hw.gpu.sm_count) - 1);
      if (target.nccl.max_ctas > 0)
        ctas = std::min<int>(ctas, static_cast<int>(target.nccl.max_ctas));
      run_hold(t, to, ctas, a.dur_us * 1e-6);
    } else if (on_sms(a)) {
      const auto shape = shape_of(a, static_cast<int>(target.hw.gpu.sm_count));
      hardware::run_kernel(t, to, 0,
                           {alone_s(a, shape_of(a, sms), edges, from) * ratio, 0,
                            hardware::KernelClass::grid, shape});
    } else {
      hardware::run_delay(t, to, sim::Time::s(a.dur_us * 1e-6 * ratio));
    }
    tasks.push_back(&t);
  }
  wire_dependencies(g, to, tasks, acts, deps);
  g.start();
  e.run();
  ReplayedStep r;
  double first = INFINITY, lastend = 0;
  for (const auto* t : tasks) {
    r.start_s.push_back(t->start_time().to_s());
    r.end_s.push_back(t->end_time().to_s());
    first = std::min(first, r.start_s.back()), lastend = std::max(lastend, r.end_s.back());
  }
  r.step_s = tasks.empty() ? 0 : lastend - first;
  return r;
}

}  // namespace twin::scenarios
