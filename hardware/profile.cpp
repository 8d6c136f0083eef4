#include "hardware/profile.hpp"

namespace twin::hardware {

namespace {

sim::Schema<GpuSpec> gpu_schema() {
  sim::Schema<GpuSpec> s;
  s.integer(
       "sm_count", "SMs", 1, 10000, std::nullopt, "streaming multiprocessors",
       [](auto& g) -> auto& { return g.sm_count; })
      .real(
          "smem_per_sm_KiB", "KiB", 1, 1e6, std::nullopt, "shared memory per SM",
          [](auto& g) -> auto& { return g.smem_per_sm_KiB; })
      .real(
          "hbm_usable_GiB", "GiB", 0.1, 1e5, std::nullopt, "HBM usable by the process",
          [](auto& g) -> auto& { return g.hbm_usable_GiB; })
      .real(
          "hbm_bw_GBps", "GBps", 1, 1e6, std::nullopt, "achieved HBM bandwidth (read+write)",
          [](auto& g) -> auto& { return g.hbm_bw_GBps; })
      .real(
          "bf16_dense_TFLOPs", "TFLOPs", 1, 1e6, std::nullopt, "dense BF16 peak",
          [](auto& g) -> auto& { return g.bf16_dense_TFLOPs; })
      .real(
          "fp8_dense_TFLOPs", "TFLOPs", 1, 1e6, std::nullopt, "dense FP8 peak",
          [](auto& g) -> auto& { return g.fp8_dense_TFLOPs; })
      .real(
          "tdp_W", "W", 0, 1e5, "board power at which the vendor's peaks hold (0: no power model)",
          [](auto& g) -> auto& { return g.tdp_W; })
      .real(
          "power_limit_W", "W", 0, 1e5,
          "board power limit (nvidia-smi -pl; 0: the TDP). Below the TDP, compute-bound "
          "kernels run at (limit / TDP)^(1/3) of the peaks [est: dynamic power ∝ f·V², V ∝ f]",
          [](auto& g) -> auto& { return g.power_limit_W; })
      .real(
          "speed_spread", "", 0, 0.9, std::nullopt,
          "spread of compute speed between GPUs (power cap, clocks): GPU g runs at "
          "1 − spread·u_g of nominal, u_g uniform in [0, 1) from a hash of g",
          [](auto& g) -> auto& { return g.speed_spread; })
      .real(
          "cuda_context_GiB", "GiB", 0, 1e4, std::nullopt,
          "HBM taken by the CUDA context and libraries, outside the caching allocator",
          [](auto& g) -> auto& { return g.cuda_context_GiB; })
      .real(
          "cuda_free_ms_per_segment", "ms", 0, 1e5, std::nullopt,
          "cudaFree of cached segments (an allocator retry): time per segment",
          [](auto& g) -> auto& { return g.cuda_free_ms_per_segment; })
      .real(
          "cuda_free_ms_per_GiB", "ms", 0, 1e5, std::nullopt,
          "cudaFree of cached segments: time per GiB released",
          [](auto& g) -> auto& { return g.cuda_free_ms_per_GiB; });
  return s;
}

sim::Schema<HostSpec> host_schema() {
  sim::Schema<HostSpec> s;
  s.integer(
       "cores_per_gpu", "cores", 1, 100000, std::nullopt, "CPU cores serving one rank",
       [](auto& h) -> auto& { return h.cores_per_gpu; })
      .real(
          "memory_per_gpu_GiB", "GiB", 0.1, 1e6, std::nullopt,
          "usable host memory per rank after the kernel's reservation",
          [](auto& h) -> auto& { return h.memory_per_gpu_GiB; })
      .real(
          "mem_bw_GBps", "GBps", 1, 1e6, std::nullopt, "achieved host memory bandwidth per rank",
          [](auto& h) -> auto& { return h.mem_bw_GBps; })
      .real(
          "fp32_TFLOPs", "TFLOPs", 0.001, 1e6, std::nullopt, "sustained SGEMM per rank's CPU",
          [](auto& h) -> auto& { return h.fp32_TFLOPs; })
      .real(
          "gloo_hop_latency_us", "us", 0, 1e6, std::nullopt,
          "latency of one step of a CPU (gloo) collective",
          [](auto& h) -> auto& { return h.gloo_hop_latency_us; })
      .real(
          "gloo_GBps", "GBps", 0.001, 1e6, std::nullopt,
          "bytes per second one rank's CPU (gloo) collective sends over TCP",
          [](auto& h) -> auto& { return h.gloo_GBps; })
      .real(
          "norm_GBps", "GBps", 0.001, 1e6, std::nullopt,
          "bytes per second PyTorch's CPU vector norm reads (one thread, whatever the cores)",
          [](auto& h) -> auto& { return h.norm_GBps; })
      .real(
          "process_baseline_GiB", "GiB", 0, 1e6, std::nullopt,
          "host memory of a rank's process besides its tensors (Python, CUDA, NCCL, data)",
          [](auto& h) -> auto& { return h.process_baseline_GiB; })
      .real(
          "unattributed_median_GiB", "GiB", 0, 1e6, std::nullopt,
          "median memory per socket attributed to no process at job start",
          [](auto& h) -> auto& { return h.unattributed_median_GiB; })
      .real(
          "unattributed_p90_GiB", "GiB", 0, 1e6, std::nullopt,
          "90th percentile of that memory (with the median: a log-normal)",
          [](auto& h) -> auto& { return h.unattributed_p90_GiB; })
      .real(
          "unattributed_kept_fraction", "", 0, 1, 1.0,
          "share of sockets that keep that memory under pressure (the others release it); 1: the "
          "bound where none releases it",
          [](auto& h) -> auto& { return h.unattributed_kept_fraction; });
  return s;
}

sim::Schema<NodeSpec> node_schema() {
  sim::Schema<NodeSpec> s;
  s.integer(
       "gpus", "GPUs", 1, 1024, std::nullopt, "GPUs per node",
       [](auto& n) -> auto& { return n.gpus; })
      .real(
          "host_h2d_GBps", "GBps", 0.1, 1e6, std::nullopt,
          "host→GPU copy bandwidth per GPU (C2C on GH200, PCIe elsewhere)",
          [](auto& n) -> auto& { return n.host_h2d_GBps; })
      .real(
          "host_d2h_GBps", "GBps", 0.1, 1e6, std::nullopt, "GPU→host copy bandwidth per GPU",
          [](auto& n) -> auto& { return n.host_d2h_GBps; })
      .real(
          "nvlink_pair_GBps", "GBps", 0.1, 1e6, std::nullopt,
          "NVLink bandwidth per direction between one pair of GPUs",
          [](auto& n) -> auto& { return n.nvlink_pair_GBps; })
      .real(
          "nvlink_gpu_GBps", "GBps", 0.1, 1e6, std::nullopt,
          "NVLink bandwidth per direction of one GPU, all links together",
          [](auto& n) -> auto& { return n.nvlink_gpu_GBps; })
      .real(
          "nic_GBps", "GBps", 0.1, 1e6, std::nullopt,
          "network bandwidth per GPU per direction achievable by NCCL",
          [](auto& n) -> auto& { return n.nic_GBps; });
  return s;
}

sim::Schema<NetworkSpec> network_schema() {
  sim::Schema<NetworkSpec> s;
  s.integer(
       "nodes_total", "nodes", 1, 1e7, std::nullopt, "nodes of the machine",
       [](auto& n) -> auto& { return n.nodes_total; })
      .integer(
          "nodes_per_group", "nodes", 1, 1e7, std::nullopt,
          "nodes of one Dragonfly+ group (a non-blocking two-level fat tree)",
          [](auto& n) -> auto& { return n.nodes_per_group; })
      .integer(
          "nodes_per_leaf", "nodes", 1, 1e7, std::nullopt, "nodes behind one leaf switch",
          [](auto& n) -> auto& { return n.nodes_per_leaf; })
      .integer(
          "spines_per_group", "switches", 1, 1e5, std::nullopt,
          "spine switches of a group; every leaf connects to every spine",
          [](auto& n) -> auto& { return n.spines_per_group; })
      .real(
          "leaf_spine_GBps", "GBps", 0.01, 1e6, std::nullopt,
          "bandwidth between one leaf and one spine, per direction",
          [](auto& n) -> auto& { return n.leaf_spine_GBps; })
      .integer(
          "global_links_per_group_pair", "links", 1, 1e5, std::nullopt,
          "global links between every pair of groups (at least one: a Dragonfly+ connects them "
          "all)",
          [](auto& n) -> auto& { return n.global_links_per_group_pair; })
      .real(
          "global_link_GBps", "GBps", 0.01, 1e6, std::nullopt,
          "bandwidth of one global link, per direction",
          [](auto& n) -> auto& { return n.global_link_GBps; });
  return s;
}

sim::Schema<NcclSpec> nccl_schema() {
  sim::Schema<NcclSpec> s;
  s.real(
       "cta_nvlink_GBps", "GBps", 0.01, 1e6, std::nullopt,
       "bandwidth one NCCL CTA (channel) moves over NVLink",
       [](auto& n) -> auto& { return n.cta_nvlink_GBps; })
      .real(
          "cta_net_GBps", "GBps", 0.01, 1e6, std::nullopt,
          "bandwidth one NCCL CTA moves over the network",
          [](auto& n) -> auto& { return n.cta_net_GBps; })
      .real(
          "base_latency_us", "us", 0, 1e6, std::nullopt, "latency of a collective launch",
          [](auto& n) -> auto& { return n.base_latency_us; })
      .real(
          "hop_latency_nvlink_us", "us", 0, 1e6, std::nullopt,
          "latency of one ring step between GPUs of a node",
          [](auto& n) -> auto& { return n.hop_latency_nvlink_us; })
      .real(
          "hop_latency_net_us", "us", 0, 1e6, std::nullopt,
          "latency of one ring step across the network",
          [](auto& n) -> auto& { return n.hop_latency_net_us; })
      .integer(
          "cta_threads", "threads", 32, 1024, std::nullopt, "threads of one NCCL CTA",
          [](auto& n) -> auto& { return n.cta_threads; })
      .integer(
          "cta_registers", "registers", 1, 255, std::nullopt, "registers per thread of an NCCL CTA",
          [](auto& n) -> auto& { return n.cta_registers; })
      .real(
          "cta_smem_KiB", "KiB", 0, 228, std::nullopt, "shared memory of one NCCL CTA",
          [](auto& n) -> auto& { return n.cta_smem_KiB; })
      .real(
          "hbm_traffic_factor", "", 0, 100, std::nullopt,
          "HBM bytes a collective moves per byte it sends over NVLink",
          [](auto& n) -> auto& { return n.hbm_traffic_factor; })
      .real(
          "buffer_per_channel_MiB", "MiB", 0, 1e5, std::nullopt,
          "NCCL device buffers per channel of a communicator",
          [](auto& n) -> auto& { return n.buffer_per_channel_MiB; });
  return s;
}

// GEMMs, grouped GEMMs and FlashAttention: their fraction of peak and its fall-off.
void add_dense_kernel_keys(sim::Schema<EfficiencySpec>& s) {
  s.real(
       "gemm_peak_fraction", "", 0.01, 1, std::nullopt,
       "fraction of dense bf16 peak that large GEMMs reach",
       [](auto& e) -> auto& { return e.gemm_peak_fraction; })
      .real(
          "gemm_half_rows", "rows", 0, 1e7, std::nullopt,
          "GEMM rows (tokens) at which a GEMM reaches half of gemm_peak_fraction",
          [](auto& e) -> auto& { return e.gemm_half_rows; })
      .real(
          "grouped_gemm_peak_fraction", "", 0.01, 1, std::nullopt,
          "fraction of dense bf16 peak a persistent grouped GEMM reaches on its padded rows",
          [](auto& e) -> auto& { return e.grouped_gemm_peak_fraction; })
      .real(
          "grouped_gemm_tile_rows", "rows", 1, 4096, std::nullopt,
          "rows of a grouped GEMM's tile: each expert's rows run as whole tiles",
          [](auto& e) -> auto& { return e.grouped_gemm_tile_rows; })
      .real(
          "grouped_gemm_half_k", "", 0, 1e5, std::nullopt,
          "a grouped GEMM tile's fixed cost (prologue, epilogue) in steps of its K dimension",
          [](auto& e) -> auto& { return e.grouped_gemm_half_k; })
      .real(
          "attention_fwd_fraction", "", 0.01, 1, std::nullopt,
          "fraction of dense peak reached by FlashAttention forward",
          [](auto& e) -> auto& { return e.attention_fwd_fraction; })
      .real(
          "attention_bwd_fraction", "", 0.01, 1, std::nullopt,
          "fraction of dense peak reached by FlashAttention backward",
          [](auto& e) -> auto& { return e.attention_bwd_fraction; })
      .real(
          "attention_fwd_half_tokens", "tokens", 0, 1e7, std::nullopt,
          "document length (or window) at which attention forward reaches half its fraction",
          [](auto& e) -> auto& { return e.attention_fwd_half_tokens; })
      .real(
          "attention_bwd_half_tokens", "tokens", 0, 1e7, std::nullopt,
          "document length (or window) at which attention backward reaches half its fraction",
          [](auto& e) -> auto& { return e.attention_bwd_half_tokens; });
}

// Block-sparse attention, per-kernel overhead and the host's loops.
void add_other_kernel_keys(sim::Schema<EfficiencySpec>& s) {
  s.real(
       "attention_fwd_block_fraction", "", 0, 1, 0.0,
       "a block-sparse attention kernel (FlexAttention) forward: fraction of dense peak per "
       "FLOP of its 128x128 mask blocks (0: a FlashAttention kernel, priced per document)",
       [](auto& e) -> auto& { return e.attention_fwd_block_fraction; })
      .real(
          "attention_bwd_block_fraction", "", 0, 1, 0.0,
          "the same for its backward (0: a FlashAttention kernel)",
          [](auto& e) -> auto& { return e.attention_bwd_block_fraction; })
      .real(
          "attention_fwd_qblock_us", "us", 0, 1e3, 0.0,
          "a block-sparse attention kernel's fixed time per query block of 128 tokens and head, "
          "forward",
          [](auto& e) -> auto& { return e.attention_fwd_qblock_us; })
      .real(
          "attention_bwd_qblock_us", "us", 0, 1e3, 0.0, "the same for its backward",
          [](auto& e) -> auto& { return e.attention_bwd_qblock_us; })
      .real(
          "kernel_overhead_us", "us", 0, 1e5, std::nullopt, "fixed cost per kernel",
          [](auto& e) -> auto& { return e.kernel_overhead_us; })
      .real(
          "gemm_fixed_us", "us", 0, 1e5, 0.0,
          "a cuBLAS bf16 GEMM's fixed time alone, fitted with gemm_half_rows (0: "
          "kernel_overhead_us)",
          [](auto& e) -> auto& { return e.gemm_fixed_us; })
      .real(
          "gemm_fp8_peak_fraction", "", 0, 1, 0.0,
          "large FP8 GEMMs (torch._scaled_mm) reach this fraction of FP8 peak (0: as bf16)",
          [](auto& e) -> auto& { return e.gemm_fp8_peak_fraction; })
      .real(
          "gemm_fp8_half_rows", "rows", 0, 1e7, 0.0,
          "an FP8 GEMM with this many rows reaches half of its fraction (0: as bf16)",
          [](auto& e) -> auto& { return e.gemm_fp8_half_rows; })
      .real(
          "eager_elementwise_factor", "", 1, 100, std::nullopt,
          "PyTorch eager (no torch.compile): elementwise time over the compiled block's",
          [](auto& e) -> auto& { return e.eager_elementwise_factor; })
      .real(
          "float8_cast_bytes_compiled", "B", 0, 1e4, std::nullopt,
          "Float8Linear's amax and casts under torch.compile: bytes per element of "
          "T·(k + n) + n·k of a linear layer",
          [](auto& e) -> auto& { return e.float8_cast_bytes_compiled; })
      .real(
          "float8_cast_bytes_eager", "B", 0, 1e4, std::nullopt, "the same in eager PyTorch",
          [](auto& e) -> auto& { return e.float8_cast_bytes_eager; })
      .real(
          "cpu_gemm_fraction", "", 0.001, 1, std::nullopt,
          "fraction of host fp32 SGEMM rate reached by CPU Newton–Schulz",
          [](auto& e) -> auto& { return e.cpu_gemm_fraction; })
      .real(
          "cpu_stream_fraction", "", 0.001, 1, std::nullopt,
          "fraction of host memory bandwidth reached by the CPU optimizer loops",
          [](auto& e) -> auto& { return e.cpu_stream_fraction; });
}

sim::Schema<EfficiencySpec> efficiency_schema() {
  sim::Schema<EfficiencySpec> s;
  add_dense_kernel_keys(s);
  add_other_kernel_keys(s);
  return s;
}

}  // namespace

const sim::Schema<Profile>& profile_schema() {
  static const sim::Schema<Profile> s = [] {
    sim::Schema<Profile> s;
    s.include(
         "gpu", gpu_schema(), [](auto& p) -> auto& { return p.gpu; })
        .include(
            "host", host_schema(), [](auto& p) -> auto& { return p.host; })
        .include(
            "node", node_schema(), [](auto& p) -> auto& { return p.node; })
        .include(
            "network", network_schema(), [](auto& p) -> auto& { return p.network; })
        .include(
            "nccl", nccl_schema(), [](auto& p) -> auto& { return p.nccl; })
        .include(
            "efficiency", efficiency_schema(), [](auto& p) -> auto& { return p.efficiency; })
        .include(
            "contention", contention_schema(), [](auto& p) -> auto& { return p.contention; })
        .include(
            "power", power_schema(), [](auto& p) -> auto& { return p.power; })
        .all_sourced()
        .text(
            "name", std::nullopt, "profile name", [](auto& p) -> auto& { return p.name; })
        .text(
            "description", std::string(), "what this profile describes",
            [](auto& p) -> auto& { return p.description; });
    return s;
  }();
  return s;
}

}  // namespace twin::hardware
