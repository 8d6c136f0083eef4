// The model architecture (the "what" of Calculon's application/execution/system split).
// A transformer: per layer attention (full or sliding-window, chosen by a cyclic pattern), then
// a dense SwiGLU feed-forward block (ffn_hidden > 0: Llama 3), routed SwiGLU experts behind a
// router (experts > 0: the EUROPA MoE of JOB.md §3), or both.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "sim/param.hpp"

namespace twin::model {

// One kind of attention layer. window_tokens == 0 means full (causal) attention.
struct AttentionKind {
  std::int64_t q_heads = 0;
  std::int64_t kv_heads = 0;
  std::int64_t qk_head_dim = 0;
  std::int64_t v_head_dim = 0;
  std::int64_t rope_dim = 0;  // dimensions of q/k that carry rotary embedding
  bool rope = false;          // whether this layer kind applies RoPE at all
  std::int64_t window_tokens = 0;
};

struct ModelArch {
  std::string name;
  std::int64_t layers = 0;
  std::int64_t hidden = 0;
  std::int64_t vocab = 0;
  bool tied_embedding = false;  // one matrix for input embedding and LM head
  AttentionKind full;
  AttentionKind sliding;
  // Layer i uses pattern[i % pattern.size()]: 'F' full attention, 'S' sliding window.
  std::string pattern;
  std::int64_t ffn_hidden = 0;  // dense SwiGLU of every layer: gate, up (hidden→ffn), down; 0: none
  std::int64_t experts = 0;     // routed experts per layer; 0: a dense model
  std::int64_t top_k = 0;
  std::int64_t expert_hidden = 0;  // SwiGLU: gate and up (hidden→expert_hidden), down (back)
  std::int64_t rope_caches = 0;    // distinct RoPE caches the implementation builds

  const AttentionKind& attention(std::int64_t layer) const;
  std::int64_t rope_layers() const;
  bool moe() const { return experts > 0; }
};

const sim::Schema<ModelArch>& model_schema();
const sim::Schema<AttentionKind>& attention_schema(bool sliding);

// Cross-field checks the per-key ranges cannot express; throws sim::ParamError.
void validate(const ModelArch& m);

}  // namespace twin::model
