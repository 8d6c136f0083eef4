// The parallel plan and training options (the "how"), SPEC.md §4 and §6. Defaults are the final
// published setup; each option names the rung of SPEC.md §6 that changes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/architecture.hpp"
#include "sim/param.hpp"

namespace twin::model {

struct ParallelPlan {
  std::int64_t replica_gpus = 0;  // GPUs of one replica = the FSDP shard group of dense weights
  std::int64_t ep = 0;            // expert parallelism inside a node
  std::int64_t dp = 1;            // data-parallel replicas (HSDP); total GPUs = replica_gpus × dp
  std::int64_t total_gpus() const { return replica_gpus * dp; }
  // Expert weights of one EP rank's block are sharded over the ranks holding the same block.
  std::int64_t expert_shard_gpus() const { return replica_gpus / ep; }
};

struct TrainingOptions {
  std::int64_t seq_len = 65536;        // tokens per row (sequence)
  std::int64_t rows_per_gpu = 1;       // sequences per GPU per step
  std::string activation_checkpointing = "full";  // none | selective | full
  double offload_fraction = 0.86;      // share of layers whose checkpointed output goes to host
  std::string optimizer = "muon";      // adamw | muon
  bool cpu_offload = true;             // FSDP2 CPUOffloadPolicy: params, grads, states on host
  std::string newton_schulz = "gpu";   // cpu | gpu (rung 4)
  std::string dense_ns_all_to_all = "async";  // blocking | async (rung 4)
  std::string moe_kernel = "sonicmoe";         // sonicmoe | plain
  std::string moe_tile_scheduler = "dynamic";  // static | dynamic (rung 5)
  std::string elementwise = "eager";           // eager | stand_in (step_costs.hpp)
  std::string expert_rows = "spread";          // spread | equal (hardware/kernel_cost.hpp)
  std::string routing = "group_limited";       // topk | group_limited (rung 7)
  double routing_imbalance_cv = 0.15;          // topk: spread of an EP rank's token share
  std::string expert_gather_dtype = "fp8";     // bf16 | fp8 (rung 8)
  std::string grad_reduce = "bf16_all_to_all"; // fp32_reduce_scatter | bf16_all_to_all (rung 9)
  std::string dense_reshard = "node_local";    // global | node_local (rung 10)
  std::string grad_norm = "accumulated";       // cpu | accumulated (rung 11a)
  bool embedding_regather = false;             // re-gather the embedding in backward (rung 11b)
  bool shared_rope_cache = true;               // one RoPE cache per distinct cache (rung 11c)
  bool release_grads_early = true;             // free reduced grads two layers later (rung 12a)
  bool unshard_async_op = true;                // all-gather buffers from the compute pool (rung 12b)
  std::string grad_a2a_recv_pool = "compute";  // side | compute (rung 12c)
  bool expandable_segments = false;            // PYTORCH_CUDA_ALLOC_CONF expandable_segments
  double pinned_round_threshold_MiB = 1;       // pinned_max_round_threshold_mb; 0 = always round
  bool offload_arena_prefault = true;          // CPU touches the offload arena first (SPEC §7)
  bool checkpoint_replicated_qkv = false;      // the state_dict hook's full QKV copy (SPEC §7)
  double thp_leak_GiB = 0;                     // host memory lost to the mimalloc THP leak
};

// Where the document lengths come from (SPEC.md §6.6). Lengths are drawn from a log-normal
// distribution unless a file of token counts is given.
struct DataOptions {
  std::string doc_lengths_file;  // "" = built-in log-normal
  double doc_length_median_tokens = 600;
  double doc_length_sigma = 1.6;
  std::int64_t seed = 1;
  bool balance_attention = true;  // sort rows into attention-cost bands (rung 6)
  std::vector<std::int64_t> doc_lengths;  // filled by the loader from doc_lengths_file
};

struct Job {
  ModelArch model;
  ParallelPlan parallel;
  TrainingOptions training;
  DataOptions data;
  std::int64_t tokens_per_step() const {
    return parallel.total_gpus() * training.rows_per_gpu * training.seq_len;
  }
};

const sim::Schema<ParallelPlan>& parallel_schema();
const sim::Schema<TrainingOptions>& training_schema();
const sim::Schema<DataOptions>& data_schema();

// Cross-field checks; `gpus_per_node` comes from the hardware profile. Throws sim::ParamError.
void validate(const Job& job, std::int64_t gpus_per_node);

}  // namespace twin::model
