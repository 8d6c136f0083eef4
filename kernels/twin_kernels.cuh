// CUDA kernels of the calibration harness (JOB.md §6.5, §6.8, §6.9; issue "calibration").
// Host-callable launchers; every launcher returns the launch's cudaError_t.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp8.h>
#include <cuda_runtime.h>

#include <cstddef>

namespace twin::kernels {

// Holds `blocks` SMs for `ns` nanoseconds — one block per SM, each the footprint of an NCCL CTA
// (640 threads × 96 registers, 80 KiB of shared memory; JOB.md §8): an NCCL CTA stand-in.
cudaError_t launch_sm_hold(int blocks, long long ns, cudaStream_t s);

// The holder of the contention measurements (calibrate/contention_bench.py): like sm_hold, but
// each block writes its SM id to smids[block] and adds 1 to *started when it runs, then spins
// until *stop ≠ 0 (at most max_ns; a block that times out adds 1 << 16 to *started).
// smem_bytes > 0 replaces the 80 KiB of shared memory (up to the most a block may have).
// launch_wait_count (one thread) spins until *counter ≥ target: put on the measured stream, it
// starts the kernel only once every holder block is resident, and smids proves which SMs (and how
// many distinct ones) were held.
cudaError_t launch_sm_hold_until(int blocks, int* started, int* smids, const int* stop,
                                 long long max_ns, int smem_bytes, cudaStream_t s);
// The same holder with another footprint (threads, shared memory) and way of waiting — mode
// 0: few registers per thread, every thread dozing in a loop; 1: 96 registers per thread, every
// thread dozing; 2: 96 registers, one thread polling and the rest at a barrier (the default) —
// for the holder probe of calibrate/contention_bench.py.
cudaError_t launch_sm_hold_shaped(int blocks, int* started, int* smids, const int* stop,
                                  long long max_ns, int smem_bytes, int threads, int mode,
                                  cudaStream_t s);
cudaError_t launch_wait_count(const int* counter, int target, long long max_ns, cudaStream_t s);
// One thread that waits `ns` on the global timer: put ahead of a timed launch, it keeps the GPU
// busy while the host enqueues the launch, so that the host's enqueue is not timed
// (calibrate/harness.hpp).
cudaError_t launch_gpu_sleep(long long ns, cudaStream_t s);
// One warp that records (global ns, SM clock cycles) in out[0..1] when *mark turns 1 and in
// out[2..3] when it turns 2 (the SM clock over a measured span; calibrate/contention_bench.py).
cudaError_t launch_clock_observe(const int* mark, unsigned long long* out, long long max_ns,
                                 cudaStream_t s);

// The residency probe (calibrate/cluster_probe.py): `ctas` CTAs (rounded down to whole
// clusters) in clusters of `cluster`, one per SM (`smem_bytes` of shared memory each); each
// writes its start time (ns, %globaltimer) and %smid, then stays spin_ns.
cudaError_t launch_cluster_probe(int cluster, int ctas, unsigned long long* starts, int* smids,
                                 long long spin_ns, int smem_bytes, cudaStream_t s);
// The tile-schedule probe (calibrate/tile_schedule_probe.py): `ctas` CTAs in clusters of
// `cluster` take `tiles` tiles of tile_ns each — mode 0 static lists, 1 a shared counter
// (`counter`, zeroed by the caller), 2 the first tile fixed and the rest from the counter, 3
// static lists numbered from the last CTA — and record each tile's start, end (%globaltimer)
// and SM; policy ≥ 0 asks for that cluster scheduling policy (cudaClusterSchedulingPolicy).
cudaError_t launch_tile_schedule_probe(int cluster, int ctas, int tiles, int mode,
                                       long long tile_ns, int* counter, unsigned long long* start,
                                       unsigned long long* end, int* sm, int smem_bytes, int policy,
                                       cudaStream_t s);

// A time stamp in stream order (calibrate/nvjet_schedule_probe.py): one thread writes
// %globaltimer to *out.
cudaError_t launch_stamp(unsigned long long* out, cudaStream_t s);

// A persistent grouped GEMM like the MoE expert GEMMs: for each group g (expert),
// C_g = A_g · B_g with A_g the rows [row_offset[g], row_offset[g+1]) of A (M×K, row-major),
// B_g the g-th K×N block of B (row-major), C like A with N columns; bf16 in and out, fp32
// accumulation on tensor cores (WMMA). One block per SM (`blocks` of them). Tiles of 128×128:
//   static:  block b runs tiles b, b+blocks, b+2·blocks, … (a fixed list);
//   dynamic: blocks take the next tile from *tile_counter (atomicAdd), which must be 0.
struct GroupedGemm {
  const __nv_bfloat16* A;
  const __nv_bfloat16* B;
  __nv_bfloat16* C;
  const int* row_offset;   // device, groups + 1 entries
  const int* tile_offset;  // device, groups + 1 entries: prefix sums of tiles per group
  int groups, n, k;
  int* tile_counter;  // device, dynamic only
};
constexpr int kTileM = 128, kTileN = 128;
cudaError_t launch_grouped_gemm(const GroupedGemm& g, bool dynamic, int blocks, cudaStream_t s);
// Shared memory the GEMM asks for per block (so that only one block fits on an SM).
int grouped_gemm_smem_bytes();

// FP8 (E4M3) block quantization, blocks of 128 values with one fp32 scale each (JOB.md §6.8):
// scale = max|x| / 448, q = x / scale. n must be a multiple of 128.
cudaError_t launch_fp8_quantize(const __nv_bfloat16* in, __nv_fp8_e4m3* out, float* scales,
                                std::size_t n, cudaStream_t s);
cudaError_t launch_fp8_dequantize(const __nv_fp8_e4m3* in, const float* scales, __nv_bfloat16* out,
                                  std::size_t n, cudaStream_t s);

// out[i] = Σ_j float(slices[j·n + i]) for j < count (the bf16 gradient all-to-all's local sum).
cudaError_t launch_bf16_sum_fp32(const __nv_bfloat16* slices, int count, std::size_t n, float* out,
                                 cudaStream_t s);

}  // namespace twin::kernels
