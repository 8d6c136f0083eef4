// Memory for the simulator's large, long-lived arrays (a step's ~10⁶ tasks, the cluster's
// arena): blocks of 2 MiB or more come 2 MiB-aligned and, on Linux, marked for transparent huge
// pages (madvise MADV_HUGEPAGE), so that touching 100 MB costs ~50 page faults instead of
// ~25,000 (measured: a 384-GPU step spent ~15% of its time in page faults). Smaller blocks, and
// every block elsewhere, come from operator new. Thread-safe: it keeps no state.
#pragma once

#include <cstddef>
#include <memory_resource>

namespace twin::sim {

class LargePages final : public std::pmr::memory_resource {
 public:
  static constexpr std::size_t kHugePage = std::size_t{2} << 20;

 private:
  void* do_allocate(std::size_t bytes, std::size_t align) override;
  void do_deallocate(void* p, std::size_t bytes, std::size_t align) override;
  bool do_is_equal(const std::pmr::memory_resource& o) const noexcept override { return this == &o; }
};

// The one instance.
LargePages& large_pages();

}  // namespace twin::sim
