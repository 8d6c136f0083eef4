// Tier 2: model accounting against hand-computed values (a tiny model) and JOB.md §3 (EUROPA).
#include <doctest/doctest.h>

#include "model/accounting.hpp"
#include "model/data.hpp"
#include "model/host_memory.hpp"
#include "model/workload.hpp"

using namespace twin::model;

namespace {

// A tiny model whose sizes are worked out by hand in the test comments.
Job tiny_job() {
  Job j;
  auto& m = j.model;
  m.layers = 2, m.hidden = 8, m.vocab = 10, m.tied_embedding = false;
  m.full = {2, 1, 4, 2, 2, true, 0};
  m.sliding = {2, 1, 4, 2, 2, true, 3};
  m.pattern = "F";
  m.experts = 4, m.top_k = 2, m.expert_hidden = 3, m.rope_caches = 1;
  j.parallel = {1, 1, 1};
  j.training.seq_len = 4;
  j.training.rows_per_gpu = 1;
  j.training.activation_checkpointing = Checkpointing::full;
  j.training.offload_fraction = 0.5;
  j.training.optimizer = Optimizer::muon;
  j.data.doc_lengths = {4};
  return j;
}

Job europa_job() {
  Job j;
  auto& m = j.model;
  m.layers = 74, m.hidden = 6144, m.vocab = 256000, m.tied_embedding = false;
  m.full = {64, 4, 192, 128, 64, false, 0};
  m.sliding = {64, 4, 192, 128, 64, true, 128};
  m.pattern = "SF";
  m.experts = 384, m.top_k = 8, m.expert_hidden = 1792, m.rope_caches = 2;
  j.parallel = {384, 4, 1};
  return j;
}

}  // namespace

TEST_SUITE("model.accounting") {
  TEST_CASE("tiny model: parameters by hand") {
    const auto j = tiny_job();
    const auto p = count_params(j.model);
    // attention per layer: q 8·2·4=64, k 8·1·4=32, v 8·1·2=16, o 2·2·8=32 → 144; two layers.
    CHECK(p.attention == 288);
    CHECK(p.router == 2 * 8 * 4);           // layers·hidden·experts
    CHECK(p.experts == 2 * 4 * 3 * 8 * 3);  // layers·experts·3·hidden·expert_hidden = 576
    CHECK(p.norms == (2 * 2 + 1) * 8);
    CHECK(p.embedding == 80);
    CHECK(p.head == 80);
    CHECK(p.total() == 1128);
    // active: dense 552 + layers·top_k·72 = 288
    CHECK(active_params(j.model) == 840);
  }
  TEST_CASE("tiny model: FLOPs of one 4-token document") {
    const auto j = tiny_job();
    const auto rows = step_rows(j);
    REQUIRE(rows.size() == 1);
    CHECK(rows[0].segments == std::vector<std::int64_t>{4});
    const auto f = step_flops(j, rows);
    // causal pairs 4·5/2 = 10; forward 2·10·heads 2·(4+2) = 240 per layer.
    CHECK(f.by_category.at("attention_core").forward == 480);
    CHECK(f.by_category.at("attention_core").backward == 1200);
    CHECK(f.by_category.at("attention_core").recompute == 480);
    // experts: 2·tokens 4·top_k 2·72 = 1152 per layer.
    CHECK(f.by_category.at("experts").forward == 2304);
    CHECK(f.by_category.at("experts").backward == 4608);
    CHECK(f.by_category.at("head").recompute == 0);
    CHECK(f.by_category.at("head").forward == 2 * 4 * 8 * 10);
  }
  TEST_CASE("tiny model: per-rank memory") {
    const auto j = tiny_job();
    const auto r = rank_memory(j);
    CHECK(r.master_params == 4 * 1128);
    // Muon: 1 state for the 864 matrix elements, AdamW 2 for embedding, head, router, norms (264).
    CHECK(r.optimizer_states == 4 * (2 * 264 + 864));
    // full AC: 2 layers · 4 tokens · 8 · 2 B = 128 B; one of two layers offloaded.
    CHECK(r.activations_host == 64);
    CHECK(r.activations_hbm == 64);
    auto adam = j;
    adam.training.optimizer = Optimizer::adamw;
    CHECK(rank_memory(adam).optimizer_states == 8 * 1128);
  }
  TEST_CASE("sliding-window pair count") {
    CHECK(causal_pairs(10, 3) == 27);  // queries see 1, 2, then 3 keys: 1+2+3·8
    CHECK(causal_pairs(10, 0) == 55);
    CHECK(causal_pairs(3, 128) == 6);
  }
  TEST_CASE("a block-sparse kernel's mask blocks, by hand") {
    // One causal document of 16,384 tokens: 128 query blocks, block i sees blocks 0 … i.
    CHECK(mask_blocks({16384}, 0, 128) == 128 * 129 / 2);
    // 32 documents of 512 (4 blocks each, aligned): 4·5/2 = 10 blocks per document.
    CHECK(mask_blocks(std::vector<std::int64_t>(32, 512), 0, 128) == 320);
    // A 128-token window: every query block but the first also reaches into the block before.
    CHECK(mask_blocks({16384}, 128, 128) == 1 + 2 * 127);
    // Unaligned: documents of 100 and 156 tokens. Block 0 (tokens 0–127) starts in document 0;
    // block 1 (128–255) starts in document 1 (from token 100, block 0): 1 + 2 blocks.
    CHECK(mask_blocks({100, 156}, 0, 128) == 3);
    // With a window of 64, block 1's first query (128) sees back to 65: block 0 still.
    CHECK(mask_blocks({100, 156}, 64, 128) == 3);
    CHECK(mask_blocks({256}, 1, 128) == 2);  // a window of one key: each block only itself
  }
  TEST_CASE("attention work: short documents and narrow windows weigh more") {
    // Documents of 4 and 6 tokens; full layers see all, sliding layers (window 3) see 3 keys.
    Job j = tiny_job();
    RankWorkload w;
    w.segments = {4, 6};
    std::vector<RankWorkload> ws{w};
    weigh_attention(ws, j.model, 2, 0);
    // Full, forward (h = 2): 10·(4+2)/4 + 21·(6+2)/6 = 15 + 28; backward (h = 0): the plain pairs.
    CHECK(ws[0].weighted_pairs[0][0] == doctest::Approx(43));
    CHECK(ws[0].weighted_pairs[0][1] == doctest::Approx(31));
    // Sliding (L = 3): (6 + 3·1)·(3+2)/3 + (6 + 3·3)·5/3 = 15 + 25.
    CHECK(ws[0].weighted_pairs[1][0] == doctest::Approx(40));
    CHECK(ws[0].weighted_pairs[1][1] == doctest::Approx(24));
  }
  TEST_CASE("packing: a document that does not fit continues in the next row") {
    const auto rows = pack_rows({5, 7, 2}, 6, 3);
    CHECK(rows[0].segments == std::vector<std::int64_t>{5, 1});
    CHECK(rows[1].segments == std::vector<std::int64_t>{6});
    CHECK(rows[2].segments == std::vector<std::int64_t>{2});
  }
  // JOB.md §4's HybridEP-style exchange: a token once per EP rank holding any of its experts.
  TEST_CASE("EUROPA: copies of a token per EP exchange") {
    auto j = europa_job();
    j.training.ep_dispatch = EpDispatch::pairs;
    CHECK(ep_copies_per_token(j) == 8);
    j.training.ep_dispatch = EpDispatch::per_rank;
    j.training.routing = ExpertRouting::group_limited;  // 2 of each group of 96: every rank
    CHECK(ep_copies_per_token(j) == 4);
    j.training.routing = ExpertRouting::topk;
    double miss = 1;  // 8 of 384 experts all outside one rank's 96: C(288, 8) / C(384, 8)
    for (int i = 0; i < 8; ++i) miss *= (288.0 - i) / (384.0 - i);
    CHECK(miss == doctest::Approx(0.09767).epsilon(1e-4));
    CHECK(ep_copies_per_token(j) == doctest::Approx(4 * (1 - miss)));
  }

  TEST_CASE("EUROPA: JOB.md §3 totals") {
    const auto j = europa_job();
    CHECK(count_params(j.model).total() == doctest::Approx(951.9e9).epsilon(0.001));
    CHECK(active_params(j.model) == doctest::Approx(32.8e9).epsilon(0.005));
    // Checkpointed layer outputs: 74 × 65,536 × 6,144 × 2 B per GPU (≈ 55 GiB), split by offload.
    const auto r = rank_memory(j);
    CHECK(r.activations_hbm + r.activations_host == 74.0 * 65536 * 6144 * 2);
    CHECK(offloaded_layers(j) == 64);  // round(0.86 · 74)
  }
  // JOB.md §7: "14–28 GiB lost per rank" to the pinned allocator's powers of two, before
  // pinned_max_round_threshold_mb. FSDP2 pins every parameter and gradient shard; Newton–Schulz's
  // results come home as new tensors, pinned too (host_memory.cpp), one per matrix a rank owns.
  TEST_CASE("EUROPA: pinned host memory of shards and Newton–Schulz results") {
    auto j = europa_job();
    j.training.pinned_round_threshold_MiB = 0;  // before the fix: every block a power of two
    const double MiB = 1024.0 * 1024.0, GiB = 1024 * MiB;
    auto part = [](const HostMemory& h, const std::string& name) {
      for (const auto& p : h.parts)
        if (p.name == name) return p.bytes;
      return 0.0;
    };
    // 74 layers × 96 experts × 3 matrices over the 96 ranks of an expert block; each matrix
    // 1,792 × 6,144 fp32 = 42 MiB (a 64 MiB block). The rank that needs most also owns a q
    // projection, 6,144 × 12,288 fp32 = 288 MiB (a 512 MiB block).
    CHECK(owned_expert_matrices(j) == 222);
    const auto h = host_memory(j, {});
    CHECK(part(h, "ns_results_pinned") == 222 * 42 * MiB + 288 * MiB);
    // Rounding: 22 MiB per expert matrix three times (parameter, gradient, result), the q
    // result's 224 MiB and the dense shards' (the embedding's 16 MB in a 16 MiB block ...).
    CHECK(h.pinned_rounding_bytes / GiB == doctest::Approx(14.57).epsilon(0.005));
    j.training.ns_results = NsResults::grad_shards;  // results into the gradient shards
    const auto g = host_memory(j, {});
    CHECK(part(g, "ns_results_pinned") == 0);
    CHECK(h.pinned_rounding_bytes - g.pinned_rounding_bytes == 222 * 22 * MiB + 224 * MiB);
    CHECK(h.total_bytes - g.total_bytes == 222 * 64 * MiB + 512 * MiB);
  }
  TEST_CASE("selective checkpointing keeps TorchTitan's save list: no expert GEMM output") {
    auto j = europa_job();
    j.training.offload_fraction = 0;
    j.training.seq_len = 8192;
    auto kept = [&](Checkpointing mode, std::int64_t top_k) {
      j.training.activation_checkpointing = mode;
      j.model.top_k = top_k;
      return rank_memory(j).activations_hbm;
    };
    // The experts' outputs (grouped GEMMs) are recomputed, not kept: top-k does not move it ...
    CHECK(kept(Checkpointing::selective, 8) == kept(Checkpointing::selective, 4));
    // ... where keeping everything does; selective keeps more than the layer outputs alone.
    CHECK(kept(Checkpointing::none, 8) > kept(Checkpointing::none, 4));
    CHECK(kept(Checkpointing::selective, 8) > kept(Checkpointing::full, 8));
    // Per token and layer: the input (h), half the dense matmul outputs, attention and its lse.
    j.model.top_k = 8;
    const auto& a = j.model.attention(0);
    const double h = static_cast<double>(j.model.hidden);
    const double dense = static_cast<double>(a.q_heads * a.qk_head_dim +
                                             a.kv_heads * (a.qk_head_dim + a.v_head_dim)) +
                         h + 2.0 * static_cast<double>(j.model.experts);
    const double attn = static_cast<double>(a.q_heads * a.v_head_dim + 2 * a.q_heads);
    CHECK(saved_bytes_per_token_layer(j.model, 0, Checkpointing::selective) ==
          doctest::Approx(2 * (h + 0.5 * dense + attn)));
  }
}
