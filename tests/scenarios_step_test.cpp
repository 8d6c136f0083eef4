// Tier 3: golden outputs of a small scenario, compared as structured data; determinism of runs
// and traces; the step's mechanisms. Elsewhere: its memory (scenarios_memory_test.cpp), the
// network and plan-dp (scenarios_network_test.cpp), sweeps, outputs and the CLI's tables
// (scenarios_commands_test.cpp), launch plans (scenarios_plan_test.cpp).
// Update the golden file after an intended change with
//   build/twin run tests/golden/small.json --json > tests/golden/small.expected.json
#include <doctest/doctest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>

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
