#include "model/architecture.hpp"

#include <fmt/format.h>

namespace twin::model {

const AttentionKind& ModelArch::attention(std::int64_t layer) const {
  return pattern[static_cast<std::size_t>(layer) % pattern.size()] == 'F' ? full : sliding;
}

std::int64_t ModelArch::rope_layers() const {
  std::int64_t n = 0;
  for (std::int64_t l = 0; l < layers; ++l) n += attention(l).rope ? 1 : 0;
  return n;
}

// Full attention's keys are required; a sliding kind's may be left out when the pattern has no
// 'S' (validate() checks the kinds the pattern uses).
const sim::Schema<AttentionKind>& attention_schema(bool sliding) {
  static const auto make = [](bool swa) {
    const auto req = [swa](std::int64_t v) {
      return swa ? std::optional<std::int64_t>(v) : std::nullopt;
    };
    const double lo = swa ? 0 : 1;
    sim::Schema<AttentionKind> s;
    s.integer(
         "q_heads", "", lo, 4096, req(0), "query heads", [](auto& a) -> auto& { return a.q_heads; })
        .integer(
            "kv_heads", "", lo, 4096, req(0), "key/value heads (GQA groups)",
            [](auto& a) -> auto& { return a.kv_heads; })
        .integer(
            "qk_head_dim", "", lo, 4096, req(0), "query/key head dimension",
            [](auto& a) -> auto& { return a.qk_head_dim; })
        .integer(
            "v_head_dim", "", lo, 4096, req(0), "value head dimension",
            [](auto& a) -> auto& { return a.v_head_dim; })
        .integer(
            "rope_dim", "", 0, 4096, req(0),
            "q/k dimensions carrying rotary embedding (RoPE cache width)",
            [](auto& a) -> auto& { return a.rope_dim; })
        .boolean(
            "rope", swa ? std::optional<bool>(false) : std::nullopt,
            "whether layers of this kind apply RoPE", [](auto& a) -> auto& { return a.rope; });
    if (swa)
      s.integer(
          "window_tokens", "tokens", 0, 1e9, std::optional<std::int64_t>(0),
          "sliding window: each query attends to at most this many keys (itself included)",
          [](auto& a) -> auto& { return a.window_tokens; });
    return s;
  };
  static const auto full_s = make(false);
  static const auto swa_s = make(true);
  return sliding ? swa_s : full_s;
}

const sim::Schema<ModelArch>& model_schema() {
  static const sim::Schema<ModelArch> s = [] {
    sim::Schema<ModelArch> s;
    s.text(
         "name", std::nullopt, "model name", [](auto& m) -> auto& { return m.name; })
        .integer(
            "layers", "", 1, 100000, std::nullopt, "transformer blocks",
            [](auto& m) -> auto& { return m.layers; })
        .integer(
            "hidden", "", 1, 1 << 20, std::nullopt, "model (residual) width",
            [](auto& m) -> auto& { return m.hidden; })
        .integer(
            "vocab", "", 1, 1e8, std::nullopt, "vocabulary size",
            [](auto& m) -> auto& { return m.vocab; })
        .boolean(
            "tied_embedding", std::nullopt,
            "one matrix for input embedding and LM head (false: two matrices)",
            [](auto& m) -> auto& { return m.tied_embedding; })
        .include(
            "attention.full", attention_schema(false), [](auto& m) -> auto& { return m.full; })
        .include(
            "attention.sliding", attention_schema(true), [](auto& m) -> auto& { return m.sliding; })
        .text(
            "attention.pattern", std::nullopt,
            "layer kinds, cycled over the layers: 'F' full, 'S' sliding window "
            "(\"SF\": layers 0,2,4… sliding, 1,3,5… full)",
            [](auto& m) -> auto& { return m.pattern; })
        .integer(
            "ffn_hidden", "", 0, 1 << 22,
            "dense SwiGLU intermediate width of every layer (0: no dense feed-forward block)",
            [](auto& m) -> auto& { return m.ffn_hidden; })
        .integer(
            "experts", "", 0, 1 << 20, "routed experts per layer (0: a dense model)",
            [](auto& m) -> auto& { return m.experts; })
        .integer(
            "top_k", "", 0, 1024, "experts chosen per token",
            [](auto& m) -> auto& { return m.top_k; })
        .integer(
            "expert_hidden", "", 0, 1 << 20,
            "expert intermediate width (SwiGLU: three matrices per expert)",
            [](auto& m) -> auto& { return m.expert_hidden; })
        .integer(
            "rope_caches", "", 0, 1024, std::nullopt,
            "distinct RoPE (cos, sin) caches the implementation needs",
            [](auto& m) -> auto& { return m.rope_caches; });
    return s;
  }();
  return s;
}

void validate(const ModelArch& m) {
  if (m.pattern.empty() || m.pattern.find_first_not_of("FS") != std::string::npos)
    throw sim::ParamError(
        "attention.pattern",
        fmt::format("\"{}\" must be a non-empty string of 'F' and 'S'", m.pattern));
  if (m.top_k > m.experts)
    throw sim::ParamError("top_k", fmt::format("top_k {} exceeds experts {}", m.top_k, m.experts));
  if (m.moe() && (m.top_k < 1 || m.expert_hidden < 1))
    throw sim::ParamError("top_k", "a MoE (experts > 0) needs top_k ≥ 1 and expert_hidden ≥ 1");
  if (!m.moe() && m.ffn_hidden < 1)
    throw sim::ParamError("ffn_hidden", "a dense model (experts 0) needs ffn_hidden ≥ 1");
  const bool uses_sliding = m.pattern.find('S') != std::string::npos;
  if (uses_sliding &&
      (m.sliding.q_heads < 1 || m.sliding.kv_heads < 1 || m.sliding.qk_head_dim < 1 ||
       m.sliding.v_head_dim < 1 || m.sliding.window_tokens < 1))
    throw sim::ParamError("attention.sliding",
                          "the pattern has 'S' layers: give the sliding kind's heads, head "
                          "dimensions and window_tokens (each ≥ 1)");
  for (const auto* k : {&m.full, &m.sliding}) {
    if (k == &m.sliding && !uses_sliding) continue;
    if (k->q_heads % k->kv_heads != 0 || k->rope_dim > k->qk_head_dim)
      throw sim::ParamError(k == &m.full ? "attention.full" : "attention.sliding",
                            "q_heads must be a multiple of kv_heads and rope_dim ≤ qk_head_dim");
  }
}

}  // namespace twin::model
