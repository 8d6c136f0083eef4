// Issue #22: dense Llama 3 models, tensor parallelism, FP8 gathers, power limits — closed forms
// worked out by hand next to each check.
#include <doctest/doctest.h>

#include <cmath>

#include "hardware/profile.hpp"
#include "model/accounting.hpp"
#include "model/comm_plan.hpp"
#include "model/data.hpp"
#include "model/step_costs.hpp"

using namespace twin::model;

namespace {

// TorchTitan's Llama 3 flavors (scenarios/models/llama3-*.json).
ModelArch llama(std::int64_t layers, std::int64_t hidden, std::int64_t ffn, std::int64_t heads) {
  ModelArch m;
  m.layers = layers, m.hidden = hidden, m.vocab = 128256, m.ffn_hidden = ffn;
  m.full = {heads, 8, 128, 128, 128, true, 0};
  m.pattern = "F";
  m.rope_caches = 1;
  return m;
}

Job llama8b_job() {
  Job j;
  j.model = llama(32, 4096, 14336, 32);
  j.parallel = {8, 1, 1, 1};
  j.training.seq_len = 8192, j.training.rows_per_gpu = 2;
  j.training.activation_checkpointing = Checkpointing::none;
  j.training.offload_fraction = 0, j.training.cpu_offload = false;
  j.training.optimizer = Optimizer::adamw;
  return j;
}

}  // namespace

TEST_SUITE("model.dense") {
  TEST_CASE("Llama 3 parameters: 8.03B, 70.55B, 405.85B") {
    // Per layer: q 4096·4096, k and v 4096·1024 each, o 4096·4096 (41.94M); SwiGLU 3·4096·14336
    // (176.16M); two norms 8,192. Embedding and output 128,256·4096 each; final norm 4,096.
    const auto p8 = count_params(llama(32, 4096, 14336, 32));
    CHECK(p8.attention == 32.0 * 41943040);
    CHECK(p8.ffn == 32.0 * 176160768);
    CHECK(p8.experts == 0);
    CHECK(p8.router == 0);
    CHECK(p8.total() == 8030261248.0);
    CHECK(active_params(llama(32, 4096, 14336, 32)) == p8.total());  // dense: all active
    CHECK(count_params(llama(80, 8192, 28672, 64)).total() == 70553706496.0);
    CHECK(count_params(llama(126, 16384, 53248, 128)).total() == 405853388800.0);
  }

  TEST_CASE("step FLOPs of a dense model: 6·N·T for the matmuls, causal attention over rows") {
    Job j = llama8b_job();
    const auto rows = whole_rows(8192, 16);  // 8 GPUs × 2 rows, no document mask
    const auto f = step_flops(j, rows);
    const double T = 8 * 2 * 8192.0;
    CHECK(f.by_category.at("ffn").forward == doctest::Approx(2 * T * 32 * 176160768.0));
    CHECK(f.by_category.at("ffn").backward == doctest::Approx(4 * T * 32 * 176160768.0));
    CHECK(f.by_category.count("experts") == 0);
    CHECK(f.by_category.count("router") == 0);
    // Attention core: 2·pairs·heads·(d_qk + d_v) per layer, pairs = 8192·8193/2 per row.
    const double pairs = 16 * 8192.0 * 8193 / 2;
    CHECK(f.by_category.at("attention_core").forward ==
          doctest::Approx(32 * 2 * pairs * 32 * 256.0));
    CHECK(f.by_category.at("head").forward == doctest::Approx(2 * T * 4096 * 128256.0));
  }

  TEST_CASE("FSDP traffic per layer under tensor parallelism and FP8 all-gather") {
    Job j = llama8b_job();
    const double linears = 41943040.0 + 176160768.0, layer = linears + 2 * 4096;
    CHECK(layer_comm(j, 0).dense_gather == 2 * layer);  // bf16, whole layer
    CHECK(layer_comm(j, 0).dense_reduce == 4 * layer);  // fp32 gradients
    CHECK(layer_comm(j, 0).expert_gather == 0);
    j.parallel = {16, 1, 1, 8};  // each FSDP group gathers its TP shard
    CHECK(layer_comm(j, 0).dense_gather == doctest::Approx(2 * layer / 8));
    j.training.float8 = j.training.float8_all_gather = true;  // linear weights in one byte
    CHECK(layer_comm(j, 0).dense_gather == doctest::Approx((2 * layer - linears) / 8));
  }

  TEST_CASE("process groups with TP 8: TP groups inside a node, FSDP over one TP index") {
    ParallelPlan p{16, 1, 1, 8};
    const auto g = process_groups(p, 16, 8, 1);
    REQUIRE(g[Comm::tp].size() == 2);
    CHECK(g[Comm::tp][1] == std::vector<int>{8, 9, 10, 11, 12, 13, 14, 15});
    REQUIRE(g[Comm::dense].size() == 8);
    CHECK(g[Comm::dense][3] == std::vector<int>{3, 11});
    CHECK(p.data_ranks() == 2);
    CHECK(p.fsdp_gpus() == 2);
  }

  TEST_CASE("comm plan of a dense model: no expert or EP collectives; TP at NCCL's 24 CTAs") {
    Job j = llama8b_job();
    j.parallel.tp = 8;
    const auto plan = plan_comms(j, twin::hardware::NcclOptions{}, 132);
    CHECK_FALSE(plan[StepColl::expert_gather].in_job);
    CHECK_FALSE(plan[StepColl::ep_all_to_all].in_job);
    CHECK(plan[StepColl::tp_all_gather].in_job);
    CHECK(plan[StepColl::tp_all_gather].ctas == 24);
    CHECK(plan[StepColl::tp_reduce_scatter].comm == Comm::tp);
  }

  TEST_CASE("checks: TP needs a dense model and must divide heads, KV heads, FFN and vocab") {
    Job j = llama8b_job();
    j.parallel = {16, 1, 1, 8};
    CHECK_NOTHROW(validate(j, 8));
    j.model.full.kv_heads = 4;
    j.model.full.q_heads = 32;
    CHECK_THROWS_WITH_AS(validate(j, 8), doctest::Contains("KV heads (4)"), twin::sim::ParamError);
    Job moe = llama8b_job();
    moe.model.experts = 8, moe.model.top_k = 2, moe.model.expert_hidden = 64;
    moe.parallel = {16, 1, 1, 2};
    CHECK_THROWS_WITH_AS(validate(moe, 8), doctest::Contains("dense models only"),
                         twin::sim::ParamError);
    Job ep = llama8b_job();
    ep.parallel.ep = 2;
    CHECK_THROWS_WITH_AS(validate(ep, 8), doctest::Contains("ep must be 1"), twin::sim::ParamError);
    Job muon = llama8b_job();  // cpu_offload false
    muon.training.optimizer = Optimizer::muon;
    CHECK_THROWS_AS(validate(muon, 8), twin::sim::ParamError);
  }

  TEST_CASE("sequence-parallel activations: 1/tp of each layer's output per rank") {
    Job j = llama8b_job();
    j.training.activation_checkpointing = Checkpointing::full;
    const double one = rank_memory(j).activations_hbm;
    CHECK(one == doctest::Approx(32 * 2 * 8192.0 * 4096 * 2));  // layer outputs, bf16
    j.parallel = {16, 1, 1, 8};
    CHECK(rank_memory(j).activations_hbm == doctest::Approx(one / 8));
  }

  TEST_CASE("a power limit below the TDP slows compute by the cube root, not HBM") {
    twin::hardware::GpuSpec g;
    g.bf16_dense_TFLOPs = 989, g.hbm_bw_GBps = 3350, g.tdp_W = 700;
    CHECK(g.peak(false).per_s == doctest::Approx(989e12));
    g.power_limit_W = 500;
    CHECK(g.clock_under_power_limit() == doctest::Approx(std::cbrt(500.0 / 700)));
    CHECK(g.peak(false).per_s == doctest::Approx(989e12 * 0.8939).epsilon(1e-3));
    CHECK(g.hbm_bw().per_s == doctest::Approx(3350e9));
    g.power_limit_W = 900;  // above the TDP: no gain
    CHECK(g.peak(false).per_s == doctest::Approx(989e12));
  }

  TEST_CASE("whole rows: one segment each (no document mask)") {
    Job j = llama8b_job();
    j.data.document_masking = false;
    const auto rows = step_rows(j);
    REQUIRE(rows.size() == 16);
    for (const auto& r : rows) CHECK(r.segments == std::vector<std::int64_t>{8192});
  }
}
