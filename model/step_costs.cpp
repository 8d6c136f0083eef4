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
                                  "tp_all_gather",
                                  "tp_reduce_scatter",
                                  "float8_amax_all_reduce",
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
  return c >= kCollDenseGather && c <= kCollFloat8Amax;
}
bool is_layer_collective(std::int32_t c) {
  return c == kCollEpAllToAll || c == kCollTpAllGather || c == kCollTpReduceScatter;
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
  double T, h, k, f, F, tp, e_gpu, pairs, per_expert;
  double copies;  // copies of a token the EP exchange sends (workload.hpp ep_copies_per_token)
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
        F(static_cast<double>(j.model.ffn_hidden)),
        tp(static_cast<double>(j.parallel.tp)),
        e_gpu(static_cast<double>(j.model.experts / j.parallel.ep)),
        pairs(j.model.moe() ? rw.expert_pairs[static_cast<std::size_t>(layer)] : 0),
        per_expert(j.model.moe() ? pairs / e_gpu : 0),
        copies(j.model.moe() ? ep_copies_per_token(j) : 0),
        sliding(a.window_tokens > 0 ? 1 : 0),
        sms(c.sm_count()),
        // A tensor-parallel rank runs 1/tp of the heads.
        flops_per_pair(2 * static_cast<double>(a.q_heads * (a.qk_head_dim + a.v_head_dim)) / tp),
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
                             : gemm_shape(sms, per_expert, n, kk);
    return Op{name,
              kExpertGemm,
              {alone, 0, expert_cls, shape},
              0,
              {Launch::kGroupedGemm, per_expert, n, kk, e_gpu}};
  }
  // The backward of grouped(name, n, kk) as one op: the input gradient (rows × kk at depth n:
  // the forward's tile model on its own shape) and the weight gradient (a kk × n grid at depth
  // rows, KernelCost::grouped_gemm_weight_grad_s; a plain loop: one cuBLAS GEMM per expert of
  // each). Measured against torch._grouped_mm (reports/calibration/grouped-gemm/, "The
  // backward"): two more forward GEMMs, the pricing until 2026-12-07 (training.expert_backward =
  // forward_twice), were 8–12% dear for the down projection at the ladder's rows and up to 20%
  // cheap below 700 rows per expert.
  Op grouped_backward(const char* name, double n, double kk) const {
    Op op = grouped(name, n, kk);
    if (job.training.expert_backward == ExpertBackward::forward_twice) return times(op, name, 2);
    op.work.alone_s = sonic ? cost.grouped_gemm_s(per_expert, kk, n, e_gpu,
                                                  job.training.expert_rows == ExpertRows::equal) +
                                  cost.grouped_gemm_weight_grad_s(per_expert, n, kk, e_gpu)
                            : cost.expert_loop_s(per_expert, kk, n, e_gpu) +
                                  e_gpu * cost.gemm_s(kk, n, per_expert);
    op.launch.backward = true;
    return op;
  }
  Op gemm(const char* name, double rows, double n, double kk) const {
    return Op{name, kOtherGemm, grid_work(cost.gemm_s(rows, n, kk), gemm_shape(sms, rows, n, kk)),
              0, gemm_launch(rows, n, kk)};
  }
  // A dense linear layer: in FP8 under training.float8 (torchao's Float8Linear: its casts are
  // float8_casts()).
  Op linear(const char* name, double rows, double n, double kk) const {
    if (!job.training.float8) return gemm(name, rows, n, kk);
    return Op{name, kOtherGemm,
              grid_work(cost.gemm_s(rows, n, kk, true), hardware::gemm_fp8_shape(sms, rows, n)), 0,
              gemm_launch(rows, n, kk)};
  }
  // The layer's elementwise work; eager PyTorch (training.compile false) runs it as more,
  // unfused kernels that move more bytes (efficiency.eager_elementwise_factor, measured).
  Op ew(const char* name, Family fam, double bytes) const {
    const double b = job.training.compile ? bytes : bytes * cost.eager_elementwise_factor();
    return Op{name, kElementwise, elementwise_op(job, cost, fam, b), 0, elementwise_launch(b)};
  }
  // Float8Linear's dynamic scaling of linear layers of input width k and output width n (pairs
  // {k, n}): amax and cast of each GEMM operand, in forward (input, weight) and backward (output
  // gradient, and the transposed operands of the weight gradient), a measured number of bytes per
  // element of T·(k + n) + n·k [meas: efficiency.float8_cast_bytes_*]; a third in forward, the rest
  // in backward [est: one GEMM of three]. With FP8 all-gather the weights arrive cast.
  Op float8_casts(const char* name, std::initializer_list<std::pair<double, double>> kn,
                  bool backward) const {
    const auto& t = job.training;
    double elems = 0;
    for (const auto& [kk, n] : kn)
      elems += T * (kk + n) + (t.float8_all_gather && !backward ? 0.0 : n * kk);
    const double b = (backward ? 2.0 / 3 : 1.0 / 3) * elems * cost.float8_cast_bytes(t.compile);
    return Op{name, kElementwise, elementwise_op(job, cost, Family::ew_fp8_quant, b), 0,
              elementwise_launch(b)};
  }
  // Tensor parallelism's collectives of the layer's activations (T·h gathered or reduce-scattered
  // over the TP group), on the compute stream's path: bf16, or FP8 where torchao's float8 TP
  // plan casts the input before gathering it (Float8ColwiseParallel, forward only).
  Op tp_coll(const char* name, Category c, bool fp8 = false) const {
    return Op{name, c, {}, T * h * (fp8 ? 1.0 : kBf16)};
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
  Op a2a(const char* name) const { return Op{name, kCollEpAllToAll, {}, T * copies * h * 2}; }
  // Tensor-parallel linear widths: this rank's share of the projections and of the FFN.
  double qkv_out() const {
    return static_cast<double>(a.q_heads * a.qk_head_dim +
                               a.kv_heads * (a.qk_head_dim + a.v_head_dim)) /
           tp;
  }
  double o_in() const { return static_cast<double>(a.q_heads * a.v_head_dim) / tp; }
  double ffn() const { return F / tp; }
  static Op times(Op op, const char* name, double r) {
    op.name = name;
    op.work = scaled(op.work, r);
    op.launch.repeat *= r;
    return op;
  }
  // Elementwise traffic [est]: norm + RoPE + residual ≈ 6 passes over T·h bf16 (sequence-
  // sharded under tensor parallelism); router softmax and top-k over T·E fp32 (3 passes);
  // permute and unpermute read the T·copies rows the EP exchange moves and write T·k (one per
  // pair), or the reverse: 2·T·k·h bf16 when a token is sent per pair (training.ep_dispatch).
  double norms() const { return 6 * T * h * 2 / tp; }
  double route_ew() const { return 3 * T * static_cast<double>(job.model.experts) * 4; }
  double permute() const { return T * (copies + k) * h * 2; }
  // Combining the k expert outputs of each token (and, in backward, summing the gradients of a
  // token's k copies): PyTorch's index_add_ (atomic adds, measured 0.12 of a copy's bandwidth)
  // in a plain MoE; SonicMoE aggregates by gathering each token's k rows, without atomics
  // (arXiv:2512.14080) [est: a gather's measured curve].
  Family combine() const { return sonic ? Family::ew_gather : Family::ew_scatter_add; }
};

// Attention: the pre-attention norm with RoPE (and the residual adds and the FFN norm: norms()),
// the projections and the attention kernel.
// Under tensor parallelism (sequence-parallel) the normed input is all-gathered before the
// projections and o_proj's partial sums are reduce-scattered after them.
std::vector<Op> attention_forward(const LayerKernels& x) {
  const bool tp = x.tp > 1, fp8 = x.job.training.float8;
  std::vector<Op> fw{x.ew("attn_norm_rope", Family::ew_norm, x.norms())};
  if (fp8)
    fw.push_back(x.float8_casts("attn_fp8_casts", {{x.h, x.qkv_out()}, {x.o_in(), x.h}}, false));
  if (tp) fw.push_back(x.tp_coll("attn_all_gather", kCollTpAllGather, fp8));
  fw.push_back(x.linear("qkv_proj", x.T, x.qkv_out(), x.h));
  fw.push_back(x.attention("attention_fwd", false));
  fw.push_back(x.linear("o_proj", x.T, x.h, x.o_in()));
  if (tp) fw.push_back(x.tp_coll("attn_reduce_scatter", kCollTpReduceScatter));
  return fw;
}

// Routed experts: router, permutation, EP dispatch, expert GEMMs, combine.
std::vector<Op> moe_forward(const LayerKernels& x, const Op& up, const Op& down) {
  std::vector<Op> fw;
  fw.reserve(8);
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

// The dense SwiGLU block (Llama): gate and up as one GEMM, the SwiGLU pass (reads gate and up,
// writes their product), down.
std::vector<Op> ffn_forward(const LayerKernels& x) {
  const bool tp = x.tp > 1;
  std::vector<Op> fw;
  const bool fp8 = x.job.training.float8;
  if (fp8)
    fw.push_back(x.float8_casts("ffn_fp8_casts", {{x.h, 2 * x.ffn()}, {x.ffn(), x.h}}, false));
  if (tp) fw.push_back(x.tp_coll("ffn_all_gather", kCollTpAllGather, fp8));
  fw.push_back(x.linear("ffn_gate_up", x.T, 2 * x.ffn(), x.h));
  fw.push_back(x.ew("ffn_swiglu", Family::ew_swiglu, x.T * 3 * x.ffn() * 2));
  fw.push_back(x.linear("ffn_down", x.T, x.h, x.ffn()));
  if (tp) fw.push_back(x.tp_coll("ffn_reduce_scatter", kCollTpReduceScatter));
  return fw;
}

// Recompute: full re-runs the forward; selective, TorchTitan's per-op policy (accounting.cpp),
// saves the attention outputs, every second aten.mm output and the reduce-scatters' outputs, so
// it re-runs half of the dense matmul work and everything else: the expert GEMMs (not on its
// save list), the elementwise work, the EP all-to-alls and TP all-gathers (functional
// collectives, not saved either).
std::vector<Op> recompute_ops(Checkpointing mode, const std::vector<Op>& fw) {
  if (mode == Checkpointing::full) return fw;
  std::vector<Op> out;
  if (mode == Checkpointing::selective)
    for (const auto& op : fw) {
      if (op.category == kAttention || op.category == kCollTpReduceScatter) continue;
      out.push_back(op.category == kOtherGemm ? LayerKernels::times(op, op.name, 0.5) : op);
    }
  return out;
}

// Backward: matmuls 2× (input and weight gradients; the expert GEMMs' each on its own shape,
// grouped_backward), attention with its backward efficiency, elementwise passes 2×; EP
// all-to-alls mirror the forward ones. Blocks run in reverse order.
void moe_backward(const LayerKernels& x, const Op& router, std::vector<Op>& bw) {
  bw.push_back(x.ew("unpermute_bwd", Family::ew_gather, 2 * x.permute()));
  bw.push_back(x.a2a("combine_bwd"));
  bw.push_back(x.grouped_backward("expert_down_bwd", x.h, x.f));
  if (!x.sonic) bw.push_back(x.ew("swiglu_bwd", Family::ew_swiglu_bwd, 2 * x.pairs * 3 * x.f * 2));
  bw.push_back(x.grouped_backward("expert_up_bwd", 2 * x.f, x.h));
  bw.push_back(x.a2a("dispatch_bwd"));
  bw.push_back(x.ew("route_bwd", x.combine(), 2 * (x.route_ew() + x.permute())));
  bw.push_back(LayerKernels::times(router, "router_bwd", 2));
}

// Under tensor parallelism a forward all-gather's gradient is a reduce-scatter and a forward
// reduce-scatter's an all-gather.
void ffn_backward(const LayerKernels& x, std::vector<Op>& bw) {
  const bool tp = x.tp > 1;
  if (x.job.training.float8)
    bw.push_back(x.float8_casts("ffn_fp8_casts_bwd", {{x.h, 2 * x.ffn()}, {x.ffn(), x.h}}, true));
  if (tp) bw.push_back(x.tp_coll("ffn_all_gather_bwd", kCollTpAllGather));
  bw.push_back(LayerKernels::times(x.linear("ffn_down", x.T, x.h, x.ffn()), "ffn_down_bwd", 2));
  bw.push_back(x.ew("ffn_swiglu_bwd", Family::ew_swiglu_bwd, 2 * x.T * 3 * x.ffn() * 2));
  bw.push_back(
      LayerKernels::times(x.linear("ffn_gate_up", x.T, 2 * x.ffn(), x.h), "ffn_gate_up_bwd", 2));
  if (tp) bw.push_back(x.tp_coll("ffn_reduce_scatter_bwd", kCollTpReduceScatter));
}

void attention_backward(const LayerKernels& x, std::vector<Op>& bw) {
  const bool tp = x.tp > 1;
  if (x.job.training.float8)
    bw.push_back(x.float8_casts("attn_fp8_casts_bwd", {{x.h, x.qkv_out()}, {x.o_in(), x.h}}, true));
  if (tp) bw.push_back(x.tp_coll("attn_all_gather_bwd", kCollTpAllGather));
  bw.push_back(LayerKernels::times(x.linear("o_proj", x.T, x.h, x.o_in()), "o_proj_bwd", 2));
  bw.push_back(x.attention("attention_bwd", true));
  bw.push_back(LayerKernels::times(x.linear("qkv_proj", x.T, x.qkv_out(), x.h), "qkv_bwd", 2));
  if (tp) bw.push_back(x.tp_coll("attn_reduce_scatter_bwd", kCollTpReduceScatter));
  bw.push_back(x.ew("attn_norm_rope_bwd", Family::ew_norm_bwd, 2 * x.norms()));
}

}  // namespace

LayerOps layer_ops(const Job& job, const hardware::KernelCost& cost, const RankWorkload& w,
                   std::int64_t layer, bool with_backward) {
  const LayerKernels x(job, cost, w, layer);
  const auto attn = attention_forward(x);
  const auto ffn = x.F > 0 ? ffn_forward(x) : std::vector<Op>{};
  LayerOps ops;
  // Room for the MoE's ops and the copy-out too: one allocation.
  ops.forward.reserve(attn.size() + ffn.size() + 16);
  ops.forward = attn;
  ops.forward.insert(ops.forward.end(), ffn.begin(), ffn.end());
  if (with_backward) ops.backward.reserve(16);
  if (job.model.moe()) {
    const Op up = x.grouped("expert_up", 2 * x.f, x.h), down = x.grouped("expert_down", x.h, x.f);
    const auto moe = moe_forward(x, up, down);
    ops.forward.insert(ops.forward.end(), moe.begin(), moe.end());
    if (with_backward) moe_backward(x, moe[0], ops.backward);
  }
  if (with_backward) {
    if (x.F > 0) ffn_backward(x, ops.backward);
    attention_backward(x, ops.backward);
    ops.recompute = recompute_ops(job.training.activation_checkpointing, ops.forward);
  }
  // FSDP2's copy-out of the gathered dense weights (step_graph.hpp reduce_copy_in) before the
  // forward and before backward's first pass: a grid kernel, so it runs fused with the ops after.
  if (job.training.fsdp_copies) {
    const double b = 2 * layer_comm(job, layer).dense_gather;
    const Op out{"dense_copy_out", kElementwise, elementwise_op(job, cost, Family::ew_add, b), 0,
                 elementwise_launch(b)};
    ops.forward.insert(ops.forward.begin(), out);
    auto& first = ops.recompute.empty() ? ops.backward : ops.recompute;
    if (with_backward) first.insert(first.begin(), out);
  }
  return ops;
}

LayerComm layer_comm(const Job& job, std::int64_t layer) {
  const auto& m = job.model;
  const double h = static_cast<double>(m.hidden);
  // Under tensor parallelism each rank's FSDP group gathers its TP shard of the layer.
  const double tp = static_cast<double>(job.parallel.tp);
  const double linears = attention_params(m.attention(layer), m.hidden) + ffn_params(m);
  const double dense = (linears + h * static_cast<double>(m.experts) + 2 * h) / tp;
  LayerComm c;
  // torchao's FP8 all-gather (training.float8_all_gather): the linear weights travel as FP8
  // (one byte, one fp32 scale per tensor), the rest in bf16.
  c.dense_gather =
      job.training.float8 && job.training.float8_all_gather ? 2 * dense - linears / tp : 2 * dense;
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
