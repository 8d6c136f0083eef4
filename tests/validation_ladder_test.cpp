// Tier 4: the ladder against every figure JOB.md marks (cal), with an error budget that fails
// the build. Budget: ±10% for the figures the twin is meant to predict at this stage. Figures
// the twin still misses by more are listed in `known_gaps` with a wider budget, so that they
// are visible, cannot silently get worse, and fail the test if they are fixed without the
// budget being tightened (README "Validation" explains each gap).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include "scenarios/commands.hpp"

using namespace twin::scenarios;

TEST_CASE("ladder: published figures within their error budget") {
  LadderArgs a;
  a.data_dir = TWIN_SOURCE_DIR;
  a.jobs = 2;
  const Json rows = ladder_json(a);
  REQUIRE(rows.size() == 14);
  // (rung, metric) → budget in percent, for the figures outside ±10% today.
  const std::map<std::pair<std::string, std::string>, std::pair<double, double>> known_gaps = {
      // Since FSDP2's copy-out and copy-in kernels (training.fsdp_copies): they lengthen compute
      // and, by delaying each reduction's start, shorten the waits for the next layer's gathers
      // at rungs 0–2 (README, Validation).
      {{"00-baseline", "tokens_per_s_per_gpu"}, {5, 15}},
      {{"02-activation-offload", "tokens_per_s_per_gpu"}, {5, 15}},
      {{"00-baseline", "breakdown_s.rank0.compute"}, {-45, -30}},
      {{"08-fp8-gather", "exposed_comm_s"}, {-45, -25}},
      // Since the EP exchange sends a token once per EP rank (training.ep_dispatch, JOB.md §4's
      // HybridEP-style dispatcher), its all-to-alls hide behind compute at rung 9 (README,
      // Validation).
      {{"09-bf16-grad-all-to-all", "exposed_comm_s"}, {-65, -45}},
      // +33% since cuBLAS's refit with split-K's reduction as a kernel of its own (2026-12-04,
      // sixth session: a_sat 374 → 319 at I = 128; +29% after the fifth's refit, +33% before):
      // how long the compute beside the reductions runs moves it (README, Validation).
      {{"09-bf16-grad-all-to-all", "gpu_time_s.expert_grad_reduce+dense_reduce_scatter"}, {20, 35}},
      // JOB.md §6.13's NCCL SMs before NCCL_MAX_CTAS (rung 12): the twin holds ≥ 64 SMs for
      // 25 s against ~20 and 57 on average while a collective runs against ~50; its dense
      // reduce-scatter there runs 20.4 s beside the all-to-all (10.3 s, and 23 s / 53 SMs, with
      // training.fsdp_streams=fsdp2). README, Validation.
      // JOB.md §6.4's Newton–Schulz of a rank's experts on the Hopper, 0.2 s: 0.237 s, the
      // H200's measured kernels at the profile's 0.83 of its clock (the middle of JOB.md's
      // 1.4–1.9 GHz under the module cap). README, Validation.
      {{"04-muon-gpu", "optimizer_parts_s.newton_schulz_gpu"}, {10, 25}},
      {{"12-allocator-pools", "nccl_sms.mean_while_collective"}, {5, 20}},
      {{"12-allocator-pools", "nccl_sms.seconds_at_or_above_64"}, {15, 35}},
  };
  // Rung 4's optimizer step (1.6 s) and rung 10's CPU gradient norm (0.43 s) and gloo
  // all-reduce (0.19 s) are not predictions: the GH200 profile's cpu_stream_fraction, norm_GBps
  // and gloo_hop_latency_us are fitted to them ([fit], hardware/profiles/jupiter-gh200.json);
  // within ±10% they say the fits still hold after the optimizer's other parts change.
  int checked = 0;
  for (const auto& r : rows)
    for (const auto& c : r["published"]) {
      const std::string rung = r["rung"], metric = c["metric"];
      const double err = c["error_pct"].get<double>();
      CAPTURE(rung);
      CAPTURE(metric);
      CAPTURE(err);
      if (auto it = known_gaps.find({rung, metric}); it != known_gaps.end()) {
        CHECK(err >= it->second.first);
        CHECK(err <= it->second.second);
      } else {
        CHECK(std::abs(err) <= 10.0);
      }
      ++checked;
    }
  CHECK(checked == 25);  // every figure of scenarios/ladder/published.json
}

namespace {
Json rung_memory(const std::string& rung, std::vector<std::string> set = {}) {
  const auto l = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/ladder/" + rung + ".json",
                               {TWIN_SOURCE_DIR, std::move(set)});
  return simulate(l, {}).json["memory"];
}
}  // namespace

// JOB.md §6.10–6.12: from rung 10 or 11 on, every rank retried allocations; at rank 0's retry
// the side streams held 27.3 GiB with 6.4 GiB in use; rung 12's fixes ended the retries. In the
// twin the retries come from caches kept across steps (model/memory_replay.hpp): a first step
// from an empty cache has none.
TEST_CASE("ladder: rung 11 retries on every rank in a long run, rung 12's fixes end them") {
  const Json r11 = rung_memory("11-minor");
  CHECK(r11["ranks_with_retries"].get<int>() == 384);
  double side_resv = 0, side_alloc = 0;
  for (const auto& p : r11["rank0"]["pools"])
    if (p["pool"] != "compute") {
      side_resv += p["at_first_retry_reserved_GiB"].get<double>();
      side_alloc += p["at_first_retry_allocated_GiB"].get<double>();
    }
  // Known gap (README, Memory): +18…+29% on the reserved side caches (the offload stream's cache
  // counted as a side stream; they move with the step's timing by whole 3 GiB reduce-scatter
  // blocks, 11% of 27.3), within 10% on what they hold in use.
  CHECK(side_resv / 27.3 - 1 >= 0.15);
  CHECK(side_resv / 27.3 - 1 <= 0.30);
  CHECK(std::abs(side_alloc / 6.4 - 1) <= 0.10);
  CHECK(rung_memory("11-minor", {"training.allocator_warm_steps=0"})["ranks_with_retries"]
            .get<int>() == 0);
  CHECK(rung_memory("12-allocator-pools")["ranks_with_retries"].get<int>() == 0);
}

// JOB.md §6.4: while the dense Newton–Schulz all-to-alls (gloo, CPU tensors) blocked the CPU
// thread the optimizer step took 2.2 s; asynchronous, 1.6 s. Both are calibration points of the
// GH200 profile (host.gloo_GBps with efficiency.cpu_stream_fraction): within ±10% they say the
// fit still holds; the async one is rung 4's published figure, checked above.
TEST_CASE("ladder: rung 4 with blocking dense all-to-alls takes 2.2 s to step the optimizer") {
  const auto l = load_scenario(std::string(TWIN_SOURCE_DIR) + "/scenarios/ladder/04-muon-gpu.json",
                               {TWIN_SOURCE_DIR, {"training.dense_ns_all_to_all=blocking"}});
  const Json r = simulate(l, {}).json;
  CHECK(std::abs(r["optimizer_step_s"].get<double>() / 2.2 - 1) <= 0.10);
  // The CPU thread ran both all-to-alls: each ~0.33 s of 103 MB at gloo's fitted 0.31 GB/s.
  CHECK(r["optimizer_parts_s"]["ns_dense_gather_all_to_all"].get<double>() > 0.25);
}

// JOB.md §6.0: rung 0's selective checkpointing fitted 8,192-token rows in HBM.
TEST_CASE("ladder: rung 0 fits at 8,192 tokens") {
  const Json m = rung_memory("00-baseline");
  CHECK_FALSE(m["oom"].get<bool>());
  CHECK(m["alloc_retries"].get<int>() == 0);
}

// JOB.md §7: 14–28 GiB per rank lost to the pinned host allocator's powers of two before
// pinned_max_round_threshold_mb. FSDP2's parameter and gradient shards and Newton–Schulz's
// results brought home (model/host_memory.cpp) give the lower end from rung 4 on; AdamW's rungs
// bring no results home and stay below the range.
TEST_CASE("ladder: pinned rounding without the threshold within JOB.md §7's 14–28 GiB") {
  const std::vector<std::string> round = {"training.pinned_round_threshold_MiB=0"};
  const double final_setup = rung_memory("13-nccl-max-ctas", round)["host_pinned_rounding_GiB"];
  CHECK(final_setup >= 14);
  CHECK(final_setup <= 28);
  CHECK(rung_memory("02-activation-offload", round)["host_pinned_rounding_GiB"].get<double>() < 14);
}
