// What each rank computes in one step: its rows (attention cost) and, per layer, the
// token-expert pairs its experts receive (routing). Ranks differ only through these.
#pragma once

#include <cstdint>
#include <vector>

#include "model/data.hpp"
#include "model/job.hpp"

namespace twin::model {

struct RankWorkload {
  double tokens = 0;         // rows_per_gpu × seq_len
  double pairs_full = 0;     // causal query–key pairs of full-attention layers (per layer)
  double pairs_sliding = 0;  // … of sliding-window layers (per layer)
  std::vector<double> expert_pairs;    // per layer: token–expert pairs this GPU's experts process
  double row_cost = 0;                 // Σ segment² of its rows (the balancing key, JOB.md §6.6)
  std::vector<std::int64_t> segments;  // its documents' lengths, over all its rows
  // Attention work in efficiency-weighted pairs, [sliding layer][backward pass]: Σ over documents
  // of pairs · (L + h)/L (weigh_attention(); L, h as in hardware/profile.hpp).
  double weighted_pairs[2][2] = {};
  // A block-sparse kernel's (FlexAttention's) work, [sliding layer]: its mask blocks of
  // kAttentionBlock tokens (data.hpp mask_blocks), and its query blocks.
  double mask_blocks[2] = {};
  double query_blocks = 0;
};

// FlexAttention's default sparse block, in tokens (torch.nn.attention.flex_attention).
constexpr std::int64_t kAttentionBlock = 128;

// Fills every rank's weighted_pairs with the half-lengths of the hardware profile's attention.
void weigh_attention(std::vector<RankWorkload>& w, const ModelArch& m, double fwd_half_tokens,
                     double bwd_half_tokens);

// The rows of one step as the data pipeline hands them out. Without balancing: packed rows in
// order. With balancing: a pool of `kBands` steps' worth of rows is sorted by cost (Σ segment²)
// and cut into bands of one step each; the twin simulates the median band (steps are shuffled,
// so every band is equally likely; the median is the typical step), its rows shuffled over
// the ranks.
std::vector<Row> assign_rows(const Job& job);
inline constexpr int kBands = 9;

// Routing: with group-limited routing every EP rank receives exactly top_k/ep of its node's
// token–expert pairs. With plain top-k an EP rank's share in a layer is (1 + cv·z)/ep,
// normalised over the node, with z standard normal drawn per (node, layer) from the data seed.
std::vector<RankWorkload> build_workload(const Job& job);

// Copies of a token that the EP exchange sends, dispatch and combine alike (JOB.md §4,
// training.ep_dispatch): `pairs` sends one per routed expert (top_k); `per_rank` (HybridEP,
// DeepEP) one per EP rank holding any of its experts, the rank expanding it to its experts and
// summing their outputs before the combine. Group-limited routing picks from every group, one
// per EP rank: min(ep, top_k) ranks. Plain top-k of E experts, E/ep per rank, drawn without
// replacement misses a given rank with probability C(E − E/ep, k)/C(E, k): on average
// ep·(1 − C(E − E/ep, k)/C(E, k)) ranks (3.61 for 384 experts, top-8, ep 4).
double ep_copies_per_token(const Job& job);

}  // namespace twin::model
