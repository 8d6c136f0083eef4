#include "sim/large_pages.hpp"

#include <climits>
#include <cstdlib>
#include <new>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace twin::sim {

namespace {
bool large(std::size_t bytes, std::size_t align) {
  return bytes >= LargePages::kHugePage && align <= LargePages::kHugePage;
}
std::size_t rounded(std::size_t bytes) {
  return (bytes + LargePages::kHugePage - 1) / LargePages::kHugePage * LargePages::kHugePage;
}
}  // namespace

LargePages::~LargePages() {
  for (const auto& [size, p] : kept_) std::free(p);
}

void* LargePages::do_allocate(std::size_t bytes, std::size_t align) {
  if (!large(bytes, align)) return ::operator new (bytes, std::align_val_t{align});
  const std::size_t size = rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (auto it = kept_.find(size); it != kept_.end()) {
      void* p = it->second;
      kept_.erase(it);
      kept_bytes_ -= size;
      return p;
    }
  }
  void* p = std::aligned_alloc(kHugePage, size);
  if (!p) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  madvise(p, size, MADV_HUGEPAGE);  // advice only: without THP it changes nothing
#endif
  return p;
}

void LargePages::do_deallocate(void* p, std::size_t bytes, std::size_t align) {
  if (!large(bytes, align)) return ::operator delete (p, std::align_val_t{align});
  const std::size_t size = rounded(bytes);
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (kept_bytes_ + size <= kKeepBytes) {
      kept_.emplace(size, p);
      kept_bytes_ += size;
      return;
    }
  }
  std::free(p);
}

LargePages& large_pages() {
  static LargePages r;
  return r;
}

void keep_freed_heap() {
#if defined(__GLIBC__)
  mallopt(M_TRIM_THRESHOLD, INT_MAX);  // also fixes the mmap threshold at its 128 KiB default
#endif
}

}  // namespace twin::sim
