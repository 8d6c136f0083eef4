#include "hardware/kernel_shapes.hpp"

#include <algorithm>
#include <cmath>

namespace twin::hardware {

namespace {
// [est] nvjet's tiles for these GEMMs are 128–320 by 96–256 (the names of the measured kernels);
// 192×192 stands for them. With fewer than 4 tiles per SM the measured curves follow static
// tile lists, with more dynamic ones (reports/calibration/contention/README.md).
constexpr double kGemmTile = 192, kStaticBelowTilesPerSm = 4;
constexpr double kElementsPerBlock = 1024, kBytesPerElement = 2 * 3;  // bf16, two in, one out
}  // namespace

KernelShape gemm_shape(int sms, double m, double n, double batch) {
  const double tiles = std::ceil(m / kGemmTile) * std::ceil(n / kGemmTile) * std::max(1.0, batch);
  const bool few = tiles < kStaticBelowTilesPerSm * sms;
  return {Family::gemm, few ? Schedule::persistent_static : Schedule::persistent_dynamic, 1,
          static_cast<float>(std::min<double>(tiles, sms))};
}

KernelShape elementwise_shape(Family f, double bytes) {
  const double blocks = std::max(1.0, std::ceil(bytes / (kElementsPerBlock * kBytesPerElement)));
  return {f, Schedule::grid, 16, static_cast<float>(blocks)};
}

KernelShape grid_stride_shape(int sms, Family f) { return {f, Schedule::grid, 8, static_cast<float>(sms * 16)}; }

KernelShape elementwise_kernel_shape(int sms, Family f, double bytes) {
  return f == Family::ew_fp8_dequant || f == Family::ew_sum_fp32 ? grid_stride_shape(sms, f)
                                                                 : elementwise_shape(f, bytes);
}

KernelShape attention_shape(int sms) {
  return {Family::attention, Schedule::persistent_dynamic, 1, static_cast<float>(sms)};
}

KernelShape grouped_shape(int sms, bool dynamic) {
  return {Family::grouped_gemm, dynamic ? Schedule::persistent_dynamic : Schedule::persistent_static, 1,
          static_cast<float>(sms)};
}

}  // namespace twin::hardware
