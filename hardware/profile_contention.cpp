#include "hardware/profile.hpp"

// The `contention` section of a profile (contention.hpp states the mechanisms its keys set).
namespace twin::hardware {

namespace {

// Compute families have a clock boost and a cluster size; elementwise families the SMs at which
// they saturate HBM and a per-SM gain with few SMs busy (contention.hpp states the mechanisms).
constexpr Family kComputeFamilies[] = {Family::gemm, Family::gemm_fp8, Family::grouped_gemm,
                                       Family::attention, Family::attention_bwd};

// The measured cluster tables (reports/calibration/clusters/).
void add_cluster_keys(sim::Schema<ContentionModel>& s) {
  s.integer(
      "clusters.gpcs", "", 1, 64, std::nullopt, "GPCs the GPU's SMs sit in",
      [](auto& c) -> auto& { return c.gpcs; });
  s.reals(
      "clusters.held_sms", "SMs", 0, 1e4, std::nullopt,
      "SMs held at which the usable SMs of clustered kernels were measured (ascending, from 0)",
      [](auto& c) -> auto& { return c.cluster_held_sms; });
  for (int t = 0; t < 4; ++t) {
    const std::string size = std::to_string(ContentionModel::kClusterSizes[t]);
    s.reals(
        "clusters.c" + size + "_usable_sms", "SMs", 0, 1e4, std::nullopt,
        "SMs a kernel in clusters of " + size +
            " can use with clusters.held_sms held (0: none starts)",
        [t](auto& c) -> auto& { return c.cluster_usable_sms[t]; });
  }
}

void add_compute_family_keys(sim::Schema<ContentionModel>& s) {
  for (const Family f : kComputeFamilies) {
    const int i = static_cast<int>(f);
    const std::string n(family_name(f));
    s.real(
         n + ".boost_max", "", 0.5, 4, std::nullopt,
         "top clock over full-load clock of " + n +
             " kernels: the most a kernel speeds up per SM "
             "when fewer SMs are busy (power cap)",
         [i](auto& c) -> auto& { return c.family[i].boost_max; })
        .real(
            n + ".sat_sms", "SMs", 0, 1e4, 0.0,
            "SMs' worth of " + n +
                " throughput at which its loads saturate L2 and HBM (0: "
                "compute-bound)",
            [i](auto& c) -> auto& { return c.family[i].sat_sms; })
        .real(
            n + ".knee", "", 0.5, 100, 3.0,
            "sharpness of that saturation (soft minimum's exponent)",
            [i](auto& c) -> auto& { return c.family[i].knee; })
        .integer(
            n + ".cluster_sms", "SMs", 1, 16, std::nullopt,
            "SMs per thread-block cluster of " + n + " kernels",
            [i](auto& c) -> auto& { return c.family[i].cluster_sms; })
        .real(
            n + ".fixed_us", "us", 0, 1e6, 0.0,
            "launch, prologue and epilogue of a " + n + " kernel: time SMs held do not stretch",
            [i](auto& c) -> auto& { return c.family[i].fixed_us; });
  }
}

void add_elementwise_family_keys(sim::Schema<ContentionModel>& s) {
  for (int i = static_cast<int>(Family::ew_add); i < kFamilies; ++i) {
    const std::string n(family_name(static_cast<Family>(i)));
    s.real(
         n + ".sat_sms", "SMs", 1, 1e4, std::nullopt,
         "SMs' worth of " + n + " kernel throughput that saturates HBM",
         [i](auto& c) -> auto& { return c.family[i].sat_sms; })
        .real(
            n + ".gpc_queue", "", 0, 10, std::nullopt,
            "λ: how much a " + n +
                " kernel's loads wait behind those of the other busy SMs of "
                "their GPC (latency L0·(1 + λ(1 − 1/n)) with n busy; 0: not latency-bound)",
            [i](auto& c) -> auto& { return c.family[i].gpc_queue; })
        .real(
            n + ".knee", "", 0.5, 100, std::nullopt,
            "sharpness of a " + n + " kernel's bandwidth saturation (soft minimum's exponent)",
            [i](auto& c) -> auto& { return c.family[i].knee; })
        .real(
            n + ".lone_block", "", 0, 1, std::nullopt,
            "fraction of an SM's throughput one " + n +
                " block reaches alone on it (0: its "
                "share of a full SM)",
            [i](auto& c) -> auto& { return c.family[i].lone_block; })
        .real(
            n + ".hbm_fraction", "", 0.01, 2, std::nullopt,
            "HBM bandwidth a " + n +
                " kernel reaches alone, as a fraction of a device copy's "
                "(gpu.hbm_bw_GBps)",
            [i](auto& c) -> auto& { return c.family[i].hbm_fraction; })
        .integer(
            n + ".block_threads", "threads", 0, 1024,
            "threads of a typical " + n + " block (0: unknown, nothing shares a held SM)",
            [i](auto& c) -> auto& { return c.family[i].block.threads; })
        .integer(
            n + ".block_registers", "registers", 0, 255, "registers per thread of that block",
            [i](auto& c) -> auto& { return c.family[i].block.registers; })
        .integer(
            n + ".block_smem_bytes", "bytes", 0, 233472,
            "shared memory of that block", [i](auto& c) -> auto& {
              return c.family[i].block.smem_bytes;
            });
  }
}

}  // namespace

sim::Schema<ContentionModel> contention_schema() {
  sim::Schema<ContentionModel> s;
  s.real(
      "sat_hbm_GBps", "GBps", 0, 1e6, 0.0,
      "HBM bandwidth (gpu.hbm_bw_GBps) of the GPU the elementwise sat_sms were fitted on: on "
      "this GPU they saturate at sat_sms × gpu.hbm_bw_GBps / this (a_sat = R / r0; 0: as given)",
      [](auto& c) -> auto& { return c.sat_hbm_GBps; });
  s.real(
       "lone_cta_setup_us", "us", 0, 1e3, 0.0,
       "a lone CTA of a cuBLAS tile: its set-up t_s before its k steps (mechanism 3's lone CTA)",
       [](auto& c) -> auto& { return c.lone_cta.setup_us; })
      .real(
          "lone_cta_stream_GBps", "GBps", 0, 1e4, 0.0,
          "what a lone CTA streams, its tile's operands (r; 0: no lone-CTA saturation)",
          [](auto& c) -> auto& { return c.lone_cta.stream_GBps; })
      .real(
          "lone_cta_TMACps", "TMACps", 0, 1e3, 0.0,
          "a lone CTA's multiply-adds per second (F: its SM's tensor cores at its clock)",
          [](auto& c) -> auto& { return c.lone_cta.TMACps; })
      .reals(
          "lone_cta_tiles.tile_m", "", 1, 1024, std::vector<double>{},
          "kernels whose lone CTA was measured on their own: nvjet's tile_m (with tile_n, "
          "cluster_m, cluster_n, setup_us, per_k_ns, one value per kernel; a kernel not listed "
          "takes the form above)",
          [](auto& c) -> auto& { return c.lone_cta.tile_m; })
      .reals(
          "lone_cta_tiles.tile_n", "", 1, 1024, std::vector<double>{}, "their tile_n",
          [](auto& c) -> auto& { return c.lone_cta.tile_n; })
      .reals(
          "lone_cta_tiles.cluster_m", "", 1, 16, std::vector<double>{},
          "their cluster's CTAs along tile_m (nvjet's <cluster_m>x<cluster_n>)",
          [](auto& c) -> auto& { return c.lone_cta.tile_cluster_m; })
      .reals(
          "lone_cta_tiles.cluster_n", "", 1, 16, std::vector<double>{}, "and along tile_n",
          [](auto& c) -> auto& { return c.lone_cta.tile_cluster_n; })
      .reals(
          "lone_cta_tiles.setup_us", "us", 0, 1e3, std::vector<double>{},
          "their lone CTA's set-up (τ = setup_us + k · per_k_ns)",
          [](auto& c) -> auto& { return c.lone_cta.tile_setup_us; })
      .reals(
          "lone_cta_tiles.per_k_ns", "ns", 0, 1e3, std::vector<double>{},
          "their lone CTA's time per step of k",
          [](auto& c) -> auto& { return c.lone_cta.tile_per_k_ns; })
      .real(
          "split_k_reduce_setup_us", "us", 0, 1e3, 0.0,
          "cuBLASLt's split-K reduction alone: its fixed time (t_r = this + bytes / rate)",
          [](auto& c) -> auto& { return c.split_k_reduce.setup_us; })
      .real(
          "split_k_reduce_GBps", "GBps", 0, 1e5, 0.0,
          "the split-K reduction's rate over the bytes it reads and writes (0: a split-K launch "
          "is one kernel)",
          [](auto& c) -> auto& { return c.split_k_reduce.GBps; })
      .real(
          "split_k_reduce_lone_block", "", 0, 1, 0.0,
          "β of the split-K reduction's block beside held SMs: the share of its SM one block "
          "reaches alone (0: the elementwise family's)",
          [](auto& c) -> auto& { return c.split_k_reduce.lone_block; })
      .real(
          "split_k_reduce_fixed_us", "us", 0, 1e3, 0.0,
          "the split-K reduction's time that held SMs do not stretch (its launch inside the GPU)",
          [](auto& c) -> auto& { return c.split_k_reduce.fixed_us; });
  add_cluster_keys(s);
  add_compute_family_keys(s);
  add_elementwise_family_keys(s);
  return s;
}

void finish_contention(Profile& p) {
  auto& c = p.contention;
  c.sm_count = static_cast<int>(p.gpu.sm_count);
  c.hbm_scale = c.sat_hbm_GBps > 0 ? p.gpu.hbm_bw_GBps / c.sat_hbm_GBps : 1.0;
  c.holder = {static_cast<int>(p.nccl.cta_threads), static_cast<int>(p.nccl.cta_registers),
              static_cast<int>(p.nccl.cta_smem_KiB * 1024)};
}

}  // namespace twin::hardware
