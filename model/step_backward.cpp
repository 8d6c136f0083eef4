// The backward pass of the step graph, as named steps (the FSDP2 rules are in step_graph.hpp):
// the LM head and loss; per layer, from the last: the next layer's prefetch, recompute and
// backward kernels (under fsdp_streams = fsdp2 the experts' reduction as soon as their
// backward ends), the post-backward boundary (buffers), the gradient reductions; the
// embedding's gradient and the gradients' way home.
#include <map>

#include "hardware/kernel_shapes.hpp"
#include "model/accounting.hpp"
#include "model/step_graph.hpp"

namespace twin::model {

using hardware::Family;
using hardware::gemm_shape;
using hardware::grid_work;

namespace {
constexpr std::size_t kNone = static_cast<std::size_t>(-1);
}  // namespace

// What backward carries from one layer to the next.
struct StepBuilder::BackwardState {
  PerRank prev_reduce;  // the last dense reduce-scatter
  // FSDP2's reduce_scatter_stream (what it last held) and the last reduction's event: each
  // post-backward, of any group, makes the compute stream wait for that event before it
  // reduces (FSDPParamGroup.post_backward, comm_ctx.reduce_scatter_state).
  PerRank rs_stream, rs_event;
  PerRank expert_reduced;  // this layer's expert reduction (with the owner's fp32 sum)
  // Each rank's reduce-scatter input (freed after the next layer's wait), and reduced gradient
  // shards by the layer whose boundary frees them (−1: the end of backward).
  std::vector<std::size_t> pending_input;
  std::vector<std::map<std::int32_t, std::vector<std::size_t>>> reduced_free_at;
  std::vector<std::size_t> grads;  // this layer's unsharded gradients
};

// LM head: gathered while the last layer runs forward, forward + loss + backward, reduced.
StepBuilder::PerRank StepBuilder::backward_head(const PerRank& last_fwd_end, BackwardState& st) {
  const auto& m = job_.model;
  const double h = static_cast<double>(m.hidden), V = vocab_shard();
  const auto L = static_cast<std::int32_t>(m.layers);
  auto head_ag = fsdp_gather(StepColl::dense_gather, V * h * 2, "head_gather", L);
  after_all(head_ag, last_fwd_end);
  // Tensor parallelism: the output layer is column-parallel over the vocabulary (loss
  // parallel), its input gathered over the sequence and its input gradient reduce-scattered.
  tp_activations(StepColl::tp_all_gather, "head_all_gather", L);
  std::vector<std::size_t> head_grad(static_cast<std::size_t>(ranks_));
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const double T = work_[r].tokens;
    const auto fwd = cost_.gemm_s(T, V, h);
    const auto head = gemm_shape(cost_.sm_count(), T, V, h);
    auto& hf = kernel(r, "head_forward", kOtherGemm, grid_work(fwd, head), L);
    hf.after(*head_ag[static_cast<std::size_t>(r)]);
    // One task for the loss's forward and backward kernels; it slows as the forward does (the
    // larger of the two, measured ×7.2 with 124 SMs held against ×4.7 for the backward).
    auto& loss = elementwise(r, "loss", Family::ew_loss, 3 * T * V * 4, L);
    auto& hb = kernel(r, "head_backward", kOtherGemm, grid_work(2 * fwd, head), L);
    note(r, hf, {gemm_launch(T, V, h)});
    note(r, hb, {gemm_launch(T, V, h, 2)});
    unshard(r, V * h * kBf16, V * h * kBf16, *head_ag[static_cast<std::size_t>(r)], hf, hb);
    // Logits and their gradient (step_memory.hpp).
    mem_.free(r,
              mem_.alloc(r, "logits_chunk", kPoolCompute, loss_buffer_bytes(job_, T, V), hf,
                         BufferLog::kStart),
              loss, BufferLog::kEnd);
    // The head's bf16 gradient and its fp32 reduce-scatter input.
    head_grad[static_cast<std::size_t>(r)] =
        mem_.alloc(r, "head_grad", kPoolCompute, V * h * (kBf16 + kFp32), hb, BufferLog::kEnd);
  }
  tp_activations(StepColl::tp_reduce_scatter, "head_reduce_scatter", L);
  const PerRank issue = marker(kCompute, "backward_start", L);
  st.prev_reduce = collective(StepColl::dense_reduce, V * h * 4, "head_grad_reduce_scatter", L);
  after_all(st.prev_reduce, issue);
  if (fsdp2_streams()) queue_on(st.prev_reduce, st.rs_stream);
  st.rs_event = st.prev_reduce;
  for (std::int64_t r = 0; r < ranks_; ++r)
    mem_.free(r, head_grad[static_cast<std::size_t>(r)],
              *st.prev_reduce[static_cast<std::size_t>(r)], BufferLog::kEnd);
  return issue;
}

// Layer i's activations and weights are fetched when layer i+1's backward starts, so on each
// PG they queue before layer i+1's reductions (issue order = PG order).
StepBuilder::Fetch StepBuilder::prefetch_layer(std::int32_t i, const PerRank& issue_at,
                                               const PerRank& d2h_all) {
  const auto& t = job_.training;
  const std::int64_t L = job_.model.layers;
  const double h = static_cast<double>(job_.model.hidden);
  const auto comm = layer_comm(job_, i);
  Fetch f{PerRank(static_cast<std::size_t>(ranks_), nullptr), {}, {}};
  if (i < offloaded_layers(job_))
    for (std::int64_t r = 0; r < ranks_; ++r) {
      auto& x = copy(r, false, "reload_activation", i, work_[r].tokens * h * 2);
      x.after(*d2h_all[static_cast<std::size_t>(r * L + i)]);
      x.after(*issue_at[static_cast<std::size_t>(r)]);
      f.h2d[static_cast<std::size_t>(r)] = &x;
      held_[static_cast<std::size_t>(r * L + i)].push_back(mem_.alloc(
          r, "reloaded_output", kPoolOffload, work_[r].tokens * h * kBf16, x, BufferLog::kStart));
    }
  if (t.dense_reshard != DenseReshard::node_local) float8_amax_before_gather(i);
  f.dense =
      t.dense_reshard == DenseReshard::node_local
          ? fsdp_gather(StepColl::nvlink_gather, comm.dense_gather, "dense_regather_nvlink", i)
          : fsdp_gather(StepColl::dense_gather, comm.dense_gather, "dense_regather", i);
  f.expert = fsdp_gather(StepColl::expert_gather, comm.expert_gather, "expert_regather", i);
  after_all(f.dense, issue_at);
  after_all(f.expert, issue_at);
  return f;
}

// The post-backward boundary's buffers: the gathered weights resharded, the pass's workspace,
// the unsharded gradients, and the reduce-scatter inputs swapped after the wait.
void StepBuilder::layer_boundary_buffers(std::int32_t i, const Fetch& cur, const PerRank& begin,
                                         const PerRank& boundary, BackwardState& st) {
  const auto& t = job_.training;
  const std::int64_t L = job_.model.layers;
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const auto ri = static_cast<std::size_t>(r), k = static_cast<std::size_t>(r * L + i);
    const auto b = layer_buffers(job_, work_[ri], i, c_.gpus_per_node());
    unshard(r, b.dense_flat, b.dense_weights, *cur.dense[ri], *begin[ri], *boundary[ri]);
    unshard(r, b.expert_flat, b.expert_weights, *cur.expert[ri], *begin[ri], *boundary[ri]);
    if (b.dense_local > 0) mem_.free(r, local_shard_[k], *cur.dense[ri], BufferLog::kEnd);
    const double pass =
        (t.activation_checkpointing == Checkpointing::none ? 0 : b.attention + b.ffn) + b.ffn_grad;
    mem_.free(r,
              mem_.alloc(r, "recompute_and_grad_workspace", kPoolCompute, pass, *begin[ri],
                         BufferLog::kEnd),
              *boundary[ri], BufferLog::kStart);
    st.grads[ri] = mem_.alloc(r, "unsharded_grads", kPoolCompute, b.grad_unsharded, *begin[ri],
                              BufferLog::kEnd);
    for (std::size_t hnd : held_[k]) mem_.free(r, hnd, *boundary[ri], BufferLog::kStart);
    // After the wait: the previous layer's reduce-scatter input goes, this layer's comes.
    if (st.pending_input[ri] != kNone)
      mem_.free(r, st.pending_input[ri], *boundary[ri], BufferLog::kEnd);
    st.pending_input[ri] =
        mem_.alloc(r, "reduce_input", kPoolCompute, b.reduce_input, *boundary[ri], BufferLog::kEnd);
    for (std::size_t hnd : st.reduced_free_at[ri][i])
      mem_.free(r, hnd, *boundary[ri], BufferLog::kEnd);
  }
}

// FSDP2's copy-in of layer i's dense and/or expert gradients (step_graph.hpp), one task per
// rank.
StepBuilder::PerRank StepBuilder::reduce_copy_in(std::int32_t layer, bool dense, bool expert) {
  if (!job_.training.fsdp_copies) return {};
  const auto comm = layer_comm(job_, layer);
  std::vector<hardware::KernelPart> parts;
  std::vector<Launch> launches;
  const auto add = [&](hardware::Family f, double bytes) {
    const auto w = elementwise_op(job_, cost_, f, bytes);
    parts.push_back({w.shape, w.alone_s, w.hbm_bytes});
    launches.push_back(elementwise_launch(bytes));
  };
  if (dense) add(hardware::Family::ew_widen, 1.5 * comm.dense_reduce);  // bf16 → fp32
  if (expert) {
    if (job_.training.grad_reduce == GradReduce::bf16_all_to_all)
      add(hardware::Family::ew_add, 2 * comm.expert_reduce);  // the all-to-all's bf16 send buffer
    else
      add(hardware::Family::ew_widen, 1.5 * comm.expert_reduce);
  }
  PerRank out(static_cast<std::size_t>(ranks_));
  for (std::int64_t r = 0; r < ranks_; ++r) {
    auto& t = kernels(r, "reduce_copy_in", kElementwise, parts, layer);
    note(r, t, launches);
    out[static_cast<std::size_t>(r)] = &t;
  }
  return out;
}

// Layer i's expert reduction: the reduce-scatter, or the bf16 all-to-all with the owner's fp32
// sum, issued at `issue_at` on the reduce-scatter stream.
void StepBuilder::reduce_expert_grads(std::int32_t i, const PerRank& issue_at, BackwardState& st) {
  const auto& t = job_.training;
  const double expert_pg =
      static_cast<double>(job_.parallel.fsdp_gpus()) / static_cast<double>(job_.parallel.ep);
  const auto comm = layer_comm(job_, i);
  const bool a2a = t.grad_reduce == GradReduce::bf16_all_to_all;
  auto rse = collective(StepColl::expert_grad_reduce, comm.expert_reduce,
                        a2a ? "expert_grad_all_to_all" : "expert_grad_reduce_scatter", i);
  after_all(rse, issue_at);
  if (fsdp2_streams()) queue_on(rse, st.rs_stream);
  st.rs_event = rse;
  if (a2a)
    for (std::int64_t r = 0; r < ranks_; ++r) {
      const auto ri = static_cast<std::size_t>(r);
      // The owner converts the received bf16 slices to fp32 and sums them (inside FSDP's
      // reduce call, so on its stream: the next reduction waits for the sum).
      const double recv = comm.expert_reduce * (expert_pg - 1) / expert_pg;
      const double sum_bytes = recv + 2 * recv / expert_pg;
      auto& s = elementwise(r, "grad_fp32_sum", Family::ew_sum_fp32, sum_bytes, i, kElementwise,
                            kSideStream);
      s.after(*rse[ri]);
      const auto rb =
          mem_.alloc(r, "grad_all_to_all_recv",
                     t.grad_a2a_recv_pool == RecvPool::compute ? kPoolCompute : kPoolReduceScatter,
                     comm.expert_reduce, *rse[ri], BufferLog::kStart);
      mem_.free(r, rb, s, BufferLog::kEnd);
      rse[ri] = &s;
      if (fsdp2_streams()) st.rs_stream[ri] = &s;
    }
  st.expert_reduced = rse;
}

// Layer i's dense reduce-scatter after its boundary, or after FSDP2's copy-in (under fsdp2
// behind the experts' reduction on the reduce-scatter stream).
StepBuilder::PerRank StepBuilder::dense_reduce_scatter(std::int32_t i, const PerRank& boundary,
                                                       BackwardState& st) {
  auto rsd = collective(StepColl::dense_reduce, layer_comm(job_, i).dense_reduce,
                        "dense_grad_reduce_scatter", i);
  after_all(rsd, boundary);
  if (fsdp2_streams()) queue_on(rsd, st.rs_stream);
  st.rs_event = rsd;
  for (std::int64_t r = 0; r < ranks_; ++r)  // copied into the reduce input
    mem_.free(r, st.grads[static_cast<std::size_t>(r)], *rsd[static_cast<std::size_t>(r)],
              BufferLog::kStart);
  return rsd;
}

// Layer i's reduced gradients: the replicas' all-reduce and each reduced shard's way home.
void StepBuilder::send_reduced_home(std::int32_t i, const PerRank& rsd, BackwardState& st) {
  const auto& t = job_.training;
  const double R = static_cast<double>(job_.parallel.fsdp_gpus());
  const double expert_pg = R / static_cast<double>(job_.parallel.ep);
  const auto comm = layer_comm(job_, i);
  const double shard_bytes = comm.dense_reduce / R + 4 * comm.expert_elems / expert_pg;
  PerRank reduced = st.expert_reduced;
  if (job_.parallel.dp > 1) {
    reduced = collective(StepColl::replica_all_reduce, shard_bytes, "replica_grad_all_reduce", i);
    after_all(reduced, rsd);
    after_all(reduced, st.expert_reduced);
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
    if (t.grad_norm != GradNorm::accumulated)
      mem_.free(r, red, *home, BufferLog::kEnd);
    else
      st.reduced_free_at[static_cast<std::size_t>(r)][t.release_grads_early && i >= 2 ? i - 2 : -1]
          .push_back(red);
  }
  st.prev_reduce = rsd;
}

// FSDP re-gathers the embedding for its backward; on the dense PG it queues behind layer 1's
// reduce-scatter (JOB.md §6.11b).
void StepBuilder::embedding_regather(const PerRank& boundary) {
  const double vh = vocab_shard() * static_cast<double>(job_.model.hidden);
  auto emb = fsdp_gather(StepColl::dense_gather, vh * 2, "embedding_regather", -1);
  after_all(emb, boundary);
  auto wait = marker(kCompute, "embedding_weight_ready", -1);
  after_all(wait, emb);
}

// Embedding gradient (a scatter-add from the token ids), reduced and sent home; the end of
// backward frees what was kept to it.
void StepBuilder::backward_embedding(BackwardState& st, PerRank& grads_home) {
  const double h = static_cast<double>(job_.model.hidden), V = vocab_shard();
  const double R = static_cast<double>(job_.parallel.fsdp_gpus());
  tp_activations(StepColl::tp_all_gather, "embedding_all_gather_bwd", -1);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    elementwise(r, "embedding_backward", Family::ew_scatter_add, 4 * work_[r].tokens * h, -1);
  }
  auto emb_rs = collective(StepColl::dense_reduce, V * h * 4, "embedding_grad_reduce_scatter", -1);
  const auto bw_end = marker(kCompute, "backward_end", -1);
  after_all(emb_rs, bw_end);
  if (fsdp2_streams()) queue_on(emb_rs, st.rs_stream);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    if (st.pending_input[ri] != kNone)
      mem_.free(r, st.pending_input[ri], *bw_end[ri], BufferLog::kEnd);
    for (std::size_t hnd : st.reduced_free_at[ri][-1])
      mem_.free(r, hnd, *bw_end[ri], BufferLog::kEnd);
  }
  if (job_.training.cpu_offload)
    for (std::int64_t r = 0; r < ranks_; ++r) {
      auto& x = copy(r, true, "grad_to_host", -1, V * h * 4 / R);
      x.after(*emb_rs[static_cast<std::size_t>(r)]);
    }
  grads_home = marker(kD2H, "grads_on_host", -1);
  after_all(grads_home, st.prev_reduce);
}

void StepBuilder::backward(const std::vector<PerRank>& fwd_end, const PerRank& d2h_all,
                           PerRank& grads_home) {
  const std::int64_t L = job_.model.layers;
  BackwardState st;
  st.pending_input.assign(static_cast<std::size_t>(ranks_), kNone);
  st.reduced_free_at.resize(static_cast<std::size_t>(ranks_));
  st.grads.resize(static_cast<std::size_t>(ranks_));
  st.rs_stream.assign(static_cast<std::size_t>(ranks_), nullptr);
  st.expert_reduced.assign(static_cast<std::size_t>(ranks_), nullptr);
  const PerRank issue = backward_head(fwd_end[static_cast<std::size_t>(L - 1)], st);
  Fetch next = prefetch_layer(static_cast<std::int32_t>(L - 1), issue, d2h_all);
  for (auto i = static_cast<std::int32_t>(L - 1); i >= 0; --i) {
    const Fetch cur = next;
    auto begin = marker(kCompute, "layer_backward", i);
    after_all(begin, cur.dense);
    after_all(begin, cur.h2d);
    if (i > 0) next = prefetch_layer(i - 1, begin, d2h_all);
    std::vector<LayerOps> ops;
    ops.reserve(static_cast<std::size_t>(ranks_));
    for (std::int64_t r = 0; r < ranks_; ++r) ops.push_back(layer_ops(job_, cost_, work_[r], i));
    const bool recompute = !ops[0].recompute.empty();
    if (recompute) run_ops(per_rank(ops, &LayerOps::recompute), i, cur.expert);
    // The routed experts are an FSDP group of their own (TorchTitan's
    // fully_shard(transformer_block.moe.experts)): their post-backward fires once their input
    // gradient is computed, mid-layer, and reduces them then.
    bool experts_reduced = false;
    std::function<void()> experts_post_backward;
    if (fsdp2_streams() && job_.model.moe())
      experts_post_backward = [&] {
        auto at = marker(kCompute, "experts_post_backward", i);
        after_all(at, st.rs_event);
        const auto copied = reduce_copy_in(i, false, true);  // FSDP2's copy-in, then the reduction
        reduce_expert_grads(i, copied.empty() ? at : copied, st);
        experts_reduced = true;
      };
    run_ops(per_rank(ops, &LayerOps::backward), i, recompute ? PerRank{} : cur.expert,
            experts_post_backward);
    // The block's post-backward: the compute stream waits for the last reduction's event
    // (fsdp2), or for the previous layer's reductions (per_group).
    auto boundary = marker(kCompute, "post_backward", i);
    if (fsdp2_streams()) {
      after_all(boundary, st.rs_event);
    } else {
      after_all(boundary, st.prev_reduce);
      after_all(boundary, st.expert_reduced);
    }
    layer_boundary_buffers(i, cur, begin, boundary, st);
    if (i == 0 && job_.training.embedding_regather) embedding_regather(boundary);
    // FSDP2's copy-in of the layer's gradients (one task for both groups), then the reductions.
    const auto copied = reduce_copy_in(i, true, !experts_reduced);
    const PerRank& issue = copied.empty() ? boundary : copied;
    const auto rsd = dense_reduce_scatter(i, issue, st);
    if (!experts_reduced) reduce_expert_grads(i, issue, st);
    send_reduced_home(i, rsd, st);
  }
  backward_embedding(st, grads_home);
}

}  // namespace twin::model
