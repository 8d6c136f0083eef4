// Closed-form accounting of the job: parameters, FLOPs per step and per-rank memory of the
// states FSDP keeps. These are the sizes every later mechanism (the step graph, the allocator)
// builds on; each formula is written out next to its code.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "model/data.hpp"
#include "model/job.hpp"

namespace twin::model {

inline constexpr double kBf16 = 2, kFp32 = 4;  // bytes per value

// Parameter counts, whole model.
struct ParamCounts {
  double attention = 0;  // q, k, v, o projections of every layer
  double router = 0;
  double experts = 0;  // routed experts, all layers
  double ffn = 0;      // dense SwiGLU blocks, all layers
  double norms = 0;    // two RMSNorm weights per layer + the final norm
  double embedding = 0;
  double head = 0;  // LM head (0 when tied)
  double total() const { return attention + router + experts + ffn + norms + embedding + head; }
  double dense() const { return total() - experts; }  // FSDP-sharded over all ranks
};

ParamCounts count_params(const ModelArch& m);
// Parameters touched per token: all dense ones plus top_k of the experts of each layer.
double active_params(const ModelArch& m);
// Parameters of one layer's attention projections.
double attention_params(const AttentionKind& a, std::int64_t hidden);
// Parameters of one expert (gate, up, down).
double expert_params(const ModelArch& m);
// Parameters of one layer's dense SwiGLU block (gate, up, down; 0 without one).
double ffn_params(const ModelArch& m);

// FLOPs of one op category over one step, summed over every rank.
struct PhaseFlops {
  double forward = 0, backward = 0, recompute = 0;
  double total() const { return forward + backward + recompute; }
};
struct StepFlops {
  std::map<std::string, PhaseFlops> by_category;  // attention_proj, attention_core, router,
                                                  // experts (MoE), ffn (dense), head
  double total() const;
};

// Matmul FLOPs are 2·m·n·k; backward of a matmul is 2× its forward (input and weight gradients).
// Attention core (QKᵀ and PV) forward is 2·pairs·heads·(d_qk + d_v); its backward is 2.5× the
// forward (FlashAttention's backward runs 5 matmul-shaped products against the forward's 2).
// Recompute: full checkpointing re-runs each layer's forward; selective (TorchTitan's per-op
// policy) re-runs half of the layer matmuls and keeps attention outputs [est].
StepFlops step_flops(const Job& job, const std::vector<Row>& rows);

// Bytes per rank of the states FSDP2 keeps, and where they live.
struct RankMemory {
  double param_shard_elems = 0;  // this rank's shard of every parameter
  double master_params = 0;      // fp32
  double grads = 0;              // fp32 sharded gradients
  double optimizer_states = 0;   // AdamW: 2 fp32 per param; Muon: 1 fp32 (matrices but router)
  double activations_hbm = 0;    // checkpointed activations kept on the GPU
  double activations_host = 0;   // checkpointed layer outputs offloaded to the host
  bool states_on_host = true;    // params, grads and optimizer states offloaded (CPUOffloadPolicy)
  double hbm_states() const;     // the part of the states that lives in HBM
};

// Muon's matrices (JOB.md §6.4). Dense ones in layer order (q, k, v, o; with a dense SwiGLU
// block also gate, up, down), which FlexShard gives out round-robin over a replica's ranks: rank
// r owns matrix j where j ≡ r (mod replica_gpus). Expert matrices are owned whole by the rank
// whose FSDP shard they are: layers × experts/ep × 3 over the ranks holding an expert block.
struct MatrixDims {
  double rows, cols;
};
std::vector<MatrixDims> muon_dense_matrices(const ModelArch& m);
// Of `dense` (muon_dense_matrices), those rank r owns.
std::vector<MatrixDims> owned_dense_matrices(const std::vector<MatrixDims>& dense, const Job& job,
                                             std::int64_t rank);
double owned_expert_matrices(const Job& job);

// Saved activation bytes per token per layer for each checkpointing mode.
double saved_bytes_per_token_layer(const ModelArch& m, std::int64_t layer, Checkpointing mode);
std::int64_t offloaded_layers(const Job& job);
RankMemory rank_memory(const Job& job);

}  // namespace twin::model
