#include "model/step_costs.hpp"

#include <algorithm>

#include "hardware/kernel_shapes.hpp"
#include "model/accounting.hpp"

namespace twin::model {

using hardware::attention_shape;
using hardware::gemm_shape;
using hardware::grid_work;
using hardware::grouped_shape;

namespace {
constexpr const char* kNames[] = {"expert_gemm",
                                  "other_gemm",
                                  "attention",
                                  "elementwise",
                                  "optimizer_gpu",
                                  "dense_all_gather",
                                  "expert_all_gather",
                                  "dense_reduce_scatter",
                                  "expert_grad_reduce",
                                  "ep_all_to_all",
                                  "replica_all_reduce",
                                  "grad_norm_all_reduce",
                                  "optimizer_all_to_all",
                                  "copy_d2h",
                                  "copy_h2d",
                                  "cpu_optimizer",
                                  "cpu_other",
                                  "marker",
                                  "fused_kernels",
                                  "alloc_retry"};
static_assert(sizeof(kNames) / sizeof(kNames[0]) == kCategoryCount);

using hardware::Family;
using hardware::KernelClass;
using hardware::KernelWork;

KernelWork scaled(KernelWork w, double k) {
  return {w.alone_s * k, w.hbm_bytes * k, w.cls, w.shape};
}
}  // namespace

hardware::KernelWork elementwise_op(const Job& job, const hardware::KernelCost& cost, Family f,
                                    double bytes) {
  return hardware::elementwise_work(
      cost, job.training.elementwise == Elementwise::stand_in ? Family::ew_add : f, bytes);
}

const char* category_name(std::int32_t c) {
  return c >= 0 && c < kCategoryCount ? kNames[c] : "?";
}
bool is_collective(std::int32_t c) {
  return c >= kCollDenseGather && c <= kCollOptimizerAllToAll;
}
bool is_gpu_compute(std::int32_t c) {
  return (c >= kExpertGemm && c <= kOptimizerGpu) || c == kFused;
}

namespace {

// One rank's layer: the shapes and costs its ops are made from (step_costs.hpp).
struct LayerKernels {
  const Job& job;
  const hardware::KernelCost& cost;
  const RankWorkload& w;
  const AttentionKind& a;
  double T, h, k, f, e_gpu, pairs, per_expert;
  int sliding, sms;
  double flops_per_pair;
  bool sonic;
  KernelClass expert_cls;

  LayerKernels(const Job& j, const hardware::KernelCost& c, const RankWorkload& rw,
               std::int64_t layer)
      : job(j),
        cost(c),
        w(rw),
        a(j.model.attention(layer)),
        T(rw.tokens),
        h(static_cast<double>(j.model.hidden)),
        k(static_cast<double>(j.model.top_k)),
        f(static_cast<double>(j.model.expert_hidden)),
        e_gpu(static_cast<double>(j.model.experts / j.parallel.ep)),
        pairs(rw.expert_pairs[static_cast<std::size_t>(layer)]),
        per_expert(pairs / e_gpu),
        sliding(a.window_tokens > 0 ? 1 : 0),
        sms(c.sm_count()),
        flops_per_pair(2 * static_cast<double>(a.q_heads * (a.qk_head_dim + a.v_head_dim))),
        // Expert GEMMs: SonicMoE runs each projection as one persistent grouped GEMM over the
        // GPU's experts (SwiGLU fused in the epilogue); a plain implementation loops over experts
        // with one grid kernel each, plus a separate SwiGLU pass.
        sonic(j.training.moe_kernel == MoeKernel::sonicmoe),
        expert_cls(!sonic ? KernelClass::grid
                   : j.training.moe_tile_scheduler == TileScheduler::dynamic
                       ? KernelClass::persistent_dynamic
                       : KernelClass::persistent_static) {}

  // A plain MoE loops over experts, one cuBLAS GEMM each: their shape is one expert's.
  Op grouped(const char* name, double n, double kk) const {
    const double alone = sonic ? cost.grouped_gemm_s(per_expert, n, kk, e_gpu,
                                                     job.training.expert_rows == ExpertRows::equal)
                               : cost.expert_loop_s(per_expert, n, kk, e_gpu);
    const auto shape = sonic ? grouped_shape(sms, expert_cls == KernelClass::persistent_dynamic)
                             : gemm_shape(sms, per_expert, n);
    return Op{name,
              kExpertGemm,
              {alone, 0, expert_cls, shape},
              0,
              {Launch::kGroupedGemm, per_expert, n, kk, e_gpu}};
  }
  Op gemm(const char* name, double rows, double n, double kk) const {
    return Op{name, kOtherGemm, grid_work(cost.gemm_s(rows, n, kk), gemm_shape(sms, rows, n)), 0,
              gemm_launch(rows, n, kk)};
  }
  Op ew(const char* name, Family fam, double bytes) const {
    return Op{name, kElementwise, elementwise_op(job, cost, fam, bytes), 0,
              elementwise_launch(bytes)};
  }
  // Attention FLOPs count causal pairs; the weighted pairs also charge short documents (and
  // narrow windows) for the tiles they fill poorly (workload.hpp). A block-sparse kernel
  // (FlexAttention) is priced by the mask blocks it visits instead.
  Op attention(const char* name, bool backward) const {
    Launch l{Launch::kAttention};
    l.sliding = sliding == 1, l.backward = backward;
    const double scale = backward ? 2.5 : 1.0;
    const double flops = scale * flops_per_pair * w.weighted_pairs[sliding][backward ? 1 : 0];
    const double block_flops = flops_per_pair *
                               static_cast<double>(kAttentionBlock * kAttentionBlock) *
                               w.mask_blocks[sliding];
    const double alone =
        cost.block_attention()
            ? cost.block_attention_s(sim::Flops{block_flops * scale},
                                     w.query_blocks * static_cast<double>(a.q_heads), backward)
            : cost.attention_s(sim::Flops{flops}, backward);
    return Op{name, kAttention, grid_work(alone, attention_shape(sms, backward)), 0, l};
  }
  Op a2a(const char* name) const { return Op{name, kCollEpAllToAll, {}, T * k * h * 2}; }
  static Op times(Op op, const char* name, double r) {
    op.name = name;
    op.work = scaled(op.work, r);
    op.launch.repeat *= r;
    return op;
  }
  // Elementwise traffic [est]: norm + RoPE + residual ≈ 6 passes over T·h bf16; router softmax
  // and top-k over T·E fp32 (3 passes); permute and unpermute copy T·k·h bf16 (read + write).
  double norms() const { return 6 * T * h * 2; }
  double route_ew() const { return 3 * T * static_cast<double>(job.model.experts) * 4; }
  double permute() const { return 2 * T * k * h * 2; }
  // Combining the k expert outputs of each token (and, in backward, summing the gradients of a
  // token's k copies): PyTorch's index_add_ (atomic adds, measured 0.12 of a copy's bandwidth)
  // in a plain MoE; SonicMoE aggregates by gathering each token's k rows, without atomics
  // (arXiv:2512.14080) [est: a gather's measured curve].
  Family combine() const { return sonic ? Family::ew_gather : Family::ew_scatter_add; }
};

std::vector<Op> forward_ops(const LayerKernels& x, const Op& up, const Op& down) {
  std::vector<Op> fw;
  fw.reserve(12);
  fw.push_back(x.ew("attn_norm_rope", Family::ew_norm, x.norms()));
  fw.push_back(x.gemm("qkv_proj", x.T,
                      static_cast<double>(x.a.q_heads * x.a.qk_head_dim +
                                          x.a.kv_heads * (x.a.qk_head_dim + x.a.v_head_dim)),
                      x.h));
  fw.push_back(x.attention("attention_fwd", false));
  fw.push_back(x.gemm("o_proj", x.T, x.h, static_cast<double>(x.a.q_heads * x.a.v_head_dim)));
  fw.push_back(x.gemm("router", x.T, static_cast<double>(x.job.model.experts), x.h));
  fw.push_back(x.ew("route_permute", Family::ew_gather, x.route_ew() + x.permute()));
  fw.push_back(x.a2a("dispatch"));
  fw.push_back(up);
  if (!x.sonic) fw.push_back(x.ew("swiglu", Family::ew_swiglu, x.pairs * 3 * x.f * 2));
  fw.push_back(down);
  fw.push_back(x.a2a("combine"));
  fw.push_back(x.ew("unpermute", x.combine(), x.permute()));
  return fw;
}

// Recompute: full re-runs the forward; selective, TorchTitan's per-op policy (accounting.cpp),
// saves the attention outputs and every second aten.mm output, so it re-runs half of the dense
// matmul work and everything else: the expert GEMMs (not on its save list), the elementwise
// work and the EP all-to-alls (functional collectives, not saved either).
std::vector<Op> recompute_ops(Checkpointing mode, const std::vector<Op>& fw) {
  if (mode == Checkpointing::full) return fw;
  std::vector<Op> out;
  if (mode == Checkpointing::selective)
    for (const auto& op : fw) {
      if (op.category == kAttention) continue;
      out.push_back(op.category == kOtherGemm ? LayerKernels::times(op, op.name, 0.5) : op);
    }
  return out;
}

// Backward: matmuls 2× (input and weight gradients), attention with its backward efficiency,
// elementwise passes 2×; EP all-to-alls mirror the forward ones.
std::vector<Op> backward_ops(const LayerKernels& x, const std::vector<Op>& fw, const Op& up,
                             const Op& down) {
  std::vector<Op> bw;
  bw.reserve(12);
  bw.push_back(x.ew("unpermute_bwd", Family::ew_gather, 2 * x.permute()));
  bw.push_back(x.a2a("combine_bwd"));
  bw.push_back(LayerKernels::times(down, "expert_down_bwd", 2));
  if (!x.sonic) bw.push_back(x.ew("swiglu_bwd", Family::ew_swiglu_bwd, 2 * x.pairs * 3 * x.f * 2));
  bw.push_back(LayerKernels::times(up, "expert_up_bwd", 2));
  bw.push_back(x.a2a("dispatch_bwd"));
  bw.push_back(x.ew("route_bwd", x.combine(), 2 * (x.route_ew() + x.permute())));
  bw.push_back(LayerKernels::times(fw[4], "router_bwd", 2));
  bw.push_back(LayerKernels::times(fw[3], "o_proj_bwd", 2));
  bw.push_back(x.attention("attention_bwd", true));
  bw.push_back(LayerKernels::times(fw[1], "qkv_bwd", 2));
  bw.push_back(x.ew("attn_norm_rope_bwd", Family::ew_norm_bwd, 2 * x.norms()));
  return bw;
}

}  // namespace

LayerOps layer_ops(const Job& job, const hardware::KernelCost& cost, const RankWorkload& w,
                   std::int64_t layer) {
  const LayerKernels x(job, cost, w, layer);
  const Op up = x.grouped("expert_up", 2 * x.f, x.h), down = x.grouped("expert_down", x.h, x.f);
  LayerOps ops;
  ops.forward = forward_ops(x, up, down);
  ops.recompute = recompute_ops(job.training.activation_checkpointing, ops.forward);
  ops.backward = backward_ops(x, ops.forward, up, down);
  return ops;
}

LayerComm layer_comm(const Job& job, std::int64_t layer) {
  const auto& m = job.model;
  const double h = static_cast<double>(m.hidden);
  const double dense =
      attention_params(m.attention(layer), m.hidden) + h * static_cast<double>(m.experts) + 2 * h;
  LayerComm c;
  c.dense_gather = 2 * dense;
  c.dense_reduce = 4 * dense;
  c.expert_elems = static_cast<double>(m.experts / job.parallel.ep) * expert_params(m);
  // FP8: one byte per value plus one fp32 scale per block of 128 values (JOB.md §6.8).
  c.expert_gather = job.training.expert_gather_dtype == GatherDtype::fp8
                        ? c.expert_elems * (1 + 4.0 / 128)
                        : 2 * c.expert_elems;
  c.expert_reduce =
      (job.training.grad_reduce == GradReduce::bf16_all_to_all ? 2 : 4) * c.expert_elems;
  return c;
}

double newton_schulz_flops(double rows, double cols) {
  const double m = std::min(rows, cols), n = std::max(rows, cols);
  return 5 * (4 * m * m * n + 2 * m * m * m);
}

}  // namespace twin::model
