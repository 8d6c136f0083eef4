// Forward and backward passes of the step graph (the FSDP2 rules are in step_graph.hpp).
#include "model/accounting.hpp"
#include "model/step_graph.hpp"

namespace twin::model {

using hardware::CollKind;

namespace {
std::vector<std::vector<Op>> per_rank(const std::vector<LayerOps>& ops, std::vector<Op> LayerOps::*part) {
  std::vector<std::vector<Op>> out;
  for (const auto& o : ops) out.push_back(o.*part);
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
  for (std::int64_t r = 0; r < ranks_; ++r)
    kernel(r, "embedding", kElementwise, {cost_.elementwise_s(4 * work_[r].tokens * h)}, -1)
        .after(*emb[static_cast<std::size_t>(r)]);
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
    for (std::int64_t r = 0; r < ranks_; ++r) ops.push_back(layer_ops(job_, cost_, work_[r], i));
    run_ops(per_rank(ops, &LayerOps::forward), i, age);
    end[i] = marker(kCompute, "layer_forward_end", i);
    if (i < off)
      for (std::int64_t r = 0; r < ranks_; ++r) {
        auto& t = task(r, kD2H, "offload_activation", kCopyD2H, i);
        hardware::run_copy(t, c_, static_cast<int>(r), hardware::CopyDir::d2h, work_[r].tokens * h * 2);
        t.after(*end[i][static_cast<std::size_t>(r)]);
        d2h_all[static_cast<std::size_t>(r * L + i)] = &t;
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
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const double T = work_[r].tokens;
    const auto fwd = cost_.gemm_s(T, V, h);
    kernel(r, "head_forward", kOtherGemm, {fwd}, L).after(*head_ag[static_cast<std::size_t>(r)]);
    kernel(r, "loss", kElementwise, {cost_.elementwise_s(3 * T * V * 4)}, L);
    kernel(r, "head_backward", kOtherGemm, {2 * fwd}, L);
  }
  const PerRank issue = marker(kCompute, "backward_start", static_cast<std::int32_t>(L));
  PerRank prev_reduce = collective(dense_pg_, kDensePg, CollKind::reduce_scatter, V * h * 4,
                                   ctas.dense, "head_grad_reduce_scatter", kCollDenseReduce,
                                   static_cast<std::int32_t>(L));
  after_all(prev_reduce, issue);
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
        auto& x = task(r, kH2D, "reload_activation", kCopyH2D, i);
        hardware::run_copy(x, c_, static_cast<int>(r), hardware::CopyDir::h2d, work_[r].tokens * h * 2);
        x.after(*d2h_all[static_cast<std::size_t>(r * L + i)]);
        x.after(*issue_at[static_cast<std::size_t>(r)]);
        f.h2d[static_cast<std::size_t>(r)] = &x;
      }
    f.dense = t.dense_reshard == "node_local"
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

  for (std::int32_t i = static_cast<std::int32_t>(L - 1); i >= 0; --i) {
    const auto comm = layer_comm(job_, i);
    const Fetch cur = next;
    auto begin = marker(kCompute, "layer_backward", i);
    after_all(begin, cur.dense);
    after_all(begin, cur.h2d);
    if (i > 0) next = prefetch(i - 1, begin);
    std::vector<LayerOps> ops;
    for (std::int64_t r = 0; r < ranks_; ++r) ops.push_back(layer_ops(job_, cost_, work_[r], i));
    if (!ops[0].recompute.empty()) run_ops(per_rank(ops, &LayerOps::recompute), i, cur.expert);
    run_ops(per_rank(ops, &LayerOps::backward), i, ops[0].recompute.empty() ? cur.expert : PerRank{});
    // Post-backward: the compute stream waits for the previous layer's reductions.
    auto boundary = marker(kCompute, "post_backward", i);
    after_all(boundary, prev_reduce);
    after_all(boundary, prev_reduce_e);
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
    const bool a2a = t.grad_reduce == "bf16_all_to_all";
    auto rse = a2a ? collective(expert_pg_, kExpertPg, CollKind::all_to_all, comm.expert_reduce,
                                ctas.grad_all_to_all, "expert_grad_all_to_all", kCollExpertReduce, i)
                   : collective(expert_pg_, kExpertPg, CollKind::reduce_scatter, comm.expert_reduce,
                                ctas.expert_reduce_scatter, "expert_grad_reduce_scatter",
                                kCollExpertReduce, i);
    after_all(rsd, boundary);
    after_all(rse, boundary);
    if (a2a)  // the owner converts the received bf16 slices to fp32 and sums them
      for (std::int64_t r = 0; r < ranks_; ++r) {
        const double recv = comm.expert_reduce * (expert_pg - 1) / expert_pg;
        auto& s = kernel(r, "grad_fp32_sum", kElementwise,
                         {cost_.elementwise_s(recv + 2 * recv / (expert_pg) )}, i, kSideStream);
        s.after(*rse[static_cast<std::size_t>(r)]);
        rse[static_cast<std::size_t>(r)] = &s;
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
      auto& x = task(r, kD2H, "grad_to_host", kCopyD2H, i);
      hardware::run_copy(x, c_, static_cast<int>(r), hardware::CopyDir::d2h, shard_bytes);
      x.after(*rsd[static_cast<std::size_t>(r)]);
      x.after(*reduced[static_cast<std::size_t>(r)]);
    }
    prev_reduce = rsd;
    prev_reduce_e = rse;
  }
  // Embedding gradient (a scatter-add from the token ids), reduced and sent home.
  for (std::int64_t r = 0; r < ranks_; ++r)
    kernel(r, "embedding_backward", kElementwise, {cost_.elementwise_s(4 * work_[r].tokens * h)}, -1);
  auto emb_rs = collective(dense_pg_, kDensePg, CollKind::reduce_scatter, V * h * 4, ctas.dense,
                           "embedding_grad_reduce_scatter", kCollDenseReduce, -1);
  after_all(emb_rs, marker(kCompute, "backward_end", -1));
  for (std::int64_t r = 0; r < ranks_; ++r) {
    auto& x = task(r, kD2H, "grad_to_host", kCopyD2H, -1);
    hardware::run_copy(x, c_, static_cast<int>(r), hardware::CopyDir::d2h, V * h * 4 / R);
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
  return marks;
}

}  // namespace twin::model
