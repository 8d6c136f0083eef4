// Documents packed into rows (JOB.md §6.6): documents in random order fill rows of seq_len
// tokens; a document that does not fit continues in the next row. A segment is the part of a
// document inside one row; attention is causal within a segment (document masking), so a row's
// attention cost follows from its segment lengths.
#pragma once

#include <cstdint>
#include <vector>

#include "model/job.hpp"
#include "sim/random.hpp"

namespace twin::model {

struct Row {
  std::vector<std::int64_t> segments;  // token counts, summing to the row length
};

// Draws document lengths until `tokens` are covered: from data.doc_lengths (shuffled, cycled) when
// given, else from the log-normal (median, sigma), clipped to [1, 64 Mi] tokens.
std::vector<std::int64_t> draw_documents(const DataOptions& data, std::int64_t tokens,
                                         sim::Rng& rng);

// Packs documents, in the given order, into `rows` rows of `seq_len` tokens.
std::vector<Row> pack_rows(const std::vector<std::int64_t>& docs, std::int64_t seq_len,
                           std::int64_t rows);

// `rows` rows of one segment each: attention causal over the whole row (no document mask, as
// TorchTitan's Llama 3 with SDPA's is_causal).
std::vector<Row> whole_rows(std::int64_t seq_len, std::int64_t rows);

// The rows of one step: rows_per_gpu consecutive rows per data-parallel rank, in order (data.
// document_masking false: whole rows).
std::vector<Row> step_rows(const Job& job);

// Query–key pairs computed by causal attention over one segment of n tokens when each query sees
// at most `window` keys (itself included); window 0 means unlimited:
//   n ≤ w: n(n+1)/2;   n > w: w(w+1)/2 + (n−w)·w.
double causal_pairs(std::int64_t n, std::int64_t window);
double row_pairs(const Row& row, std::int64_t window);

// A block-sparse attention kernel's work over a packed sequence of documents (`segments`, in
// order): the (query block, key block) pairs of `block` tokens each that hold at least one pair
// the causal document mask (and `window`) allows. Query block i starts at q = i·block and reaches
// back to the block of the first key its first query sees, max(its document's start, q − w + 1):
// i − ⌊that / block⌋ + 1 blocks. FlexAttention's default block is 128 (torch.nn.attention.
// flex_attention, _DEFAULT_SPARSE_BLOCK_SIZE); calibrate/attention_bench.py counts alike.
double mask_blocks(const std::vector<std::int64_t>& segments, std::int64_t window,
                   std::int64_t block);

}  // namespace twin::model
