#include "model/job.hpp"

#include <fmt/format.h>

namespace twin::model {

const sim::Schema<ParallelPlan>& parallel_schema() {
  static const sim::Schema<ParallelPlan> s = [] {
    sim::Schema<ParallelPlan> s;
    s.integer(
         "replica_gpus", "GPUs", 1, 1e6, std::nullopt,
         "GPUs of one replica: the FSDP shard group of dense weights (384 on JUPITER)",
         [](auto& p) -> auto& { return p.replica_gpus; })
        .integer(
            "ep", "GPUs", 1, 1024,
            "expert parallelism inside a node: each GPU owns experts/ep experts per layer",
            [](auto& p) -> auto& { return p.ep; })
        .integer(
            "dp", "", 1, 100000, "data-parallel replicas (HSDP); total GPUs = replica_gpus × dp",
            [](auto& p) -> auto& { return p.dp; })
        .integer(
            "tp", "GPUs", 1, 64,
            "tensor parallelism with sequence parallelism inside a node: tp GPUs share each "
            "layer's heads and FFN width and the same rows; dense weights are FSDP-sharded over "
            "replica_gpus / tp ranks (dense models only)",
            [](auto& p) -> auto& { return p.tp; });
    return s;
  }();
  return s;
}

namespace {

// The step's size, checkpointing, offload and optimizer (rungs 1-4).
void add_step_keys(sim::Schema<TrainingOptions>& s) {
  s.integer(
       "seq_len", "tokens", 1, 1 << 24, "tokens per sequence (row)",
       [](auto& t) -> auto& { return t.seq_len; })
      .integer(
          "rows_per_gpu", "rows", 1, 4096,
          "sequences per data-parallel rank per step (TorchTitan's local_batch_size: per GPU, "
          "or per tensor-parallel group)",
          [](auto& t) -> auto& { return t.rows_per_gpu; })
      .enumeration(
          "activation_checkpointing", sim::names(kCheckpointingNames),
          "none: keep every activation; selective: TorchTitan's per-op policy (attention "
          "outputs and every second dense matmul output saved; expert GEMMs, elementwise work "
          "and EP all-to-alls recomputed); full: keep only each layer's output (rung 1)",
          [](auto& t) -> auto& { return t.activation_checkpointing; })
      .real(
          "offload_fraction", "", 0, 1,
          "share of layers whose checkpointed output is offloaded to the host over C2C (rung 2)",
          [](auto& t) -> auto& { return t.offload_fraction; })
      .enumeration(
          "optimizer", sim::names(kOptimizerNames),
          "adamw for everything, or Muon for matrices except the router + AdamW (rung 3)",
          [](auto& t) -> auto& { return t.optimizer; })
      .boolean(
          "cpu_offload",
          "FSDP2 CPUOffloadPolicy: sharded params, grads and optimizer states on the host",
          [](auto& t) -> auto& { return t.cpu_offload; })
      .enumeration(
          "newton_schulz", sim::names(kDeviceNames),
          "where Muon's Newton–Schulz runs; gpu: expert matrices whole on their owner (rung 4)",
          [](auto& t) -> auto& { return t.newton_schulz; })
      .enumeration(
          "dense_ns_all_to_all", sim::names(kAllToAllModeNames),
          "all-to-alls gathering dense matrices to their Newton–Schulz owner: blocking the "
          "CPU thread, or overlapping expert work (rung 4)",
          [](auto& t) -> auto& { return t.dense_ns_all_to_all; })
      .enumeration(
          "newton_schulz_kernels", sim::names(kNsKernelsNames),
          "Newton–Schulz on the GPU as written in Muon's reference code (unfused: three GEMMs "
          "and five elementwise kernels per iteration, measured 24% elementwise on our H200), "
          "or with the scaled sums in the GEMMs' epilogues (torch.baddbmm: three GEMMs)",
          [](auto& t) -> auto& { return t.newton_schulz_kernels; });
}

// The MoE kernels, routing and the collectives' forms (rungs 5-11a).
// TorchTitan's switches for dense models: [compile], [float8], async TP (JOB.md names none of
// them for EUROPA; their defaults keep the EUROPA job as modelled).
void add_torchtitan_keys(sim::Schema<TrainingOptions>& s) {
  s.boolean(
       "compile",
       "torch.compile of each block: pointwise work fused (the elementwise traffic "
       "step_costs.cpp counts); false: eager PyTorch, efficiency.eager_elementwise_factor times "
       "the elementwise time",
       [](auto& t) -> auto& { return t.compile; })
      .boolean(
          "float8",
          "torchao Float8Linear: the dense linear layers (not the LM head, router or experts) as "
          "FP8 GEMMs with dynamic tensorwise scaling, plus their amax and cast passes",
          [](auto& t) -> auto& { return t.float8; })
      .boolean(
          "float8_all_gather",
          "with float8: FSDP2 all-gathers those weights in FP8 (enable_fsdp_float8_all_gather)",
          [](auto& t) -> auto& { return t.float8_all_gather; })
      .boolean(
          "float8_precompute_scale",
          "with FP8 all-gather: the weights' scales come from one amax pass and all-reduce after "
          "the optimizer (precompute_float8_dynamic_scale_for_fsdp) instead of one all-reduce per "
          "weight in each gather",
          [](auto& t) -> auto& { return t.float8_precompute_scale; })
      .boolean(
          "async_tp",
          "TorchTitan's async tensor parallelism: each all-gather and reduce-scatter is cut into "
          "tp chunks that overlap the GEMM consuming or producing them; one chunk stays exposed",
          [](auto& t) -> auto& { return t.async_tp; })
      .integer(
          "loss_chunk_tokens", "tokens", 0, 1e9,
          "tokens per chunk of a fused linear cross-entropy, whose logits live chunk by chunk "
          "(the EUROPA job's [est]: 65,536 × 256,000 logits would not fit); 0: PyTorch's "
          "cross_entropy over the whole batch's fp32 logits, as TorchTitan calls it",
          [](auto& t) -> auto& { return t.loss_chunk_tokens; });
}

void add_kernel_and_comm_keys(sim::Schema<TrainingOptions>& s) {
  s.enumeration(
       "moe_kernel", sim::names(kMoeKernelNames),
       "expert GEMMs: SonicMoE's persistent grouped GEMMs, or a plain per-expert loop",
       [](auto& t) -> auto& { return t.moe_kernel; })
      .enumeration(
          "moe_tile_scheduler", sim::names(kTileSchedulerNames),
          "SonicMoE tile scheduling: static per-block tile lists, or an atomic counter (rung 5)",
          [](auto& t) -> auto& { return t.moe_tile_scheduler; })
      .enumeration(
          "elementwise", sim::names(kElementwiseNames),
          "elementwise ops as their own kernels (PyTorch eager, the project's FP8 and fp32-sum "
          "kernels: measured bandwidth and contention per family), or each as one vectorized "
          "bf16 kernel moving its bytes (the micro-step harness's stand-in)",
          [](auto& t) -> auto& { return t.elementwise; })
      .enumeration(
          "expert_rows", sim::names(kExpertRowsNames),
          "tokens per expert within a GPU: spread (routing gives each expert its own count; a "
          "grouped GEMM pads half a tile per expert on average) or equal (every expert the same "
          "rows, padded to whole tiles: the micro-step harness)",
          [](auto& t) -> auto& { return t.expert_rows; })
      .enumeration(
          "expert_backward", sim::names(kExpertBackwardNames),
          "the expert GEMMs' backward: their input and weight gradients, each priced on its own "
          "shape (the weight gradient's depth is the expert's rows), or as two more forward GEMMs "
          "(the twin before 2026-12-07; what the committed micro-step plans ran)",
          [](auto& t) -> auto& { return t.expert_backward; })
      .enumeration(
          "routing", sim::names(kExpertRoutingNames),
          "unconstrained top-k (EP ranks get unequal tokens) or 2 experts per group of 96 "
          "(exactly balanced, rung 7)",
          [](auto& t) -> auto& { return t.routing; })
      .real(
          "routing_imbalance_cv", "", 0, 2,
          "topk routing: coefficient of variation of an EP rank's share of its node's "
          "token-expert pairs, per layer [est]",
          [](auto& t) -> auto& { return t.routing_imbalance_cv; })
      .enumeration(
          "ep_dispatch", sim::names(kEpDispatchNames),
          "EP token exchange: pairs (TorchTitan's all_to_all_single: a token once per routed "
          "expert) or per_rank (HybridEP/DeepEP: once per EP rank holding any of its experts, "
          "outputs summed on that rank before the combine)",
          [](auto& t) -> auto& { return t.ep_dispatch; })
      .boolean(
          "ep_worst_case_buffer",
          "per_rank exchange: the dispatcher preallocates a buffer for the worst case, "
          "outside the caching allocator (HybridEP: every token of the EP group routed to "
          "one rank) — false: chunked buffers of negligible size (DeepEP's normal kernels) "
          "[est]",
          [](auto& t) -> auto& { return t.ep_worst_case_buffer; })
      .enumeration(
          "expert_gather_dtype", sim::names(kGatherDtypeNames),
          "expert weight all-gather in bf16, or FP8 E4M3 blocks of 128 with an fp32 scale "
          "(rung 8)",
          [](auto& t) -> auto& { return t.expert_gather_dtype; })
      .enumeration(
          "grad_reduce", sim::names(kGradReduceNames),
          "expert gradient reduction: fp32 ring reduce-scatter, or a bf16 all-to-all "
          "summed locally in fp32 (rung 9)",
          [](auto& t) -> auto& { return t.grad_reduce; })
      .enumeration(
          "dense_reshard", sim::names(kDenseReshardNames),
          "dense weights after forward: resharded over all ranks (re-gathered over "
          "InfiniBand) or 4-way in the node (re-gathered over NVLink, rung 10)",
          [](auto& t) -> auto& { return t.dense_reshard; })
      .enumeration(
          "grad_norm", sim::names(kGradNormNames),
          "gradient norm on the CPU after backward (+ gloo all-reduce), or accumulated "
          "during backward with one NCCL all-reduce (rung 11a)",
          [](auto& t) -> auto& { return t.grad_norm; });
}

// Buffers, allocator and host memory (rungs 11b-12, README Memory).
void add_memory_keys(sim::Schema<TrainingOptions>& s) {
  s.boolean(
       "embedding_regather", "re-gather the embedding weight in backward (rung 11b removes it)",
       [](auto& t) -> auto& { return t.embedding_regather; })
      .boolean(
          "shared_rope_cache",
          "one RoPE cache per distinct cache instead of a copy per RoPE layer (rung 11c)",
          [](auto& t) -> auto& { return t.shared_rope_cache; })
      .boolean(
          "release_grads_early",
          "with the gradient-norm hook registered, free each reduced gradient two layers "
          "later instead of at the end of backward (rung 12a)",
          [](auto& t) -> auto& { return t.release_grads_early; })
      .boolean(
          "unshard_async_op",
          "all-gather set-up (input, flat output, FP8 buffers) on the compute stream, so "
          "from its pool, instead of FSDP2's copy-in side stream (rung 12b)",
          [](auto& t) -> auto& { return t.unshard_async_op; })
      .enumeration(
          "grad_a2a_recv_pool", sim::names(kRecvPoolNames),
          "pool of the bf16 gradient all-to-all receive buffer: the reduce-scatter side "
          "stream's, or the compute stream's (rung 12c)",
          [](auto& t) -> auto& { return t.grad_a2a_recv_pool; })
      .boolean(
          "fsdp_copies",
          "FSDP2's copies on the compute stream: each all-gather's copy-out into the "
          "parameters and each reduction's copy-in of the gradients (cast to the reduce "
          "dtype); false leaves them out (a harness that runs no FSDP)",
          [](auto& t) -> auto& { return t.fsdp_copies; })
      .enumeration(
          "fsdp_streams", sim::names(kFsdpStreamsNames),
          "order of FSDP's collectives: per_group, each process group's in issue order on its "
          "own NCCL stream; fsdp2, as FSDP2 issues them (one all-gather and one reduce-scatter "
          "stream for every group, synchronous collectives, each post-backward waiting for the "
          "last reduction; the experts a group of their own, reduced mid-layer)",
          [](auto& t) -> auto& { return t.fsdp_streams; })
      .enumeration(
          "side_stream_priority", sim::names(kStreamPriorityNames),
          "priority of the streams FSDP runs its copies, sums and collectives on, against the "
          "compute stream's normal one: high, as FSDP2 creates them (the block scheduler serves "
          "their kernels first); normal, as FSDP1 does unless HSDP limits its all-gathers "
          "(kernels served in arrival order; hardware/gpu.hpp)",
          [](auto& t) -> auto& { return t.side_stream_priority; })
      .boolean(
          "expandable_segments",
          "PYTORCH_CUDA_ALLOC_CONF=expandable_segments:True (segments grow by pages)",
          [](auto& t) -> auto& { return t.expandable_segments; })
      .integer(
          "allocator_warm_steps", "steps", 0, 8,
          "identical steps replayed through the caching allocator before the reported one: "
          "its pools keep their cached blocks across steps (0: the first step, from an "
          "empty cache; README, Memory)",
          [](auto& t) -> auto& { return t.allocator_warm_steps; })
      .real(
          "pinned_round_threshold_MiB", "MiB", 0, 1e6,
          "pinned host allocations above this keep their size "
          "(pinned_max_round_threshold_mb); below it, and always when 0, they round up to "
          "a power of two (README, Memory)",
          [](auto& t) -> auto& { return t.pinned_round_threshold_MiB; })
      .enumeration(
          "ns_results", sim::names(kNsResultsNames),
          "Newton–Schulz on the GPU: its results come home as new host tensors "
          "(.to(\"cpu\", non_blocking=True), which PyTorch allocates pinned: a block of the "
          "pinned host allocator per matrix, kept in its cache), or are copied into the "
          "matrices' pinned gradient shards, no longer needed (no new host memory; README, Memory)",
          [](auto& t) -> auto& { return t.ns_results; })
      .boolean(
          "offload_arena_prefault",
          "the CPU touches every page of the activation-offload arena at start; if not, "
          "pages first written by GPU copies may land in HBM when Grace is full (README, Memory)",
          [](auto& t) -> auto& { return t.offload_arena_prefault; })
      .boolean(
          "checkpoint_replicated_qkv",
          "the checkpoint state_dict hook gathers the full fused QKV weight on every rank "
          "and the checkpointer caches it (README, Memory)",
          [](auto& t) -> auto& { return t.checkpoint_replicated_qkv; })
      .real(
          "thp_leak_GiB", "GiB", 0, 1e6,
          "host memory per rank lost to an allocator backing arenas with transparent huge "
          "pages (mimalloc without MIMALLOC_ALLOW_THP=0; README, Memory); its size is not "
          "published",
          [](auto& t) -> auto& { return t.thp_leak_GiB; });
}

}  // namespace

const sim::Schema<TrainingOptions>& training_schema() {
  static const sim::Schema<TrainingOptions> s = [] {
    sim::Schema<TrainingOptions> s;
    add_step_keys(s);
    add_kernel_and_comm_keys(s);
    add_memory_keys(s);
    add_torchtitan_keys(s);
    return s;
  }();
  return s;
}

const sim::Schema<DataOptions>& data_schema() {
  static const sim::Schema<DataOptions> s = [] {
    sim::Schema<DataOptions> s;
    s.text(
         "doc_lengths_file",
         "file of document lengths in tokens (whitespace-separated integers, relative to the "
         "scenario file); empty: the built-in log-normal",
         [](auto& d) -> auto& { return d.doc_lengths_file; })
        .real(
            "doc_length_median_tokens", "tokens", 1, 1e9,
            "median of the built-in log-normal document-length distribution [est]",
            [](auto& d) -> auto& { return d.doc_length_median_tokens; })
        .real(
            "doc_length_sigma", "", 0, 10,
            "sigma (of ln length) of the built-in log-normal distribution [est]",
            [](auto& d) -> auto& { return d.doc_length_sigma; })
        .integer(
            "seed", "", 0, 9.0e15, "seed of document sampling and shuffling",
            [](auto& d) -> auto& { return d.seed; })
        .boolean(
            "balance_attention",
            "sort packed rows into narrow attention-cost bands so a step's rows cost the "
            "same (rung 6)",
            [](auto& d) -> auto& { return d.balance_attention; })
        .boolean(
            "document_masking",
            "attention is causal within each packed document (false: causal over the whole "
            "row, as TorchTitan's Llama 3 with SDPA)",
            [](auto& d) -> auto& { return d.document_masking; });
    return s;
  }();
  return s;
}

namespace {
void validate_tp(const Job& job, std::int64_t gpus_per_node) {
  const auto& p = job.parallel;
  const auto& m = job.model;
  if (p.tp == 1) return;
  if (m.moe())
    throw sim::ParamError("parallel.tp",
                          "tensor parallelism is modelled for dense models only "
                          "(experts 0); a MoE uses ep");
  if (gpus_per_node % p.tp != 0)
    throw sim::ParamError("parallel.tp",
                          fmt::format("tp ({}) must divide the GPUs of a node ({}): tensor "
                                      "parallelism stays inside a node",
                                      p.tp, gpus_per_node));
  const auto& a = m.full;
  if (a.q_heads % p.tp != 0 || a.kv_heads % p.tp != 0 || m.ffn_hidden % p.tp != 0 ||
      m.vocab % p.tp != 0)
    throw sim::ParamError(
        "parallel.tp",
        fmt::format("tp ({}) must divide the query heads ({}), KV heads ({}), ffn_hidden ({}) and "
                    "vocab ({})",
                    p.tp, a.q_heads, a.kv_heads, m.ffn_hidden, m.vocab));
}
}  // namespace

void validate(const Job& job, std::int64_t gpus_per_node) {
  const auto& p = job.parallel;
  const auto& m = job.model;
  if (!m.moe() && p.ep != 1)
    throw sim::ParamError("parallel.ep", fmt::format("a dense model (experts 0) has no expert "
                                                     "parallelism: ep must be 1, not {}",
                                                     p.ep));
  if (m.experts % p.ep != 0)
    throw sim::ParamError(
        "model.experts", "parallel.ep",
        fmt::format("experts ({}) must be divisible by ep ({})", m.experts, p.ep));
  if (gpus_per_node % p.ep != 0)
    throw sim::ParamError("parallel.ep", fmt::format("ep ({}) must divide the GPUs of a node ({}): "
                                                     "expert parallelism stays inside a node",
                                                     p.ep, gpus_per_node));
  if (job.training.optimizer == Optimizer::muon && !job.training.cpu_offload)
    throw sim::ParamError("training.optimizer", "training.cpu_offload",
                          "Muon is modelled on the host only (JOB.md §6.3-6.4): with "
                          "cpu_offload false choose adamw");
  validate_tp(job, gpus_per_node);
  if (p.replica_gpus % gpus_per_node != 0)
    throw sim::ParamError(
        "parallel.replica_gpus",
        fmt::format("{} GPUs cannot be tiled by nodes of {} GPUs", p.replica_gpus, gpus_per_node));
}

}  // namespace twin::model
