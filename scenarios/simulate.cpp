#include "scenarios/simulate.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <map>
#include <memory>

#include "hardware/cluster.hpp"
#include "model/step_graph.hpp"
#include "reports/metrics.hpp"
#include "reports/trace.hpp"
#include "sim/engine.hpp"
#include "sim/fluid.hpp"
#include "sim/task.hpp"

namespace twin::scenarios {

namespace {

using reports::Interval;

struct RankTimes {
  std::vector<Interval> compute, comm;
  std::map<std::string, double> gpu_time;
};

Json breakdown_json(const RankTimes& rt, double step) {
  const auto b = reports::breakdown(rt.compute, rt.comm, step);
  return {{"compute_overlapped", b.compute_overlapped}, {"compute_only", b.compute_only},
          {"comm_wait", b.comm_wait}, {"idle", b.idle}};
}

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
  return fmt::format("most GPU compute: attention pairs {:.2f}× the mean, routed token-expert "
                     "pairs {:.2f}× the mean",
                     attn_r / (attn / n), experts_r / (experts / n));
}

}  // namespace

RunResult simulate(const Loaded& loaded, const RunOptions& opts) {
  const auto& s = loaded.scenario;
  sim::Engine engine;
  engine.set_event_limit(opts.event_limit);
  sim::Fluid fluid(engine);
  sim::TaskGraph graph(engine);
  const int gpus = static_cast<int>(s.job.parallel.total_gpus());
  hardware::Cluster cluster(engine, fluid, s.hw, gpus, s.nccl);
  model::StepBuilder builder(s.job, cluster, graph);
  const auto marks = builder.build();

  std::map<int, reports::SmTimeline> sms;
  std::vector<int> tracked{0};
  for (int r : opts.trace_ranks)
    if (r >= 0 && r < gpus) tracked.push_back(r);
  for (int r : tracked)
    if (!sms.count(r))
      cluster.gpu(r).on_nccl_sms.connect([&sms, &engine, r](int, int held) { sms[r].change(engine.now(), held); });

  graph.start();
  engine.run();
  if (graph.finished() != graph.size())
    throw std::logic_error(fmt::format("deadlock: {} of {} tasks finished", graph.finished(), graph.size()));

  double step = 0;
  for (auto* t : marks.optimizer_end) step = std::max(step, t->end_time().to_s());
  std::vector<RankTimes> times(static_cast<std::size_t>(gpus));
  for (std::size_t i = 0; i < graph.size(); ++i) {
    const auto& t = graph[i];
    const auto rank = static_cast<std::size_t>(t.lane / model::kStreamCount);
    const Interval iv{t.start_time().count_ns(), t.end_time().count_ns()};
    if (model::is_gpu_compute(t.category)) times[rank].compute.push_back(iv);
    if (model::is_collective(t.category)) times[rank].comm.push_back(iv);
    const double dur = static_cast<double>(iv.end_ns - iv.begin_ns) * 1e-9;
    if (const auto* fp = builder.parts(i)) {
      double alone = 0;
      for (const auto& [c, a] : fp->parts) alone += a;
      for (const auto& [c, a] : fp->parts)
        times[rank].gpu_time[model::category_name(c)] += alone > 0 ? dur * a / alone : 0;
    } else if (t.category != model::kMarker) {
      times[rank].gpu_time[model::category_name(t.category)] += dur;
    }
  }
  std::size_t slowest = 0;
  std::vector<double> busy(times.size());
  for (std::size_t r = 0; r < times.size(); ++r) {
    auto c = times[r].compute;
    busy[r] = reports::merge(c);
    if (busy[r] > busy[slowest]) slowest = r;
  }
  const double tokens = static_cast<double>(s.job.tokens_per_step());
  Json j;
  j["scenario"] = s.name;
  j["step_time_s"] = step;
  j["tokens_per_s_per_gpu"] = tokens / (gpus * step);
  j["tokens_per_day"] = tokens * 86400 / step;
  j["slowest_rank"] = {{"rank", slowest}, {"gpu_compute_s", busy[slowest]},
                       {"why", slowest_why(builder.workload(), slowest)}};
  j["breakdown_s"] = {{"rank0", breakdown_json(times[0], step)},
                      {"slowest", breakdown_json(times[slowest], step)}};
  Json gt = Json::object();
  for (const auto& [k, v] : times[0].gpu_time) gt[k] = v;
  j["gpu_time_s"] = gt;
  j["optimizer_step_s"] = (marks.optimizer_end[0]->end_time() - marks.backward_end[0]->end_time()).to_s();
  j["exposed_comm_s"] = j["breakdown_s"]["rank0"]["comm_wait"];
  const auto st = sms[0].stats(sim::Time::s(step));
  j["nccl_sms"] = {{"mean_while_collective", st.mean_while_collective}, {"max", st.max},
                   {"seconds_at_or_above_64", st.seconds_at_or_above_64}};
  j["simulation"] = {{"tasks", graph.size()}, {"events", engine.events_processed()},
                     {"fluid_solves", fluid.solves()}};

  RunResult out;
  if (opts.trace) {
    reports::ChromeTrace tr;
    std::vector<int> ranks = opts.trace_ranks.empty() ? std::vector<int>{0} : opts.trace_ranks;
    for (int r : ranks) {
      if (r < 0 || r >= gpus) continue;
      tr.process(r, fmt::format("rank {}", r));
      for (int st2 = 0; st2 < model::kStreamCount; ++st2) tr.thread(r, st2, model::stream_name(st2));
    }
    for (std::size_t i = 0; i < graph.size(); ++i) {
      const auto& t = graph[i];
      const int rank = t.lane / model::kStreamCount;
      if (t.category == model::kMarker || std::find(ranks.begin(), ranks.end(), rank) == ranks.end()) continue;
      tr.complete(rank, t.lane % model::kStreamCount, t.name, model::category_name(t.category),
                  t.start_time().count_ns(), t.end_time().count_ns(), t.index);
    }
    for (int r : ranks)
      if (sms.count(r))
        for (const auto& [t, held] : sms[r].points()) tr.counter(r, "nccl_sms", t, held);
    out.trace = tr.str();
  }
  out.json = std::move(j);
  return out;
}

std::string summary(const Json& r) {
  std::string s = fmt::format(
      "scenario {}: step {:.2f} s, {:.0f} tokens/s per GPU, {:.3g} tokens/day\n",
      r["scenario"].get<std::string>(), r["step_time_s"].get<double>(),
      r["tokens_per_s_per_gpu"].get<double>(), r["tokens_per_day"].get<double>());
  for (const char* who : {"rank0", "slowest"}) {
    const auto& b = r["breakdown_s"][who];
    s += fmt::format("  {:<8} compute+comm {:6.2f} s | compute only {:6.2f} s | waiting on comm "
                     "{:6.2f} s | idle {:6.2f} s\n",
                     who, b["compute_overlapped"].get<double>(), b["compute_only"].get<double>(),
                     b["comm_wait"].get<double>(), b["idle"].get<double>());
  }
  s += fmt::format("  slowest rank {}: {}\n", r["slowest_rank"]["rank"].get<std::size_t>(),
                   r["slowest_rank"]["why"].get<std::string>());
  s += fmt::format("  optimizer step {:.2f} s; NCCL SMs: mean {:.1f} while a collective runs, max "
                   "{}, ≥64 for {:.1f} s\n",
                   r["optimizer_step_s"].get<double>(), r["nccl_sms"]["mean_while_collective"].get<double>(),
                   r["nccl_sms"]["max"].get<int>(), r["nccl_sms"]["seconds_at_or_above_64"].get<double>());
  s += "  GPU time per kind (rank 0, s):";
  for (const auto& [k, v] : r["gpu_time_s"].items()) s += fmt::format(" {} {:.2f};", k, v.get<double>());
  return s + "\n";
}

}  // namespace twin::scenarios
