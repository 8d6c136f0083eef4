// The ops of one layer on one rank, with their kernel works (hardware/kernel_cost.hpp), in
// compute-stream order; and the sizes of the layer's collectives. JOB.md §5 lists the ops;
// elementwise byte counts are estimates, stated next to each op in step_costs.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"
#include "model/comm_plan.hpp"
#include "model/job.hpp"
#include "model/workload.hpp"

namespace twin::model {

// Task categories of the step (reports name them through category_name()).
enum Category : std::int32_t {
  kExpertGemm,
  kOtherGemm,
  kAttention,
  kElementwise,
  kOptimizerGpu,
  kCollDenseGather,
  kCollExpertGather,
  kCollDenseReduce,
  kCollExpertReduce,
  kCollEpAllToAll,
  kCollReplicaAllReduce,
  kCollNormAllReduce,
  kCollTpAllGather,
  kCollTpReduceScatter,
  kCollFloat8Amax,
  kCopyD2H,
  kCopyH2D,
  kCpuOptimizer,
  kCpuOther,
  kMarker,
  kFused,
  kAllocRetry,
  kCategoryCount
};
const char* category_name(std::int32_t c);
bool is_collective(std::int32_t c);
bool is_gpu_compute(std::int32_t c);
// The step's collective of an op's category (EP all-to-all, TP all-gather or reduce-scatter).
bool is_layer_collective(std::int32_t c);

// What a real GPU runs for an op, as shapes rather than times: the micro-step executor
// (calibrate/micro_step.py) launches these, the twin times them through KernelCost.
struct Launch {
  enum Kind : std::uint8_t {
    kNone,
    kGemm,
    kGroupedGemm,
    kAttention,
    kElementwise,
    kCollective,
    kCopyH2D,
    kCopyD2H
  };
  Kind kind = kNone;
  double m = 0, n = 0, k = 0;  // GEMM (m×k)·(k×n); grouped: m rows for each of `groups` experts
  double groups = 0;
  double bytes = 0;       // elementwise: HBM bytes moved; copies: bytes copied
  int ctas = 0;           // collective: CTAs (SMs) it holds
  double repeat = 1;      // kernels of this shape (backward 2; selective recompute 0.5)
  bool sliding = false;   // attention of a sliding-window layer
  bool backward = false;  // attention backward
  // Collective: its kind and bytes (nccl-tests' size: all-gather the gathered buffer,
  // reduce-scatter its input, all-to-all the send buffer, all-reduce the buffer), communicator
  // and process group (global ranks in ring order, owned by the step builder).
  hardware::CollKind coll = hardware::CollKind::all_gather;
  Comm comm = Comm::dense;
  std::int32_t group_id = -1;  // the group's index among its communicator's groups
  const std::vector<int>* group = nullptr;
};

inline Launch gemm_launch(double m, double n, double k, double repeat = 1) {
  Launch l{Launch::kGemm, m, n, k};
  l.repeat = repeat;
  return l;
}
inline Launch elementwise_launch(double bytes) {
  Launch l{Launch::kElementwise};
  l.bytes = bytes;
  return l;
}

// An elementwise op whose own kernel is of family f, moving `bytes`, as the scenario runs it
// (training.elementwise): "eager", that kernel (its measured bandwidth and contention curve);
// "stand_in", one vectorized bf16 kernel (ew_add) moving the same bytes — what the micro-step
// harness (calibrate/micro_step.py) runs for every elementwise op.
hardware::KernelWork elementwise_op(const Job& job, const hardware::KernelCost& cost,
                                    hardware::Family f, double bytes);

struct Op {
  const char* name;
  Category category;
  hardware::KernelWork work;  // compute ops
  // > 0: a collective of this many bytes (per rank's view) on the compute stream's path instead:
  // an EP all-to-all or a TP all-gather or reduce-scatter, as `category` says.
  double coll_bytes = 0;
  Launch launch{};
};

struct LayerOps {
  std::vector<Op> forward;    // also the recompute under full checkpointing
  std::vector<Op> recompute;  // what backward re-runs (per checkpointing mode)
  std::vector<Op> backward;
};

// with_backward false: the forward alone (recompute and backward left empty), what the forward
// pass reads; the backward pass asks for all three.
LayerOps layer_ops(const Job& job, const hardware::KernelCost& cost, const RankWorkload& w,
                   std::int64_t layer, bool with_backward = true);
// One part of every rank's ops, moved out (each part is run once).
inline std::vector<std::vector<Op>> per_rank(std::vector<LayerOps>& ops,
                                             std::vector<Op> LayerOps::*part) {
  std::vector<std::vector<Op>> out;
  out.reserve(ops.size());
  for (auto& o : ops) out.push_back(std::move(o.*part));
  return out;
}

// Bytes of the layer's collectives (per rank's view, S of hardware/collective.hpp).
struct LayerComm {
  double dense_gather = 0;   // bf16 dense weights of the layer, gathered
  double dense_reduce = 0;   // fp32 dense gradients (reduce-scatter input)
  double expert_gather = 0;  // this GPU's expert block, bf16 or FP8 + scales
  double expert_reduce = 0;  // fp32 reduce-scatter input, or the bf16 all-to-all send buffer
  double expert_elems = 0;   // parameters of the block
};
LayerComm layer_comm(const Job& job, std::int64_t layer);

// Newton–Schulz FLOPs for one m×n matrix (5 iterations; per iteration X·Xᵀ 2m²n, A² 2m³,
// (bA + cA²)·X 2m²n, with m ≤ n).
double newton_schulz_flops(double rows, double cols);

}  // namespace twin::model
