// Tier 3: the step's memory — allocator pools, retries that cost time, out of memory, the bound
// found before simulating, the allocator snapshot, rung 12's pools, host memory.
#include <doctest/doctest.h>

#include <filesystem>
#include <map>
#include <string>

#include "hardware/cluster.hpp"
#include "model/memory_bound.hpp"
#include "model/memory_replay.hpp"
#include "model/step_graph.hpp"
#include "model/step_memory.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/simulate.hpp"
#include "sim/engine.hpp"
#include "tests/golden_small.hpp"

using namespace twin::scenarios;
namespace fs = std::filesystem;

namespace {
const fs::path kRoot = TWIN_SOURCE_DIR;
using twin::test::small;
}  // namespace

TEST_SUITE("scenarios.memory") {
  TEST_CASE("the step's memory: pools, retries that cost time, out of memory") {
    const auto base = simulate(small(), {}).json;
    const auto& m = base["memory"];
    CHECK(m["hbm_peak_reserved_GiB"].get<double>() <= m["hbm_capacity_GiB"].get<double>());
    CHECK(m["hbm_peak_allocated_GiB"].get<double>() <= m["hbm_peak_reserved_GiB"].get<double>());
    CHECK(m["alloc_retries"] == 0);
    CHECK(base["simulation"]["passes"] == 1);
    // Squeeze the allocator below the first step's reserved peak: it retries (on every rank),
    // and the retries' synchronisations and cudaFrees make the step longer.
    const auto tight =
        simulate(small({"hardware.gpu.hbm_usable_GiB=1.3", "training.allocator_warm_steps=0"}), {})
            .json;
    CHECK(tight["memory"]["alloc_retries"].get<int>() > 0);
    CHECK(tight["memory"]["oom"] == false);
    CHECK(tight["simulation"]["passes"] == 2);
    CHECK(tight["gpu_time_s"]["alloc_retry"].get<double>() > 0);
    CHECK(tight["step_time_s"].get<double>() > base["step_time_s"].get<double>());
    // A later step starts with every pool's cache of the step before (model/memory_replay.hpp):
    // here it retries on 4 of the 8 ranks (rank 0's caches serve it), and is still slower.
    const auto later = simulate(small({"hardware.gpu.hbm_usable_GiB=1.3"}), {}).json;
    CHECK(later["memory"]["ranks_with_retries"].get<int>() == 4);
    CHECK(later["memory"]["rank0"]["alloc_retries"].get<int>() == 0);
    CHECK(later["step_time_s"].get<double>() > base["step_time_s"].get<double>());
    // Squeeze further: out of memory, naming the allocation that failed.
    const auto oom = simulate(small({"hardware.gpu.hbm_usable_GiB=1.25"}), {}).json["memory"];
    CHECK(oom["oom"] == true);
    CHECK(oom["worst_rank"]["failed_allocation"].get<std::string>() != "");
  }
  // model/memory_bound.hpp: bytes live at once in every schedule, read off the graph before the
  // step runs, are never more than the replay of the simulated step holds at its peak on that
  // rank (and come close: 89–98% here, 84–99% on europa.json and the ladder's rungs 0 and 11).
  TEST_CASE("the HBM certainly live before simulating: at most the replay's peak, and close") {
    for (const auto& sets : std::vector<std::vector<std::string>>{
             {}, {"training.activation_checkpointing=selective"}, {"training.seq_len=16384"}}) {
      CAPTURE(sets.size());
      const auto& s = small(sets).scenario;
      twin::sim::Engine e;
      twin::sim::Fluid f(e);
      twin::sim::TaskGraph g(e);
      twin::hardware::Cluster c(e, f, s.hw, simulated_gpus(s),
                                static_cast<int>(s.nccl.reserved_sms));
      twin::model::StepBuilder b(s.job, s.nccl, c, g);
      b.build();
      const auto live = twin::model::certain_live(g, b.buffers(), b.ops(),
                                                  twin::model::kStreamCount, twin::model::kCompute);
      REQUIRE(live.rank >= 0);
      twin::model::bind_step(b.ops(), g, c);
      g.start();
      e.run();
      const auto hbm = twin::model::replay_hbm_ranks(b.buffers(), simulated_gpus(s),
                                                     {std::int64_t{1} << 50, false}, 1);
      const double peak =
          static_cast<double>(hbm[static_cast<std::size_t>(live.rank)].total.peak_allocated);
      CHECK(static_cast<double>(live.bytes) <= peak);
      CHECK(static_cast<double>(live.bytes) >= 0.8 * peak);
    }
    // Squeezed below it, the step stops before simulating, with nothing else set; where it does
    // not, the run is the same as without asking. A run that goes on says it in its `why`.
    RunOptions stop;
    stop.stop_if_certain_oom = true;
    int certain = 0;
    for (const char* hbm : {"1.15", "1.2", "1.25", "1.3"}) {
      CAPTURE(hbm);
      const auto l = small({std::string("hardware.gpu.hbm_usable_GiB=") + hbm});
      const auto full = simulate(l, {});
      const auto quick = simulate(l, stop);
      // A run out of HBM says when no schedule could fit it.
      CHECK((full.report.runnable.why.find("in every schedule") != std::string::npos) ==
            quick.certain_oom.has_value());
      if (quick.certain_oom) {
        ++certain;
        CHECK(full.report.memory.oom);
        CHECK(quick.json.is_null());
      } else {
        CHECK(quick.json.dump() == full.json.dump());
      }
    }
    CHECK(certain >= 1);
  }

  TEST_CASE("the allocator snapshot (torch.cuda.memory._snapshot's form) agrees with the replay") {
    RunOptions o;
    o.snapshot_rank = 0;
    const auto r = simulate(small(), o);
    const auto& snap = r.memory_snapshot;
    const auto& m = r.json["memory"]["rank0"];
    REQUIRE(snap["twin"]["rank"] == 0);
    // The segments at the step's end: each the sum of its blocks; allocated = the active blocks.
    std::int64_t reserved = 0, active = 0;
    for (const auto& seg : snap["segments"]) {
      std::int64_t sum = 0;
      for (const auto& b : seg["blocks"]) {
        sum += b["size"].get<std::int64_t>();
        if (b["state"] == "active_allocated") active += b["size"].get<std::int64_t>();
      }
      CHECK(sum == seg["total_size"].get<std::int64_t>());
      reserved += sum;
    }
    CHECK(reserved >= active);
    CHECK(static_cast<double>(reserved) / twin::sim::kGiB <=
          m["peak_reserved_GiB"].get<double>() + 1e-9);
    // Walking the trace back from the end gives the allocated bytes at the step's start; forward
    // again, the step's peak, which is the replay's.
    const auto& trace = snap["device_traces"][0];
    REQUIRE(trace.size() > 10);
    auto delta = [](const Json& e) {
      const auto size = e["size"].get<std::int64_t>();
      return e["action"] == "alloc" ? size : e["action"] == "free_completed" ? -size : 0;
    };
    std::int64_t net = 0;
    for (const auto& e : trace) net += delta(e);
    std::int64_t now = active - net, peak = now;
    CHECK(now >= 0);
    for (const auto& e : trace) peak = std::max(peak, now += delta(e));
    CHECK(static_cast<double>(peak) / twin::sim::kGiB ==
          doctest::Approx(m["peak_allocated_GiB"].get<double>()));
    // Each action names the buffer it serves.
    CHECK(trace[0]["frames"][0]["name"].get<std::string>() != "");
  }
  TEST_CASE("rung 12's switches move buffers out of the side-stream pools") {
    // Peak allocated bytes of a pool (reserved moves in 2 and 20 MiB segments at this size).
    auto pool = [](const Json& r, const char* name) {
      for (const auto& p : r["memory"]["rank0"]["pools"])
        if (p["pool"] == name) return p["peak_allocated_GiB"].get<double>();
      return -1.0;
    };
    const auto fixed = simulate(small(), {}).json;
    const auto side =
        simulate(small({"training.unshard_async_op=false", "training.grad_a2a_recv_pool=side"}), {})
            .json;
    CHECK(pool(fixed, "all_gather") == 0);
    CHECK(pool(side, "all_gather") > 0);
    CHECK(pool(side, "reduce_scatter") > pool(fixed, "reduce_scatter"));
    // The norm hook without early release keeps every reduced gradient to the end of backward.
    const auto kept = simulate(small({"training.release_grads_early=false"}), {}).json;
    CHECK(pool(kept, "reduce_scatter") > pool(fixed, "reduce_scatter"));
  }
  TEST_CASE("longer sequences stop fitting; host memory follows the optimizer") {
    const std::string hbm = "hardware.gpu.hbm_usable_GiB=3";
    CHECK(simulate(small({hbm}), {}).json["memory"]["oom"] == false);
    CHECK(simulate(small({hbm, "training.seq_len=131072"}), {}).json["memory"]["oom"] == true);
    auto host = [](std::vector<std::string> s) {
      return simulate(small(std::move(s)), {}).json["memory"]["host_peak_GiB"].get<double>();
    };
    const std::string into_grads = "training.ns_results=grad_shards";
    CHECK(host({"training.optimizer=adamw"}) > host({into_grads}));  // two states instead of one
    // Newton–Schulz's results home as new (pinned) tensors: a rank's owned matrices once more.
    CHECK(host({}) > host({into_grads}));
    CHECK(host({"training.newton_schulz=cpu"}) == host({into_grads}));
    // Expert shards of 1.2 MB: rounded to 2 MiB unless the threshold (1 MiB) keeps them exact.
    const std::string f = "model.expert_hidden=600";
    CHECK(host({f, "training.pinned_round_threshold_MiB=0"}) > host({f}));
  }
}
