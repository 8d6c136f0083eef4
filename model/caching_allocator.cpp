#include "model/caching_allocator.hpp"

#include <algorithm>
#include <stdexcept>

namespace twin::model {

namespace {
std::int64_t round_up(std::int64_t x, std::int64_t m) {
  return (x + m - 1) / m * m;
}
}  // namespace

CachingAllocator::CachingAllocator(Options opts, int streams)
    : opts_(opts), per_stream_(static_cast<std::size_t>(streams)) {
  if (streams <= 0) throw std::invalid_argument("the allocator needs at least one stream");
}

std::int64_t CachingAllocator::round_size(std::int64_t bytes) {
  return bytes < kMinBlock ? kMinBlock : round_up(bytes, kMinBlock);
}

std::int64_t CachingAllocator::segment_size(std::int64_t rounded) {
  if (rounded <= kSmallSize) return kSmallBuffer;
  if (rounded < kMinLargeAlloc) return kLargeBuffer;
  return round_up(rounded, kRoundLarge);
}

CachingAllocator::Key CachingAllocator::key(std::int64_t id) const {
  const Block& b = blocks_[static_cast<std::size_t>(id)];
  return {b.stream, b.size, b.addr, id};
}

void CachingAllocator::account(int stream, std::int64_t allocated, std::int64_t reserved) {
  for (PoolStats* p : {&per_stream_[static_cast<std::size_t>(stream)], &total_}) {
    p->allocated += allocated;
    p->reserved += reserved;
    p->peak_allocated = std::max(p->peak_allocated, p->allocated);
    p->peak_reserved = std::max(p->peak_reserved, p->reserved);
  }
}

std::int64_t CachingAllocator::find_free(bool small, int stream, std::int64_t size) {
  auto& p = pool(small);
  auto it = p.lower_bound({stream, size, 0, 0});
  if (it == p.end() || std::get<0>(*it) != stream) return -1;
  const std::int64_t id = std::get<3>(*it);
  p.erase(it);
  return id;
}

std::int64_t CachingAllocator::new_segment(bool small, int stream, std::int64_t size) {
  const std::int64_t seg =
      opts_.expandable_segments ? round_up(size, kRoundLarge) : segment_size(size);
  if (total_.reserved + seg > opts_.capacity_bytes) return -1;
  blocks_.push_back({next_addr_, seg, stream, small, false, -1, -1});
  note(TraceEvent::segment_alloc, blocks_.back());
  next_addr_ += seg;
  account(stream, 0, seg);
  return static_cast<std::int64_t>(blocks_.size()) - 1;
}

// Frees (cudaFree) every cached segment that is one free block; with expandable segments, the
// pages of every free block. Returns the number of cudaFree calls.
int CachingAllocator::release_cached(std::int64_t& bytes) {
  int released = 0;
  for (auto* p : {&small_, &large_})
    for (auto it = p->begin(); it != p->end();) {
      Block& b = blocks_[static_cast<std::size_t>(std::get<3>(*it))];
      const bool whole = b.prev < 0 && b.next < 0;
      if (!whole && !opts_.expandable_segments) {
        ++it;
        continue;
      }
      note(TraceEvent::segment_free, b);  // with expandable segments: its pages unmapped
      if (b.prev >= 0) blocks_[static_cast<std::size_t>(b.prev)].next = b.next;
      if (b.next >= 0) blocks_[static_cast<std::size_t>(b.next)].prev = b.prev;
      account(b.stream, 0, -b.size);
      bytes += b.size;
      b.size = 0;
      ++released;
      it = p->erase(it);
    }
  return released;
}

CachingAllocator::Result CachingAllocator::malloc(std::int64_t bytes, int stream) {
  if (stream < 0 || static_cast<std::size_t>(stream) >= per_stream_.size())
    throw std::out_of_range("allocator stream out of range");
  const std::int64_t size = round_size(bytes);
  const bool small = size <= kSmallSize;
  Result r;
  std::int64_t id = find_free(small, stream, size);
  if (id < 0) id = new_segment(small, stream, size);
  if (id < 0) {
    r.retried = true;
    ++retries_;
    r.segments_released = release_cached(r.bytes_released);
    id = new_segment(small, stream, size);
  }
  if (id < 0) {
    ++ooms_;
    note(TraceEvent::oom, {0, size, stream});
    return r;
  }
  const std::int64_t remaining = blocks_[static_cast<std::size_t>(id)].size - size;
  if (small ? remaining >= kMinBlock : remaining > kSmallSize) {
    Block rest = blocks_[static_cast<std::size_t>(id)];
    rest.addr += size;
    rest.size = remaining;
    rest.prev = id;
    const auto rest_id = static_cast<std::int64_t>(blocks_.size());
    if (rest.next >= 0) blocks_[static_cast<std::size_t>(rest.next)].prev = rest_id;
    blocks_.push_back(rest);
    Block& b = blocks_[static_cast<std::size_t>(id)];
    b.size = size;
    b.next = rest_id;
    pool(small).insert(key(rest_id));
  }
  Block& b = blocks_[static_cast<std::size_t>(id)];
  b.allocated = true;
  note(TraceEvent::alloc, b);
  account(stream, b.size, 0);
  r.block = id;
  return r;
}

void CachingAllocator::free(std::int64_t id) {
  if (id < 0 || static_cast<std::size_t>(id) >= blocks_.size() ||
      !blocks_[static_cast<std::size_t>(id)].allocated)
    throw std::invalid_argument("free of a block that is not allocated");
  Block& b = blocks_[static_cast<std::size_t>(id)];
  b.allocated = false;
  note(TraceEvent::free, b);
  account(b.stream, -b.size, 0);
  auto& p = pool(b.small);
  // Merge with free neighbours of the same segment (they are in the pool under their own keys).
  for (const std::int64_t n : {b.prev, b.next}) {
    if (n < 0 || blocks_[static_cast<std::size_t>(n)].allocated) continue;
    Block& o = blocks_[static_cast<std::size_t>(n)];
    p.erase(key(n));
    if (n == b.prev) {
      b.addr = o.addr;
      b.prev = o.prev;
      if (o.prev >= 0) blocks_[static_cast<std::size_t>(o.prev)].next = id;
    } else {
      b.next = o.next;
      if (o.next >= 0) blocks_[static_cast<std::size_t>(o.next)].prev = id;
    }
    b.size += o.size;
    o.size = 0;
  }
  p.insert(key(id));
}

std::vector<CachingAllocator::SegmentView> CachingAllocator::segments() const {
  std::vector<SegmentView> out;
  for (std::size_t i = 0; i < blocks_.size(); ++i) {
    const Block& head = blocks_[i];
    if (head.size == 0 || head.prev >= 0) continue;  // merged away, or not a segment's first block
    SegmentView seg{head.addr, 0, head.stream, head.small, {}};
    for (auto id = static_cast<std::int64_t>(i); id >= 0;
         id = blocks_[static_cast<std::size_t>(id)].next) {
      const Block& b = blocks_[static_cast<std::size_t>(id)];
      seg.blocks.push_back({id, b.addr, b.size, b.allocated});
      seg.size += b.size;
    }
    out.push_back(std::move(seg));
  }
  std::sort(out.begin(), out.end(),
            [](const SegmentView& a, const SegmentView& b) { return a.addr < b.addr; });
  return out;
}

void CachingAllocator::reset_peaks() {
  auto reset = [](PoolStats& p) {
    p.peak_allocated = p.allocated;
    p.peak_reserved = p.reserved;
  };
  reset(total_);
  for (PoolStats& p : per_stream_) reset(p);
}

std::int64_t CachingAllocator::inactive_split() const {
  std::int64_t s = 0;
  for (const auto* p : {&small_, &large_})
    for (const auto& k : *p) {
      const Block& b = blocks_[static_cast<std::size_t>(std::get<3>(k))];
      if (b.prev >= 0 || b.next >= 0) s += b.size;
    }
  return s;
}

}  // namespace twin::model
