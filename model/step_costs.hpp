// The ops of one layer on one rank, with their kernel works (hardware/kernel_cost.hpp), in
// compute-stream order; and the sizes of the layer's collectives. SPEC.md §5 lists the ops;
// elementwise byte counts are estimates, stated next to each op in step_costs.cpp.
#pragma once

#include <cstdint>
#include <vector>

#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"
#include "model/job.hpp"
#include "model/workload.hpp"

namespace twin::model {

// Task categories of the step (reports name them through category_name()).
enum Category : std::int32_t {
  kExpertGemm, kOtherGemm, kAttention, kElementwise, kOptimizerGpu,
  kCollDenseGather, kCollExpertGather, kCollDenseReduce, kCollExpertReduce, kCollEpAllToAll,
  kCollReplicaAllReduce, kCollNormAllReduce, kCollOptimizerAllToAll,
  kCopyD2H, kCopyH2D, kCpuOptimizer, kCpuOther, kMarker, kFused, kAllocRetry, kCategoryCount
};
const char* category_name(std::int32_t c);
bool is_collective(std::int32_t c);
bool is_gpu_compute(std::int32_t c);

struct Op {
  const char* name;
  Category category;
  hardware::KernelWork work;  // compute ops
  double a2a_bytes = 0;       // > 0: an EP all-to-all of this send buffer instead
};

struct LayerOps {
  std::vector<Op> forward;    // also the recompute under full checkpointing
  std::vector<Op> recompute;  // what backward re-runs (per checkpointing mode)
  std::vector<Op> backward;
};

LayerOps layer_ops(const Job& job, const hardware::KernelCost& cost, const RankWorkload& w,
                   std::int64_t layer);

// Bytes of the layer's collectives (per rank's view, S of hardware/collective.hpp).
struct LayerComm {
  double dense_gather = 0;    // bf16 dense weights of the layer, gathered
  double dense_reduce = 0;    // fp32 dense gradients (reduce-scatter input)
  double expert_gather = 0;   // this GPU's expert block, bf16 or FP8 + scales
  double expert_reduce = 0;   // fp32 reduce-scatter input, or the bf16 all-to-all send buffer
  double expert_elems = 0;    // parameters of the block
};
LayerComm layer_comm(const Job& job, std::int64_t layer);

// Newton–Schulz FLOPs for one m×n matrix (5 iterations; per iteration X·Xᵀ 2m²n, A² 2m³,
// (bA + cA²)·X 2m²n, with m ≤ n).
double newton_schulz_flops(double rows, double cols);

}  // namespace twin::model
