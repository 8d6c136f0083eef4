// An emulation of PyTorch's CUDA caching allocator (c10/cuda/CUDACachingAllocator.cpp, the
// native backend, default settings), as JOB.md §8 summarises it:
//  - request sizes round up to 512 B;
//  - two pools: small (rounded size ≤ 1 MiB, carved from 2 MiB segments) and large; a new large
//    segment is 20 MiB for requests < 10 MiB, else the request rounded up to 2 MiB;
//  - a free block is reused best-fit (smallest size, then lowest address) among blocks of the
//    same pool *and the same stream*: a stream's cache never serves another stream;
//  - a reused block splits when what remains is ≥ 512 B (small pool) or > 1 MiB (large pool);
//    freed blocks merge with free neighbours of the same segment;
//  - on a miss: cudaMalloc a new segment if the reserved bytes stay within the capacity; else
//    synchronize, cudaFree every cached segment that is entirely free (all streams, both pools)
//    and try once more — a *retry* (num_alloc_retries counts the attempt); else out of memory.
//    (Freeing oversize cached blocks first only applies with max_split_size set: not modelled.)
//  - expandable_segments (an option): segments grow in 2 MiB pages, so a miss maps only
//    round_up(size, 2 MiB) and a retry can unmap the pages of any free block, split or not. This
//    is the option's intent; its exact page bookkeeping is not emulated.
// Cross-stream use (record_stream / events) is the caller's: it frees a block when the last
// stream using it has finished with it.
#pragma once

#include <algorithm>
#include <cstdint>
#include <string>
#include <tuple>
#include <vector>

namespace twin::model {

struct PoolStats {
  std::int64_t allocated = 0, reserved = 0;
  std::int64_t peak_allocated = 0, peak_reserved = 0;
};

class CachingAllocator {
 public:
  static constexpr std::int64_t kMinBlock = 512;
  static constexpr std::int64_t kSmallSize = 1 << 20;       // 1 MiB
  static constexpr std::int64_t kSmallBuffer = 2 << 20;     // 2 MiB
  static constexpr std::int64_t kLargeBuffer = 20 << 20;    // 20 MiB
  static constexpr std::int64_t kMinLargeAlloc = 10 << 20;  // 10 MiB
  static constexpr std::int64_t kRoundLarge = 2 << 20;      // 2 MiB

  struct Options {
    std::int64_t capacity_bytes = 0;  // what cudaMalloc may reserve in all
    bool expandable_segments = false;
  };
  struct Result {
    std::int64_t block = -1;  // −1: out of memory
    bool retried = false;
    int segments_released = 0;  // cudaFree calls made by the retry
    std::int64_t bytes_released = 0;
  };

  // What PyTorch's allocator records for torch.cuda.memory._record_memory_history (its device
  // trace's actions; a free is requested and completed at once here: no cross-stream use) and
  // shows in torch.cuda.memory._snapshot() (segments with their blocks).
  struct TraceEvent {
    enum Action : std::uint8_t { segment_alloc, alloc, free, segment_free, oom };
    Action action = alloc;
    std::int64_t addr = 0, size = 0;
    int stream = 0;
  };
  struct BlockView {
    std::int64_t id = 0, addr = 0, size = 0;
    bool allocated = false;
  };
  struct SegmentView {
    std::int64_t addr = 0, size = 0;
    int stream = 0;
    bool small = false;
    std::vector<BlockView> blocks;  // in address order
  };

  CachingAllocator(Options opts, int streams);
  // Appends every action from now on to *sink (nullptr: stop).
  void record(std::vector<TraceEvent>* sink) { trace_ = sink; }
  // The segments now reserved, in address order.
  std::vector<SegmentView> segments() const;

  static std::int64_t round_size(std::int64_t bytes);
  static std::int64_t segment_size(std::int64_t rounded);

  Result malloc(std::int64_t bytes, int stream);
  void free(std::int64_t block);
  std::int64_t block_size(std::int64_t block) const { return blocks_[block].size; }

  const PoolStats& total() const { return total_; }
  // Peaks restart from the current values (torch.cuda.reset_peak_memory_stats).
  void reset_peaks();
  const PoolStats& stream(int s) const { return per_stream_[static_cast<std::size_t>(s)]; }
  std::int64_t retries() const { return retries_; }
  std::int64_t ooms() const { return ooms_; }
  // Free bytes in segments that are split (PyTorch's inactive_split_bytes).
  std::int64_t inactive_split() const;

 private:
  struct Block {
    std::int64_t addr = 0, size = 0;
    int stream = 0;
    bool small = false, allocated = false;
    std::int64_t prev = -1, next = -1;  // neighbours in the segment
  };
  using Key = std::tuple<int, std::int64_t, std::int64_t, std::int64_t>;  // stream, size, addr, id
  // A pool's free blocks in key order: a sorted vector, not a tree — a pool caches a few to a
  // few hundred free blocks (europa: at most 16), where a search and a short move beat a tree's
  // allocation and pointer chasing (a 384-GPU step's replay: ~10⁶ of these operations).
  class FreeBlocks {
   public:
    using const_iterator = std::vector<Key>::const_iterator;
    const_iterator begin() const { return keys_.begin(); }
    const_iterator end() const { return keys_.end(); }
    const_iterator lower_bound(const Key& k) const {
      return std::lower_bound(keys_.begin(), keys_.end(), k);
    }
    void insert(const Key& k) { keys_.insert(lower_bound(k), k); }
    const_iterator erase(const_iterator it) { return keys_.erase(it); }
    void erase(const Key& k) { keys_.erase(lower_bound(k)); }  // k must be present

   private:
    std::vector<Key> keys_;
  };

  FreeBlocks& pool(bool small) { return small ? small_ : large_; }
  Key key(std::int64_t id) const;
  std::int64_t find_free(bool small, int stream, std::int64_t size);
  std::int64_t new_segment(bool small, int stream, std::int64_t size);
  int release_cached(std::int64_t& bytes);
  void account(int stream, std::int64_t allocated, std::int64_t reserved);

  Options opts_;
  std::vector<Block> blocks_;
  FreeBlocks small_, large_;
  std::vector<PoolStats> per_stream_;
  PoolStats total_;
  std::int64_t next_addr_ = 0;
  std::int64_t retries_ = 0, ooms_ = 0;
  std::vector<TraceEvent>* trace_ = nullptr;
  void note(TraceEvent::Action a, const Block& b) {
    if (trace_) trace_->push_back({a, b.addr, b.size, b.stream});
  }
};

}  // namespace twin::model
