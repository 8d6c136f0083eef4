#include "sim/large_pages.hpp"

#include <cstdlib>
#include <new>

#if defined(__linux__)
#include <sys/mman.h>
#endif

namespace twin::sim {

namespace {
bool large(std::size_t bytes) { return bytes >= LargePages::kHugePage; }
std::size_t rounded(std::size_t bytes) {
  return (bytes + LargePages::kHugePage - 1) / LargePages::kHugePage * LargePages::kHugePage;
}
}  // namespace

void* LargePages::do_allocate(std::size_t bytes, std::size_t align) {
  if (!large(bytes) || align > kHugePage) return ::operator new(bytes, std::align_val_t{align});
  void* p = std::aligned_alloc(kHugePage, rounded(bytes));
  if (!p) throw std::bad_alloc();
#if defined(MADV_HUGEPAGE)
  madvise(p, rounded(bytes), MADV_HUGEPAGE);  // advice only: without THP it changes nothing
#endif
  return p;
}

void LargePages::do_deallocate(void* p, std::size_t bytes, std::size_t align) {
  if (!large(bytes) || align > kHugePage) return ::operator delete(p, std::align_val_t{align});
  std::free(p);
}

LargePages& large_pages() {
  static LargePages r;
  return r;
}

}  // namespace twin::sim
