// Forward and backward passes of the step graph (the FSDP2 rules are in step_graph.hpp).
#include "model/accounting.hpp"
#include "hardware/kernel_shapes.hpp"
#include "model/step_graph.hpp"

#include <algorithm>
#include <map>

namespace twin::model {

using hardware::elementwise_shape;
using hardware::gemm_shape;
using hardware::grid_stride_shape;
using hardware::grid_work;

using hardware::CollKind;
using hardware::Family;

namespace {
// One part of every rank's ops, moved out (each part is run once).
std::vector<std::vector<Op>> per_rank(std::vector<LayerOps>& ops, std::vector<Op> LayerOps::*part) {
  std::vector<std::vector<Op>> out;
  out.reserve(ops.size());
  for (auto& o : ops) out.push_back(std::move(o.*part));
  return out;
}
}  // namespace

void StepBuilder::forward(std::vector<PerRank>& begin, std::vector<PerRank>& end, PerRank& d2h_all) {
  const auto& m = job_.model;
  const auto& ctas = c_.nccl().default_ctas;
  const std::int64_t L = m.layers, off = offloaded_layers(job_);
  const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
  auto emb = collective(dense_pg_, kDensePg, CollKind::all_gather, V * h * 2, ctas.dense,
                        "embedding_gather", kCollDenseGather, -1);
  const double rope = rope_cache_bytes(job_);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const double eb = 4 * work_[r].tokens * h;
    auto& k = kernel(r, "embedding", kElementwise, elementwise_op(job_, cost_, Family::ew_gather, eb), -1);
    note(r, k, {elementwise_launch(eb)});
    k.after(*emb[static_cast<std::size_t>(r)]);
    unshard(r, V * h * kBf16, V * h * kBf16, *emb[static_cast<std::size_t>(r)], k, k);
    mem_.alloc(r, "rope_caches", kPoolCompute, rope, k, BufferLog::kStart);  // kept all step
  }
  begin.resize(static_cast<std::size_t>(L));
  end.resize(static_cast<std::size_t>(L));
  for (std::int32_t i = 0; i < L; ++i) {
    const auto comm = layer_comm(job_, i);
    auto agd = collective(dense_pg_, kDensePg, CollKind::all_gather, comm.dense_gather, ctas.dense,
                          "dense_gather", kCollDenseGather, i);
    auto age = collective(expert_pg_, kExpertPg, CollKind::all_gather, comm.expert_gather,
                          ctas.expert_allgather, "expert_gather", kCollExpertGather, i);
    if (i >= 1) after_all(agd, begin[i - 1]), after_all(age, begin[i - 1]);  // prefetch
    if (i >= 2) after_all(agd, end[i - 2]), after_all(age, end[i - 2]);      // two buffers
    begin[i] = marker(kCompute, "layer_forward", i);
    after_all(begin[i], agd);
    std::vector<LayerOps> ops;
    ops.reserve(static_cast<std::size_t>(ranks_));
    for (std::int64_t r = 0; r < ranks_; ++r) ops.push_back(layer_ops(job_, cost_, work_[r], i));
    run_ops(per_rank(ops, &LayerOps::forward), i, age);
    end[i] = marker(kCompute, "layer_forward_end", i);
    for (std::int64_t r = 0; r < ranks_; ++r) {
      const auto ri = static_cast<std::size_t>(r), k = static_cast<std::size_t>(r * L + i);
      const auto b = layer_buffers(job_, work_[ri], i, c_.gpus_per_node());
      unshard(r, b.dense_flat, b.dense_weights, *agd[ri], *begin[i][ri], *end[i][ri]);
      unshard(r, b.expert_flat, b.expert_weights, *age[ri], *begin[i][ri], *end[i][ri]);
      // Activations of the forward pass: freed at the layer's end under checkpointing (only the
      // output, and under selective checkpointing some more, is kept for backward).
      const auto act = mem_.alloc(r, "layer_activations", kPoolCompute, b.attention + b.moe,
                                  *begin[i][ri], BufferLog::kEnd);
      if (job_.training.activation_checkpointing == Checkpointing::none) held_[k].push_back(act);
      else mem_.free(r, act, *end[i][ri], BufferLog::kStart);
      if (b.kept_extra > 0 && job_.training.activation_checkpointing == Checkpointing::selective)
        held_[k].push_back(mem_.alloc(r, "saved_activations", kPoolCompute, b.kept_extra,
                                      *end[i][ri], BufferLog::kEnd));
      if (b.dense_local > 0)
        local_shard_[k] = mem_.alloc(r, "dense_node_local_shard", kPoolCompute, b.dense_local,
                                     *end[i][ri], BufferLog::kEnd);
      const auto out = mem_.alloc(r, "layer_output", kPoolCompute, b.layer_out, *end[i][ri], BufferLog::kEnd);
      if (i < off) {
        auto& t = copy(r, true, "offload_activation", i, work_[r].tokens * h * 2);
        t.after(*end[i][ri]);
        d2h_all[k] = &t;
        mem_.free(r, out, t, BufferLog::kEnd);  // returns to the pool once the copy is done
      } else {
        held_[k].push_back(out);
      }
    }
  }
}

void StepBuilder::backward(const std::vector<PerRank>& fwd_end, const PerRank& d2h_all,
                           PerRank& grads_home) {
  const auto& m = job_.model;
  const auto& t = job_.training;
  const auto& ctas = c_.nccl().default_ctas;
  const std::int64_t L = m.layers, off = offloaded_layers(job_);
  const double h = static_cast<double>(m.hidden), V = static_cast<double>(m.vocab);
  const double R = static_cast<double>(job_.parallel.replica_gpus);
  const double expert_pg = R / static_cast<double>(job_.parallel.ep);

  // LM head: gathered while the last layer runs forward, forward + loss + backward, reduced.
  auto head_ag = collective(dense_pg_, kDensePg, CollKind::all_gather, V * h * 2, ctas.dense,
                            "head_gather", kCollDenseGather, static_cast<std::int32_t>(L));
  after_all(head_ag, fwd_end[static_cast<std::size_t>(L - 1)]);
  std::vector<std::size_t> head_grad(static_cast<std::size_t>(ranks_));
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const double T = work_[r].tokens;
    const auto fwd = cost_.gemm_s(T, V, h);
    const auto head = gemm_shape(cost_.sm_count(), T, V);
    auto& hf = kernel(r, "head_forward", kOtherGemm, grid_work(fwd, head), L);
    hf.after(*head_ag[static_cast<std::size_t>(r)]);
    // One task for the loss's forward and backward kernels; it slows as the forward does (the
    // larger of the two, measured ×7.2 with 124 SMs held against ×4.7 for the backward).
    auto& loss = kernel(r, "loss", kElementwise, elementwise_op(job_, cost_, Family::ew_loss, 3 * T * V * 4), L);
    auto& hb = kernel(r, "head_backward", kOtherGemm, grid_work(2 * fwd, head), L);
    note(r, hf, {gemm_launch(T, V, h)});
    note(r, loss, {elementwise_launch(3 * T * V * 4)});
    note(r, hb, {gemm_launch(T, V, h, 2)});
    unshard(r, V * h * kBf16, V * h * kBf16, *head_ag[static_cast<std::size_t>(r)], hf, hb);
    // Logits and their gradient, chunked over tokens (a fused linear cross-entropy) [est].
    const double chunk = std::min(T, kLossChunkTokens) * V * (kBf16 + kFp32);
    mem_.free(r, mem_.alloc(r, "logits_chunk", kPoolCompute, chunk, hf, BufferLog::kStart), loss,
              BufferLog::kEnd);
    // The head's bf16 gradient and its fp32 reduce-scatter input.
    head_grad[static_cast<std::size_t>(r)] =
        mem_.alloc(r, "head_grad", kPoolCompute, V * h * (kBf16 + kFp32), hb, BufferLog::kEnd);
  }
  const PerRank issue = marker(kCompute, "backward_start", static_cast<std::int32_t>(L));
  PerRank prev_reduce = collective(dense_pg_, kDensePg, CollKind::reduce_scatter, V * h * 4,
                                   ctas.dense, "head_grad_reduce_scatter", kCollDenseReduce,
                                   static_cast<std::int32_t>(L));
  after_all(prev_reduce, issue);
  for (std::int64_t r = 0; r < ranks_; ++r)
    mem_.free(r, head_grad[static_cast<std::size_t>(r)], *prev_reduce[static_cast<std::size_t>(r)],
              BufferLog::kEnd);
  PerRank prev_reduce_e(static_cast<std::size_t>(ranks_), nullptr);

  // Layer i's activations and weights are fetched when layer i+1's backward starts, so on each
  // PG they queue before layer i+1's reductions (issue order = PG order).
  struct Fetch {
    PerRank h2d, dense, expert;
  };
  auto prefetch = [&](std::int32_t i, const PerRank& issue_at) {
    const auto comm = layer_comm(job_, i);
    Fetch f{PerRank(static_cast<std::size_t>(ranks_), nullptr), {}, {}};
    if (i < off)
      for (std::int64_t r = 0; r < ranks_; ++r) {
        auto& x = copy(r, false, "reload_activation", i, work_[r].tokens * h * 2);
        x.after(*d2h_all[static_cast<std::size_t>(r * L + i)]);
        x.after(*issue_at[static_cast<std::size_t>(r)]);
        f.h2d[static_cast<std::size_t>(r)] = &x;
        held_[static_cast<std::size_t>(r * L + i)].push_back(
            mem_.alloc(r, "reloaded_output", kPoolOffload, work_[r].tokens * h * kBf16, x, BufferLog::kStart));
      }
    f.dense = t.dense_reshard == DenseReshard::node_local
                  ? collective(node_pg_, kNodePg, CollKind::all_gather, comm.dense_gather,
                               ctas.nvlink_gather, "dense_regather_nvlink", kCollDenseGather, i)
                  : collective(dense_pg_, kDensePg, CollKind::all_gather, comm.dense_gather,
                               ctas.dense, "dense_regather", kCollDenseGather, i);
    f.expert = collective(expert_pg_, kExpertPg, CollKind::all_gather, comm.expert_gather,
                          ctas.expert_allgather, "expert_regather", kCollExpertGather, i);
    after_all(f.dense, issue_at);
    after_all(f.expert, issue_at);
    return f;
  };
  Fetch next = prefetch(static_cast<std::int32_t>(L - 1), issue);
  // Memory still to free: each rank's reduce-scatter input (freed after the next layer's wait),
  // and reduced gradient shards, by the layer whose boundary frees them (−1: end of backward).
  constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::vector<std::size_t> pending_input(static_cast<std::size_t>(ranks_), kNone);
  std::vector<std::map<std::int32_t, std::vector<std::size_t>>> reduced_free_at(static_cast<std::size_t>(ranks_));
  std::vector<std::size_t> grads(static_cast<std::size_t>(ranks_));
  const bool norm_hook = t.grad_norm == GradNorm::accumulated;

  for (std::int32_t i = static_cast<std::int32_t>(L - 1); i >= 0; --i) {
    const auto comm = layer_comm(job_, i);
    const Fetch cur = next;
    auto begin = marker(kCompute, "layer_backward", i);
    after_all(begin, cur.dense);
    after_all(begin, cur.h2d);
    if (i > 0) next = prefetch(i - 1, begin);
    std::vector<LayerOps> ops;
    ops.reserve(static_cast<std::size_t>(ranks_));
    for (std::int64_t r = 0; r < ranks_; ++r) ops.push_back(layer_ops(job_, cost_, work_[r], i));
    const bool recompute = !ops[0].recompute.empty();
    if (recompute) run_ops(per_rank(ops, &LayerOps::recompute), i, cur.expert);
    run_ops(per_rank(ops, &LayerOps::backward), i, recompute ? PerRank{} : cur.expert);
    // Post-backward: the compute stream waits for the previous layer's reductions.
    auto boundary = marker(kCompute, "post_backward", i);
    after_all(boundary, prev_reduce);
    after_all(boundary, prev_reduce_e);
    for (std::int64_t r = 0; r < ranks_; ++r) {
      const auto ri = static_cast<std::size_t>(r), k = static_cast<std::size_t>(r * L + i);
      const auto b = layer_buffers(job_, work_[ri], i, c_.gpus_per_node());
      unshard(r, b.dense_flat, b.dense_weights, *cur.dense[ri], *begin[ri], *boundary[ri]);
      unshard(r, b.expert_flat, b.expert_weights, *cur.expert[ri], *begin[ri], *boundary[ri]);
      if (b.dense_local > 0) mem_.free(r, local_shard_[k], *cur.dense[ri], BufferLog::kEnd);
      const double pass = (t.activation_checkpointing == Checkpointing::none ? 0 : b.attention + b.moe) + b.moe_grad;
      mem_.free(r, mem_.alloc(r, "recompute_and_grad_workspace", kPoolCompute, pass, *begin[ri],
                              BufferLog::kEnd),
                *boundary[ri], BufferLog::kStart);
      grads[ri] = mem_.alloc(r, "unsharded_grads", kPoolCompute, b.grad_unsharded, *begin[ri], BufferLog::kEnd);
      for (std::size_t hnd : held_[k]) mem_.free(r, hnd, *boundary[ri], BufferLog::kStart);
      // After the wait: the previous layer's reduce-scatter input goes, this layer's comes.
      if (pending_input[ri] != kNone) mem_.free(r, pending_input[ri], *boundary[ri], BufferLog::kEnd);
      pending_input[ri] = mem_.alloc(r, "reduce_input", kPoolCompute, b.reduce_input, *boundary[ri], BufferLog::kEnd);
      for (std::size_t hnd : reduced_free_at[ri][i]) mem_.free(r, hnd, *boundary[ri], BufferLog::kEnd);
    }
    if (i == 0 && t.embedding_regather) {
      // FSDP re-gathers the embedding for its backward; on the dense PG it queues behind
      // layer 1's reduce-scatter (SPEC.md §6.11b).
      auto emb = collective(dense_pg_, kDensePg, CollKind::all_gather, V * h * 2, ctas.dense,
                            "embedding_regather", kCollDenseGather, -1);
      after_all(emb, boundary);
      auto wait = marker(kCompute, "embedding_weight_ready", -1);
      after_all(wait, emb);
    }
    auto rsd = collective(dense_pg_, kDensePg, CollKind::reduce_scatter, comm.dense_reduce,
                          ctas.dense, "dense_grad_reduce_scatter", kCollDenseReduce, i);
    const bool a2a = t.grad_reduce == GradReduce::bf16_all_to_all;
    auto rse = a2a ? collective(expert_pg_, kExpertPg, CollKind::all_to_all, comm.expert_reduce,
                                ctas.grad_all_to_all, "expert_grad_all_to_all", kCollExpertReduce, i)
                   : collective(expert_pg_, kExpertPg, CollKind::reduce_scatter, comm.expert_reduce,
                                ctas.expert_reduce_scatter, "expert_grad_reduce_scatter",
                                kCollExpertReduce, i);
    after_all(rsd, boundary);
    after_all(rse, boundary);
    for (std::int64_t r = 0; r < ranks_; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      mem_.free(r, grads[ri], *rsd[ri], BufferLog::kStart);  // copied into the reduce input
      if (!a2a) continue;
      // The owner converts the received bf16 slices to fp32 and sums them.
      const double recv = comm.expert_reduce * (expert_pg - 1) / expert_pg;
      const double sum_bytes = recv + 2 * recv / expert_pg;
      auto& s = kernel(r, "grad_fp32_sum", kElementwise, elementwise_op(job_, cost_, Family::ew_sum_fp32, sum_bytes),
                       i, kSideStream);
      note(r, s, {elementwise_launch(sum_bytes)});
      s.after(*rse[ri]);
      const auto rb = mem_.alloc(r, "grad_all_to_all_recv",
                                 t.grad_a2a_recv_pool == RecvPool::compute ? kPoolCompute : kPoolReduceScatter,
                                 comm.expert_reduce, *rse[ri], BufferLog::kStart);
      mem_.free(r, rb, s, BufferLog::kEnd);
      rse[ri] = &s;
    }
    const double shard_bytes = comm.dense_reduce / R + 4 * comm.expert_elems / expert_pg;
    PerRank reduced = rse;
    if (job_.parallel.dp > 1) {
      reduced = collective(replica_pg_, kReplicaPg, CollKind::all_reduce, shard_bytes, ctas.dense,
                           "replica_grad_all_reduce", kCollReplicaAllReduce, i);
      after_all(reduced, rsd);
      after_all(reduced, rse);
    }
    for (std::int64_t r = 0; r < ranks_; ++r) {
      // With the optimizer on the host (cpu_offload) the reduced shard goes home; else it stays
      // for the GPU optimizer, to the end of the step.
      sim::Task* home = nullptr;
      if (t.cpu_offload) {
        home = &copy(r, true, "grad_to_host", i, shard_bytes);
        home->after(*rsd[static_cast<std::size_t>(r)]);
        home->after(*reduced[static_cast<std::size_t>(r)]);
      }
      // The reduced shard (reduce-scatter stream) lives until copied home; with the norm hook
      // registered FSDP2 keeps it to the end of backward, or two layers on with rung 12a.
      const auto red = mem_.alloc(r, "reduced_grad_shard", kPoolReduceScatter, shard_bytes,
                                  *rsd[static_cast<std::size_t>(r)], BufferLog::kStart);
      if (!home) continue;
      if (!norm_hook) mem_.free(r, red, *home, BufferLog::kEnd);
      else reduced_free_at[static_cast<std::size_t>(r)][t.release_grads_early && i >= 2 ? i - 2 : -1].push_back(red);
    }
    prev_reduce = rsd;
    prev_reduce_e = rse;
  }
  // Embedding gradient (a scatter-add from the token ids), reduced and sent home.
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const double eb = 4 * work_[r].tokens * h;
    note(r, kernel(r, "embedding_backward", kElementwise, elementwise_op(job_, cost_, Family::ew_scatter_add, eb), -1),
         {elementwise_launch(eb)});
  }
  auto emb_rs = collective(dense_pg_, kDensePg, CollKind::reduce_scatter, V * h * 4, ctas.dense,
                           "embedding_grad_reduce_scatter", kCollDenseReduce, -1);
  const auto bw_end = marker(kCompute, "backward_end", -1);
  after_all(emb_rs, bw_end);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    if (pending_input[ri] != kNone) mem_.free(r, pending_input[ri], *bw_end[ri], BufferLog::kEnd);
    for (std::size_t hnd : reduced_free_at[ri][-1]) mem_.free(r, hnd, *bw_end[ri], BufferLog::kEnd);
  }
  if (t.cpu_offload)
    for (std::int64_t r = 0; r < ranks_; ++r) {
      auto& x = copy(r, true, "grad_to_host", -1, V * h * 4 / R);
      x.after(*emb_rs[static_cast<std::size_t>(r)]);
    }
  grads_home = marker(kD2H, "grads_on_host", -1);
  after_all(grads_home, prev_reduce);
}

StepMarks StepBuilder::build() {
  std::vector<PerRank> begin, end;
  PerRank d2h(static_cast<std::size_t>(ranks_ * job_.model.layers), nullptr);
  forward(begin, end, d2h);
  StepMarks marks;
  backward(end, d2h, marks.backward_end);
  marks.optimizer_end = build_optimizer(marks.backward_end);
  hardware::merge_alike_links(c_);  // every collective of the step is bound now
  return marks;
}

}  // namespace twin::model
