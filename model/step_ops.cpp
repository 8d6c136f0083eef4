#include "model/step_ops.hpp"

namespace twin::model {

void bind_step(const StepOps& ops, sim::TaskGraph& g, hardware::Cluster& c) {
  for (std::size_t i = 0; i < ops.kernels.size(); ++i) {
    const auto& k = ops.kernels[i];
    hardware::run_kernel(g[k.task], c, k.rank, k.work);
  }
  for (std::size_t i = 0; i < ops.fused.size(); ++i) {
    const auto& f = ops.fused[i];
    hardware::run_fused(g[f.task], c, f.rank, std::span(&ops.parts[f.first], f.count));
  }
  for (std::size_t i = 0; i < ops.collectives.size(); ++i) {
    const auto& x = ops.collectives[i];
    std::vector<sim::Task*> ts;
    ts.reserve(x.ranks->size());
    for (std::size_t j = 0; j < x.ranks->size(); ++j) ts.push_back(&g[x.first_task + j]);
    hardware::run_collective(ts, c,
                             {x.kind, *x.ranks, x.bytes, x.ctas, x.across_copies, x.priority});
  }
  for (std::size_t i = 0; i < ops.copies.size(); ++i) {
    const auto& x = ops.copies[i];
    hardware::run_copy(g[x.task], c, x.rank, x.dir, x.bytes);
  }
  for (const auto& x : ops.cpu) hardware::run_cpu(g[x.task], c, x.rank, x.core_s, x.max_cores);
  for (const auto& x : ops.cpu_collectives) {
    std::vector<sim::Task*> ts;
    for (const auto id : x.tasks) ts.push_back(&g[id]);
    hardware::run_cpu_collective(ts, c, x.kind, x.bytes);
  }
  hardware::merge_alike_links(c);  // every collective of the step is bound now
}

}  // namespace twin::model
