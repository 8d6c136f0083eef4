#include "model/host_memory.hpp"

#include <algorithm>
#include <cmath>
#include <utility>

#include "model/accounting.hpp"
#include "sim/units.hpp"

namespace twin::model {

namespace {
using sim::kGiB;
using sim::kMiB;

// Shard elements of every parameter tensor on one rank. FSDP2 shards dim 0 over the group
// (chunks of ⌈rows/n⌉ rows); expert tensors [experts/ep, f, h] are sharded over the ranks that
// hold the block, so one rank holds whole experts' matrices.
std::vector<double> shard_tensors(const Job& job) {
  const auto& m = job.model;
  const double R = static_cast<double>(job.parallel.replica_gpus),
               h = static_cast<double>(m.hidden);
  const double e_gpu = static_cast<double>(m.experts / job.parallel.ep),
               f = static_cast<double>(m.expert_hidden);
  const double expert_pg = R / static_cast<double>(job.parallel.ep);
  auto dim0 = [&](double rows, double cols) { return std::ceil(rows / R) * cols; };
  std::vector<double> t;
  t.push_back(dim0(static_cast<double>(m.vocab), h));  // embedding
  if (!m.tied_embedding) t.push_back(dim0(static_cast<double>(m.vocab), h));
  t.push_back(dim0(h, 1));  // final norm
  for (std::int64_t l = 0; l < m.layers; ++l) {
    const auto& a = m.attention(l);
    t.push_back(dim0(static_cast<double>(a.q_heads * a.qk_head_dim), h));
    t.push_back(dim0(static_cast<double>(a.kv_heads * a.qk_head_dim), h));
    t.push_back(dim0(static_cast<double>(a.kv_heads * a.v_head_dim), h));
    t.push_back(dim0(h, static_cast<double>(a.q_heads * a.v_head_dim)));
    if (m.moe()) t.push_back(dim0(static_cast<double>(m.experts), h));  // router
    t.push_back(dim0(h, 1));
    t.push_back(dim0(h, 1));
    if (m.moe())
      for (int k = 0; k < 3; ++k)
        t.push_back(std::ceil(e_gpu / expert_pg) * f * h);  // gate, up, down
    if (m.ffn_hidden > 0) {  // dense SwiGLU: gate and up [F, h], down [h, F]
      const double F = static_cast<double>(m.ffn_hidden);
      t.push_back(dim0(F, h)), t.push_back(dim0(F, h)), t.push_back(dim0(h, F));
    }
  }
  return t;
}

// Newton–Schulz's results on the host (JOB.md §6.4, step_optimizer.cpp), on the rank that needs
// most: every result is home before the CPU thread updates (the optimizer's one wait), so all are
// live at once. As new tensors, `.to("cpu", non_blocking=True)`: PyTorch allocates the destination
// of a non-blocking copy from an accelerator to the CPU pinned (aten/src/ATen/native/
// TensorConversions.cpp, `_to_copy`: pin_out), one block of the pinned host allocator per matrix,
// which keeps it cached for the next step. Exact bytes and the allocator's bytes.
std::pair<double, double> ns_results_pinned(const Job& job) {
  const auto& t = job.training;
  if (!t.cpu_offload || t.optimizer != Optimizer::muon || t.newton_schulz != Device::gpu ||
      t.ns_results != NsResults::pinned_copies)
    return {0, 0};
  const auto& m = job.model;
  const double expert = kFp32 * static_cast<double>(m.hidden * m.expert_hidden);
  const double experts = std::ceil(owned_expert_matrices(job));
  double exact = experts * expert,
         pinned = experts * pinned_size(expert, t.pinned_round_threshold_MiB);
  const auto dense = muon_dense_matrices(m);
  const auto owners =
      std::min<std::int64_t>(job.parallel.replica_gpus, static_cast<std::int64_t>(dense.size()));
  double dense_exact = 0, dense_pinned = 0;  // the rank whose dense matrices take most
  for (std::int64_t r = 0; r < owners; ++r) {
    double e = 0, p = 0;
    for (const auto& d : owned_dense_matrices(dense, job, r)) {
      e += kFp32 * d.rows * d.cols;
      p += pinned_size(kFp32 * d.rows * d.cols, t.pinned_round_threshold_MiB);
    }
    if (p > dense_pinned) dense_exact = e, dense_pinned = p;
  }
  return {exact + dense_exact, pinned + dense_pinned};
}

}  // namespace

double pinned_size(double bytes, double threshold_MiB) {
  if (bytes <= 0) return 0;
  if (threshold_MiB > 0 && bytes > threshold_MiB * kMiB) return bytes;
  return std::exp2(std::ceil(std::log2(bytes)));
}

HostMemory host_memory(const Job& job, const hardware::Profile& p) {
  const auto& t = job.training;
  const auto mem = rank_memory(job);
  HostMemory out;
  auto add = [&](const char* name, double bytes) {
    if (bytes <= 0) return;
    out.parts.push_back({name, bytes});
    out.total_bytes += bytes;
  };
  add("process_baseline", p.host.process_baseline_GiB * kGiB);
  if (t.cpu_offload) {
    // FSDP2's CPU offload pins every fp32 parameter shard and its gradient, one pinned
    // allocation each (JOB.md §7).
    double exact = 0, pinned = 0;  // one copy (params); the gradients are the same again
    for (double e : shard_tensors(job)) {
      exact += kFp32 * e;
      pinned += pinned_size(kFp32 * e, t.pinned_round_threshold_MiB);
    }
    add("params_fp32_pinned", exact);
    add("grads_fp32_pinned", exact);
    const auto [ns_exact, ns_pinned] = ns_results_pinned(job);
    add("ns_results_pinned", ns_exact);
    out.pinned_rounding_bytes = 2 * (pinned - exact) + (ns_pinned - ns_exact);
    add("pinned_rounding", out.pinned_rounding_bytes);
    add(t.optimizer == Optimizer::muon ? "optimizer_states_muon_adamw" : "optimizer_states_adamw",
        mem.optimizer_states);
  }
  add("activation_offload_arena", mem.activations_host);
  if (t.checkpoint_replicated_qkv) {
    double qkv = 0;  // the full fused QKV weight of every layer, fp32
    for (std::int64_t l = 0; l < job.model.layers; ++l) {
      const auto& a = job.model.attention(l);
      qkv += static_cast<double>(job.model.hidden * (a.q_heads * a.qk_head_dim +
                                                     a.kv_heads * (a.qk_head_dim + a.v_head_dim)));
    }
    add("checkpoint_replicated_qkv", kFp32 * qkv);
  }
  add("thp_leak", t.thp_leak_GiB * kGiB);
  out.capacity_bytes = p.host.memory_per_gpu_GiB * kGiB;
  // Pages of an arena first written by GPU copies go to HBM once Grace is full (first touch):
  // the typical socket's free room is the capacity less the median unattributed memory.
  if (!t.offload_arena_prefault) {
    const double room = out.capacity_bytes - p.host.unattributed_median_GiB * kGiB;
    out.hbm_spill_bytes = std::clamp(out.total_bytes - room, 0.0, mem.activations_host);
    out.total_bytes -= out.hbm_spill_bytes;
  }
  out.headroom_bytes = out.capacity_bytes - out.total_bytes;
  return out;
}

double socket_short_probability(double headroom_GiB, const hardware::HostSpec& h) {
  if (headroom_GiB <= 0) return 1;
  if (h.unattributed_median_GiB <= 0) return 0;
  const double sigma = std::log(std::max(h.unattributed_p90_GiB, h.unattributed_median_GiB) /
                                h.unattributed_median_GiB) /
                       1.2816;
  if (sigma <= 0)
    return headroom_GiB < h.unattributed_median_GiB ? h.unattributed_kept_fraction : 0;
  const double z = (std::log(headroom_GiB) - std::log(h.unattributed_median_GiB)) / sigma;
  return h.unattributed_kept_fraction * 0.5 * std::erfc(z / std::sqrt(2.0));
}

double host_oom_probability(double headroom_GiB, double sockets, const hardware::HostSpec& h) {
  const double p = socket_short_probability(headroom_GiB, h);
  return 1 - std::pow(1 - p, sockets);  // -expm1(sockets·log1p(−p)) for tiny p
}

}  // namespace twin::model
