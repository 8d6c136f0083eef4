// The optimizer step on the host (JOB.md §4 CPU offload, §6.3–6.4, §6.11a). Each rank's CPU
// thread runs: gradient norm, AdamW on its AdamW parameters, Muon momentum, Newton–Schulz
// (on the CPU, or on the GPU for the matrices this rank owns whole), and the parameter update.
#include <algorithm>
#include <cmath>

#include "hardware/kernel_shapes.hpp"
#include "model/accounting.hpp"
#include "model/step_graph.hpp"

namespace twin::model {

using hardware::Family;

namespace {

// Muon's fp32 passes per parameter, as its reference code and TorchTitan's DistMuon write them
// (torchtitan/distributed/flex_shard/dist_muon.py): the momentum, m.lerp_(g, 1 − μ) (reads g, m,
// writes m), and Nesterov's input, torch.lerp(g, m, μ) (reads g, m, writes it): 24 B; the
// update, p.mul_(1 − lr·wd) then p.add_(direction, −lr) (8 + 12 B): 20 B.
constexpr double kMuonMomentumBytes = 24;
constexpr double kMuonUpdateBytes = 20;

}  // namespace

sim::Task& StepBuilder::cpu(std::int64_t rank, const char* name, double seconds_alone,
                            double threads) {
  sim::Task& t = task(rank, kCpu, name, kCpuOptimizer, -1);
  const double cores = threads > 0 ? threads : static_cast<double>(c_.profile().host.cores_per_gpu);
  ops_.cpu.push_back({task_id(t), static_cast<std::int32_t>(rank), seconds_alone * cores, cores});
  return t;
}

StepBuilder::PerRank StepBuilder::cpu_collective(hardware::CpuCollKind kind, double bytes,
                                                 const char* name, bool worker) {
  PerRank out(static_cast<std::size_t>(ranks_), nullptr);
  for (const auto& grp : pgs_[Comm::dense]) {
    auto& op = ops_.cpu_collectives.emplace_back();
    op.kind = kind;
    op.bytes = bytes;
    for (int r : grp) {
      const auto ri = static_cast<std::size_t>(r);
      sim::Task* t = nullptr;
      if (worker) {
        t = &g_.add(name, lane_of(r, kCpu), kCpuOther, -1);
        if (last_[ri][kCpu]) t->after(*last_[ri][kCpu]);
      } else {
        t = &task(r, kCpu, name, kCpuOther, -1);
      }
      op.tasks.push_back(task_id(*t));
      out[ri] = t;
    }
  }
  return out;
}

// The gradient norm and clip: on the CPU, TorchTitan's clip_grad_norm_ over the rank's fp32
// shards — the total norm (reads 4 B/param on one thread: PyTorch's CPU vector norm does not
// spread over the cores, measured, host.norm_GBps), the scalar all-reduced by gloo among each
// replica's ranks (the gradients are CPU tensors), then clip_grads_with_norm_, which multiplies
// every gradient by the clamped coefficient, even at 1 (torch/nn/utils/clip_grad.py: no branch
// on the value; 8 B/param, on every core). Or the norm accumulated during backward and
// all-reduced by NCCL at the end (JOB.md §6.11a), which "replaced" the CPU norm's ~0.43 s: the
// coefficient then scales the update [est], no pass of its own.
void StepBuilder::grad_norm(const PerRank& grads_home, double shard) {
  if (job_.training.grad_norm == GradNorm::cpu) {
    for (std::int64_t r = 0; r < ranks_; ++r)
      cpu(r, "grad_norm_cpu", cost_.cpu_norm_s(sim::bytes(4 * shard)), 1);
    cpu_collective(hardware::CpuCollKind::all_reduce, 4, "grad_norm_gloo_all_reduce", false);
    for (std::int64_t r = 0; r < ranks_; ++r)
      cpu(r, "grad_clip_cpu", cost_.cpu_stream_s(sim::bytes(8 * shard)));
    return;
  }
  auto ar = collective(StepColl::norm_all_reduce, 4, "grad_norm_all_reduce", -1);
  after_all(ar, grads_home);
  auto wait = marker(kCpu, "grad_norm_ready", -1);
  after_all(wait, ar);
}

// Newton–Schulz of the matrices rank r owns, on its GPU: the expert matrices' momentum up, the
// expert and dense runs of kernels (as PyTorch launches them: training.newton_schulz_kernels),
// the results home; the CPU thread waits for them.
void StepBuilder::newton_schulz_gpu(std::int64_t r, double owned_expert,
                                    std::span<const hardware::KernelPart> dense_parts,
                                    double dense_own, sim::Task& gathered) {
  const auto& m = job_.model;
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.expert_hidden);
  const double expert_bytes = 4 * owned_expert * h * f;
  auto& up = copy(r, false, "ns_to_gpu", -1, expert_bytes);
  up.after(*last_[static_cast<std::size_t>(r)][kCpu]);
  const bool epilogues = job_.training.newton_schulz_kernels == NsKernels::baddbmm;
  auto& ns = kernels(r, "newton_schulz_gpu", kOptimizerGpu,
                     hardware::newton_schulz_parts(cost_, h, f, owned_expert, epilogues), -1);
  ns.after(up);
  auto& nd = kernels(r, "newton_schulz_gpu_dense", kOptimizerGpu, dense_parts, -1);
  nd.after(gathered);
  auto& down = copy(r, true, "ns_to_host", -1, expert_bytes + 4 * dense_own);
  down.after(nd);
  // Momentum of the owned matrices in HBM while Newton–Schulz runs (allocated by the copy).
  mem_.free(r,
            mem_.alloc(r, "newton_schulz_momentum", kPoolOffload, expert_bytes + 4 * dense_own, up,
                       BufferLog::kStart),
            down, BufferLog::kEnd);
  auto& wait = task(r, kCpu, "ns_results_on_host", kMarker, -1);
  wait.after(down);
}

// Muon's orthogonalisation and update. Expert matrices are owned whole: each rank of an expert
// shard group owns layers × (experts/ep) × 3 / (replica_gpus/ep) of them. Dense matrices stay
// sharded and are gathered to their owner (round-robin) by an all-to-all, and scattered back
// after. Their shards are CPU tensors (the CPU offload), so the all-to-alls are gloo's, over TCP
// (JOB.md §6.4: "on CPU tensors PyTorch streams and events do nothing, so the dense all-to-alls
// blocked the main thread"): blocking, the CPU thread runs both; async (rung 4's fix), gloo's
// worker thread does, while the CPU thread sets up the experts' Newton–Schulz and then updates
// the expert matrices, the dense ones once their results are home.
void StepBuilder::muon_newton_schulz(double muon_elems) {
  const auto& m = job_.model;
  const auto& t = job_.training;
  const double R = static_cast<double>(job_.parallel.replica_gpus);
  const double h = static_cast<double>(m.hidden), f = static_cast<double>(m.expert_hidden);
  const double owned_expert = owned_expert_matrices(job_);
  const double expert_flops = owned_expert * newton_schulz_flops(h, f);
  const auto dense = muon_dense_matrices(m);
  double dense_elems = 0;
  for (const auto& d : dense) dense_elems += d.rows * d.cols;
  const bool epilogues = t.newton_schulz_kernels == NsKernels::baddbmm;
  // The fp32 shards of every dense matrix, to their owners and back.
  const bool worker = t.dense_ns_all_to_all == AllToAllMode::async;
  auto dense_all_to_all = [&](const char* name) {
    return cpu_collective(hardware::CpuCollKind::all_to_all, 4 * dense_elems / R, name, worker);
  };
  auto gather = dense_all_to_all("ns_dense_gather_all_to_all");
  for (std::int64_t r = 0; r < ranks_; ++r) {
    double dense_flops = 0, dense_own = 0;
    std::vector<hardware::KernelPart> dense_parts;
    for (const auto& d : owned_dense_matrices(dense, job_, r)) {
      dense_flops += newton_schulz_flops(d.rows, d.cols);
      dense_own += d.rows * d.cols;
      const auto p = hardware::newton_schulz_parts(cost_, d.rows, d.cols, 1, epilogues);
      dense_parts.insert(dense_parts.end(), p.begin(), p.end());
    }
    if (t.newton_schulz == Device::gpu)
      newton_schulz_gpu(r, owned_expert, dense_parts, dense_own,
                        *gather[static_cast<std::size_t>(r)]);
    else
      cpu(r, "newton_schulz_cpu", cost_.cpu_matmul_s(sim::Flops{expert_flops + dense_flops}))
          .after(*gather[static_cast<std::size_t>(r)]);
  }
  auto scatter = dense_all_to_all("ns_dense_scatter_all_to_all");
  const double dense_shard = dense_elems / R;
  for (std::int64_t r = 0; r < ranks_; ++r) {
    cpu(r, "muon_update",
        cost_.cpu_stream_s(sim::bytes(kMuonUpdateBytes * (muon_elems - dense_shard))));
    cpu(r, "muon_update_dense", cost_.cpu_stream_s(sim::bytes(kMuonUpdateBytes * dense_shard)))
        .after(*scatter[static_cast<std::size_t>(r)]);
  }
}

// Without CPU offload the sharded states stay in HBM and PyTorch steps them on the GPU, as
// TorchTitan does by default: the gradient norm over the rank's fp32 shards (torch's foreach
// norm reads 4 B/param) with an all-reduce of the scalar, the clip (clip_grads_with_norm_
// multiplies every gradient by the clamped coefficient: 8 B/param), and a fused AdamW (reads p,
// g, m, v, writes p, m, v: 28 B/param) — bandwidth-bound passes [est: each at a vectorized
// elementwise kernel's measured bandwidth].
StepBuilder::PerRank StepBuilder::gpu_optimizer(const PerRank& grads_home, double shard) {
  auto pass = [&](std::int64_t r, const char* name, double bytes) -> sim::Task& {
    auto& k = kernel(r, name, kOptimizerGpu,
                     hardware::elementwise_work(cost_, Family::ew_add, bytes), -1);
    note(r, k, {elementwise_launch(bytes)});
    return k;
  };
  for (std::int64_t r = 0; r < ranks_; ++r)
    pass(r, "grad_norm_gpu", 4 * shard).after(*grads_home[static_cast<std::size_t>(r)]);
  auto ar = collective(StepColl::norm_all_reduce, 4, "grad_norm_all_reduce", -1);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    ar[ri]->after(*last_[ri][kCompute]);
    pass(r, "clip_grads", 8 * shard).after(*ar[ri]);
  }
  auto start = marker(kCompute, "optimizer_step_start", -1);
  for (std::int64_t r = 0; r < ranks_; ++r) pass(r, "adamw_gpu", 28 * shard);
  return start;
}

// torchao's precompute_float8_dynamic_scale_for_fsdp after the optimizer step: one pass over the
// rank's shards of the linear weights (fp32, 4 B/param) for their amaxes, and one all-reduce of
// all of them over the shard group, which the compute stream awaits.
void StepBuilder::float8_precompute(double shard) {
  const auto& t = job_.training;
  if (!t.float8 || !t.float8_all_gather || !t.float8_precompute_scale) return;
  for (std::int64_t r = 0; r < ranks_; ++r) {
    auto& k = kernel(r, "float8_precompute_amax", kOptimizerGpu,
                     hardware::elementwise_work(cost_, Family::ew_add, 4 * shard), -1);
    note(r, k, {elementwise_launch(4 * shard)});
  }
  auto ar = collective(StepColl::float8_amax,
                       4.0 * static_cast<double>(linear_weights_per_layer() * job_.model.layers),
                       "float8_amax_all_reduce", -1);
  for (std::int64_t r = 0; r < ranks_; ++r) {
    const auto ri = static_cast<std::size_t>(r);
    ar[ri]->after(*last_[ri][kCompute]);
  }
  auto ready = marker(kCompute, "float8_scales_ready", -1);
  after_all(ready, ar);
}

void StepBuilder::build_optimizer(const PerRank& grads_home, StepMarks& marks) {
  const auto& t = job_.training;
  const auto params = count_params(job_.model);
  const double R = static_cast<double>(job_.parallel.replica_gpus);
  const double shard = params.total() / R;
  if (!t.cpu_offload) {
    marks.optimizer_step_start = gpu_optimizer(grads_home, shard);
    float8_precompute(shard);
    marks.optimizer_end = marker(kCpu, "optimizer_end", -1);
    for (std::int64_t r = 0; r < ranks_; ++r)
      marks.optimizer_end[static_cast<std::size_t>(r)]->after(
          *last_[static_cast<std::size_t>(r)][kCompute]);
    return;
  }
  const bool muon = t.optimizer == Optimizer::muon;
  const double adam =
      muon ? (params.embedding + params.head + params.router + params.norms) / R : shard;
  const double muon_elems = shard - adam;
  auto start = marker(kCpu, "optimizer_start", -1);
  after_all(start, grads_home);
  grad_norm(grads_home, shard);
  marks.optimizer_step_start = marker(kCpu, "optimizer_step_start", -1);
  // AdamW reads p, g, m, v and writes p, m, v (7 fp32); Muon's momentum (kMuonMomentumBytes).
  for (std::int64_t r = 0; r < ranks_; ++r) {
    cpu(r, "adamw", cost_.cpu_stream_s(sim::bytes(28 * adam)));
    if (muon)
      cpu(r, "muon_momentum", cost_.cpu_stream_s(sim::bytes(kMuonMomentumBytes * muon_elems)));
  }
  if (muon) muon_newton_schulz(muon_elems);
  marks.optimizer_end = marker(kCpu, "optimizer_end", -1);
}

}  // namespace twin::model
