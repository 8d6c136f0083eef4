#include "model/data.hpp"

#include <algorithm>
#include <cmath>

namespace twin::model {

std::vector<std::int64_t> draw_documents(const DataOptions& data, std::int64_t tokens,
                                         sim::Rng& rng) {
  std::vector<std::int64_t> docs;
  std::int64_t covered = 0;
  if (!data.doc_lengths.empty()) {
    std::vector<std::int64_t> pool = data.doc_lengths;
    while (covered < tokens) {
      rng.shuffle(pool);
      for (auto len : pool) {
        docs.push_back(len);
        if ((covered += len) >= tokens) break;
      }
    }
    return docs;
  }
  const double mu = std::log(data.doc_length_median_tokens);
  constexpr double kMaxDoc = 64.0 * 1024 * 1024;
  while (covered < tokens) {
    const double len = std::exp(mu + data.doc_length_sigma * rng.normal());
    const auto n = static_cast<std::int64_t>(std::clamp(std::round(len), 1.0, kMaxDoc));
    docs.push_back(n);
    covered += n;
  }
  return docs;
}

std::vector<Row> pack_rows(const std::vector<std::int64_t>& docs, std::int64_t seq_len,
                           std::int64_t rows) {
  std::vector<Row> out(static_cast<std::size_t>(rows));
  std::size_t d = 0;
  std::int64_t left_in_doc = docs.empty() ? 0 : docs[0];
  for (auto& row : out) {
    std::int64_t room = seq_len;
    while (room > 0 && d < docs.size()) {
      const std::int64_t take = std::min(room, left_in_doc);
      row.segments.push_back(take);
      room -= take;
      left_in_doc -= take;
      if (left_in_doc == 0 && ++d < docs.size()) left_in_doc = docs[d];
    }
  }
  return out;
}

std::vector<Row> whole_rows(std::int64_t seq_len, std::int64_t rows) {
  return std::vector<Row>(static_cast<std::size_t>(rows), Row{{seq_len}});
}

std::vector<Row> step_rows(const Job& job) {
  sim::Rng rng(static_cast<std::uint64_t>(job.data.seed));
  const std::int64_t rows = job.parallel.data_ranks() * job.training.rows_per_gpu;
  if (!job.data.document_masking) return whole_rows(job.training.seq_len, rows);
  const auto docs = draw_documents(job.data, rows * job.training.seq_len, rng);
  return pack_rows(docs, job.training.seq_len, rows);
}

double causal_pairs(std::int64_t n, std::int64_t window) {
  const double nn = static_cast<double>(n);
  if (window <= 0 || window >= n) return nn * (nn + 1) / 2;
  const double w = static_cast<double>(window);
  return w * (w + 1) / 2 + (nn - w) * w;
}

double mask_blocks(const std::vector<std::int64_t>& segments, std::int64_t window,
                   std::int64_t block) {
  std::int64_t tokens = 0;
  for (auto n : segments) tokens += n;
  double total = 0;
  std::size_t doc = 0;
  std::int64_t doc_start = 0;
  for (std::int64_t q = 0; q < tokens; q += block) {
    while (doc < segments.size() && doc_start + segments[doc] <= q) doc_start += segments[doc++];
    const std::int64_t first_key = window > 0 ? std::max(doc_start, q - window + 1) : doc_start;
    total += static_cast<double>(q / block - first_key / block + 1);
  }
  return total;
}

double row_pairs(const Row& row, std::int64_t window) {
  double p = 0;
  for (auto n : row.segments) p += causal_pairs(n, window);
  return p;
}

}  // namespace twin::model
