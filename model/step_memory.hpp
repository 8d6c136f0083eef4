// The HBM buffers of the step (JOB.md §5, §6.10–§6.12, §8): what each is, how large, which
// allocator pool (the stream that allocates it, FSDP2's rules) and between which tasks it lives.
// The step builder records every buffer against the tasks that allocate and free it; after the
// simulation, memory_replay.hpp replays them through the caching-allocator emulation at their
// simulated times.
#pragma once

#include <cstdint>
#include <vector>

#include "model/job.hpp"
#include "model/workload.hpp"
#include "sim/large_pages.hpp"
#include "sim/task.hpp"

namespace twin::model {

// Allocator pools: one per stream that allocates (the caching allocator caches per stream).
// FSDP2 (torch/distributed/fsdp/_fully_shard/_fsdp_collectives.py): the all-gather copy-in
// stream allocates the gather input and flat output; the reduce-scatter stream allocates the
// reduced output; everything else allocates on the compute (current) stream unless a switch of
// rung 12 moves it. Activation reloads allocate on the host-to-device stream.
enum MemPool : std::int32_t {
  kPoolCompute,
  kPoolAllGather,
  kPoolReduceScatter,
  kPoolOffload,
  kPoolCount
};
const char* pool_name(std::int32_t p);

// Bytes of one layer's buffers on one rank. Activation sizes are estimates [est] from the ops
// of step_costs (bf16 unless noted); each formula is in step_memory.cpp.
struct LayerBuffers {
  double dense_flat = 0;      // gathered dense weights, flat all-gather output (bf16)
  double dense_local = 0;     // node-local reshard kept from forward to backward (bf16)
  double expert_flat = 0;     // gathered expert block, flat (bf16, or FP8 + scales)
  double expert_weights = 0;  // the expert block as bf16 tensors (dequantized for FP8)
  double dense_weights = 0;   // dense weights as unsharded tensors (bf16)
  double layer_out = 0;       // the checkpointed layer output
  double kept_extra = 0;      // further activations kept forward→backward (none/selective)
  double attention = 0;       // attention activations of one pass (q, k, v, o, log-sum-exp)
  double ffn = 0;             // feed-forward activations of one pass (MoE per moe_kernel, SwiGLU)
  double ffn_grad = 0;        // gradient workspace of the feed-forward backward
  double grad_unsharded = 0;  // the layer's unsharded weight gradients (bf16)
  double reduce_input = 0;    // reduce-scatter inputs (fp32) or all-to-all send buffer
  double a2a_recv = 0;        // bf16 gradient all-to-all receive buffer (0 for reduce-scatter)
  double reduced = 0;         // this rank's reduced gradient shard (fp32)
};
LayerBuffers layer_buffers(const Job& job, const RankWorkload& w, std::int64_t layer,
                           std::int64_t gpus_per_node);

// HBM the loss holds from the head's forward to its backward: `tokens` × `vocab` logits at
// bytes per element — a chunked fused linear cross-entropy (training.loss_chunk_tokens > 0):
// a chunk's bf16 logits and fp32 gradient, 6 B [est]; PyTorch's cross_entropy over the whole
// batch's fp32 logits as TorchTitan calls it (loss_chunk_tokens 0): eager, the bf16 logits, their
// fp32 copy, the saved log-softmax and its fp32 gradient, 2 + 4 + 4 + 4 = 14 B; compiled (the
// loss region fused), the bf16 logits and the fp32 gradient, 6 B [est: op sequences; checked
// against a measured step, reports/torchtitan/README.md].
double loss_buffer_bytes(const Job& job, double tokens, double vocab);

// Bytes of the RoPE caches: one cache is seq_len × rope cache width × (cos, sin) × fp32; with
// a shared cache the model holds rope_caches of them, else one per RoPE layer.
double rope_cache_bytes(const Job& job);

// One buffer: allocated when task `alloc_task` starts (or ends), freed when `free_task` starts
// (or ends); one never freed (free_task kNone) lives to the end of the step. Events at the same
// simulated time happen in the order they were recorded (`alloc_seq`, `free_seq`): the builder
// records them in program order.
struct Buffer {  // 40 bytes: a step records ~10⁶
  static constexpr std::uint32_t kNone = 0xffffffffU;
  const char* name = "";
  double bytes = 0;
  std::uint32_t alloc_task = 0, free_task = kNone;  // task ids in the step's graph
  std::uint32_t alloc_seq = 0, free_seq = 0;
  std::int32_t pool = kPoolCompute;
  bool alloc_at_end = false;
  bool free_at_end = true;
  bool freed() const { return free_task != kNone; }
};

class BufferLog {
 public:
  explicit BufferLog(std::int64_t ranks)
      : by_rank_(static_cast<std::size_t>(ranks)), seq_(static_cast<std::size_t>(ranks), 0) {}
  enum At : bool { kStart = false, kEnd = true };
  // Records a buffer; returns its handle for free(): its index among the rank's buffers.
  std::size_t alloc(std::int64_t rank, const char* name, std::int32_t pool, double bytes,
                    const sim::Task& t, At at);
  void free(std::int64_t rank, std::size_t handle, const sim::Task& t, At at);
  // One rank's buffers, in the order recorded.
  class Rank {
   public:
    std::size_t size() const { return ids_->size(); }
    const Buffer& operator[](std::size_t i) const { return (*all_)[(*ids_)[i]]; }

   private:
    friend class BufferLog;
    Rank(const sim::Chunked<Buffer, 18>& all, const std::vector<std::uint32_t>& ids)
        : all_(&all), ids_(&ids) {}
    const sim::Chunked<Buffer, 18>* all_;
    const std::vector<std::uint32_t>* ids_;
  };
  Rank rank(std::int64_t r) const { return {all_, by_rank_[static_cast<std::size_t>(r)]}; }
  // When a buffer is allocated and freed (its task's start or end), in ns of simulated time.
  std::int64_t alloc_ns(const Buffer& b) const { return at(b.alloc_task, b.alloc_at_end); }
  std::int64_t free_ns(const Buffer& b) const { return at(b.free_task, b.free_at_end); }
  std::int64_t ranks() const { return static_cast<std::int64_t>(by_rank_.size()); }

 private:
  // Every rank's buffers in one append-only array (10 MiB chunks on large pages: a step
  // records ~10⁶), and per rank their places in it.
  sim::Chunked<Buffer, 18> all_;
  const sim::TaskGraph* graph_ = nullptr;  // of the tasks recorded
  std::int64_t at(std::uint32_t task, bool end) const {
    return (end ? graph_->end_of(task) : graph_->start_of(task)).count_ns();
  }
  std::vector<std::vector<std::uint32_t>> by_rank_;
  std::vector<std::uint32_t> seq_;
};

}  // namespace twin::model
