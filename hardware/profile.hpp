// A hardware profile: the numbers that describe one kind of node and its network. Every number
// carries a `source` note in the profile file ([spec], [meas], [est], [cal], or the calibration
// run that measured it); JOB.md §2 is the source of the JUPITER profile.
#pragma once

#include <cmath>
#include <cstdint>
#include <map>
#include <string>

#include "hardware/contention.hpp"
#include "hardware/power.hpp"
#include "sim/param.hpp"
#include "sim/units.hpp"

namespace twin::hardware {

struct GpuSpec {
  std::int64_t sm_count = 0;
  double smem_per_sm_KiB = 0;
  double hbm_usable_GiB = 0;
  double hbm_bw_GBps = 0;        // achieved, counting read + write
  double bf16_dense_TFLOPs = 0;  // vendor peak, dense
  double fp8_dense_TFLOPs = 0;
  double tdp_W = 0;             // board power at which the peaks hold (0: no power model)
  double power_limit_W = 0;     // a lower limit slows compute (clock_under_power_limit)
  double speed_spread = 0;      // GPU g computes at (1 − speed_spread·u_g) of nominal speed
  double cuda_context_GiB = 0;  // HBM the CUDA context and libraries take outside the allocator
  // cudaFree of cached segments (an allocator retry): per segment + per GiB released
  double cuda_free_ms_per_segment = 0;
  double cuda_free_ms_per_GiB = 0;
  // The rates as typed quantities: the one place their GB/s and TFLOP/s become per-second.
  sim::BytesPerSec hbm_bw() const { return sim::GBps(hbm_bw_GBps); }
  sim::FlopsPerSec peak(bool fp8) const {
    const double tflops = fp8 ? fp8_dense_TFLOPs : bf16_dense_TFLOPs;
    const double f = clock_under_power_limit();
    return sim::TFLOPs(f < 1 ? tflops * f : tflops);
  }
  // Set by finish_power when the profile's `power` controller runs: it holds power_limit_W
  // kernel by kernel (power.hpp), so no static clock scales the peaks as well.
  bool limit_held_by_controller = false;
  // The SM clock's fraction under a power limit below the TDP, for profiles without a
  // controller: dynamic power ∝ f·V² with the voltage roughly proportional to the clock in the
  // DVFS range, so P ∝ f³ and f = (limit / TDP)^(1/3) [est]; 1 without a limit. HBM bandwidth
  // is not scaled.
  double clock_under_power_limit() const {
    if (limit_held_by_controller) return 1;
    if (tdp_W <= 0 || power_limit_W <= 0 || power_limit_W >= tdp_W) return 1;
    return std::cbrt(power_limit_W / tdp_W);
  }
  // The limit the board holds: power_limit_W, never above the TDP (0: none given, the TDP).
  double board_limit_W() const {
    return power_limit_W > 0 && (tdp_W <= 0 || power_limit_W < tdp_W) ? power_limit_W : tdp_W;
  }
};

struct HostSpec {
  std::int64_t cores_per_gpu = 0;  // CPU cores serving one GPU's rank
  double memory_per_gpu_GiB = 0;   // usable host memory per rank (after kernel reservation)
  double mem_bw_GBps = 0;          // achieved (STREAM) per socket
  double fp32_TFLOPs = 0;          // sustained SGEMM per socket
  double gloo_hop_latency_us = 0;  // one step of a CPU (gloo) collective over TCP
  double gloo_GBps = 0;            // bytes a rank's gloo moves per second (its TCP pairs)
  // PyTorch's CPU gradient norm: bytes read per second. It runs on one thread, whatever the
  // cores (calibrate/cpu_optimizer_probe.py), so one core's memory bandwidth bounds it.
  double norm_GBps = 0;
  double process_baseline_GiB = 0;  // a rank's process besides tensors (Python, CUDA, NCCL host)
  // Memory held by no process at job start, per socket, log-normal through these two points
  // (JOB.md §7: 20,436 observations of Grace sockets).
  double unattributed_median_GiB = 0;
  double unattributed_p90_GiB = 0;
  // Of the sockets, the share that keeps that memory under pressure (the others release it, and
  // their ranks do not run short for it; model/host_memory.hpp).
  double unattributed_kept_fraction = 1;
  sim::BytesPerSec mem_bw() const { return sim::GBps(mem_bw_GBps); }
  sim::FlopsPerSec fp32_peak() const { return sim::TFLOPs(fp32_TFLOPs); }
};

struct NodeSpec {
  std::int64_t gpus = 0;
  double host_h2d_GBps = 0;  // GPU reading host memory (C2C or PCIe), achieved
  double host_d2h_GBps = 0;
  double nvlink_pair_GBps = 0;  // per direction between one pair of GPUs
  double nvlink_gpu_GBps = 0;   // per direction, all NVLink of one GPU together
  double nic_GBps = 0;          // per GPU per direction, achievable by NCCL
  sim::BytesPerSec host_h2d() const { return sim::GBps(host_h2d_GBps); }
  sim::BytesPerSec host_d2h() const { return sim::GBps(host_d2h_GBps); }
  sim::BytesPerSec nvlink_pair() const { return sim::GBps(nvlink_pair_GBps); }
  sim::BytesPerSec nvlink_gpu() const { return sim::GBps(nvlink_gpu_GBps); }
  sim::BytesPerSec nic() const { return sim::GBps(nic_GBps); }
};

struct NetworkSpec {
  std::int64_t nodes_total = 0;
  std::int64_t nodes_per_group = 0;  // Dragonfly+ group (a two-level fat tree)
  std::int64_t nodes_per_leaf = 0;
  std::int64_t spines_per_group = 0;
  double leaf_spine_GBps = 0;  // per leaf–spine pair, per direction
  std::int64_t global_links_per_group_pair = 0;
  double global_link_GBps = 0;  // one global link, per direction
};

// NCCL's behaviour on this machine (JOB.md §8).
struct NcclSpec {
  double cta_nvlink_GBps = 0;         // bandwidth one CTA (channel) moves over NVLink
  double cta_net_GBps = 0;            // bandwidth one CTA moves over the network
  double base_latency_us = 0;         // per collective launch
  double hop_latency_nvlink_us = 0;   // per ring step between GPUs of a node
  double hop_latency_net_us = 0;      // per ring step crossing the network
  double hbm_traffic_factor = 0;      // HBM bytes moved per byte a collective sends over NVLink
  double buffer_per_channel_MiB = 0;  // device buffers per channel of a communicator
  // One CTA's share of its SM (what small compute blocks fit beside it: contention.hpp, 5.).
  std::int64_t cta_threads = 0;
  std::int64_t cta_registers = 0;  // per thread
  double cta_smem_KiB = 0;
  // What one CTA moves, over the network or over NVLink.
  sim::BytesPerSec cta_bw(bool network) const {
    return sim::GBps(network ? cta_net_GBps : cta_nvlink_GBps);
  }
};

// Global efficiencies of the kernel cost model (kernel_cost.hpp). Each is either measured by
// twin-calibrate or fitted to a figure JOB.md marks (cal); the profile's `source` says which.
struct EfficiencySpec {
  double gemm_peak_fraction = 0;  // large bf16 GEMMs reach this fraction of dense peak
  double gemm_half_rows = 0;      // a GEMM with this many rows (tokens) reaches half of it
  // Persistent grouped GEMMs (one kernel over a GPU's experts; kernel_cost.hpp):
  double grouped_gemm_peak_fraction = 0;  // of dense peak, on rows padded to whole tiles
  double grouped_gemm_tile_rows = 0;      // each expert's rows run as whole tiles of this many
  double grouped_gemm_half_k = 0;         // a tile's fixed cost, in steps of K
  double attention_fwd_fraction = 0;      // FlashAttention forward, fraction of dense peak
  double attention_bwd_fraction = 0;
  // A document of L attended tokens (L = min(length, window)) reaches L/(L + h) of the fraction:
  // short documents fill the kernel's causal tiles poorly (fitted per pass, attention_bench.py).
  double attention_fwd_half_tokens = 0;
  double attention_bwd_half_tokens = 0;
  // A block-sparse attention kernel (FlexAttention) instead, where set (> 0): each mask block of
  // 128×128 tokens costs its FLOPs at this fraction of peak, and each query block per head a fixed
  // time (kernel_cost.hpp; fitted per pass by attention_bench.py).
  double attention_fwd_block_fraction = 0;
  double attention_bwd_block_fraction = 0;
  double attention_fwd_qblock_us = 0;
  double attention_bwd_qblock_us = 0;
  double kernel_overhead_us = 0;  // fixed cost per kernel (launch, tail)
  // A cuBLAS bf16 GEMM's own fixed time alone (its launch, first tiles' ramp and tail, back to
  // back on the GPU), fitted with gemm_half_rows (twin-fit-gemm --fit-fixed); 0: as every
  // kernel, kernel_overhead_us (FP8 GEMMs always: kernel_cost.hpp).
  double gemm_fixed_us = 0;
  // FP8 GEMMs (torch._scaled_mm): their own peak fraction and half rows (0: bf16's).
  double gemm_fp8_peak_fraction = 0;
  double gemm_fp8_half_rows = 0;
  // PyTorch's pointwise work without torch.compile: eager kernels take this many times the
  // elementwise time of the compiled (fused) block, whose traffic step_costs.cpp counts.
  double eager_elementwise_factor = 1;
  // torchao Float8Linear's dynamic-scaling casts, HBM bytes (at a vectorized kernel's bandwidth)
  // per element of T·(k + n) + n·k of a linear layer, compiled and eager.
  double float8_cast_bytes_compiled = 0;
  double float8_cast_bytes_eager = 0;
  double cpu_gemm_fraction = 0;    // CPU matmuls (Newton–Schulz) reach this of host fp32 peak
  double cpu_stream_fraction = 0;  // CPU optimizer loops reach this of host memory bandwidth
};

struct Profile {
  std::string name;
  std::string description;
  GpuSpec gpu;
  HostSpec host;
  NodeSpec node;
  NetworkSpec network;
  NcclSpec nccl;
  EfficiencySpec efficiency;
  ContentionModel
      contention;    // SM contention per kernel family (contention.hpp); sm_count from gpu
  PowerModel power;  // the power cap's controller (power.hpp); off unless the profile has one
  std::map<std::string, std::string> sources;  // key → source note, filled by the loader
  std::string provenance_json;                 // measured profiles: where, when, versions
};

const sim::Schema<Profile>& profile_schema();
// The keys of a profile's `contention` section (profile_contention.cpp).
sim::Schema<ContentionModel> contention_schema();
// The keys of a profile's `power` section (profile_power.cpp).
sim::Schema<PowerModel> power_schema();
// Completes the contention model after loading: the GPU's SM count, what an NCCL CTA holds of its
// SM, and the elementwise a_sat's scale with this GPU's HBM bandwidth (contention.hpp, 3.).
void finish_contention(Profile& p);
// Completes the power controller after loading: the limit it holds is the GPU's
// (gpu.power_limit_W, at most the TDP), and while it runs no static clock scales the peaks.
void finish_power(Profile& p);

}  // namespace twin::hardware
