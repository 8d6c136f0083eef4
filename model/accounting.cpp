#include "model/accounting.hpp"

#include <cmath>

namespace twin::model {

namespace {}

double attention_params(const AttentionKind& a, std::int64_t hidden) {
  const double h = static_cast<double>(hidden);
  const double q = h * a.q_heads * a.qk_head_dim;
  const double k = h * a.kv_heads * a.qk_head_dim;
  const double v = h * a.kv_heads * a.v_head_dim;
  const double o = static_cast<double>(a.q_heads * a.v_head_dim) * h;
  return q + k + v + o;
}

double expert_params(const ModelArch& m) {
  return 3.0 * static_cast<double>(m.hidden) * static_cast<double>(m.expert_hidden);
}

double ffn_params(const ModelArch& m) {
  return 3.0 * static_cast<double>(m.hidden) * static_cast<double>(m.ffn_hidden);
}

ParamCounts count_params(const ModelArch& m) {
  ParamCounts c;
  const double h = static_cast<double>(m.hidden);
  for (std::int64_t l = 0; l < m.layers; ++l)
    c.attention += attention_params(m.attention(l), m.hidden);
  c.router = static_cast<double>(m.layers) * h * static_cast<double>(m.experts);
  c.experts = static_cast<double>(m.layers * m.experts) * expert_params(m);
  c.ffn = static_cast<double>(m.layers) * ffn_params(m);
  c.norms = static_cast<double>(2 * m.layers + 1) * h;
  c.embedding = static_cast<double>(m.vocab) * h;
  c.head = m.tied_embedding ? 0 : c.embedding;
  return c;
}

double active_params(const ModelArch& m) {
  const auto c = count_params(m);
  return c.dense() + static_cast<double>(m.layers * m.top_k) * expert_params(m);
}

std::vector<MatrixDims> muon_dense_matrices(const ModelArch& m) {
  std::vector<MatrixDims> out;
  const double h = static_cast<double>(m.hidden);
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const auto& a = m.attention(l);
    out.push_back({h, static_cast<double>(a.q_heads * a.qk_head_dim)});
    out.push_back({h, static_cast<double>(a.kv_heads * a.qk_head_dim)});
    out.push_back({h, static_cast<double>(a.kv_heads * a.v_head_dim)});
    out.push_back({static_cast<double>(a.q_heads * a.v_head_dim), h});
    if (m.ffn_hidden > 0) {  // dense SwiGLU: gate, up, down
      const double F = static_cast<double>(m.ffn_hidden);
      out.push_back({h, F}), out.push_back({h, F}), out.push_back({F, h});
    }
  }
  return out;
}

std::vector<MatrixDims> owned_dense_matrices(const std::vector<MatrixDims>& dense, const Job& job,
                                             std::int64_t rank) {
  std::vector<MatrixDims> out;
  const auto R = static_cast<std::size_t>(job.parallel.replica_gpus);
  for (auto j = static_cast<std::size_t>(rank) % R; j < dense.size(); j += R)
    out.push_back(dense[j]);
  return out;
}

double owned_expert_matrices(const Job& job) {
  const auto& m = job.model;
  return static_cast<double>(m.layers * (m.experts / job.parallel.ep) * 3) /
         static_cast<double>(job.parallel.expert_shard_gpus());
}

double StepFlops::total() const {
  double t = 0;
  for (const auto& [_, f] : by_category) t += f.total();
  return t;
}

StepFlops step_flops(const Job& job, const std::vector<Row>& rows) {
  const auto& m = job.model;
  const double tokens = static_cast<double>(job.tokens_per_step());
  const double h = static_cast<double>(m.hidden);
  const Checkpointing ac = job.training.activation_checkpointing;
  const double mm_recompute = ac == Checkpointing::full        ? 1.0
                              : ac == Checkpointing::selective ? 0.5
                                                               : 0.0;
  const double core_recompute = ac == Checkpointing::full ? 1.0 : 0.0;
  StepFlops f;
  auto add_matmul = [&](const std::string& cat, double fwd, bool in_layer) {
    auto& p = f.by_category[cat];
    p.forward += fwd;
    p.backward += 2 * fwd;
    if (in_layer) p.recompute += mm_recompute * fwd;
  };
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const auto& a = m.attention(l);
    add_matmul("attention_proj", 2 * tokens * attention_params(a, m.hidden), true);
    if (m.moe()) {
      add_matmul("router", 2 * tokens * h * static_cast<double>(m.experts), true);
      add_matmul("experts", 2 * tokens * static_cast<double>(m.top_k) * expert_params(m), true);
    }
    if (m.ffn_hidden > 0) add_matmul("ffn", 2 * tokens * ffn_params(m), true);
    double pairs = 0;
    for (const auto& r : rows) pairs += row_pairs(r, a.window_tokens);
    const double fwd = 2 * pairs * static_cast<double>(a.q_heads * (a.qk_head_dim + a.v_head_dim));
    auto& core = f.by_category["attention_core"];
    core.forward += fwd;
    core.backward += 2.5 * fwd;
    core.recompute += core_recompute * fwd;
  }
  add_matmul("head", 2 * tokens * h * static_cast<double>(m.vocab), false);
  return f;
}

double saved_bytes_per_token_layer(const ModelArch& m, std::int64_t layer, Checkpointing mode) {
  const double h = static_cast<double>(m.hidden);
  if (mode == Checkpointing::full) return h * kBf16;  // the layer's output only
  const auto& a = m.attention(layer);
  const double k = static_cast<double>(m.top_k), fe = static_cast<double>(m.expert_hidden);
  // Matmul outputs per token: the dense ones (aten.mm: q, k, v, o, router logits in fp32 ⇒ 2
  // bf16 units) and the experts' (grouped GEMMs or the MoE kernel's own: gate, up, down).
  // A dense SwiGLU block adds gate and up (2F) and down (h) outputs, all aten.mm.
  const double F = static_cast<double>(m.ffn_hidden);
  const double dense_mm =
      static_cast<double>(a.q_heads * a.qk_head_dim + a.kv_heads * a.qk_head_dim +
                          a.kv_heads * a.v_head_dim) +
      h + 2.0 * static_cast<double>(m.experts) + (F > 0 ? 2 * F + h : 0.0);
  const double expert_mm = 2 * k * fe + k * h;
  const double attn_out = static_cast<double>(a.q_heads * a.v_head_dim + 2 * a.q_heads);  // + lse
  // selective, TorchTitan's per-op policy (torchtitan/distributed/activation_checkpoint.py): the
  // layer input, every second aten.mm output and the attention outputs with their log-sum-exp;
  // its save list has no grouped GEMM nor custom MoE kernel, so the experts' outputs are
  // recomputed (step_costs.cpp). none: every matmul output and input, plus the SwiGLU products
  // [est].
  const double elems = mode == Checkpointing::selective
                           ? h + 0.5 * dense_mm + attn_out
                           : 2 * (dense_mm + expert_mm) + attn_out + k * fe + F + 2 * h;
  return elems * kBf16;
}

std::int64_t offloaded_layers(const Job& job) {
  return static_cast<std::int64_t>(
      std::lround(job.training.offload_fraction * static_cast<double>(job.model.layers)));
}

double RankMemory::hbm_states() const {
  return states_on_host ? 0 : master_params + grads + optimizer_states;
}

RankMemory rank_memory(const Job& job) {
  const auto& m = job.model;
  const auto c = count_params(m);
  RankMemory r;
  // Dense weights are sharded over the replica; each expert block (experts/ep experts per layer)
  // over the replica_gpus/ep ranks holding it: both come to total / replica_gpus per rank.
  const double n = static_cast<double>(job.parallel.replica_gpus);
  r.param_shard_elems = c.total() / n;
  r.master_params = kFp32 * r.param_shard_elems;
  r.grads = kFp32 * r.param_shard_elems;
  // Muon covers every weight matrix except the router; embedding, head, router and norms use AdamW.
  const double adam_elems = job.training.optimizer == Optimizer::muon
                                ? (c.embedding + c.head + c.router + c.norms) / n
                                : r.param_shard_elems;
  r.optimizer_states = kFp32 * (2 * adam_elems + (r.param_shard_elems - adam_elems));
  r.states_on_host = job.training.cpu_offload;
  const double row_tokens = static_cast<double>(job.training.seq_len * job.training.rows_per_gpu);
  const std::int64_t off = offloaded_layers(job);
  const double tp = static_cast<double>(job.parallel.tp);  // sequence parallelism shards them
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const double layer_out = row_tokens * static_cast<double>(m.hidden) * kBf16 / tp;
    const double saved =
        row_tokens * saved_bytes_per_token_layer(m, l, job.training.activation_checkpointing) / tp;
    const bool offloaded = l < off;  // the first layers' outputs are offloaded
    r.activations_host += offloaded ? layer_out : 0;
    r.activations_hbm += saved - (offloaded ? layer_out : 0);
  }
  return r;
}

}  // namespace twin::model
