// One scenario through the twin (simulate.hpp): the step built, run and replayed (the passes),
// its figures (the reports) and what the options ask to export.
#include "scenarios/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <memory>
#include <optional>
#include <set>

#include "hardware/cluster.hpp"
#include "model/accounting.hpp"
#include "model/host_memory.hpp"
#include "model/memory_bound.hpp"
#include "model/memory_replay.hpp"
#include "model/step_graph.hpp"
#include "reports/metrics.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/memory_metrics.hpp"
#include "scenarios/memory_snapshot.hpp"
#include "scenarios/plan.hpp"
#include "scenarios/trace_export.hpp"
#include "sim/engine.hpp"
#include "sim/fluid.hpp"
#include "sim/task.hpp"
#include "sim/units.hpp"

namespace twin::scenarios {

namespace {

using reports::Interval;

struct RankTimes {
  std::vector<Interval> compute, comm;
  // Seconds per task category, and whether the rank ran any task of it (reports list those).
  std::array<double, model::kCategoryCount> gpu_time{};
  std::array<bool, model::kCategoryCount> ran{};
  void add(std::int32_t category, double s) {
    gpu_time[static_cast<std::size_t>(category)] += s;
    ran[static_cast<std::size_t>(category)] = true;
  }
};

std::string slowest_why(const std::vector<model::RankWorkload>& w, std::size_t r) {
  double attn = 0, experts = 0, attn_r = 0, experts_r = 0;
  for (std::size_t i = 0; i < w.size(); ++i) {
    double e = 0;
    for (double p : w[i].expert_pairs) e += p;
    attn += w[i].pairs_full;
    experts += e;
    if (i == r) attn_r = w[i].pairs_full, experts_r = e;
  }
  const double n = static_cast<double>(w.size());
  const auto why =
      fmt::format("most GPU compute: attention pairs {:.2f}× the mean", attn_r / (attn / n));
  if (experts <= 0) return why;  // a dense model routes nothing
  return why +
         fmt::format(", routed token-expert pairs {:.2f}× the mean", experts_r / (experts / n));
}

// One simulation of the step: everything the run owns, kept alive for the reports.
struct Pass {
  sim::Engine engine;
  sim::Fluid fluid{engine};
  sim::TaskGraph graph{engine};
  hardware::Cluster cluster;
  model::StepBuilder builder;
  model::StepMarks marks;
  std::map<int, reports::SmTimeline> sms;
  std::vector<model::HbmReplay> hbm;              // per rank
  std::optional<model::CertainLive> certain_oom;  // out of HBM whatever the timing: not run
  Pass(const Scenario& s)
      : cluster(engine, fluid, s.hw, simulated_gpus(s), static_cast<int>(s.nccl.reserved_sms),
                hardware::FabricSpec{s.placement, s.placement.simulate_all_replicas
                                                      ? 1
                                                      : static_cast<int>(s.job.parallel.dp)}),
        builder(s.job, s.nccl, cluster, graph) {}
};

using sim::kGiB;

model::CachingAllocator::Options alloc_options(const Scenario& s, double capacity) {
  return {static_cast<std::int64_t>(capacity), s.job.training.expandable_segments};
}

// One rank's allocator actions over the reported step (replayed again, with a recorder).
model::AllocatorTrace allocator_trace(const Scenario& s, const model::StepBuilder& b, int rank,
                                      double capacity) {
  model::AllocatorTrace t;
  model::replay_hbm(b.buffers(), rank, alloc_options(s, capacity),
                    s.job.training.allocator_warm_steps, &t);
  return t;
}

// The step's bytes live at once in every schedule (model/memory_bound.hpp), where they are more
// than the allocator's capacity: out of HBM whatever the timing.
std::optional<model::CertainLive> out_of_hbm_always(const Pass& p, double capacity) {
  const auto live = model::certain_live(p.graph, p.builder.buffers(), p.builder.ops(),
                                        model::kStreamCount, model::kCompute);
  if (live.bytes <= static_cast<std::int64_t>(capacity)) return std::nullopt;
  return live;
}

std::unique_ptr<Pass> run_pass(const Scenario& s, const RunOptions& opts, double alloc_capacity,
                               const std::vector<std::vector<model::AllocRetry>>* retries) {
  auto p = std::make_unique<Pass>(s);
  p->engine.set_event_limit(opts.event_limit);
  std::vector<std::int64_t> recorded{opts.plan_rank};  // the plan's rank and the traced ones
  if (opts.plan_all_ranks)
    for (int r = 0; r < p->cluster.gpus(); ++r) recorded.push_back(r);
  if (opts.trace)
    for (const int r : opts.trace_ranks.empty() ? std::vector<int>{0} : opts.trace_ranks)
      recorded.push_back(r);
  p->builder.record_launches(recorded);
  p->marks = p->builder.build();
  if (opts.stop_if_certain_oom && !retries) {
    p->certain_oom = out_of_hbm_always(*p, alloc_capacity);
    if (p->certain_oom) return p;  // not simulated
  }
  model::bind_step(p->builder.ops(), p->graph, p->cluster);
  if (retries) model::inject_retries(p->graph, p->cluster, *retries);
  const int gpus = p->cluster.gpus();
  std::vector<int> tracked{0};
  for (int r : opts.trace_ranks)
    if (r >= 0 && r < gpus) tracked.push_back(r);
  for (int r : tracked)
    if (!p->sms.count(r))
      p->cluster.gpu(r).on_nccl_sms.connect(
          [pp = p.get(), r](int, int held) { pp->sms[r].change(pp->engine.now(), held); });
  p->graph.start();
  p->engine.run();
  if (p->graph.finished() != p->graph.size()) {
    std::string stuck;
    for (std::size_t i = 0; i < p->graph.size() && stuck.empty(); ++i)
      if (p->graph[i].state() == sim::Task::State::blocked)
        stuck = fmt::format("{} (task {}, lane {})", p->graph[i].name, i, p->graph[i].lane);
    throw std::logic_error(fmt::format("deadlock: {} of {} tasks finished; first blocked: {}",
                                       p->graph.finished(), p->graph.size(), stuck));
  }
  p->hbm = model::replay_hbm_ranks(p->builder.buffers(), gpus, alloc_options(s, alloc_capacity),
                                   s.job.training.allocator_warm_steps);
  return p;
}

reports::NetworkReport network_report(const Scenario& s, Pass& p, double step) {
  const auto* f = p.cluster.topology();
  std::set<int> groups;
  for (int n : p.cluster.placement()) groups.insert(f->group_of(n));
  const int replica_nodes = static_cast<int>(s.job.parallel.replica_gpus / s.hw.node.gpus);
  const auto per_replica =
      hardware::groups_per_block(p.cluster.placement(), replica_nodes, s.hw.network);
  double slowest = INFINITY;
  for (int g = 0; g < p.cluster.gpus(); ++g) slowest = std::min(slowest, p.cluster.gpu(g).speed());
  std::vector<reports::LinkReport> links;
  for (const auto& [r, u] : f->usage()) {
    std::vector<reports::Interval> iv;
    for (const auto& [a, b] : u.busy_ns) iv.push_back({a, b});
    const double busy = reports::merge(iv), cap = p.fluid.capacity(r);
    links.push_back({f->name(r), u.bytes / 1e9, busy,
                     p.fluid.saturated_s(p.cluster.solver_resource(r)),
                     busy > 0 ? u.bytes / (cap * busy) : 0, u.bytes / (cap * step)});
  }
  std::sort(links.begin(), links.end(), [](const auto& a, const auto& b) {
    if (a.saturated_s != b.saturated_s) return a.saturated_s > b.saturated_s;
    return a.utilization_while_busy != b.utilization_while_busy
               ? a.utilization_while_busy > b.utilization_while_busy
               : a.link < b.link;
  });
  reports::NetworkReport n{
      sim::name_of(s.placement.policy, hardware::kPlacementPolicyNames),
      sim::name_of(s.placement.routing, hardware::kRoutingNames),
      p.cluster.placement().size(),
      groups.size(),
      *std::max_element(per_replica.begin(), per_replica.end()),
      hardware::groups_across_blocks_max(p.cluster.placement(), replica_nodes, s.hw.network),
      p.cluster.slowest_copy(),
      slowest,
      s.placement.simulate_all_replicas ? s.job.parallel.dp : 1,
      0,
      {}};
  for (auto& l : links) {
    n.links_saturating += l.saturated_s > 0.01 * step ? 1 : 0;
    if (n.busiest_links.size() < 8) n.busiest_links.push_back(std::move(l));
  }
  return n;
}

// Model FLOPs and utilization (reports/metrics.hpp), against the GPU's dense bf16 peak as the
// vendor states it (a power limit's lower clock is a loss the MFU shows, not a smaller peak).
reports::FlopsReport flops_report(const Scenario& s, double step) {
  const auto f = model::step_flops(s.job, model::step_rows(s.job));
  double model_flops = 0;
  for (const auto& [_, ph] : f.by_category) model_flops += ph.forward + ph.backward;
  const double gpu_s = static_cast<double>(s.job.parallel.total_gpus()) * step;
  const double peak = sim::TFLOPs(s.hw.gpu.bf16_dense_TFLOPs).per_s;
  return {model_flops, f.total(), model_flops / gpu_s / 1e12, model_flops / (gpu_s * peak),
          f.total() / (gpu_s * peak)};
}

// One rank's allocations in simulated order (RunResult::alloc_events).
Json alloc_events_json(const Scenario& s, const Pass& p, int r, double capacity) {
  const auto bufs = p.builder.buffers().rank(r);
  Json ev = Json::array(), pools = Json::array();
  for (const auto& e : model::alloc_sequence(p.builder.buffers(), r)) {
    const auto& b = bufs[e.buffer];
    const double t_s = sim::Time::ns(e.time_ns).to_s();
    if (e.alloc)
      ev.push_back({"alloc", e.buffer, static_cast<std::int64_t>(b.bytes), b.pool, b.name, t_s});
    else
      ev.push_back({"free", e.buffer, t_s});
  }
  for (int k = 0; k < model::kPoolCount; ++k) pools.push_back(model::pool_name(k));
  return {{"scenario", s.name},
          {"rank", r},
          {"capacity_bytes", static_cast<std::int64_t>(capacity)},
          {"expandable_segments", s.job.training.expandable_segments},
          {"pools", pools},
          {"events", ev}};
}

CertainOom certain_oom_of(const Pass& p, const model::CertainLive& live, double capacity) {
  const auto& t = p.graph[static_cast<std::size_t>(live.task)];
  return {static_cast<double>(live.bytes) / kGiB, capacity / kGiB, live.rank,
          t.index >= 0 ? fmt::format("{} (layer {})", t.name, t.index) : t.name};
}

// For a step out of HBM: whether it would be in every schedule (model/memory_bound.hpp), so that
// no other order of its work or allocator setting could fit it; empty if not found so.
std::string whatever_the_timing(const Pass& p, double capacity) {
  const auto live = out_of_hbm_always(p, capacity);
  if (!live) return "";
  const auto c = certain_oom_of(p, *live, capacity);
  return fmt::format(
      "; in every schedule: {:.2f} GiB live at once on rank {} across {}, more than "
      "the allocator's {:.2f} GiB",
      c.live_GiB, c.rank, c.across, c.capacity_GiB);
}

// Allocator retries cost time: a second run carries the first run's retries
// (memory_replay.hpp). Sets `passes` to the runs made.
std::unique_ptr<Pass> run_with_retries(const Scenario& s, const RunOptions& opts, double capacity,
                                       int& passes) {
  auto pass = run_pass(s, opts, capacity, nullptr);
  if (pass->certain_oom) return pass;
  std::vector<std::vector<model::AllocRetry>> retries;
  bool any = false;
  for (const auto& h : pass->hbm) retries.push_back(h.retries), any = any || !h.retries.empty();
  passes = any ? 2 : 1;
  if (!any) return pass;
  model::resolve_retries(pass->graph, model::kStreamCount, retries);
  return run_pass(s, opts, capacity, &retries);
}

// Each rank's compute and collective intervals and GPU time per category.
std::vector<RankTimes> rank_times(const Pass& p) {
  std::vector<RankTimes> times(static_cast<std::size_t>(p.cluster.gpus()));
  for (std::size_t i = 0; i < p.graph.size(); ++i) {
    const auto& t = p.graph[i];
    const auto rank = static_cast<std::size_t>(t.lane / model::kStreamCount);
    const Interval iv{t.start_time().count_ns(), t.end_time().count_ns()};
    if (model::is_gpu_compute(t.category)) times[rank].compute.push_back(iv);
    if (model::is_collective(t.category)) times[rank].comm.push_back(iv);
    const double dur = static_cast<double>(iv.end_ns - iv.begin_ns) * 1e-9;
    if (const auto fp = p.builder.parts(i)) {
      fp->split(dur, [&](std::int32_t c, double share) { times[rank].add(c, share); });
    } else if (t.category != model::kMarker) {
      times[rank].add(t.category, dur);
    }
  }
  return times;
}

// Rank 0's optimizer tasks by name (reports/metrics.hpp, optimizer_parts_s).
std::vector<std::pair<std::string, double>> optimizer_parts(const Pass& p) {
  std::map<std::string, double> by_name;
  const sim::Time from = p.marks.backward_end[0]->end_time();
  for (std::size_t i = 0; i < p.graph.size(); ++i) {
    const auto& t = p.graph[i];
    if (t.lane >= 0 && t.lane < model::kStreamCount && t.category != model::kMarker &&
        t.start_time() >= from)
      by_name[t.name] += (t.end_time() - t.start_time()).to_s();
  }
  return {by_name.begin(), by_name.end()};
}

// The step's time metrics (reports/metrics.hpp): throughput, the slowest rank, rank 0's
// breakdown and GPU time per category, the optimizer step, NCCL's SMs.
reports::StepReport time_report(const Scenario& s, Pass& p, double step) {
  auto times = rank_times(p);
  std::size_t slowest = 0;
  std::vector<double> busy(times.size()), waits(times.size());
  std::vector<reports::Breakdown> parts(times.size());
  for (std::size_t r = 0; r < times.size(); ++r) {
    auto& t = times[r];
    busy[r] = reports::merge(t.compute);
    parts[r] = reports::breakdown_merged(t.compute, busy[r], t.comm, reports::merge(t.comm), step);
    waits[r] = parts[r].comm_wait;
    if (busy[r] > busy[slowest]) slowest = r;
  }
  const double tokens = static_cast<double>(s.job.tokens_per_step());
  reports::StepReport r;
  r.scenario = s.name;
  r.step_time_s = step;
  r.tokens_per_s_per_gpu = tokens / (static_cast<double>(s.job.parallel.total_gpus()) * step);
  r.tokens_per_day = tokens * 86400 / step;
  r.slowest_rank = {slowest, busy[slowest], slowest_why(p.builder.workload(), slowest)};
  r.rank0 = parts[0];
  r.slowest = parts[slowest];
  std::map<std::string, double> by_name;  // reports list categories by name
  for (std::int32_t c = 0; c < model::kCategoryCount; ++c)
    if (times[0].ran[static_cast<std::size_t>(c)])
      by_name[model::category_name(c)] = times[0].gpu_time[static_cast<std::size_t>(c)];
  r.gpu_time_s.assign(by_name.begin(), by_name.end());
  r.optimizer_step_s =
      (p.marks.optimizer_end[0]->end_time() - p.marks.optimizer_step_start[0]->end_time()).to_s();
  r.optimizer_parts_s = optimizer_parts(p);
  const auto nodes = reports::node_spread(busy, waits, static_cast<int>(s.hw.node.gpus));
  r.node_compute_spread = nodes.compute_spread;
  r.node_comm_wait_ratio = nodes.comm_wait_ratio;
  r.nccl_sms = p.sms[0].stats(sim::Time::s(step));
  if (const auto* power = p.cluster.power(0)) r.power_cap_s = power->added_s();
  return r;
}

// What the options ask to export besides the metrics: a plan, allocations, a snapshot, a trace.
void exports(RunResult& out, const Scenario& s, Pass& p, const RunOptions& opts, double capacity,
             double step, const Json& provenance) {
  const int gpus = p.cluster.gpus();
  if (opts.plan_rank >= 0 && opts.plan_rank < gpus)
    out.plan = step_plan(s, p.graph, p.builder, p.marks, opts.plan_rank);
  if (opts.plan_all_ranks)
    for (int r = 0; r < gpus; ++r)
      out.plans.push_back(step_plan(s, p.graph, p.builder, p.marks, r));
  if (opts.alloc_events_rank >= 0 && opts.alloc_events_rank < gpus)
    out.alloc_events = alloc_events_json(s, p, opts.alloc_events_rank, capacity);
  if (opts.snapshot_rank >= 0 && opts.snapshot_rank < gpus)
    out.memory_snapshot =
        memory_snapshot_json(allocator_trace(s, p.builder, opts.snapshot_rank, capacity), s,
                             opts.snapshot_rank, capacity);
  if (opts.trace) {
    std::map<int, model::AllocatorTrace> alloc;
    for (int r : opts.trace_ranks.empty() ? std::vector<int>{0} : opts.trace_ranks)
      if (r >= 0 && r < gpus) alloc[r] = allocator_trace(s, p.builder, r, capacity);
    out.trace =
        trace_text(p.graph, p.builder, p.sms, alloc, opts.trace_ranks, gpus, step, provenance);
  }
}

}  // namespace

RunResult simulate(const Loaded& loaded, const RunOptions& opts) {
  const auto& s = loaded.scenario;
  check_resources(s, s.name, opts);
  const auto host = model::host_memory(s.job, s.hw);
  const double capacity =
      model::allocator_capacity_bytes(s.job, s.hw, s.nccl, host.hbm_spill_bytes);
  int passes = 1;
  auto pass = run_with_retries(s, opts, capacity, passes);
  RunResult out;
  if (pass->certain_oom) {
    out.certain_oom = certain_oom_of(*pass, *pass->certain_oom, capacity);
    return out;
  }
  double step = 0;
  for (auto* t : pass->marks.optimizer_end) step = std::max(step, t->end_time().to_s());
  auto& r = out.report;
  r = time_report(s, *pass, step);
  r.memory = memory_report(s, host, capacity, pass->hbm);
  r.network = network_report(s, *pass, step);
  r.simulation = {pass->graph.size(), pass->engine.events_processed(), pass->fluid.solves(),
                  passes};
  r.runnable = reports::runnable(r.memory);
  if (r.memory.oom) r.runnable.why += whatever_the_timing(*pass, capacity);
  r.flops = flops_report(s, step);
  r.provenance = provenance(loaded.resolved);
  exports(out, s, *pass, opts, capacity, step, r.provenance);
  out.json = reports::to_json(r);
  return out;
}

}  // namespace twin::scenarios
