// Memory for the simulator's large, long-lived arrays (a step's ~10⁶ tasks, their edges, the
// cluster's arena). Blocks of 2 MiB or more come 2 MiB-aligned and, on Linux, marked for
// transparent huge pages (madvise MADV_HUGEPAGE): touching 100 MB then costs ~50 page faults
// instead of ~25,000. Freed large blocks are kept (up to kKeepBytes) and handed out again to a
// request of the same size, so that the next simulation of a sweep or a benchmark reuses pages
// the kernel has already zeroed — on our 2-core VM, first touches of fresh memory were a fifth
// of a 384-GPU step. Smaller blocks come from operator new. Thread-safe.
#pragma once

#include <cstddef>
#include <map>
#include <memory_resource>
#include <mutex>
#include <new>
#include <stdexcept>
#include <utility>
#include <vector>

namespace twin::sim {

class LargePages final : public std::pmr::memory_resource {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;
  static constexpr std::size_t kKeepBytes = std::size_t{1} << 30;
  ~LargePages() override;

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override;
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override {
    return this == &o;
  }

  std::mutex mutex_;
  std::multimap<std::size_t, void*> kept_;  // freed blocks by rounded size
  std::size_t kept_bytes_ = 0;
};

// The one instance.
LargePages& large_pages();

// The small allocations' side of the same cost: glibc gives the top of its heap back to the
// kernel whenever more than 128 KiB is free there (M_TRIM_THRESHOLD), so every simulation of a
// sweep or a benchmark touched fresh, kernel-zeroed pages again for its many small blocks
// (StepEuropaSimulate: ~13% of its time in page faults, perf). Programs that run many
// simulations call this once at start: the heap keeps what it has grown to (at most its peak,
// which the next simulation reuses). Measured: StepEuropaSimulate median 824 → 654 ms, side by side
// (reports/performance/README.md). No effect outside glibc.
void keep_freed_heap();

// An append-only array in chunks of 2^kBits elements from large_pages(): elements never move
// (stable addresses), growing never copies, and memory is touched only as elements are added
// (a vector's doubling touches up to twice its final size, a cost on first touch).
template <class T, unsigned kBits>
class Chunked {
 public:
  static constexpr std::size_t kChunk = std::size_t{1} << kBits;
  Chunked() = default;
  Chunked(const Chunked&) = delete;
  Chunked& operator=(const Chunked&) = delete;
  ~Chunked() {
    for (std::size_t i = 0; i < size_; ++i) (*this)[i].~T();
    for (T* c : chunks_) large_pages().deallocate(c, kChunk * sizeof(T), alignof(T));
  }
  std::size_t size() const { return size_; }
  T& operator[](std::size_t i) { return chunks_[i >> kBits][i & (kChunk - 1)]; }
  const T& operator[](std::size_t i) const { return chunks_[i >> kBits][i & (kChunk - 1)]; }
  template <class... A>
  T& emplace_back(A&&... args) {
    if (size_ == chunks_.size() * kChunk)
      chunks_.push_back(static_cast<T*>(large_pages().allocate(kChunk * sizeof(T), alignof(T))));
    T* p = new (&(*this)[size_]) T{std::forward<A>(args)...};
    ++size_;
    return *p;
  }
  // Appends [first, last) inside one chunk (the rest of a chunk too short for it is filled with
  // default elements), so the run is contiguous: returns the index of its first element.
  template <class It>
  std::size_t append_run(It first, It last) {
    const auto n = static_cast<std::size_t>(last - first);
    if (n > kChunk) throw std::length_error("a run longer than a chunk");
    if (const std::size_t room = kChunk - size_ % kChunk; n > room)
      for (std::size_t i = 0; i < room; ++i) emplace_back();
    const std::size_t at = size_;
    for (; first != last; ++first) emplace_back(*first);
    return at;
  }

 private:
  std::vector<T*> chunks_;
  std::size_t size_ = 0;
};

}  // namespace twin::sim
