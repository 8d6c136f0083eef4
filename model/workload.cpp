#include "model/workload.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace twin::model {

namespace {

double row_cost(const Row& r) {
  double c = 0;
  for (auto n : r.segments) c += static_cast<double>(n) * static_cast<double>(n);
  return c;
}

std::int64_t full_window(const ModelArch& m) {
  return m.full.window_tokens;
}

}  // namespace

std::vector<Row> assign_rows(const Job& job) {
  if (!job.data.balance_attention || !job.data.document_masking) return step_rows(job);
  const std::int64_t rows = job.parallel.data_ranks() * job.training.rows_per_gpu;
  sim::Rng rng(static_cast<std::uint64_t>(job.data.seed));
  const auto docs = draw_documents(job.data, rows * kBands * job.training.seq_len, rng);
  auto pool = pack_rows(docs, job.training.seq_len, rows * kBands);
  std::vector<std::size_t> order(pool.size());
  std::iota(order.begin(), order.end(), 0);
  std::vector<double> cost(pool.size());
  for (std::size_t i = 0; i < pool.size(); ++i) cost[i] = row_cost(pool[i]);
  std::stable_sort(order.begin(), order.end(), [&](auto a, auto b) { return cost[a] < cost[b]; });
  const std::size_t band = kBands / 2;
  std::vector<Row> out;
  for (std::int64_t i = 0; i < rows; ++i)
    out.push_back(std::move(
        pool[order[band * static_cast<std::size_t>(rows) + static_cast<std::size_t>(i)]]));
  rng.shuffle(out);
  return out;
}

std::vector<RankWorkload> build_workload(const Job& job) {
  const auto& m = job.model;
  const auto& p = job.parallel;
  const auto rows = assign_rows(job);
  const std::int64_t n = p.total_gpus();
  std::vector<RankWorkload> w(static_cast<std::size_t>(n));
  for (std::int64_t r = 0; r < n; ++r) {
    auto& rw = w[static_cast<std::size_t>(r)];
    const std::int64_t data_rank = r / p.tp;  // a TP group's ranks share their rows
    for (std::int64_t k = 0; k < job.training.rows_per_gpu; ++k) {
      const Row& row = rows[static_cast<std::size_t>(data_rank * job.training.rows_per_gpu + k)];
      rw.tokens += static_cast<double>(job.training.seq_len);
      rw.pairs_full += row_pairs(row, full_window(m));
      rw.pairs_sliding += row_pairs(row, m.sliding.window_tokens);
      rw.row_cost += row_cost(row);
      rw.segments.insert(rw.segments.end(), row.segments.begin(), row.segments.end());
    }
    // Rows are whole multiples of the block (seq_len), so the rank's rows pack as one sequence.
    rw.mask_blocks[0] = mask_blocks(rw.segments, full_window(m), kAttentionBlock);
    rw.mask_blocks[1] = mask_blocks(rw.segments, m.sliding.window_tokens, kAttentionBlock);
    rw.query_blocks = std::ceil(rw.tokens / static_cast<double>(kAttentionBlock));
  }
  // Routing, per EP group (ep consecutive ranks of a node) and layer.
  sim::Rng rng(static_cast<std::uint64_t>(job.data.seed) ^ 0x5eedULL);
  const bool balanced = job.training.routing == ExpertRouting::group_limited;
  for (std::int64_t g0 = 0; g0 < n; g0 += p.ep) {
    double group_tokens = 0;
    for (std::int64_t j = 0; j < p.ep; ++j)
      group_tokens += w[static_cast<std::size_t>(g0 + j)].tokens;
    const double pairs = group_tokens * static_cast<double>(m.top_k);
    for (std::int64_t l = 0; l < m.layers; ++l) {
      std::vector<double> share(static_cast<std::size_t>(p.ep), 1.0);
      if (!balanced)
        for (auto& s : share)
          s = std::max(0.05, 1 + job.training.routing_imbalance_cv * rng.normal());
      const double total = std::accumulate(share.begin(), share.end(), 0.0);
      for (std::int64_t j = 0; j < p.ep; ++j)
        w[static_cast<std::size_t>(g0 + j)].expert_pairs.push_back(
            pairs * share[static_cast<std::size_t>(j)] / total);
    }
  }
  return w;
}

void weigh_attention(std::vector<RankWorkload>& w, const ModelArch& m, double fwd_half_tokens,
                     double bwd_half_tokens) {
  const std::int64_t windows[2] = {full_window(m), m.sliding.window_tokens};
  const double half[2] = {fwd_half_tokens, bwd_half_tokens};
  for (auto& rw : w)
    for (int s = 0; s < 2; ++s)
      for (int b = 0; b < 2; ++b) {
        double p = 0;
        for (auto n : rw.segments) {
          const auto win = windows[s];
          const double L = static_cast<double>(win > 0 ? std::min(n, win) : n);
          p += causal_pairs(n, win) * (L + half[b]) / L;
        }
        rw.weighted_pairs[s][b] = p;
      }
}

double ep_copies_per_token(const Job& job) {
  const auto& m = job.model;
  const double k = static_cast<double>(m.top_k), ep = static_cast<double>(job.parallel.ep);
  if (job.training.ep_dispatch == EpDispatch::pairs) return k;
  if (job.training.routing == ExpertRouting::group_limited) return std::min(ep, k);
  const double E = static_cast<double>(m.experts), other = E - E / ep;
  double miss = 1;  // C(E − E/ep, k) / C(E, k), term by term
  for (std::int64_t i = 0; i < m.top_k; ++i)
    miss *= std::max(0.0, other - static_cast<double>(i)) / (E - static_cast<double>(i));
  return ep * (1 - miss);
}

}  // namespace twin::model
