#include "model/step_ops.hpp"

namespace twin::model {

namespace {

std::vector<sim::Task*> tasks_of(const std::vector<std::uint32_t>& ids, sim::TaskGraph& g) {
  std::vector<sim::Task*> ts;
  ts.reserve(ids.size());
  for (const auto id : ids) ts.push_back(&g[id]);
  return ts;
}

}  // namespace

void bind_step(const StepOps& ops, sim::TaskGraph& g, hardware::Cluster& c) {
  for (const auto& k : ops.kernels) hardware::run_kernel(g[k.task], c, k.rank, k.work);
  for (const auto& f : ops.fused)
    hardware::run_fused(g[f.task], c, f.rank,
                        std::span(ops.parts.data() + f.first, static_cast<std::size_t>(f.count)));
  for (const auto& x : ops.collectives) hardware::run_collective(tasks_of(x.tasks, g), c, x.spec);
  for (const auto& x : ops.copies) hardware::run_copy(g[x.task], c, x.rank, x.dir, x.bytes);
  for (const auto& x : ops.cpu) hardware::run_cpu(g[x.task], c, x.rank, x.core_s, x.max_cores);
  for (const auto& x : ops.cpu_all_reduces)
    hardware::run_cpu_all_reduce(tasks_of(x.tasks, g), c, x.bytes);
  hardware::merge_alike_links(c);  // every collective of the step is bound now
}

}  // namespace twin::model
