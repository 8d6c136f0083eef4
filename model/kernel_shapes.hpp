// How each kernel of the step slows while SMs are held: its contention shape
// (hardware/contention.hpp) from its sizes. The launch configurations are those measured on our
// H200 (reports/calibration/contention/: PyTorch profiler records of every kernel class).
#pragma once

#include "hardware/contention.hpp"
#include "hardware/ops.hpp"

namespace twin::model {

// cuBLAS bf16 GEMM (m×k)·(k×n), `batch` of them: nvjet launches a persistent grid of one CTA per
// SM (clusters of 2). With few tiles per SM it behaves as static tile lists (late CTAs wait a
// round: measured ×1.7–1.9 with 4–56 SMs held), with many as dynamic (slowing with the SMs held).
hardware::KernelShape gemm_shape(int sms, double m, double n, double batch = 1);
// A PyTorch elementwise kernel of family f moving `bytes` (read + write): 128-thread blocks of
// 1,024 elements, 16 blocks per SM.
hardware::KernelShape elementwise_shape(hardware::Family f, double bytes);
// A grid-stride kernel of 16 blocks of 256 threads per SM (8 resident at once): the FP8
// dequantization and the fp32 sum of bf16 slices (kernels/fp8_block.cu's launch).
hardware::KernelShape grid_stride_shape(int sms, hardware::Family f);
// cuDNN / FlashAttention: a persistent grid of one CTA per SM taking tiles dynamically.
hardware::KernelShape attention_shape(int sms);
// A persistent grouped GEMM (SonicMoE, torch._grouped_mm) with static or dynamic tile lists.
hardware::KernelShape grouped_shape(int sms, bool dynamic);

inline hardware::KernelWork grid_work(double seconds, hardware::KernelShape shape) {
  return {seconds, 0, hardware::KernelClass::grid, shape};
}

}  // namespace twin::model
