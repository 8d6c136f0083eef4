// Replays one rank's buffers (step_memory.hpp) through the caching-allocator emulation at
// their simulated times, and what the allocator may use: HBM less the CUDA context, NCCL's
// buffers and host pages that landed in HBM (JOB.md §7, §8).
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "hardware/cluster.hpp"
#include "hardware/nccl_options.hpp"
#include "hardware/profile.hpp"
#include "model/caching_allocator.hpp"
#include "model/step_memory.hpp"
#include "sim/task.hpp"

namespace twin::model {

struct AllocRetry {
  std::size_t task = 0;  // id of the task whose allocation retried
  std::int64_t time_ns = 0;
  std::size_t event = 0;  // its index in the rank's alloc_sequence
  int segments_released = 0;
  std::int64_t bytes_released = 0;
  static constexpr std::size_t kNone = static_cast<std::size_t>(-1);
  std::size_t stream_prev = kNone;  // filled by resolve_retries
  std::int64_t sync_ns = 0;         // filled by resolve_retries
};

struct HbmReplay {
  PoolStats total;
  std::array<PoolStats, kPoolCount> pools{};
  // Per pool at the moment of peak allocated bytes (JOB.md §6.12 reports that moment).
  std::array<PoolStats, kPoolCount> at_peak{};
  std::int64_t inactive_split_at_peak = 0;
  // Per pool just before the first retry released anything (JOB.md §6.12 reports that moment:
  // the side streams' caches against the compute stream's failed request); empty without retries.
  std::vector<PoolStats> at_first_retry;
  std::vector<AllocRetry> retries;
  bool oom = false;
  std::string failed;  // the first allocation that failed: "name (GiB, pool)"
};

// One rank's allocations and frees in simulated-time order (ties in recording order).
struct AllocEvent {
  std::int64_t time_ns = 0;
  std::size_t buffer = 0;  // index into BufferLog::rank(rank)
  bool alloc = true;
};
std::vector<AllocEvent> alloc_sequence(const BufferLog& log, std::int64_t rank);

// The step a long run sees. PyTorch's caching allocator hands cached segments back to the
// device only on a retry or torch.cuda.empty_cache() (c10/cuda/CUDACachingAllocator.cpp,
// release_cached_blocks), and TorchTitan's training loop calls neither (its GarbageCollection,
// torchtitan/tools/utils.py, runs Python's gc only), so every stream's pool enters a step holding
// what the steps before left: for FSDP's side streams, the high-water mark of the last backward.
// replay_hbm replays `warm_steps` identical steps first (buffers never freed stay allocated) and
// reports the next one; 0 is the first step, from an empty cache.
// The reported step's allocator actions, each at its simulated time with the buffer it serves,
// and the segments at the step's end: what torch.cuda.memory._snapshot() holds after
// _record_memory_history (scenarios/ writes it in that form).
struct AllocatorTrace {
  struct Event {
    CachingAllocator::TraceEvent action;
    std::int64_t time_ns = 0;
    const char* buffer = "";
  };
  std::vector<Event> events;
  std::vector<CachingAllocator::SegmentView> segments;
  std::vector<const char*> block_buffer;  // per block id: the buffer it holds while allocated
};
HbmReplay replay_hbm(const BufferLog& log, std::int64_t rank, const CachingAllocator::Options& opts,
                     std::int64_t warm_steps = 0, AllocatorTrace* trace = nullptr);
// replay_hbm of ranks 0 … ranks − 1. Ranks whose allocations form the same sequence (sizes,
// pools, names, order; times aside) are replayed once, the others told their own retries' tasks
// and times: the same results (issue #21: of europa's 384 ranks 228 sequences are distinct).
std::vector<HbmReplay> replay_hbm_ranks(const BufferLog& log, std::int64_t ranks,
                                        const CachingAllocator::Options& opts,
                                        std::int64_t warm_steps = 0);

// NCCL's device buffers on one rank: the channels it keeps buffers for (comm_plan.hpp) × the
// buffer per channel.
double nccl_buffer_bytes(const Job& job, const hardware::Profile& p,
                         const hardware::NcclOptions& n);

// The EP dispatcher's own device buffer on one rank, outside the caching allocator. HybridEP
// (training.ep_dispatch = per_rank, ep_worst_case_buffer) preallocates for the worst case, every
// token of the EP group routed to this rank: tokens × hidden bf16 plus tokens × the group's
// experts fp32 routing probabilities, shared by dispatch and combine (DeepEP's hybrid-ep
// README, "Buffer Management"); 3.38 GiB per rank for EUROPA. 0 otherwise: DeepEP's normal
// kernels stream through chunked buffers, NCCL through its own (nccl_buffer_bytes).
double ep_buffer_bytes(const Job& job);

// What cudaMalloc may reserve on one rank.
double allocator_capacity_bytes(const Job& job, const hardware::Profile& p,
                                const hardware::NcclOptions& n, double host_spill_bytes);

// A retry on the real allocator synchronizes the device and cudaFrees cached segments (JOB.md
// §8). resolve_retries reads, from the run that found the retries, what the synchronization
// waited for (until the work then running on the rank's other streams ended) and the
// allocating stream's previous task. inject_retries then adds, to a rebuilt graph of the same
// step, a task before each allocating task, on its stream, after that previous task, taking
// the wait plus the cudaFree time (per segment and per GiB, hardware/profile.hpp). A fixed
// delay rather than new edges, so that no wait cycle can arise through collectives. Graph ids
// are unchanged (new tasks go at the end).
void resolve_retries(const sim::TaskGraph& g, std::int32_t lanes_per_rank,
                     std::vector<std::vector<AllocRetry>>& retries_by_rank);
void inject_retries(sim::TaskGraph& g, hardware::Cluster& c,
                    const std::vector<std::vector<AllocRetry>>& retries_by_rank);

}  // namespace twin::model
