#include "model/step_memory.hpp"

#include <algorithm>
#include <stdexcept>

#include "model/accounting.hpp"
#include "model/step_costs.hpp"

namespace twin::model {

namespace {
constexpr const char* kPoolNames[] = {"compute", "all_gather", "reduce_scatter", "offload"};
static_assert(sizeof(kPoolNames) / sizeof(kPoolNames[0]) == kPoolCount);
}  // namespace

const char* pool_name(std::int32_t p) {
  return p >= 0 && p < kPoolCount ? kPoolNames[p] : "?";
}

LayerBuffers layer_buffers(const Job& job, const RankWorkload& w, std::int64_t layer,
                           std::int64_t gpus_per_node) {
  const auto& m = job.model;
  const auto& t = job.training;
  const auto& a = m.attention(layer);
  const auto comm = layer_comm(job, layer);
  const double T = w.tokens, h = static_cast<double>(m.hidden),
               f = static_cast<double>(m.expert_hidden);
  const double P = w.expert_pairs[static_cast<std::size_t>(layer)];
  const double R = static_cast<double>(job.parallel.fsdp_gpus());
  // Tensor parallelism (with sequence parallelism) shards every activation over the TP group but
  // the gathered inputs of the projections and of the FFN (Korthikanti et al., 2022).
  const double tp = static_cast<double>(job.parallel.tp), F = static_cast<double>(m.ffn_hidden);
  const double expert_pg = R / static_cast<double>(job.parallel.ep);
  LayerBuffers b;
  b.dense_flat = b.dense_weights = comm.dense_gather;
  // Node-local reshard: each GPU of the node keeps its share of the bf16 dense weights.
  b.dense_local = t.dense_reshard == DenseReshard::node_local
                      ? comm.dense_gather / static_cast<double>(gpus_per_node)
                      : 0;
  b.expert_flat = comm.expert_gather;
  b.expert_weights = kBf16 * comm.expert_elems;
  b.layer_out = T * h * kBf16 / tp;
  b.kept_extra =
      std::max(0.0, T * saved_bytes_per_token_layer(m, layer, t.activation_checkpointing) / tp -
                        b.layer_out);
  // FlashAttention keeps q, k, v, the output and an fp32 log-sum-exp per query head.
  const double qkvo = static_cast<double>(a.q_heads * (a.qk_head_dim + a.v_head_dim) +
                                          a.kv_heads * (a.qk_head_dim + a.v_head_dim));
  b.attention = (T * qkvo * kBf16 + T * static_cast<double>(a.q_heads) * kFp32) / tp;
  // MoE, per received token–expert pair P [est]: a plain implementation materialises the
  // dispatched tokens (h), gate+up output (2f), the SwiGLU product (f) and the down output (h);
  // SonicMoE keeps the dispatched tokens and the SwiGLU product and recomputes the rest. The
  // ratio, (h+f)/(2h+3f) = 0.45, matches SonicMoE's published 12.5 → 5.4 GiB (0.43, JOB.md
  // §6.5). Router logits are fp32 per expert.
  const double per_pair = t.moe_kernel == MoeKernel::sonicmoe ? h + f : 2 * h + 3 * f;
  b.ffn = P * per_pair * kBf16 + T * static_cast<double>(m.experts) * kFp32;
  b.ffn_grad = P * (h + 2 * f) * kBf16;  // gradients of the dispatched tokens and gate+up [est]
  // A dense SwiGLU: its (gathered) input, the gate and up outputs and their product; in backward
  // the gradients of gate and up [est].
  if (F > 0) b.ffn += T * (h + 3 * F / tp) * kBf16, b.ffn_grad += T * 2 * F / tp * kBf16;
  b.grad_unsharded = comm.dense_gather + kBf16 * comm.expert_elems;
  b.reduce_input = comm.dense_reduce + comm.expert_reduce;
  b.a2a_recv = t.grad_reduce == GradReduce::bf16_all_to_all ? comm.expert_reduce : 0;
  b.reduced = comm.dense_reduce / R + kFp32 * comm.expert_elems / expert_pg;
  return b;
}

double loss_buffer_bytes(const Job& job, double tokens, double vocab) {
  const auto chunk = static_cast<double>(job.training.loss_chunk_tokens);
  if (chunk > 0) return std::min(tokens, chunk) * vocab * (kBf16 + kFp32);
  return tokens * vocab * (job.training.compile ? kBf16 + kFp32 : kBf16 + 3 * kFp32);
}

double rope_cache_bytes(const Job& job) {
  const auto& m = job.model;
  if (m.rope_layers() == 0) return 0;
  // Cached at the full q/k head width [est]: with two caches this gives JOB.md §6.11c's shared
  // 0.19 GiB at 65,536 tokens (0.1875 GiB).
  const auto& a = m.full.rope ? m.full : m.sliding;
  const double one = static_cast<double>(job.training.seq_len * a.qk_head_dim) * 2 * kFp32;
  const double copies = job.training.shared_rope_cache ? static_cast<double>(m.rope_caches)
                                                       : static_cast<double>(m.rope_layers());
  return one * copies;
}

std::size_t BufferLog::alloc(std::int64_t rank, const char* name, std::int32_t pool, double bytes,
                             const sim::Task& t, At at) {
  auto& ids = by_rank_[static_cast<std::size_t>(rank)];
  if (all_.size() >= 0xffffffffULL) throw std::length_error("too many buffers");
  Buffer& b = all_.emplace_back();
  b.name = name;
  b.bytes = bytes;
  if (graph_ && graph_ != &t.graph()) throw std::logic_error("buffers of tasks of two graphs");
  graph_ = &t.graph();
  b.alloc_task = static_cast<std::uint32_t>(t.id());
  b.alloc_seq = seq_[static_cast<std::size_t>(rank)]++;
  b.pool = pool;
  b.alloc_at_end = at == kEnd;
  ids.push_back(static_cast<std::uint32_t>(all_.size() - 1));
  return ids.size() - 1;
}

void BufferLog::free(std::int64_t rank, std::size_t handle, const sim::Task& t, At at) {
  Buffer& b = all_[by_rank_[static_cast<std::size_t>(rank)][handle]];
  if (graph_ != &t.graph()) throw std::logic_error("buffers of tasks of two graphs");
  b.free_task = static_cast<std::uint32_t>(t.id());
  b.free_at_end = at == kEnd;
  b.free_seq = seq_[static_cast<std::size_t>(rank)]++;
}

}  // namespace twin::model
