// How the libraries the step runs launch its kernels (cuBLAS's nvjet, PyTorch's elementwise
// kernels, cuDNN, CUTLASS/QuACK grouped GEMMs), as contention shapes (contention.hpp) from the
// kernels' sizes. The launch configurations are those measured on our H200
// (reports/calibration/contention/: PyTorch profiler records of every kernel class).
#pragma once

#include "hardware/contention.hpp"
#include "hardware/kernel_cost.hpp"
#include "hardware/ops.hpp"

namespace twin::hardware {

// cuBLAS bf16 GEMM (m×k)·(k×n), `batch` of them: nvjet launches a persistent grid of one CTA per
// SM (clusters of 2). With few tiles per SM it behaves as static tile lists (late CTAs wait a
// round: measured ×1.7–1.9 with 4–56 SMs held), with many as dynamic (slowing with the SMs held).
KernelShape gemm_shape(int sms, double m, double n, double batch = 1);
// A PyTorch elementwise kernel of family f moving `bytes` (read + write): 128-thread blocks of
// 1,024 elements, 16 blocks per SM.
KernelShape elementwise_shape(Family f, double bytes);
// A grid-stride kernel of 16 blocks of 256 threads per SM (8 resident at once): the FP8
// dequantization and the fp32 sum of bf16 slices (kernels/fp8_block.cu's launch).
KernelShape grid_stride_shape(int sms, Family f);
// The launch of an elementwise kernel of family f moving `bytes`: the project's grid-stride
// kernels for the FP8 dequantization and the fp32 sum, PyTorch's grid for the others.
KernelShape elementwise_kernel_shape(int sms, Family f, double bytes);
// cuDNN / FlashAttention: a persistent grid of one CTA per SM taking tiles dynamically.
KernelShape attention_shape(int sms);
// A persistent grouped GEMM (SonicMoE, torch._grouped_mm) with static or dynamic tile lists.
KernelShape grouped_shape(int sms, bool dynamic);

inline KernelWork grid_work(double seconds, KernelShape shape) {
  return {seconds, 0, KernelClass::grid, shape};
}
// An elementwise kernel of family f moving `bytes`: its time alone and its launch.
inline KernelWork elementwise_work(const KernelCost& cost, Family f, double bytes) {
  return grid_work(cost.elementwise_s(bytes, f), elementwise_kernel_shape(cost.sm_count(), f, bytes));
}

}  // namespace twin::hardware
