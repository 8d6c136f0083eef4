// The step as data (model/step_ops.hpp): the builder emits records, only bind_step touches the
// machine.
#include <doctest/doctest.h>

#include <vector>

#include "hardware/cluster.hpp"
#include "model/step_graph.hpp"
#include "sim/engine.hpp"
#include "tests/golden_small.hpp"

using twin::test::small;

TEST_SUITE("scenarios.step_ops") {
  // The builder emits data (model/step_ops.hpp); only bind_step touches the machine.
  TEST_CASE("every task but the markers has exactly one record, and only binding sets its work") {
    const auto& s = small().scenario;
    twin::sim::Engine e;
    twin::sim::Fluid f(e);
    twin::sim::TaskGraph g(e);
    twin::hardware::Cluster c(e, f, s.hw, static_cast<int>(s.job.parallel.total_gpus()));
    twin::model::StepBuilder b(s.job, s.nccl, c, g);
    b.build();
    const auto& ops = b.ops();
    std::vector<int> records(g.size(), 0);
    auto count = [&records](std::uint32_t id) { ++records.at(id); };
    for (std::size_t i = 0; i < ops.kernels.size(); ++i) count(ops.kernels[i].task);
    for (std::size_t i = 0; i < ops.fused.size(); ++i) count(ops.fused[i].task);
    for (std::size_t i = 0; i < ops.collectives.size(); ++i)
      for (std::size_t j = 0; j < ops.collectives[i].ranks->size(); ++j)
        count(static_cast<std::uint32_t>(ops.collectives[i].first_task + j));
    for (std::size_t i = 0; i < ops.copies.size(); ++i) count(ops.copies[i].task);
    for (const auto& x : ops.cpu) count(x.task);
    for (const auto& x : ops.cpu_all_reduces)
      for (const auto id : x.tasks) count(id);
    std::size_t unbound = 0;
    for (std::size_t i = 0; i < g.size(); ++i) {
      CAPTURE(g[i].name);
      CHECK(records[i] == (g[i].category == twin::model::kMarker ? 0 : 1));
      if (g[i].on_ready) ++unbound;  // a closure before binding would be hardware at build time
    }
    CHECK(unbound == 0);
    CHECK(ops.collectives.size() > 0);
    twin::model::bind_step(ops, g, c);
    for (std::size_t i = 0; i < g.size(); ++i)
      if (g[i].category != twin::model::kMarker) CHECK(static_cast<bool>(g[i].on_ready));
    g.start();
    e.run();
    CHECK(g.finished() == g.size());
  }
}
