// Forward and backward passes of the step graph (the FSDP2 rules are in step_graph.hpp).
#include <algorithm>
#include <map>

#include "hardware/kernel_shapes.hpp"
#include "model/accounting.hpp"
#include "model/step_graph.hpp"

namespace twin::model {

using hardware::elementwise_shape;
using hardware::gemm_shape;
using hardware::grid_stride_shape;
using hardware::grid_work;

using hardware::Family;

// The embedding: gathered, looked up; the RoPE caches, kept all step.
// Under tensor parallelism each rank holds a vocabulary shard (TorchTitan's RowwiseParallel
// embedding) and the looked-up rows are reduce-scattered over the sequence.
void StepBuilder::forward_embedding() {
  const auto& m = job_.model;
  const double h = static_cast<double>(m.hidden), V = vocab_shard();
  auto emb = fsdp_gather(StepColl::dense_gather, V * h * 2, "embedding_gather", -1);
  const double rope = rope_cache_bytes(job_);
  const auto states = rank_memory(job_);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    auto& k = elementwise(r, "embedding", Family::ew_gather, 4 * work_[r].tokens * h, -1);
    k.after(*emb[static_cast<std::size_t>(r)]);
    unshard(r, V * h * kBf16, V * h * kBf16, *emb[static_cast<std::size_t>(r)], k, k);
    mem_.alloc(r, "rope_caches", kPoolCompute, rope, k, BufferLog::kStart);  // kept all step
    if (!job_.training.cpu_offload) {  // FSDP2's sharded fp32 parameters and AdamW's states
      mem_.alloc(r, "param_shards", kPoolCompute, states.master_params, k, BufferLog::kStart);
      mem_.alloc(r, "optimizer_states", kPoolCompute, states.optimizer_states, k,
                 BufferLog::kStart);
    }
  }
  tp_activations(StepColl::tp_reduce_scatter, "embedding_reduce_scatter", -1);
}

// Layer i's buffers on rank r: its gathered weights, its activations (freed at the layer's end
// under checkpointing: only the output, and under selective checkpointing some more, is kept for
// backward), its output (offloaded to the host for the first layers).
void StepBuilder::forward_layer_buffers(std::int64_t r, std::int32_t i, const sim::Task& gather_d,
                                        const sim::Task& gather_e, const sim::Task& begin,
                                        sim::Task& end, PerRank& d2h_all) {
  const auto ri = static_cast<std::size_t>(r),
             k = static_cast<std::size_t>(r * job_.model.layers + i);
  const auto b = layer_buffers(job_, work_[ri], i, c_.gpus_per_node());
  const auto ckpt = job_.training.activation_checkpointing;
  unshard(r, b.dense_flat, b.dense_weights, gather_d, begin, end);
  unshard(r, b.expert_flat, b.expert_weights, gather_e, begin, end);
  const auto act =
      mem_.alloc(r, "layer_activations", kPoolCompute, b.attention + b.ffn, begin, BufferLog::kEnd);
  if (ckpt == Checkpointing::none)
    held_[k].push_back(act);
  else
    mem_.free(r, act, end, BufferLog::kStart);
  if (b.kept_extra > 0 && ckpt == Checkpointing::selective)
    held_[k].push_back(
        mem_.alloc(r, "saved_activations", kPoolCompute, b.kept_extra, end, BufferLog::kEnd));
  if (b.dense_local > 0)
    local_shard_[k] =
        mem_.alloc(r, "dense_node_local_shard", kPoolCompute, b.dense_local, end, BufferLog::kEnd);
  const auto out = mem_.alloc(r, "layer_output", kPoolCompute, b.layer_out, end, BufferLog::kEnd);
  if (i < offloaded_layers(job_)) {
    auto& t = copy(r, true, "offload_activation", i,
                   work_[r].tokens * static_cast<double>(job_.model.hidden) * 2);
    t.after(end);
    d2h_all[k] = &t;
    mem_.free(r, out, t, BufferLog::kEnd);  // returns to the pool once the copy is done
  } else {
    held_[k].push_back(out);
  }
}

void StepBuilder::forward(std::vector<PerRank>& begin, std::vector<PerRank>& end,
                          PerRank& d2h_all) {
  const std::int64_t L = job_.model.layers;
  forward_embedding();
  begin.resize(static_cast<std::size_t>(L));
  end.resize(static_cast<std::size_t>(L));
  for (std::int32_t i = 0; i < L; ++i) {
    const auto comm = layer_comm(job_, i);
    float8_amax_before_gather(i);
    // TorchTitan's explicit prefetch with EP: the next block, then its experts.
    auto agd = fsdp_gather(StepColl::dense_gather, comm.dense_gather, "dense_gather", i);
    auto age = fsdp_gather(StepColl::expert_gather, comm.expert_gather, "expert_gather", i);
    if (i >= 1) after_all(agd, begin[i - 1]), after_all(age, begin[i - 1]);  // prefetch
    if (i >= 2) after_all(agd, end[i - 2]), after_all(age, end[i - 2]);      // two buffers
    begin[i] = marker(kCompute, "layer_forward", i);
    after_all(begin[i], agd);
    std::vector<LayerOps> ops;
    ops.reserve(static_cast<std::size_t>(ranks_));
    for (std::int64_t r = 0; r < ranks_; ++r)
      ops.push_back(layer_ops(job_, cost_, work_[r], i, false));
    run_ops(per_rank(ops, &LayerOps::forward), i, age);
    end[i] = marker(kCompute, "layer_forward_end", i);
    for (std::int64_t r = 0; r < ranks_; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      forward_layer_buffers(r, i, *agd[ri], *age[ri], *begin[i][ri], *end[i][ri], d2h_all);
    }
  }
}

StepMarks StepBuilder::build() {
  std::vector<PerRank> begin, end;
  PerRank d2h(static_cast<std::size_t>(ranks_ * job_.model.layers), nullptr);
  forward(begin, end, d2h);
  StepMarks marks;
  backward(end, d2h, marks.backward_end);
  build_optimizer(marks.backward_end, marks);
  return marks;
}

}  // namespace twin::model
