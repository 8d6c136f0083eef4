#include "hardware/kernel_cost.hpp"

#include <algorithm>
#include <cmath>

namespace twin::hardware {

double KernelCost::gemm_s(double m, double n, double k, bool fp8) const {
  if (m <= 0 || n <= 0 || k <= 0) return 0;
  const auto& e = p_.efficiency;
  const double peak = p_.gpu.peak(fp8).per_s;
  const bool own = fp8 && e.gemm_fp8_peak_fraction > 0;  // FP8's measured curve, where given
  const double eff = own ? e.gemm_fp8_peak_fraction * m / (m + e.gemm_fp8_half_rows)
                         : e.gemm_peak_fraction * m / (m + e.gemm_half_rows);
  const double elem = fp8 ? 1.0 : 2.0;
  const double bytes = elem * (m * k + k * n) + 2.0 * m * n;
  return gemm_fixed_s(fp8) +
         std::max(2 * m * n * k / (peak * eff), bytes / (p_.gpu.hbm_bw().per_s));
}

double KernelCost::grouped_gemm_s(double m, double n, double k, double groups, bool equal) const {
  if (m <= 0 || n <= 0 || k <= 0 || groups <= 0) return 0;
  const auto& e = p_.efficiency;
  const double tile = std::max(1.0, e.grouped_gemm_tile_rows);
  const double padded = equal ? std::ceil(m / tile) * tile : m + tile / 2;
  return grouped_roofline_s(2 * groups * padded * n * (k + e.grouped_gemm_half_k), m, n, k, groups);
}

double KernelCost::grouped_gemm_weight_grad_s(double m, double n, double k, double groups) const {
  if (m <= 0 || n <= 0 || k <= 0 || groups <= 0) return 0;
  const auto& e = p_.efficiency;
  return grouped_roofline_s(2 * groups * k * n * (m + e.grouped_gemm_half_k), m, n, k, groups);
}

double KernelCost::grouped_roofline_s(double flops, double m, double n, double k,
                                      double groups) const {
  // Its three matrices once each, whichever two it reads (the weight gradient: X and dY).
  const double bytes = groups * (2.0 * (m * k + k * n) + 2.0 * m * n);
  return overhead_s() +
         std::max(flops / (p_.gpu.peak(false).per_s * p_.efficiency.grouped_gemm_peak_fraction),
                  bytes / (p_.gpu.hbm_bw().per_s));
}

double KernelCost::attention_s(sim::Flops flops, bool backward) const {
  if (flops.v <= 0) return 0;
  const auto& e = p_.efficiency;
  const double f = backward ? e.attention_bwd_fraction : e.attention_fwd_fraction;
  return overhead_s() + flops.v / (p_.gpu.peak(false).per_s * f);
}

double KernelCost::block_attention_s(sim::Flops block_flops, double qblock_heads,
                                     bool backward) const {
  if (block_flops.v <= 0) return 0;
  const auto& e = p_.efficiency;
  const double f = backward ? e.attention_bwd_block_fraction : e.attention_fwd_block_fraction;
  const double tq = (backward ? e.attention_bwd_qblock_us : e.attention_fwd_qblock_us) * 1e-6;
  return overhead_s() + block_flops.v / (p_.gpu.peak(false).per_s * f) + qblock_heads * tq;
}

double KernelCost::elementwise_s(sim::Bytes bytes, Family f) const {
  if (bytes.v <= 0) return 0;
  return overhead_s() + bytes.v / (p_.gpu.hbm_bw().per_s * p_.contention.of(f).hbm_fraction);
}

double KernelCost::cpu_matmul_s(sim::Flops flops) const {
  return flops.v / (p_.host.fp32_peak().per_s * p_.efficiency.cpu_gemm_fraction);
}

double KernelCost::cpu_stream_s(sim::Bytes bytes) const {
  return bytes.v / (p_.host.mem_bw().per_s * p_.efficiency.cpu_stream_fraction);
}

}  // namespace twin::hardware
