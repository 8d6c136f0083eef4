// Tier 3: golden outputs of a small scenario, compared as structured data; determinism of runs
// and traces; the step's mechanisms and memory (the network and plan-dp:
// scenarios_network_test.cpp; sweeps, outputs and the CLI's tables: scenarios_commands_test.cpp;
// launch plans: scenarios_plan_test.cpp).
// Update the golden file after an intended change with
//   build/twin run tests/golden/small.json --json > tests/golden/small.expected.json
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

#include "hardware/cluster.hpp"
#include "model/memory_bound.hpp"
#include "model/memory_replay.hpp"
#include "model/step_graph.hpp"
#include "model/step_memory.hpp"
#include "reports/output.hpp"
#include "scenarios/build_info.hpp"
#include "scenarios/commands.hpp"
#include "scenarios/json_tree.hpp"
#include "scenarios/parallel.hpp"
#include "scenarios/simulate.hpp"
#include "sim/engine.hpp"
#include "tests/golden_small.hpp"

using namespace twin::scenarios;
namespace fs = std::filesystem;

namespace {

const fs::path kRoot = TWIN_SOURCE_DIR;

using twin::test::small;

// Structured comparison: same keys, strings equal, numbers within a relative 1e-9; the commit the
// twin was built from (provenance.commit) is the build's, not the scenario's.
void compare(const Json& got, const Json& want, const std::string& path) {
  CAPTURE(path);
  if (path == "$.provenance.commit") return;
  if (want.is_number())
    REQUIRE(got.is_number());
  else
    REQUIRE(got.type() == want.type());
  if (want.is_object()) {
    CHECK(got.size() == want.size());
    for (const auto& [k, v] : want.items()) {
      REQUIRE(got.contains(k));
      compare(got[k], v, path + "." + k);
    }
  } else if (want.is_array()) {
    REQUIRE(got.size() == want.size());
    for (std::size_t i = 0; i < want.size(); ++i) compare(got[i], want[i], path + "[]");
  } else if (want.is_number()) {
    const double a = got.get<double>(), b = want.get<double>();
    CHECK(std::abs(a - b) <= 1e-9 * std::max(1.0, std::abs(b)));
  } else {
    CHECK(got == want);
  }
}

}  // namespace

TEST_SUITE("scenarios.step") {
  TEST_CASE("golden: the small scenario's outputs are unchanged") {
    const auto l = small();
    Json got = simulate(l, {}).json;
    got["resolved_scenario"] = l.resolved;
    compare(got, read_json_file(kRoot / "tests/golden/small.expected.json"), "$");
  }
  TEST_CASE("determinism: identical JSON and trace bytes across runs") {
    RunOptions o;
    o.trace = true;
    o.trace_ranks = {0, 5};
    const auto a = simulate(small(), o), b = simulate(small(), o);
    CHECK(a.json.dump() == b.json.dump());
    CHECK(a.trace == b.trace);
    CHECK(a.trace.find("\"nccl_sms\"") != std::string::npos);
  }
  TEST_CASE("the breakdown sums to the step time") {
    const auto r = simulate(small(), {}).json;
    for (const char* who : {"rank0", "slowest"}) {
      double sum = 0;
      for (const auto& [k, v] : r["breakdown_s"][who].items()) sum += v.get<double>();
      CHECK(sum == doctest::Approx(r["step_time_s"].get<double>()).epsilon(1e-9));
    }
  }
  TEST_CASE("parallel jobs: an exception reaches the caller, the lowest job's, with any threads") {
    const std::function<int(std::size_t)> f = [](std::size_t i) -> int {
      if (i == 3 || i == 7) throw std::runtime_error("job " + std::to_string(i));
      return static_cast<int>(i);
    };
    for (const int jobs : {1, 2, 4}) {
      CAPTURE(jobs);
      try {
        run_parallel<int>(12, jobs, f);
        FAIL("no exception");
      } catch (const std::runtime_error& e) {
        CHECK(std::string(e.what()) == "job 3");
      }
    }
    CHECK(run_parallel<int>(5, 2, [](std::size_t i) { return static_cast<int>(2 * i); }) ==
          std::vector<int>{0, 2, 4, 6, 8});
  }
  TEST_CASE("mechanisms move the step the right way") {
    auto tps = [](std::vector<std::string> sets) {
      return simulate(small(std::move(sets)), {}).json["tokens_per_s_per_gpu"].get<double>();
    };
    // On a slow network the bytes of the expert collectives decide.
    const std::string slow = "hardware.node.nic_GBps=1";
    const double base = tps({slow});
    CHECK(tps({slow, "training.expert_gather_dtype=bf16"}) < base);  // twice the gathered bytes
    CHECK(tps({slow, "training.grad_reduce=fp32_reduce_scatter"}) < base);
    CHECK(tps({"hardware.node.nic_GBps=0.5"}) < base);
    // SMs reserved by another library slow every kernel; the more, the slower.
    const double free = tps({});
    CHECK(tps({"nccl.reserved_sms=20"}) < free);
    CHECK(tps({"nccl.reserved_sms=60"}) < tps({"nccl.reserved_sms=20"}));
  }
  // training.fsdp_streams: FSDP2's shared all-gather and reduce-scatter streams with
  // synchronous collectives, and the experts' own post-backward (step_graph.hpp, queue_on).
  TEST_CASE("fsdp_streams: fsdp2 orders FSDP's collectives; per_group leaves them to each group") {
    // Rank 0's (start, end) in µs of the trace's tasks named `name`, by layer.
    const auto spans = [](const Json& trace, const std::string& name) {
      std::map<int, std::pair<double, double>> out;
      for (const auto& e : trace["traceEvents"])
        if (e["ph"] == "X" && e["pid"] == 0 && e["name"] == name) {
          const double ts = e["ts"];
          out[e["args"]["layer"].get<int>()] = {ts, ts + e["dur"].get<double>()};
        }
      return out;
    };
    const auto run = [&](const std::string& streams, bool async_unshard) {
      RunOptions o;
      o.trace = true;
      // Without FSDP's copy-in kernels, so that a reduction starts where its issue point ends.
      return Json::parse(
          simulate(small({"training.fsdp_copies=false", "training.fsdp_streams=" + streams,
                          std::string("training.unshard_async_op=") +
                              (async_unshard ? "true" : "false")}),
                   o)
              .trace);
    };
    const Json f2 = run("fsdp2", false), f2_async = run("fsdp2", true),
               pg = run("per_group", false);
    for (const Json* t : {&f2, &pg}) {
      const bool fsdp2 = t == &f2;
      CAPTURE(fsdp2);
      const auto a2a = spans(*t, "expert_grad_all_to_all"), sum = spans(*t, "grad_fp32_sum"),
                 rs = spans(*t, "dense_grad_reduce_scatter"), dispatch = spans(*t, "dispatch_bwd"),
                 dense = spans(*t, "dense_gather"), expert = spans(*t, "expert_gather");
      REQUIRE(a2a.size() == 4);
      for (const auto& [i, x] : a2a) {
        CAPTURE(i);
        // fsdp2: the experts reduce as their dispatch's backward ends, before the block's
        // boundary; the dense reduce-scatter waits on the reduce-scatter stream for their sum;
        // each all-gather waits on the all-gather stream for the one issued before it.
        // per_group: both reductions after the boundary, side by side; gathers side by side.
        CHECK((std::abs(x.first - dispatch.at(i).second) < 1e-6) == fsdp2);
        CHECK((x.first < rs.at(i).first) == fsdp2);
        CHECK((rs.at(i).first >= sum.at(i).second - 1e-6) == fsdp2);
        CHECK((expert.at(i).first >= dense.at(i).second - 1e-6) == fsdp2);
        if (fsdp2 && i > 0) CHECK(dense.at(i).first >= expert.at(i - 1).second - 1e-6);
      }
    }
    // unshard_async_op issues the gathers from the compute stream: side by side again.
    const auto dense = spans(f2_async, "dense_gather"), expert = spans(f2_async, "expert_gather");
    for (const auto& [i, x] : expert) CHECK(x.first < dense.at(i).second);
  }
}

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
    CHECK(host({"training.optimizer=adamw"}) > host({}));  // two states instead of one
    // Expert shards of 1.2 MB: rounded to 2 MiB unless the threshold (1 MiB) keeps them exact.
    const std::string f = "model.expert_hidden=600";
    CHECK(host({f, "training.pinned_round_threshold_MiB=0"}) > host({f}));
  }
}

TEST_SUITE("scenarios.outputs") {
  TEST_CASE("outputs say which twin and which scenario made them; MFU follows its formula") {
    const auto l = small();
    RunOptions o;
    o.trace = true;
    const auto r = simulate(l, o);
    const auto& p = r.json["provenance"];
    CHECK(p["twin"] == twin_version());
    CHECK(p["commit"] == twin_commit());
    CHECK(p["resolved_fnv1a"] == content_hash(l.resolved));
    CHECK(Json::parse(r.trace)["otherData"] == p);
    const auto& f = r.json["flops"];
    const double gpu_s = static_cast<double>(l.scenario.job.parallel.total_gpus()) *
                         r.json["step_time_s"].get<double>();
    CHECK(f["mfu"].get<double>() ==
          doctest::Approx(f["model_per_step"].get<double>() /
                          (gpu_s * l.scenario.hw.gpu.bf16_dense_TFLOPs * 1e12)));
    CHECK(f["hfu"].get<double>() >= f["mfu"].get<double>());  // recomputation only adds
    // Another scenario (one value changed), another hash.
    CHECK(content_hash(small({"nccl.max_ctas=8"}).resolved) !=
          p["resolved_fnv1a"].get<std::string>());
  }
}

TEST_SUITE("scenarios.outputs") {
  TEST_CASE("a step that does not fit is unmistakably not runnable, in JSON and in the summary") {
    const auto fits_run = simulate(small(), {});
    const auto& fits = fits_run.json;
    CHECK(fits["runnable"]["ok"].get<bool>());
    const auto summary = [](const RunResult& r) { return twin::reports::summary(r.report); };
    CHECK(summary(fits_run).rfind("NOT RUNNABLE", 0) == std::string::npos);
    const auto oom_run = simulate(small({"training.seq_len=4194304"}), {});
    const auto& oom = oom_run.json;
    CHECK_FALSE(oom["runnable"]["ok"].get<bool>());
    CHECK(oom["runnable"]["why"].get<std::string>().find("out of HBM on rank") !=
          std::string::npos);
    CHECK(summary(oom_run).rfind("NOT RUNNABLE: out of HBM", 0) == 0);
    // The summary's labels are the JSON's keys.
    CHECK(summary(fits_run).find("compute_overlapped") != std::string::npos);
    CHECK(summary(fits_run).find("comm_wait") != std::string::npos);
    // Time per kind on lines by what runs it, the host's apart.
    CHECK(summary(fits_run).find("    compute kernels: ") != std::string::npos);
    CHECK(summary(fits_run).find("    on the CPU: cpu_optimizer") != std::string::npos);
  }
}

TEST_SUITE("scenarios.outputs") {
  TEST_CASE("model and run agree on Grace memory; model's GiB table holds only GiB") {
    const auto l = small();
    const auto a = accounting_json(l.scenario);
    const auto r = simulate(l, {}).json;
    CHECK(a["memory_per_rank_GiB"]["host_total"].get<double>() ==
          doctest::Approx(r["memory"]["host_peak_GiB"].get<double>()));
    for (const auto& [k, v] : a["memory_per_rank_GiB"].items()) {
      CAPTURE(k);
      CHECK(v.is_number_float());
    }
    CHECK(a["states_per_rank"]["offloaded_layers"].is_number_integer());
  }
}

TEST_SUITE("scenarios.outputs") {
  TEST_CASE(
      "a trace carries each task's launches, cross-stream dependencies, phases and the step") {
    RunOptions o;
    o.trace = true;
    o.trace_ranks = {0, 1};
    const auto r = simulate(small(), o);
    const Json t = Json::parse(r.trace);
    std::map<std::string, int> ph;
    bool gemm_shape = false, ctas = false, step = false;
    for (const auto& e : t["traceEvents"]) {
      ++ph[e["ph"].get<std::string>()];
      if (e["ph"] != "X") continue;
      step = step || e["name"] == "ProfilerStep#0";
      for (const auto& l : e["args"].value("launches", Json::array())) {
        gemm_shape = gemm_shape || (l["kind"] == "gemm" && l.contains("m") && l.contains("k"));
        ctas = ctas || (l["kind"] == "collective" && l["ctas"].get<int>() > 0);
      }
    }
    CHECK(gemm_shape);
    CHECK(ctas);
    CHECK(step);
    CHECK(ph["s"] > 0);
    CHECK(ph["s"] == ph["f"]);  // every arrow has both ends
    CHECK(ph["i"] > 0);         // phase ends
  }

  TEST_CASE("a trace shows who each collective waited for and HBM per pool over the step") {
    RunOptions o;
    o.trace = true;
    o.trace_ranks = {0, 1, 2, 3};
    const auto r = simulate(small(), o);
    const Json t = Json::parse(r.trace);
    int peers = 0, samples = 0;
    double last_t = -1, peak_compute = 0;
    for (const auto& e : t["traceEvents"]) {
      if (e["ph"] == "s" && e["name"] == "collective peer") ++peers;
      if (e["ph"] != "C" || e["name"] != "hbm_allocated_GiB" || e["pid"] != 0) continue;
      ++samples;
      CHECK(e["args"].size() == static_cast<std::size_t>(twin::model::kPoolCount));
      CHECK(e["ts"].get<double>() > last_t);  // one sample per moment, in time order
      last_t = e["ts"];
      for (const auto& [pool, gib] : e["args"].items()) CHECK(gib.get<double>() >= -1e-12);
      peak_compute = std::max(peak_compute, e["args"]["compute"].get<double>());
    }
    CHECK(peers > 0);
    CHECK(samples > 10);
    // The counter's compute pool peaks at the allocator replay's peak, less its rounding of
    // requests up to whole blocks (model/caching_allocator.hpp).
    const auto& pool = r.json["memory"]["rank0"]["pools"][0];
    REQUIRE(pool["pool"] == "compute");
    const double replay = pool["peak_allocated_GiB"];
    CHECK(peak_compute <= replay * (1 + 1e-9));
    CHECK(peak_compute >= 0.95 * replay);
  }

  TEST_CASE(
      "a trace named *.gz is the same trace, gzip-compressed, byte for byte the same each time") {
    const std::string text = "{\"traceEvents\":[]}\n";
    const auto z = twin::reports::gzip(text);
    CHECK(z.size() > 10);
    CHECK(static_cast<unsigned char>(z[0]) == 0x1f);  // gzip magic
    CHECK(static_cast<unsigned char>(z[1]) == 0x8b);
    CHECK(z == twin::reports::gzip(text));
    CHECK(twin::reports::gzip_named("t.json.gz"));
    CHECK_FALSE(twin::reports::gzip_named("t.json"));
  }
}
