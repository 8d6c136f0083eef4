// The step as data (model/step_ops.hpp): the builder emits records, only bind_step touches the
// machine.
#include <doctest/doctest.h>

#include <algorithm>
#include <vector>

#include "hardware/cluster.hpp"
#include "model/memory_replay.hpp"
#include "model/step_graph.hpp"
#include "scenarios/loader.hpp"
#include "sim/engine.hpp"
#include "tests/golden_small.hpp"

using twin::test::small;

namespace {
// The small scenario's step, built (not run), with `sets` applied.
struct Built {
  twin::scenarios::Loaded l;
  twin::sim::Engine e;
  twin::sim::Fluid f{e};
  twin::sim::TaskGraph g{e};
  twin::hardware::Cluster c;
  twin::model::StepBuilder b;
  explicit Built(std::vector<std::string> sets)
      : l(twin::scenarios::load_scenario(std::string(TWIN_SOURCE_DIR) + "/tests/golden/small.json",
                                         {TWIN_SOURCE_DIR, std::move(sets)})),
        c(e, f, l.scenario.hw, static_cast<int>(l.scenario.job.parallel.total_gpus())),
        b(l.scenario.job, l.scenario.nccl, c, g) {
    b.build();
  }
};

// Bytes of the first EP all-to-all (rank 0's dispatch) in the small scenario's built step.
double ep_dispatch_bytes(std::vector<std::string> sets) {
  const Built x(std::move(sets));
  const auto& ops = x.b.ops();
  for (std::size_t i = 0; i < ops.collectives.size(); ++i)
    if (x.g[ops.collectives[i].first_task].category == twin::model::kCollEpAllToAll)
      return ops.collectives[i].bytes;
  return 0;
}

// Rank 0's tasks whose name starts with `name` (a fused task's name joins its parts' with '+';
// rank 0's lanes are 0 … kStreamCount − 1).
std::vector<const twin::sim::Task*> rank0_tasks(const Built& x, const std::string& name) {
  std::vector<const twin::sim::Task*> out;
  for (std::size_t i = 0; i < x.g.size(); ++i)
    if (x.g[i].lane >= 0 && x.g[i].lane < twin::model::kStreamCount &&
        std::string(x.g[i].name).rfind(name, 0) == 0)
      out.push_back(&x.g[i]);
  return out;
}
}  // namespace

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
    for (const auto& x : ops.cpu_collectives)
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

  // replay_hbm_ranks replays each distinct allocation sequence once (issue #21): every rank's
  // result must be the one its own replay gives, retries (task, time) included — here with an
  // allocator squeezed to two thirds of the worst rank's reserved peak, so that ranks retry. With
  // group-limited routing 6 of the small scenario's 8 ranks repeat another's sequence.
  TEST_CASE("the ranks' HBM replays, alike ones replayed once, equal each rank's own") {
    Built x({"training.routing=group_limited"});
    twin::model::bind_step(x.b.ops(), x.g, x.c);
    x.g.start();
    x.e.run();
    const auto& log = x.b.buffers();
    const auto ranks = static_cast<std::int64_t>(x.l.scenario.job.parallel.total_gpus());
    std::int64_t peak = 0;
    for (std::int64_t r = 0; r < ranks; ++r)
      peak = std::max(
          peak,
          twin::model::replay_hbm(log, r, {std::int64_t{1} << 50, false}).total.peak_reserved);
    const twin::model::CachingAllocator::Options tight{peak * 2 / 3, false};
    const auto all = twin::model::replay_hbm_ranks(log, ranks, tight, 1);
    REQUIRE(all.size() == static_cast<std::size_t>(ranks));
    std::size_t retries = 0;
    for (std::int64_t r = 0; r < ranks; ++r) {
      CAPTURE(r);
      const auto own = twin::model::replay_hbm(log, r, tight, 1);
      const auto& got = all[static_cast<std::size_t>(r)];
      CHECK(got.total.peak_reserved == own.total.peak_reserved);
      CHECK(got.total.peak_allocated == own.total.peak_allocated);
      CHECK(got.oom == own.oom);
      CHECK(got.failed == own.failed);
      REQUIRE(got.retries.size() == own.retries.size());
      for (std::size_t i = 0; i < own.retries.size(); ++i) {
        CHECK(got.retries[i].task == own.retries[i].task);
        CHECK(got.retries[i].time_ns == own.retries[i].time_ns);
        CHECK(got.retries[i].bytes_released == own.retries[i].bytes_released);
      }
      for (std::size_t p = 0; p < own.pools.size(); ++p)
        CHECK(got.pools[p].reserved == own.pools[p].reserved);
      retries += own.retries.size();
    }
    CHECK(retries > 0);
  }

  // alloc_sequence sorts a rank's allocations and frees by (time, record number) with a radix
  // sort: against a comparison sort of the same records.
  TEST_CASE("a rank's allocation sequence is in (time, record) order, every record once") {
    Built x({});
    twin::model::bind_step(x.b.ops(), x.g, x.c);
    x.g.start();
    x.e.run();
    const auto& log = x.b.buffers();
    for (std::int64_t r : {0, 5}) {
      struct Ref {
        std::int64_t t;
        std::uint32_t seq;
        std::size_t buffer;
        bool alloc;
      };
      std::vector<Ref> want;
      const auto bufs = log.rank(r);
      for (std::size_t i = 0; i < bufs.size(); ++i) {
        if (bufs[i].bytes <= 0) continue;
        want.push_back({log.alloc_ns(bufs[i]), bufs[i].alloc_seq, i, true});
        if (bufs[i].freed()) want.push_back({log.free_ns(bufs[i]), bufs[i].free_seq, i, false});
      }
      std::sort(want.begin(), want.end(),
                [](const Ref& a, const Ref& b) { return a.t != b.t ? a.t < b.t : a.seq < b.seq; });
      const auto got = twin::model::alloc_sequence(log, r);
      REQUIRE(got.size() == want.size());
      CHECK(got.size() > 100);
      for (std::size_t i = 0; i < got.size(); ++i) {
        CAPTURE(i);
        CHECK(got[i].time_ns == want[i].t);
        CHECK(got[i].buffer == want[i].buffer);
        CHECK(got[i].alloc == want[i].alloc);
      }
    }
  }

  // JOB.md §4: the small scenario's 4,096 tokens per GPU, hidden 512, top-4 of 16 experts over
  // EP 4. Per pair: T·k·h·2 bytes. Per rank under plain top-k: a token reaches
  // 4·(1 − C(12,4)/C(16,4)) = 4·(1 − 495/1820) ranks on average; group-limited routing reaches
  // all 4 (= k: nothing saved).
  TEST_CASE("EP exchange: a token per routed expert, or once per EP rank holding one") {
    const double T = 4096, h = 512;
    const double pairs = ep_dispatch_bytes({"training.ep_dispatch=pairs"});
    CHECK(pairs == doctest::Approx(T * 4 * h * 2));
    CHECK(ep_dispatch_bytes({"training.ep_dispatch=per_rank", "training.routing=group_limited"}) ==
          doctest::Approx(pairs));
    CHECK(ep_dispatch_bytes({"training.ep_dispatch=per_rank", "training.routing=topk"}) ==
          doctest::Approx(T * 4 * (1 - 495.0 / 1820) * h * 2));
    CHECK(ep_dispatch_bytes({"training.ep_dispatch=pairs", "training.routing=topk"}) ==
          doctest::Approx(pairs));
  }

  // FSDP2 (_fsdp_collectives.py): every gather's copy-out, before the weights' first use, and
  // every reduction's copy-in, before the collective, on the compute stream. The small scenario
  // (4 layers, full checkpointing) gathers each layer's dense and expert weights in forward and
  // again in backward, and reduces each layer's dense and expert gradients once.
  TEST_CASE("FSDP's copy-out and copy-in kernels: on the compute stream, ahead of their use") {
    const Built on({});
    CHECK(rank0_tasks(on, "dense_copy_out").size() == 8);
    CHECK(rank0_tasks(on, "expert_copy_out").size() == 8);
    const auto copy_in = rank0_tasks(on, "reduce_copy_in");
    CHECK(copy_in.size() == 4);  // one task per layer for both groups' gradients
    for (const auto* t : copy_in) {
      CHECK(t->lane == twin::model::kCompute);
      int reductions = 0;
      t->each_successor([&](const twin::sim::Task& n) {
        reductions += n.category == twin::model::kCollDenseReduce ||
                      n.category == twin::model::kCollExpertReduce;
      });
      CHECK(reductions == 2);  // both collectives wait for their input
    }
    const Built off({"training.fsdp_copies=false"});
    CHECK(rank0_tasks(off, "dense_copy_out").empty());
    CHECK(rank0_tasks(off, "expert_copy_out").empty());
    CHECK(rank0_tasks(off, "reduce_copy_in").empty());
    // Tasks of their own: 8 expert copy-outs and 4 copy-ins per rank (the dense copy-out runs
    // fused with the layer's first kernels), 8 ranks.
    CHECK(off.g.size() + 12 * 8 == on.g.size());
  }

  // Who gets an SM first (hardware/gpu.hpp): FSDP's streams high as FSDP2 creates them, the
  // compute stream and the EP exchange (NCCL's internal streams) normal; `normal` lowers FSDP's.
  TEST_CASE("side_stream_priority: FSDP's kernels and collectives high, the rest normal") {
    using P = twin::hardware::Gpu::Priority;
    for (const char* setting : {"high", "normal"}) {
      CAPTURE(setting);
      const Built x({std::string("training.side_stream_priority=") + setting});
      const P fsdp = std::string(setting) == "high" ? P::high : P::normal;
      const auto& ops = x.b.ops();
      int side = 0, compute = 0;
      for (std::size_t i = 0; i < ops.kernels.size(); ++i) {
        const auto& k = ops.kernels[i];
        const bool on_compute =
            x.g[k.task].lane % twin::model::kStreamCount == twin::model::kCompute;
        CHECK(k.work.priority == (on_compute ? P::normal : fsdp));
        (on_compute ? compute : side) += 1;
      }
      CHECK(side > 0);  // the fp32 gradient sums on the reduce-scatter stream
      CHECK(compute > 0);
      int fsdp_colls = 0, ep = 0;
      for (std::size_t i = 0; i < ops.collectives.size(); ++i) {
        const auto& c = ops.collectives[i];
        const auto cat = x.g[c.first_task].category;
        if (cat == twin::model::kCollEpAllToAll) {
          CHECK(c.priority == P::normal);
          ++ep;
        } else if (cat == twin::model::kCollDenseGather || cat == twin::model::kCollExpertGather ||
                   cat == twin::model::kCollDenseReduce || cat == twin::model::kCollExpertReduce) {
          CHECK(c.priority == fsdp);
          ++fsdp_colls;
        }
      }
      CHECK(ep > 0);
      CHECK(fsdp_colls > 0);
    }
  }
}
