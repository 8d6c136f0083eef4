// The parallel plan and training options (the "how"), JOB.md §4 and §6. Defaults are the final
// published setup; each option names the rung of JOB.md §6 that changes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "model/architecture.hpp"
#include "sim/param.hpp"

namespace twin::model {

// The training options' choices, named in scenario files by the tables below (one per
// enumeration; the schema in job.cpp and the outputs read them).
enum class Checkpointing { none, selective, full };
enum class Optimizer { adamw, muon };
enum class Device { cpu, gpu };
enum class AllToAllMode { blocking, async };
enum class MoeKernel { sonicmoe, plain };
enum class TileScheduler { static_lists, dynamic };
enum class Elementwise { eager, stand_in };
enum class NsKernels { unfused, baddbmm };
enum class ExpertRows { spread, equal };
enum class ExpertBackward { gradients, forward_twice };
enum class ExpertRouting { topk, group_limited };
enum class EpDispatch { pairs, per_rank };
enum class GatherDtype { bf16, fp8 };
enum class GradReduce { fp32_reduce_scatter, bf16_all_to_all };
enum class DenseReshard { global, node_local };
enum class GradNorm { cpu, accumulated };
enum class RecvPool { side, compute };
enum class FsdpStreams { per_group, fsdp2 };
enum class StreamPriority { high, normal };
enum class NsResults { pinned_copies, grad_shards };

inline constexpr sim::Named<Checkpointing> kCheckpointingNames[] = {
    {Checkpointing::none, "none"},
    {Checkpointing::selective, "selective"},
    {Checkpointing::full, "full"}};
inline constexpr sim::Named<Optimizer> kOptimizerNames[] = {{Optimizer::adamw, "adamw"},
                                                            {Optimizer::muon, "muon"}};
inline constexpr sim::Named<Device> kDeviceNames[] = {{Device::cpu, "cpu"}, {Device::gpu, "gpu"}};
inline constexpr sim::Named<AllToAllMode> kAllToAllModeNames[] = {
    {AllToAllMode::blocking, "blocking"}, {AllToAllMode::async, "async"}};
inline constexpr sim::Named<MoeKernel> kMoeKernelNames[] = {{MoeKernel::sonicmoe, "sonicmoe"},
                                                            {MoeKernel::plain, "plain"}};
inline constexpr sim::Named<TileScheduler> kTileSchedulerNames[] = {
    {TileScheduler::static_lists, "static"}, {TileScheduler::dynamic, "dynamic"}};
inline constexpr sim::Named<Elementwise> kElementwiseNames[] = {
    {Elementwise::eager, "eager"}, {Elementwise::stand_in, "stand_in"}};
inline constexpr sim::Named<NsKernels> kNsKernelsNames[] = {{NsKernels::unfused, "unfused"},
                                                            {NsKernels::baddbmm, "baddbmm"}};
inline constexpr sim::Named<ExpertRows> kExpertRowsNames[] = {{ExpertRows::spread, "spread"},
                                                              {ExpertRows::equal, "equal"}};
inline constexpr sim::Named<ExpertBackward> kExpertBackwardNames[] = {
    {ExpertBackward::gradients, "gradients"}, {ExpertBackward::forward_twice, "forward_twice"}};
inline constexpr sim::Named<ExpertRouting> kExpertRoutingNames[] = {
    {ExpertRouting::topk, "topk"}, {ExpertRouting::group_limited, "group_limited"}};
inline constexpr sim::Named<EpDispatch> kEpDispatchNames[] = {{EpDispatch::pairs, "pairs"},
                                                              {EpDispatch::per_rank, "per_rank"}};
inline constexpr sim::Named<GatherDtype> kGatherDtypeNames[] = {{GatherDtype::bf16, "bf16"},
                                                                {GatherDtype::fp8, "fp8"}};
inline constexpr sim::Named<GradReduce> kGradReduceNames[] = {
    {GradReduce::fp32_reduce_scatter, "fp32_reduce_scatter"},
    {GradReduce::bf16_all_to_all, "bf16_all_to_all"}};
inline constexpr sim::Named<DenseReshard> kDenseReshardNames[] = {
    {DenseReshard::global, "global"}, {DenseReshard::node_local, "node_local"}};
inline constexpr sim::Named<GradNorm> kGradNormNames[] = {{GradNorm::cpu, "cpu"},
                                                          {GradNorm::accumulated, "accumulated"}};
inline constexpr sim::Named<RecvPool> kRecvPoolNames[] = {{RecvPool::side, "side"},
                                                          {RecvPool::compute, "compute"}};
inline constexpr sim::Named<FsdpStreams> kFsdpStreamsNames[] = {
    {FsdpStreams::per_group, "per_group"}, {FsdpStreams::fsdp2, "fsdp2"}};
inline constexpr sim::Named<StreamPriority> kStreamPriorityNames[] = {
    {StreamPriority::high, "high"}, {StreamPriority::normal, "normal"}};
inline constexpr sim::Named<NsResults> kNsResultsNames[] = {
    {NsResults::pinned_copies, "pinned_copies"}, {NsResults::grad_shards, "grad_shards"}};

struct ParallelPlan {
  std::int64_t replica_gpus = 0;  // GPUs of one replica = the FSDP shard group of dense weights
  std::int64_t ep = 4;            // expert parallelism inside a node
  std::int64_t dp = 1;            // data-parallel replicas (HSDP); total GPUs = replica_gpus × dp
  // Tensor parallelism with sequence parallelism inside a node (Megatron-style, as TorchTitan's
  // 2D plan): tp consecutive GPUs share every layer's heads and FFN width and the same rows.
  std::int64_t tp = 1;
  std::int64_t total_gpus() const { return replica_gpus * dp; }
  std::int64_t data_ranks() const { return total_gpus() / tp; }  // ranks with their own rows
  std::int64_t fsdp_gpus() const { return replica_gpus / tp; }   // a dense weight's shard group
  // Expert weights of one EP rank's block are sharded over the ranks holding the same block.
  std::int64_t expert_shard_gpus() const { return replica_gpus / ep; }
};

struct TrainingOptions {
  std::int64_t seq_len = 65536;   // tokens per row (sequence)
  std::int64_t rows_per_gpu = 1;  // sequences per data-parallel rank (per GPU when tp = 1)
  Checkpointing activation_checkpointing = Checkpointing::full;
  double offload_fraction = 0.86;  // share of layers whose checkpointed output goes to host
  Optimizer optimizer = Optimizer::muon;
  bool cpu_offload = true;             // FSDP2 CPUOffloadPolicy: params, grads, states on host
  Device newton_schulz = Device::gpu;  // rung 4
  AllToAllMode dense_ns_all_to_all = AllToAllMode::async;  // rung 4
  NsKernels newton_schulz_kernels = NsKernels::unfused;    // hardware/kernel_shapes.hpp
  MoeKernel moe_kernel = MoeKernel::sonicmoe;
  TileScheduler moe_tile_scheduler = TileScheduler::dynamic;  // rung 5
  Elementwise elementwise = Elementwise::eager;               // step_costs.hpp
  bool compile = true;  // torch.compile per block: fused pointwise work (false: eager PyTorch)
  bool float8 = false;  // torchao Float8Linear: dense linear layers in FP8, dynamic scaling
  bool float8_all_gather = false;         // FSDP2 gathers those weights in FP8
  bool float8_precompute_scale = false;   // their scales from one amax pass after the optimizer
  bool async_tp = false;                  // TorchTitan's async TP: collectives overlap GEMMs
  std::int64_t loss_chunk_tokens = 4096;  // fused chunked cross-entropy; 0: over the whole batch
  ExpertRows expert_rows = ExpertRows::spread;                 // hardware/kernel_cost.hpp
  ExpertBackward expert_backward = ExpertBackward::gradients;  // model/step_costs.cpp
  ExpertRouting routing = ExpertRouting::group_limited;        // rung 7
  double routing_imbalance_cv = 0.15;             // topk: spread of an EP rank's token share
  EpDispatch ep_dispatch = EpDispatch::per_rank;  // JOB.md §4: a HybridEP-style dispatcher
  bool ep_worst_case_buffer = false;  // HybridEP's preallocated buffer (memory_replay.hpp) [est]
  GatherDtype expert_gather_dtype = GatherDtype::fp8;     // rung 8
  GradReduce grad_reduce = GradReduce::bf16_all_to_all;   // rung 9
  DenseReshard dense_reshard = DenseReshard::node_local;  // rung 10
  GradNorm grad_norm = GradNorm::accumulated;             // rung 11a
  bool embedding_regather = false;  // re-gather the embedding in backward (rung 11b)
  bool shared_rope_cache = true;    // one RoPE cache per distinct cache (rung 11c)
  bool release_grads_early = true;  // free reduced grads two layers later (rung 12a)
  bool unshard_async_op = true;     // all-gather buffers from the compute pool (rung 12b)
  RecvPool grad_a2a_recv_pool = RecvPool::compute;  // rung 12c
  bool fsdp_copies = true;  // FSDP2's copy-out and reduce copy-in kernels (step_graph.hpp)
  // How FSDP collectives are ordered (step_graph.hpp, StepBuilder::queue_on).
  FsdpStreams fsdp_streams = FsdpStreams::per_group;
  StreamPriority side_stream_priority = StreamPriority::high;  // FSDP2's (hardware/gpu.hpp)
  bool expandable_segments = false;       // PYTORCH_CUDA_ALLOC_CONF expandable_segments
  std::int64_t allocator_warm_steps = 1;  // steps the allocator's caches saw before this one
  double pinned_round_threshold_MiB = 1;  // pinned_max_round_threshold_mb; 0 = always round
  NsResults ns_results = NsResults::pinned_copies;  // where GPU Newton–Schulz lands (host_memory)
  bool offload_arena_prefault = true;      // CPU touches the offload arena first (JOB.md §7)
  bool checkpoint_replicated_qkv = false;  // the state_dict hook's full QKV copy (JOB.md §7)
  double thp_leak_GiB = 0;                 // host memory lost to the mimalloc THP leak
};

// Where the document lengths come from (JOB.md §6.6). Lengths are drawn from a log-normal
// distribution unless a file of token counts is given.
struct DataOptions {
  std::string doc_lengths_file;  // "" = built-in log-normal
  double doc_length_median_tokens = 600;
  double doc_length_sigma = 1.6;
  std::int64_t seed = 1;
  bool balance_attention = true;          // sort rows into attention-cost bands (rung 6)
  bool document_masking = true;           // attention within documents (false: whole rows)
  std::vector<std::int64_t> doc_lengths;  // filled by the loader from doc_lengths_file
};

struct Job {
  ModelArch model;
  ParallelPlan parallel;
  TrainingOptions training;
  DataOptions data;
  std::int64_t tokens_per_step() const {
    return parallel.data_ranks() * training.rows_per_gpu * training.seq_len;
  }
};

const sim::Schema<ParallelPlan>& parallel_schema();
const sim::Schema<TrainingOptions>& training_schema();
const sim::Schema<DataOptions>& data_schema();

// Cross-field checks; `gpus_per_node` comes from the hardware profile. Throws sim::ParamError.
void validate(const Job& job, std::int64_t gpus_per_node);

}  // namespace twin::model
