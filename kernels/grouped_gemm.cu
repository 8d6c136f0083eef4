#include <mma.h>

#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {

using namespace nvcuda;
constexpr int kBK = 32;
constexpr int kThreads = 256;  // 8 warps: 2 (M) × 4 (N), each 64×32 of the 128×128 tile
constexpr int kSmemPad = 8;
// Ask for shared memory like the real persistent GEMMs (SonicMoE/QuACK use most of the SM's
// 228 KiB): one block per SM, and no NCCL CTA can share its SM (JOB.md §6.13). With 120 KiB an
// NCCL CTA did fit beside a block (measured on 2 H200, 2026-11-29: no slowdown at 8–24 CTAs).
constexpr int kSmemBytes = 200 * 1024;

__device__ int find_group(const int* tile_offset, int groups, int tile) {
  int lo = 0, hi = groups - 1;
  while (lo < hi) {
    const int mid = (lo + hi + 1) / 2;
    if (tile_offset[mid] <= tile)
      lo = mid;
    else
      hi = mid - 1;
  }
  return lo;
}

__device__ void run_tile(const GroupedGemm& g, int tile, __nv_bfloat16* As, __nv_bfloat16* Bs) {
  const int grp = find_group(g.tile_offset, g.groups, tile);
  const int local = tile - g.tile_offset[grp];
  const int tiles_n = (g.n + kTileN - 1) / kTileN;
  const int row0 = g.row_offset[grp] + (local / tiles_n) * kTileM;
  const int row_end = g.row_offset[grp + 1];
  const int col0 = (local % tiles_n) * kTileN;
  const __nv_bfloat16* B = g.B + static_cast<size_t>(grp) * g.k * g.n;
  const int warp = threadIdx.x / 32, wm = warp / 4, wn = warp % 4;
  wmma::fragment<wmma::accumulator, 16, 16, 16, float> acc[4][2];
  for (auto& a : acc)
    for (auto& b : a) wmma::fill_fragment(b, 0.f);
  for (int k0 = 0; k0 < g.k; k0 += kBK) {
    // Stage A (128×32) and B (32×128) tiles; out-of-range rows/cols are zero.
    for (int i = threadIdx.x; i < kTileM * kBK; i += kThreads) {
      const int r = i / kBK, c = i % kBK, gr = row0 + r, gc = k0 + c;
      As[r * (kBK + kSmemPad) + c] = (gr < row_end && gc < g.k)
                                         ? g.A[static_cast<size_t>(gr) * g.k + gc]
                                         : __float2bfloat16(0.f);
    }
    for (int i = threadIdx.x; i < kBK * kTileN; i += kThreads) {
      const int r = i / kTileN, c = i % kTileN, gr = k0 + r, gc = col0 + c;
      Bs[r * (kTileN + kSmemPad) + c] =
          (gr < g.k && gc < g.n) ? B[static_cast<size_t>(gr) * g.n + gc] : __float2bfloat16(0.f);
    }
    __syncthreads();
    for (int kk = 0; kk < kBK; kk += 16) {
      wmma::fragment<wmma::matrix_a, 16, 16, 16, __nv_bfloat16, wmma::row_major> fa[4];
      wmma::fragment<wmma::matrix_b, 16, 16, 16, __nv_bfloat16, wmma::row_major> fb[2];
      for (int i = 0; i < 4; ++i)
        wmma::load_matrix_sync(fa[i], As + (wm * 64 + i * 16) * (kBK + kSmemPad) + kk,
                               kBK + kSmemPad);
      for (int j = 0; j < 2; ++j)
        wmma::load_matrix_sync(fb[j], Bs + kk * (kTileN + kSmemPad) + wn * 32 + j * 16,
                               kTileN + kSmemPad);
      for (int i = 0; i < 4; ++i)
        for (int j = 0; j < 2; ++j) wmma::mma_sync(acc[i][j], fa[i], fb[j], acc[i][j]);
    }
    __syncthreads();
  }
  // Write back through shared memory (reusing As) to convert to bf16 with bounds checks.
  float* stage = reinterpret_cast<float*>(As) + warp * 16 * 16;
  for (int i = 0; i < 4; ++i)
    for (int j = 0; j < 2; ++j) {
      wmma::store_matrix_sync(stage, acc[i][j], 16, wmma::mem_row_major);
      __syncwarp();
      for (int e = threadIdx.x % 32; e < 256; e += 32) {
        const int r = row0 + wm * 64 + i * 16 + e / 16, c = col0 + wn * 32 + j * 16 + e % 16;
        if (r < row_end && c < g.n)
          g.C[static_cast<size_t>(r) * g.n + c] = __float2bfloat16(stage[e]);
      }
      __syncwarp();
    }
  __syncthreads();
}

__global__ void __launch_bounds__(kThreads) grouped_gemm(GroupedGemm g, bool dynamic) {
  extern __shared__ __align__(16) unsigned char smem[];
  auto* As = reinterpret_cast<__nv_bfloat16*>(smem);
  auto* Bs = As + kTileM * (kBK + kSmemPad) + 1024;  // stage area for 8 warps × 256 floats
  __shared__ int next;
  const int total = g.tile_offset[g.groups];
  if (!dynamic) {
    for (int t = blockIdx.x; t < total; t += gridDim.x) run_tile(g, t, As, Bs);
    return;
  }
  while (true) {
    if (threadIdx.x == 0) next = atomicAdd(g.tile_counter, 1);
    __syncthreads();
    const int t = next;
    __syncthreads();
    if (t >= total) return;
    run_tile(g, t, As, Bs);
  }
}

}  // namespace

int grouped_gemm_smem_bytes() {
  return kSmemBytes;
}

cudaError_t launch_grouped_gemm(const GroupedGemm& g, bool dynamic, int blocks, cudaStream_t s) {
  cudaError_t e =
      cudaFuncSetAttribute(grouped_gemm, cudaFuncAttributeMaxDynamicSharedMemorySize, kSmemBytes);
  if (e != cudaSuccess) return e;
  grouped_gemm<<<blocks, kThreads, kSmemBytes, s>>>(g, dynamic);
  return cudaGetLastError();
}

}  // namespace twin::kernels
