// How the libraries the step runs launch its kernels (cuBLAS's nvjet, PyTorch's elementwise
// kernels, cuDNN, CUTLASS/QuACK grouped GEMMs), as contention shapes (contention.hpp) from the
// kernels' sizes. The launch configurations are those measured on our H200
// (reports/calibration/contention/: PyTorch profiler records of every kernel class).
#pragma once

#include <array>
#include <vector>

#include "hardware/contention.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"

namespace twin::hardware {

// How cuBLAS (nvjet, sm90) launches a bf16 GEMM (m×k)·(k×n), `batch` of them: its output tile
// (tile_m over cuBLAS's M = n, tile_n over N = m), thread-block cluster, tiles and CTAs.
struct GemmLaunch {
  int tile_m = 192, tile_n = 192, cluster = 2;
  double tiles = 0, ctas = 0;  // tiles: output tiles × split-K slices (a CTA's unit of work)
  int cluster_m = 1;    // the cluster's CTAs along M (nvjet's "<cluster_m>x<cluster / cluster_m>")
  int split_k = 1;      // slices of k, each a CTA's (nvjet's "splitK" kernels, a reduction after)
  double k = 0;         // the GEMM's k (0: unknown; a tile's work, for a lone CTA's time)
  double m = 0, n = 0;  // its rows and columns (0: unknown; a split-K reduction's bytes)
  // nvjet's <cluster_m>x<cluster_n>: the cluster's CTAs along M and along N.
  std::array<int, 2> cluster_shape() const {
    const int cm = std::max(1, cluster_m);
    return {cm, std::max(1, cluster / cm)};
  }
};
// Multiply-adds per element a CTA of the launch loads: its CTAs along N share (multicast) their
// A tile, those along M their B tile, so a CTA loads tile_m / cluster_n + tile_n / cluster_m
// elements per step of k for tile_m · tile_n multiply-adds (contention.hpp, mechanism 3).
double load_intensity(const GemmLaunch& l);
// The grid of a launch of one CTA per tile in clusters, cols × rows output tiles (along M, along
// N) times batch: CUDA launches clusters whole, so the tiles are padded to whole clusters along
// each side (the grid of every recorded launch of one tile per CTA: test_calibrate).
double padded_grid(const GemmLaunch& l, double cols, double rows, double batch = 1);
// Reproduces the launches measured on our H200 (reports/calibration/contention/, profiler records
// of 65 GEMMs; checked in test_calibrate) of (m×k)·(k×n): a GEMM of at most 192 rows that one
// wave of CTAs holds runs one row of tiles as high as its rows (or rows of 64 where they divide
// them), split over k where its tiles alone fill less than a wave (small_row_launch,
// kernel_shapes.cpp); a GEMM of at least two waves of 192×192 tiles runs one CTA per SM in
// clusters of 2, on 192×192 tiles unless 256×128 or 128×256 need at least 3% less padded work in
// whole waves ([fit], kernel_shapes.cpp); another takes the tile of the kernels seen that needs
// the least padded work in whole waves (ties: the larger tile, then fewer tiles), in clusters of
// 8 when it fits one wave of them (14 clusters: 112 CTAs), and runs one CTA per tile up to one
// wave, one per SM beyond (a grid of one tile per CTA padded to whole clusters: padded_grid); its
// cluster oriented to pad that grid least, then so that its CTAs load least (the higher load
// intensity: nvjet's orientation on 20 of the 22 recorded launches whose tile this takes).
GemmLaunch gemm_launch(int sms, double m, double n, double k, double batch = 1);
// The contention shape of a cuBLAS bf16 GEMM: static tile lists at few tiles per CTA (late CTAs
// wait: measured ×1.4–1.9 from 4 SMs held at up to 2 per CTA), above a first tile fixed per CTA
// and the rest dynamic (late CTAs cost one more round of tiles: measured ×1.12–1.35 at 5.8 tiles
// per CTA, ×1.02–1.05 at 184); the switch: kernel_shapes.cpp.
KernelShape gemm_shape(int sms, double m, double n, double k, double batch = 1);
KernelShape gemm_shape(const GemmLaunch& l);  // of a given launch (a measured one)
// cuBLASLt FP8 GEMM with row-wise scales (`torch._scaled_mm`): nvjet's 128×128 tiles on one CTA
// per SM without clusters at every measured shape.
KernelShape gemm_fp8_shape(int sms, double m, double n);
// A PyTorch elementwise kernel of family f moving `bytes` (read + write): 128-thread blocks of
// 1,024 elements, 16 blocks per SM.
KernelShape elementwise_shape(Family f, double bytes);
// A grid-stride kernel of 16 blocks of 256 threads per SM (8 resident at once): the FP8
// dequantization and the fp32 sum of bf16 slices (kernels/fp8_block.cu's launch).
KernelShape grid_stride_shape(int sms, Family f);
// PyTorch's index_add_ (MoE unpermute: indexFuncLargeIndex, aten/src/ATen/native/cuda/Indexing.cu):
// one 128-thread block per 128 source elements, at most 8 blocks per SM (measured: 1,056 blocks
// on our H200 at 4,096 and 16,384 tokens), 16 resident per SM.
KernelShape index_add_shape(int sms, double bytes);
// The launch of an elementwise kernel of family f moving `bytes`: the project's grid-stride
// kernels for the FP8 dequantization and the fp32 sum, index_add_'s capped grid, PyTorch's grid
// for the others.
KernelShape elementwise_kernel_shape(int sms, Family f, double bytes);
// cuDNN / FlashAttention: a persistent grid of one CTA per SM taking tiles dynamically.
KernelShape attention_shape(int sms, bool backward);
// A persistent grouped GEMM (SonicMoE, torch._grouped_mm) with static or dynamic tile lists.
KernelShape grouped_shape(int sms, bool dynamic);

// Muon's Newton–Schulz as PyTorch runs it, unfused (the quintic iteration X ← aX + (bA + cA²)X,
// A = X·Xᵀ; calibrate/contention_bench.py's newton_schulz_5): per iteration on an m×n matrix
// (m ≤ n) three cuBLAS GEMMs and five elementwise kernels, in launch order — X·Xᵀ (m×m over n),
// b·A, c·A, (cA)·A (m×m over m), their sum, a·X, B·X (m×n over m), the sum. Measured on our H200
// (the case's profiler records): 8 launches per iteration, the elementwise ones 24% of the time.
struct GemmDims {
  double m, n, k;  // (m×k)·(k×n)
};
std::array<GemmDims, 3> newton_schulz_gemms(double rows, double cols);
// The 5 iterations' launches on `batch` matrices of rows×cols (each launch batched), with their
// times alone: the parts of one task (ContentionModel::slowdown over parts, ops.hpp's run_fused).
// `epilogues`: b·A + c·A² and a·X + B·X as torch.baddbmm, in the GEMMs' epilogues (no elementwise
// kernels; the extra read of A or X in the epilogue is not counted).
std::vector<KernelPart> newton_schulz_parts(const KernelCost& cost, double rows, double cols,
                                            double batch, bool epilogues = false);

inline KernelWork grid_work(double seconds, KernelShape shape) {
  return {seconds, 0, KernelClass::grid, shape};
}
// An elementwise kernel of family f moving `bytes`: its time alone, its launch, and its bytes
// through HBM (the engine shares HBM between it, copies and collectives: ops.hpp).
inline KernelWork elementwise_work(const KernelCost& cost, Family f, double bytes) {
  auto w = grid_work(cost.elementwise_s(sim::bytes(bytes), f),
                     elementwise_kernel_shape(cost.sm_count(), f, bytes));
  w.hbm_bytes = bytes;
  return w;
}

}  // namespace twin::hardware
