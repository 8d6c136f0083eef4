// The memory twin: the caching-allocator emulation on hand-worked sequences and against
// PyTorch's real allocator (figures recorded on our H200 by calibrate/allocator_replay.py), and
// the host (Grace) accounting.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <set>

#include "model/caching_allocator.hpp"
#include "model/host_memory.hpp"
#include "model/memory_bound.hpp"
#include "model/memory_replay.hpp"
#include "model/step_memory.hpp"

using namespace twin::model;

namespace {
constexpr std::int64_t MiB = 1 << 20;
constexpr double GiB = 1024.0 * MiB;

CachingAllocator alloc(std::int64_t capacity, int streams = 2) {
  return CachingAllocator({capacity, false}, streams);
}

struct Replayed {
  PoolStats total;
  std::int64_t retries = 0, ooms = 0;
};

// Replays a sequence in the format of `twin memory --events`, `steps` times in a row without
// emptying the cache (a buffer never freed stays allocated), as calibrate/allocator_replay.py
// --steps does on the real allocator; the figures are the last time through.
Replayed replay(const nlohmann::json& seq, std::int64_t capacity, int steps = 1) {
  CachingAllocator a({capacity, seq.value("expandable_segments", false)},
                     static_cast<int>(seq["pools"].size()));
  std::set<std::int64_t> freed;
  for (const auto& e : seq["events"])
    if (e[0] == "free") freed.insert(e[1].get<std::int64_t>());
  std::map<std::int64_t, std::int64_t> blocks;
  std::int64_t retries_before = 0, ooms_before = 0;
  for (int step = 0; step < steps && a.ooms() == 0; ++step) {
    a.reset_peaks();
    retries_before = a.retries(), ooms_before = a.ooms();
    for (const auto& e : seq["events"]) {
      const auto id = e[1].get<std::int64_t>();
      if (e[0] == "alloc") {
        if (step > 0 && !freed.count(id)) continue;
        const auto r = a.malloc(e[2].get<std::int64_t>(), e[3].get<int>());
        if (r.block >= 0) blocks[id] = r.block;
      } else if (blocks.count(id)) {
        a.free(blocks[id]);
        blocks.erase(id);
      }
    }
  }
  return {a.total(), a.retries() - retries_before, a.ooms() - ooms_before};
}

nlohmann::json read(const std::string& name) {
  std::ifstream f(std::string(TWIN_SOURCE_DIR) + "/tests/data/allocator/" + name);
  REQUIRE(f.good());
  return nlohmann::json::parse(f);
}
}  // namespace

TEST_CASE("allocator: sizes round to 512 B; small requests share 2 MiB segments") {
  CHECK(CachingAllocator::round_size(1) == 512);
  CHECK(CachingAllocator::round_size(512) == 512);
  CHECK(CachingAllocator::round_size(513) == 1024);
  CHECK(CachingAllocator::segment_size(MiB) == 2 * MiB);            // small pool
  CHECK(CachingAllocator::segment_size(MiB + 512) == 20 * MiB);     // < 10 MiB
  CHECK(CachingAllocator::segment_size(11 * MiB + 1) == 12 * MiB);  // rounded to 2 MiB
  auto a = alloc(1 << 30);
  a.malloc(1, 0);
  a.malloc(511, 0);  // the remainder of the same 2 MiB segment
  CHECK(a.total().reserved == 2 * MiB);
  CHECK(a.total().allocated == 1024);
}

TEST_CASE("allocator: a large block splits only when more than 1 MiB would remain") {
  auto a = alloc(1 << 30);
  const auto b = a.malloc(30 * MiB, 0).block;
  a.free(b);
  a.malloc(29 * MiB, 0);  // 1 MiB would remain: not > 1 MiB, the whole 30 MiB block is used
  CHECK(a.total().allocated == 30 * MiB);
  a.free(a.malloc(5 * MiB, 0).block);  // a new 20 MiB segment, split: 5 + 15
  CHECK(a.total().reserved == 50 * MiB);
  CHECK(a.inactive_split() == 0);  // freed 5 MiB merged back into one free 20 MiB block
}

TEST_CASE("allocator: one stream's cache never serves another stream") {
  auto a = alloc(1 << 30);
  a.free(a.malloc(100 * MiB, 0).block);
  a.malloc(100 * MiB, 1);
  CHECK(a.total().reserved == 200 * MiB);
  CHECK(a.stream(0).reserved == 100 * MiB);
  CHECK(a.stream(0).allocated == 0);
}

TEST_CASE("allocator: a miss at capacity frees unsplit cached segments and retries") {
  auto a = alloc(256 * MiB);
  const auto x = a.malloc(100 * MiB, 0).block, y = a.malloc(100 * MiB, 0).block;
  a.free(x);
  a.free(y);
  const auto r = a.malloc(150 * MiB, 1);  // 200 + 150 > 256: release stream 0's cache, retry
  CHECK(r.retried);
  CHECK(r.segments_released == 2);
  CHECK(r.block >= 0);
  CHECK(a.total().reserved == 150 * MiB);
  // A split cached segment (a block of it still in use) cannot be released: out of memory.
  auto b = alloc(256 * MiB);
  b.free(b.malloc(120 * MiB, 0).block);
  b.malloc(50 * MiB, 0);  // splits the cached 120 MiB segment
  const auto f = b.malloc(150 * MiB, 1);
  CHECK(f.retried);
  CHECK(f.block < 0);
  CHECK(b.ooms() == 1);
}

TEST_CASE("allocator: expandable segments map pages, and a retry can unmap split free blocks") {
  CachingAllocator a({256 * MiB, true}, 2);
  a.malloc(3 * MiB, 0);
  CHECK(a.total().reserved == 4 * MiB);  // 2 MiB pages, not a 20 MiB segment
  a.free(a.malloc(120 * MiB, 0).block);
  CHECK(a.malloc(200 * MiB, 1).block >= 0);  // the free 120 MiB is unmapped by the retry
}

TEST_CASE("allocator: matches PyTorch's real caching allocator on recorded sequences") {
  const auto real = read("real-h200.json");
  std::map<std::string, nlohmann::json> seqs;
  for (const char* f : {"synthetic.json", "rung02-rank0.json", "rung11-rank0.json"}) {
    const auto d = read(f);
    for (const auto& s : d.contains("sequences") ? d["sequences"] : nlohmann::json::array({d}))
      seqs[s["scenario"].get<std::string>()] = s;
  }
  CHECK(real["results"].size() >= 10);
  for (const auto& r : real["results"]) {
    const auto name = r["sequence"].get<std::string>();
    CAPTURE(name);
    CAPTURE(r["capacity_bytes"].get<std::int64_t>());
    REQUIRE(seqs.count(name));
    const auto got = replay(seqs[name], r["allowed_bytes"].get<std::int64_t>());
    CHECK(got.total.peak_reserved == r["peak_reserved_bytes"].get<std::int64_t>());
    CHECK(got.total.peak_allocated == r["peak_allocated_bytes"].get<std::int64_t>());
    CHECK(got.total.reserved == r["end_reserved_bytes"].get<std::int64_t>());
    CHECK(got.retries == r["num_alloc_retries"].get<std::int64_t>());
    CHECK(got.ooms == r["num_ooms"].get<std::int64_t>());
  }
}

// A training loop keeps the allocator's caches from step to step (model/memory_replay.hpp):
// the real allocator replayed 2 and 3 times in a row, against the emulation replayed alike —
// rung 11's rank 0 retries once in a later step (not in the first), and rung 4's does not.
TEST_CASE("allocator: matches PyTorch's real caching allocator over consecutive steps") {
  const auto real = read("real-h200-steps.json");
  REQUIRE(real["results"].size() == 10);
  for (const auto& r : real["results"]) {
    const auto file = r["file"].get<std::string>();
    CAPTURE(file);
    CAPTURE(r["capacity_bytes"].get<std::int64_t>());
    CAPTURE(r["steps"].get<int>());
    const auto got =
        replay(read(file), r["allowed_bytes"].get<std::int64_t>(), r["steps"].get<int>());
    CHECK(got.total.peak_reserved == r["peak_reserved_bytes"].get<std::int64_t>());
    CHECK(got.total.peak_allocated == r["peak_allocated_bytes"].get<std::int64_t>());
    CHECK(got.total.reserved == r["end_reserved_bytes"].get<std::int64_t>());
    CHECK(got.retries == r["num_alloc_retries"].get<std::int64_t>());
    CHECK(got.ooms == r["num_ooms"].get<std::int64_t>());
  }
}

TEST_CASE("host: the pinned allocator rounds to a power of two below its threshold") {
  CHECK(pinned_size(70.0 * MiB, 0) == 128.0 * MiB);  // JOB.md §7's example
  CHECK(pinned_size(70.0 * MiB, 1) == 70.0 * MiB);   // above 1 MiB: exact
  CHECK(pinned_size(0.5 * MiB, 1) == 0.5 * MiB);
  CHECK(pinned_size(0.6 * MiB, 1) == 1.0 * MiB);
}

TEST_CASE("host: out-of-memory risk from the unattributed-memory distribution") {
  twin::hardware::HostSpec h;
  h.unattributed_median_GiB = 10.9;
  h.unattributed_p90_GiB = 17.6;
  CHECK(socket_short_probability(10.9, h) == doctest::Approx(0.5));
  CHECK(socket_short_probability(17.6, h) == doctest::Approx(0.1).epsilon(1e-3));
  CHECK(socket_short_probability(-1, h) == 1);
  // More sockets, more risk; more headroom, less.
  double prev = 0;
  for (double n : {4.0, 384.0, 1536.0, 23424.0}) {
    const double p = host_oom_probability(25, n, h);
    CHECK(p > prev);
    prev = p;
  }
  CHECK(host_oom_probability(30, 384, h) < host_oom_probability(25, 384, h));
  // Sockets that release the memory under pressure never run short for it: p scales by the
  // share that keeps it, and 384 sockets fail together less often: 1 − (1 − q·p)^384.
  const double p1 = socket_short_probability(26.2, h);
  h.unattributed_kept_fraction = 0.1;
  CHECK(socket_short_probability(26.2, h) == doctest::Approx(0.1 * p1));
  CHECK(host_oom_probability(26.2, 384, h) == doctest::Approx(1 - std::pow(1 - 0.1 * p1, 384)));
}

TEST_CASE("RoPE caches: one per distinct cache when shared, else one per RoPE layer") {
  Job j;
  j.model.layers = 4;
  j.model.pattern = "FS";  // layers 1 and 3 sliding
  j.model.full = {64, 4, 192, 128, 64, false, 0};
  j.model.sliding = {64, 8, 192, 128, 64, true, 128};
  j.model.rope_caches = 2;
  j.training.seq_len = 65536;
  // 65,536 × 192 × (cos, sin) × 4 B = 96 MiB a cache: shared, 2 of them = 0.1875 GiB
  // (JOB.md §6.11c: 0.19 GiB); unshared, one per RoPE layer (2 here).
  j.training.shared_rope_cache = true;
  CHECK(rope_cache_bytes(j) == doctest::Approx(2 * 96.0 * MiB));
  j.model.layers = 6;  // 3 RoPE layers
  j.training.shared_rope_cache = false;
  CHECK(rope_cache_bytes(j) == doctest::Approx(3 * 96.0 * MiB));
}

// HybridEP's worst-case buffer: every token of the EP group routed to one rank (DeepEP's
// hybrid-ep README, "Buffer Management"); EUROPA: 65,536 × 4 tokens × (6,144 × 2 B + 384 × 4 B)
// = 3.375 GiB, outside the caching allocator.
TEST_CASE("EP dispatcher: HybridEP's worst-case buffer, only where it is modelled") {
  Job j;
  j.model.experts = 384, j.model.top_k = 8, j.model.hidden = 6144;
  j.parallel = {384, 4, 1};
  j.training.seq_len = 65536;
  j.training.ep_dispatch = EpDispatch::per_rank;
  CHECK(ep_buffer_bytes(j) == 0);
  j.training.ep_worst_case_buffer = true;
  CHECK(ep_buffer_bytes(j) == doctest::Approx(3.375 * GiB));
  j.training.ep_dispatch = EpDispatch::pairs;  // NCCL's all-to-all: its own channel buffers
  CHECK(ep_buffer_bytes(j) == 0);
}

// model/memory_bound.hpp on a hand-built rank: a compute stream c0 → c1 → c2 → c3 (c1 and c2
// kernels that take time, c0 and c3 markers) and a side-stream task s after c0, before c3.
TEST_CASE(
    "certain live bytes: only buffers live across a timed compute-stream task in every order") {
  twin::sim::Engine e;
  twin::sim::TaskGraph g(e);
  auto& c0 = g.add("c0", 0);
  auto& c1 = g.add("c1", 0);
  auto& c2 = g.add("c2", 0);
  auto& c3 = g.add("c3", 0);
  auto& s = g.add("s", 1);
  c1.after(c0), c2.after(c1), c3.after(c2), s.after(c0), c3.after(s);
  StepOps ops;
  for (const auto* t : {&c1, &c2})
    ops.kernels.emplace_back(static_cast<std::uint32_t>(t->id()), 0,
                             twin::hardware::KernelWork{1e-3});
  BufferLog log(1);
  // a: from c0's end to c2's end — live across c1 and c2.
  log.free(0, log.alloc(0, "a", 0, 100, c0, BufferLog::kEnd), c2, BufferLog::kEnd);
  // b: on the side stream, freed at c3's start — s may run beside c1 or c2, or after them.
  log.free(0, log.alloc(0, "b", 0, 1000, s, BufferLog::kStart), c3, BufferLog::kStart);
  // c: from c1's start, never freed.
  log.alloc(0, "c", 0, 10, c1, BufferLog::kStart);
  // d: for c1's run only.
  log.free(0, log.alloc(0, "d", 0, 1, c1, BufferLog::kStart), c1, BufferLog::kEnd);
  // e: from c1's end to c2's start — between them, across no task that takes time.
  log.free(0, log.alloc(0, "e", 0, 5000, c1, BufferLog::kEnd), c2, BufferLog::kStart);
  const auto live = certain_live(g, log, ops, 2, 0);
  CHECK(live.bytes == 111);  // across c1: a, c and d
  CHECK(live.rank == 0);
  CHECK(live.task == static_cast<std::int64_t>(c1.id()));

  // A compute-stream task that could run beside the chain's is left out of it: a buffer it
  // allocates is not counted across the chain's tasks, until an edge orders it.
  twin::sim::TaskGraph g2(e);
  auto& x0 = g2.add("x0", 0);
  auto& x1 = g2.add("x1", 0);
  StepOps ops2;
  for (const auto* t : {&x0, &x1})
    ops2.kernels.emplace_back(static_cast<std::uint32_t>(t->id()), 0,
                              twin::hardware::KernelWork{1e-3});
  BufferLog log2(1);
  log2.alloc(0, "p", 0, 10, x0, BufferLog::kStart);
  log2.alloc(0, "q", 0, 20, x1, BufferLog::kStart);
  CHECK(certain_live(g2, log2, ops2, 2, 0).bytes == 10);
  x1.after(x0);
  CHECK(certain_live(g2, log2, ops2, 2, 0).bytes == 30);
}
