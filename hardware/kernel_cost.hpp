// Kernel cost model: the time of a kernel alone on an idle GPU (the work the engine's kernel
// classes consume). A roofline with per-class efficiency (profile `efficiency`):
//   GEMM       t = t_0 + max( 2mnk / (peak·f_gemm·m/(m+m½)),  bytes / HBM )
//              — a GEMM of m rows reaches f_gemm·m/(m+m½) of peak (small expert GEMMs are slow);
//              t_0 a bf16 GEMM's own fixed time where the profile fits one (gemm_fixed_us), else
//              (and for FP8) overhead;
//   grouped    t = overhead + max( G·2·m_p·n·(k+k½) / (peak·f_g),  bytes / HBM )
//              — one persistent kernel over G experts of m rows each: every expert's rows run as
//              whole tiles of M_t rows, m_p = ⌈m/M_t⌉·M_t when all experts have m, m + M_t/2 on
//              average when their rows differ; each tile costs k½ K-steps beyond its k
//              (torch._grouped_mm measured on our H200: reports/calibration/grouped-gemm/);
//   attention  t = overhead + FLOPs_w / (peak·f_attn)          (forward and backward differ),
//              FLOPs_w counting each document's pairs × (L + L½)/L (model/workload.hpp); or, for
//              a block-sparse kernel (FlexAttention), by the mask blocks it visits (below);
//   elementwise t = overhead + bytes / (HBM·f_F), f_F the fraction of a device copy's bandwidth
//              that kernel family F reaches alone (measured per family: profile `contention`);
//   CPU        matmul FLOPs / (host fp32·f_cpu_gemm), streaming bytes / (host bw·f_cpu_stream).
// The calibration harness replaces these curves with measured tables (calibrate/).
#pragma once

#include "hardware/contention.hpp"
#include "hardware/profile.hpp"

namespace twin::hardware {

class KernelCost {
 public:
  explicit KernelCost(const Profile& p) : p_(p) {}

  // A bf16 (or fp8) GEMM (m×k)·(k×n); its operands and result are its HBM traffic.
  double gemm_s(double m, double n, double k, bool fp8 = false) const;
  // `groups` GEMMs of m rows each (the experts of a GPU): one persistent grouped GEMM (rows
  // `equal` in every expert, or spread around m), or a loop of one GEMM per expert.
  double grouped_gemm_s(double m, double n, double k, double groups, bool equal) const;
  double expert_loop_s(double m, double n, double k, double groups) const {
    return groups * gemm_s(m, n, k);
  }
  // The weight gradient of that grouped GEMM, dW_e = X_eᵀ·dY_e for each of `groups` experts: a
  // fixed k × n grid of output tiles whose depth is the expert's m rows (a varlen-K grouped
  // GEMM), on the forward's tile model with the roles swapped — no row padding, and each tile's
  // fixed cost k½ added to its depth m rather than to k:
  //   t = overhead + groups · 2·k·n·(m + k½) / (peak · f_g).
  // No parameter of its own: held out against torch._grouped_mm's weight gradients
  // (reports/calibration/grouped-gemm/, "The backward").
  double grouped_gemm_weight_grad_s(double m, double n, double k, double groups) const;
  double attention_s(sim::Flops flops, bool backward) const;
  // A block-sparse attention kernel (FlexAttention), where the profile has one (block_attention()):
  //   t = overhead + block FLOPs / (peak·f_b) + query blocks·heads·t_q,
  // block FLOPs those of every mask block as if full (attention_bench.py fits f_b and t_q).
  bool block_attention() const { return p_.efficiency.attention_fwd_block_fraction > 0; }
  double block_attention_s(sim::Flops block_flops, double qblock_heads, bool backward) const;
  // `bytes` read and written by a kernel of elementwise family f.
  double elementwise_s(sim::Bytes bytes, Family f) const;
  double cpu_matmul_s(sim::Flops flops) const;
  double cpu_stream_s(sim::Bytes bytes) const;
  // PyTorch's CPU vector norm over `bytes` of gradients: one thread (host.norm_GBps).
  double cpu_norm_s(sim::Bytes bytes) const { return bytes.v / (p_.host.norm_GBps * 1e9); }
  double overhead_s() const { return p_.efficiency.kernel_overhead_us * 1e-6; }
  // A bf16 GEMM's fixed time alone; FP8 GEMMs (torch._scaled_mm) keep the per-kernel cost their
  // own curve was fitted with (reports/calibration/gemm-alone/README.md).
  double gemm_fixed_s(bool fp8 = false) const {
    const double t = p_.efficiency.gemm_fixed_us;
    return t > 0 && !fp8 ? t * 1e-6 : overhead_s();
  }
  double eager_elementwise_factor() const { return p_.efficiency.eager_elementwise_factor; }
  double float8_cast_bytes(bool compiled) const {
    return compiled ? p_.efficiency.float8_cast_bytes_compiled
                    : p_.efficiency.float8_cast_bytes_eager;
  }
  int sm_count() const { return static_cast<int>(p_.gpu.sm_count); }

 private:
  // A grouped GEMM of `flops` (its tiles' work) over `groups` experts' operands (m × k)·(k × n):
  // overhead + max(flops / (peak · f_g), bytes / HBM bandwidth).
  double grouped_roofline_s(double flops, double m, double n, double k, double groups) const;
  const Profile& p_;
};

}  // namespace twin::hardware
