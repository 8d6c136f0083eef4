// How much slower a kernel runs while some of the GPU's SMs are held (by NCCL CTAs, another
// library, a side job): the mechanism under the NCCL_MAX_CTAS what-if (JOB.md §6.13).
// Measured on our H200, kernel class by kernel class, by calibrate/contention_bench.py
// (reports/calibration/contention/, fits and residuals there).
//
// A kernel of family F runs B blocks (CTAs), at most o per SM, in thread-block clusters of c SMs.
// With k SMs held, s = S − k are free (S SMs in all). Five mechanisms make its time T(k), a sixth
// its fixed part:
//
//  1. Usable SMs. A cluster needs c free SMs inside one GPC (and a pair, one TPC); the SMs held
//     strand free ones in GPCs and TPCs left with a remainder. u = s for c = 1; for c > 1, u_c(k)
//     is measured (calibrate/cluster_probe.py: CTAs in clusters of 2, 4, 8, 16 resident beside k
//     holders), linear between the measured k, rounded down to whole clusters; 0 where no
//     cluster can start (the kernel waits for SMs to free). On the H200 the block scheduler puts
//     holders on one SM of each TPC first, so clusters lose more than the SMs held: with 16
//     held, clusters of 2 use 108 SMs, of 8 only 72 (reports/calibration/clusters/).
//  2. Power-capped clocks. A GPU at full load runs below its top clock; with fewer SMs busy the
//     same power buys a higher clock: dynamic power ∝ a·f³ at a fixed budget gives
//     f ∝ (S/a)^⅓ for a busy SMs, up to a ceiling: b(a) = min(b_max, (S/a)^⅓). Measured on the
//     H200 (contention_bench.py --clock, SM cycles against global time while the kernel runs):
//     GEMMs and attention run at 1,342–1,850 MHz alone and ~1,812 MHz with 56–112 SMs held, so
//     b_max is that plateau over the clock alone, per family the median over its cases (1.10
//     cuBLAS — 0.98 for small GEMMs to 1.35 for the longest —, 1.07 _grouped_mm, 1.23 FP8,
//     1.07/1.11 attention forward/backward); with 124 held
//     the clock reaches 1,980 MHz (not modelled: +3–10% at that one point). Elementwise kernels
//     run at 1,960–1,980 MHz whatever is held: their per-SM gain is the memory side instead. An
//     SM's loads leave through its GPC's port, where they wait behind those of the GPC's other
//     busy SMs; with n busy SMs in a GPC a load's latency is L0·(1 + λ(1 − 1/n)) (alone: L0; a
//     full GPC: nearly 1 + λ), and a latency-bound SM's rate is its inverse. Holders spread over
//     the G GPCs (reports/calibration/clusters/), so n = max(1, a/G) and
//        b(a) = (1 + λ(1 − G/S)) / (1 + λ(1 − 1/n)),
//     λ fitted per family (how latency-bound its loads are; 0: not at all).
//  3. Bandwidth saturation. The kernel's throughput with a busy SMs, in SM-equivalents, is
//     Θ(a) = x / (1 + (x/a_sat)^p)^(1/p), x = a·b(a): linear in SMs until the memory system
//     saturates at a_sat SMs' worth (a soft minimum of sharpness p). Compute-bound: a_sat = ∞.
//     For a streaming kernel a_sat = R / r0, R the chip's HBM bandwidth and r0 what one SM
//     streams alone (measured: u streaming SMs beside 132 − u holders reach u·r0 until close to
//     R = 4.66 TB/s, knee p ≈ 4, for r0 of 42–236 GB/s; reports/calibration/contention/, file z),
//     so on a GPU of the same SMs and another HBM the elementwise families' a_sat scale with its
//     bandwidth: a_sat × hbm_bw / sat_hbm_GBps (hbm_scale below).
//     Compute families fit a_sat too: what a tile gains with fewer tiles running beyond the
//     measured clock (_grouped_mm: a round of late CTAs costs 0.75 of the first, the clock only
//     explaining 0.93) is their loads' share of L2 and HBM. A CTA's loads per unit of work are
//     set by its tile: it loads tile_m/c_n + tile_n/c_m elements per step of k for tile_m·tile_n
//     multiply-adds (c_m, c_n: its cluster's CTAs along M and N, which multicast the tiles they
//     share), so a launch saturates at a_sat·I/I_ref SMs, I that load intensity and a_sat the
//     family's at I_ref (cuBLAS: 192×192 tiles in pairs, I = 128). Measured: cuBLAS's 128-row
//     down projection (96×64 tiles in pairs, I = 55) runs a late round of CTAs at 0.78 of its
//     first round's time where the clock explains none of it, its 128-row up projection (64×64
//     tiles in clusters of 8, I = 85) as the large GEMMs do; with the family's one a_sat the first
//     missed by 16% at 124 SMs held (within 9.1% now, reports/calibration/contention/). The
//     count against the L2 reads measured (Nsight Compute, 42 cuBLAS launches): exact to 0.1% in
//     clusters of 8 and in 4×1 clusters over one row of tiles, multicast included; nvjet's pairs
//     read 9–43% less than it counts. What the curves want is not the reads alone: the small-row
//     4×1 launches, read as counted, slow as if I were 28–35, not 51–70 (README, "What the GEMMs
//     load").
//     A launch whose full round is bound by what it streams, not by its tiles' reuse: a lone
//     CTA's tile takes τ, its kernel's line measured on rounds of lone CTAs (files y, lone-wide:
//     LoneCta), else the form t_s + max(B/r, M/F) (B the bytes it streams, M its multiply-adds;
//     the medians over the measured kernels), and a launch of G CTAs of
//     one tile each (one round alone, near the top clock the lone CTAs ran at; longer launches
//     run lower) whose time alone is t (t_f of it fixed) gives a lone CTA the share ρ = τ/(t −
//     t_f) of its round. In Θ's units a lone CTA takes ρ of a full round when Θ(G) = ρ·G·b(1):
//     solved for a_sat, the launch saturates there (own_saturation()): its lone CTA replaces its
//     load intensity's estimate, unless ρ·b(1) ≥ b(G) (τ no shorter than the full round: no a_sat
//     gives that, the load intensity's stands). (Until the sixth session of 2026-12-04 it took
//     the smaller of the two; where the load intensity's was the smaller, a CTA ran its tile
//     faster beside 64 others than τ allows alone — nvjet's 1×2 pairs of 64×32 tiles at 64 rows:
//     −37% at 124 SMs held, −24% at 64.) Measured with a probe that lands on each SM as a CTA
//     leaves it (cta_end_probe.py, file cta-ends): a full round's CTAs end within 1–4 µs of each
//     other, a late round of lone CTAs runs about τ past them.
//     A split-K launch is two kernels (split_k()): nvjet's slices of k, then cuBLASLt's
//     reduction of their fp32 partial sums, an elementwise grid kernel (its time alone t_r =
//     setup + bytes / rate, measured: calibrate/split_k_reduce.hpp); ρ is the slices', and the
//     launch slows as the engine runs a fused pair, Σ t_i·slowdown_i / Σ t_i. Read as one kernel,
//     the reduction's 1.6–3.5 µs of a 12–23 µs launch lowered ρ and the model saturated the
//     slices too early: every split-K launch of file p missed low (−9…−20%). Held out on the 70
//     small-row launches (files l, p, q), the worst miss per launch fell from up to +148% to
//     within −27…+23%. The reduction runs on its own grid, as every recorded launch did: one
//     512-thread block per 32 × 16 outputs, four to an SM (2,048 threads) — ~1.5 waves alone,
//     8–10 on the 20 SMs left beside 112 held, where an elementwise kernel's grid for the same
//     bytes (16 blocks to an SM) had 2 and the split-K launches missed low with 72–124 held.
//     Timed apart beside held SMs (file reduce) the reduction confirms the grid — ~1.4 µs per
//     wave of four blocks to an SM, whatever the shape — but its partial last waves cost less
//     than a whole block's time and its ~1 µs launch does not repeat per wave: the reduction takes
//     its own β (a lone block reaches 0.55 of its SM, not 1/4) and 1.0 µs no wave stretches,
//     fitted on the 2,048-column GEMMs (held out, 34 points: median miss 8.3% → 4.6%, worst
//     45.9% → 22.9%).
//  4. Scheduling. grid: the hardware dispatches blocks as slots free, u·o at a time; full waves
//     run on u SMs; the last r = B mod u·o blocks start as slots free, spread over a_t =
//     min(r, u) SMs. A block alone reaches β of its SM's throughput (at least its share 1/o: a
//     latency-bound block gains nothing from an emptier SM, one whose SM is bound by its own
//     pipes or by HBM gains up to the whole SM), so the tail runs min(r·β, a_t) SMs' worth:
//        T = ⌊B/(u·o)⌋·u·o/Θ(u) + [r > 0]·r/Θ'(min(r·β, a_t), a_t),
//     Θ'(x, a) the saturation of 3. for x·b(a). Measured: the FP8 dequantization's tail of 32
//     blocks costs 0.34 of a full wave (β = 1/o), RMSNorm's of 128 rows almost nothing (β ≈ 1);
//     persistent static: G = min(B, S) CTAs with fixed tile lists (N mod G of them one tile
//     longer: which ones in launch order is the kernel's ListOrder, below); CTAs start in block
//     order, those without an SM on the first SMs (pair, for clusters of 2) that free — observed
//     directly with the tile-schedule probe (a kernel of 132 CTAs in clusters of 2 and equal tiles
//     beside 0–32 held SMs, reports/calibration/clusters/): its static lists, in either order, and
//     its shared counter take the rounds this model gives at every point (test_calibrate); with
//     fewer tiles than CTAs the CTAs without one end at once. All running CTAs progress at the
//     clock of the SMs then busy, Θ(a)/a per CTA (with one list per CTA, N = G: rounds of u CTAs, T
//     = Σ_rounds a_j/Θ(a_j)); persistent dynamic: N tiles from a shared counter, in waves of u, the
//     last partial wave of r tiles on r SMs at their clock: T = W(N, u) = ⌊N/u⌋·u/Θ(u) + r/Θ(r);
//     with N unknown (0), a fluid drain: T = 1/Θ(u); persistent first-static (cuBLAS's nvjet GEMMs
//     from 2.4 tiles per CTA in clusters of 2 and 4, from 4 in clusters of 8: kernel_shapes.cpp):
//     CTA j starts with tile j, then takes tiles from the counter; the L = G − u CTAs without an
//     SM keep their first tile until the running ones have drained the counter:
//        T = W(N − L, u) + W(L, u).
//     An empirical rule for nvjet, not the hardware's: the probe's own first-static kernel starts
//     its late clusters as soon as CTAs find the counter empty and exit (×1.0 with 1–2 SMs held
//     where the rule gives ×1.5), so what holds nvjet's late clusters back is inside nvjet (its
//     router GEMM's steps fit no schedule the probe ran: README of
//     reports/calibration/contention/, "Where it misses"). Measured: holding 2–16 SMs slows
//     cuBLAS by about one tile per CTA — ×1.12–1.35 at 5.8 tiles per CTA (o_proj at 4,096 rows),
//     ×1.04–1.19 at 21, ×1.02–1.05 at 184 — where a dynamic counter alone predicts ×1.00–1.05;
//     o_proj at 4,096 rows: worst held-out point −27% → −16%.
//  5. Sharing a held SM. A holder (an NCCL CTA: 544–640 threads × 96 registers, ~80 KiB shared
//     memory) leaves part of its SM's registers, threads and shared memory; a small grid block
//     fits beside it. h = blocks of the kernel resident on an SM beside one holder, by the SM's
//     occupancy limits (blocks_beside()); a held SM then lends h of its o slots, so the grid
//     runs on u' = u + k·h/o SMs' worth of slots in 4. (u' for u). Measured: the FP8
//     dequantization (256 threads × 16 registers, a fixed grid of 2,112 blocks) beside holders of
//     544 or 640 threads × 96 registers (1,024 registers left in one register partition: h = 1)
//     adds its third to twelfth rounds exactly at the k where ⌈2112/(8(132 − k) + k)⌉ steps (56,
//     80, 100, 112, 124 held), and stays at three rounds up to 124 held beside holders of 32
//     threads (h = 7). GEMM and attention blocks need most of an SM's shared memory: h = 0.
//  6. Fixed time. A kernel's launch, prologue and epilogue take t_f whatever the SMs held; a
//     kernel of time alone t stretches only its other t − t_f:
//        slowdown = φ + (1 − φ)·T(k)/T(0),  φ = min(1, t_f/t).
//     Measured: cuBLAS's 6–13 µs down projections at 128–352 rows slow ×1.40–1.67 where their
//     second round of CTAs predicts ×1.85, and ×15.7–22 with 124 SMs held, not ×27.6.
// The slowdown is T(k)/T(0) (and 6.). Each family's parameters are in the hardware profile
// (`contention.*`, hardware/profile.hpp), fitted by twin-fit-contention (calibrate/).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

namespace twin::hardware {

// Kernel families, each with its own fitted parameters. Elementwise kernels differ in how many
// SMs saturate HBM (their per-SM throughput): one family per implementation the step runs.
enum class Family : std::uint8_t {
  gemm,          // cuBLAS bf16 (nvjet persistent kernels, clusters of 2)
  gemm_fp8,      // cuBLASLt FP8 with row-wise scales
  grouped_gemm,  // CUTLASS/QuACK persistent grouped GEMMs (torch._grouped_mm, SonicMoE)
  attention,     // cuDNN SDPA / FlexAttention forward
  attention_bwd,  // their backward (measured: ×13.8–16.0 with 124 SMs held, forward ×14.8–16.5)
  ew_add,         // vectorized same-dtype elementwise (add, mul, RoPE, residual, bf16 casts)
  ew_norm,        // RMSNorm forward
  ew_swiglu,      // SwiGLU forward (unfused: silu, mul)
  ew_gather,      // index_select of token rows (MoE permute)
  ew_scatter_add,  // index_add_ of token rows (MoE unpermute, combine weights)
  ew_widen,        // mixed-dtype elementwise: bf16→fp32 casts, fp32 accumulation of bf16
  ew_fp8_quant,    // FP8 block quantization (128 values, one scale)
  ew_fp8_dequant,  // FP8 block dequantization (grid-stride, 16 blocks per SM)
  ew_sum_fp32,     // fp32 sum of bf16 slices (the bf16 gradient all-to-all's local sum)
  ew_loss,         // cross-entropy forward over a chunk of logits
  // Backward kernels whose curves differ from their forward's (measured: RMSNorm backward ×4.7 vs
  // ×4.3 forward with 124 SMs held, SwiGLU ×8.4 vs ×5.9, cross-entropy ×4.7 vs ×7.2).
  ew_norm_bwd,
  ew_swiglu_bwd,
  ew_loss_bwd,
  count
};
constexpr int kFamilies = static_cast<int>(Family::count);
std::string_view family_name(Family f);
// The family of a name, or Family::count if none.
Family family_of(std::string_view name);

enum class Schedule : std::uint8_t {
  grid,
  persistent_static,
  persistent_dynamic,
  persistent_first_static
};

// Static tile lists give CTA j (in the kernel's own numbering) tiles j, j + G, …, so the first
// N mod G carry one tile more; which CTAs those are in launch order (the order in which CTAs find
// SMs, mechanism 4) depends on the kernel:
//  - launch: the project's kernels, CUTLASS's grouped GEMMs, the tile-schedule probe;
//  - nvjet_pairs: cuBLAS's nvjet GEMMs in clusters of 2 (grid [2, 66, 1] in the profiler): their
//    CTAs are numbered column-major while the clusters launch row-major, so in launch order the
//    clusters take numbers from the two halves in turn — cluster i: (G/2)·(i mod 2) + 2⌊i/2⌋ +
//    rank. Measured: the router GEMM at 16,384 and 24,576 tokens (256 tiles) slows ×1.0 / 1.44 /
//    1.83 with 1 / 2–3 / 4–16 SMs held, the rounds of this order (a late light cluster at 1 held;
//    a late heavy one starting after one tile at 2–3; one starting after two at 4–16); releasing
//    the holders at chosen times shows the late clusters carrying two tiles and starting by
//    themselves after one or two (reports/calibration/contention/, "nvjet's late clusters");
//  - last: the last CTAs (cuBLAS in other cluster sizes: not measured; one tile per CTA there).
enum class ListOrder : std::uint8_t { launch, nvjet_pairs, last };

// What one block (CTA) takes of an SM, for occupancy (mechanism 5). threads = 0: unknown.
struct BlockResources {
  int threads = 0;
  int registers = 0;   // per thread
  int smem_bytes = 0;  // static + dynamic shared memory
};
// Blocks of `b` resident at once on one Hopper SM (sm_90: 2,048 threads, 228 KiB of shared
// memory with 1 KiB reserved per block, 32 blocks, 65,536 registers in four partitions of 16,384,
// one per warp scheduler; CUDA C++ Programming Guide, "Compute Capabilities"), beside one block of
// `beside` (threads = 0: alone). Registers count per partition: warps go round-robin over the
// four, so an NCCL CTA of 17 or 20 warps × 96 registers leaves 1,024 registers in its fullest
// partition, room for one warp of 32 registers there — measured: FP8 dequantization blocks (8
// warps × 16) fit once beside holders of 544 and of 640 threads alike. 0 if b is unknown.
int blocks_beside(const BlockResources& b, const BlockResources& beside = {});

// What contention needs to know of one kernel launch. The default, a dynamic kernel of a
// compute-bound family with default parameters, slows in proportion to the SMs held.
struct KernelShape {
  Family family = Family::gemm;
  Schedule schedule = Schedule::persistent_dynamic;
  std::uint16_t blocks_per_sm = 1;  // o
  float blocks = 0;                 // B (grid: blocks; persistent: CTAs, ≤ S)
  float tiles = 0;           // N (persistent: tiles over the CTAs; 0: one list per CTA / fluid)
  std::uint8_t cluster = 0;  // c (SMs per thread-block cluster; 0: the family's)
  std::int8_t beside = -1;   // h (grid: blocks beside a holder; −1: the family's)
  float clock_gain = 0;      // b_max of this launch (its measured clock; 0: the family's)
  ListOrder order = ListOrder::launch;  // static lists: which CTAs carry the longer ones
  // Multiply-adds per element a CTA loads into shared memory (its tile's operand reuse after the
  // cluster's multicast, mechanism 3); 0: the family's reference, kReferenceLoadIntensity.
  std::uint8_t load_intensity = 0;
  // A cuBLAS CTA's kernel (nvjet's <tile_m>x<tile_n> tile in <cluster_m>x<cluster / cluster_m>
  // clusters) and the k it runs per tile (its slice), for a lone CTA's time (mechanism 3:
  // own_saturation); cta_k 0: not known (the load intensity alone).
  float cta_k = 0;
  std::uint16_t tile_m = 0, tile_n = 0;
  std::uint8_t cluster_m = 1;
  // A split-K launch's reduction (cuBLASLt's splitKreduce_kernel after nvjet's slices of k): the
  // bytes it reads (the slices' fp32 partial sums) and writes (bf16); 0: no reduction.
  float reduce_bytes = 0;
  float reduce_blocks = 0;  // its grid (0: an elementwise kernel's for its bytes)
  bool is_reduce = false;   // this launch is that reduction (split_k(): its own β and fixed time)
};
// The load intensity at which a family's a_sat is fitted: nvjet's 192×192 tiles in clusters of
// 2 (192·192 / (192/2 + 192) = 128 multiply-adds per element loaded), cuBLAS's tile for most
// large GEMMs (reports/calibration/contention/).
constexpr double kReferenceLoadIntensity = 128;

// A family's fitted parameters.
struct FamilyParams {
  double boost_max = 1;   // b_max (compute families)
  double gpc_queue = 0;   // λ (elementwise families: mechanism 2's memory side)
  double sat_sms = 0;     // a_sat (0: compute-bound)
  double knee = 3;        // p
  double lone_block = 0;  // β: an SM's throughput one block reaches alone (0: 1/o, its share)
  int cluster_sms = 1;    // c
  double fixed_us = 0;    // t_f (mechanism 6)
  // Elementwise families: the HBM bandwidth the kernel reaches alone, as a fraction of a device
  // copy's (the time alone of `bytes` moved is bytes / (hbm_bw · hbm_fraction), kernel_cost.hpp).
  double hbm_fraction = 0;
  // Grid families: their kernels' typical block (mechanism 5; threads 0: h = 0).
  BlockResources block;
};

// One kernel of a run of kernels timed as one task (a fused run, Newton–Schulz's GEMMs and
// elementwise kernels): its shape and its time alone.
struct KernelPart {
  KernelShape shape;
  double alone_s;
  double hbm_bytes = 0;  // bytes it moves through HBM (ops.hpp: shared with copies and NCCL)
  // Written when its run starts: its time over alone_s under the power cap's clock (power.hpp),
  // so that reports split a fused run's time by what each part took.
  mutable double power_slowdown = 1;
};

struct ContentionModel {
  int sm_count = 132;
  // Mechanism 1's measurement: u_c(k) at the SMs held `cluster_held_sms` (ascending, from 0),
  // for clusters of 2, 4, 8, 16 (kClusterSizes); empty: u = ⌊s/c⌋·c.
  static constexpr int kClusterSizes[] = {2, 4, 8, 16};
  std::vector<double> cluster_held_sms;
  int gpcs = 8;  // G: GPCs the SMs sit in (mechanism 2's memory side)
  std::vector<double> cluster_usable_sms[4];
  FamilyParams family[kFamilies];
  BlockResources holder;  // what holds an SM (an NCCL CTA; threads 0: nothing fits beside it)
  // The HBM bandwidth (a device copy's) of the GPU the elementwise families' a_sat were fitted
  // on, and this GPU's over it: their a_sat scale by hbm_scale (mechanism 3; 0: not given, 1).
  double sat_hbm_GBps = 0;
  double hbm_scale = 1;
  // A lone CTA of a cuBLAS tile (mechanism 3): τ = t_s + max(bytes / r, multiply-adds / F);
  // stream_GBps 0: not known (launches saturate by their load intensity alone). A kernel
  // measured on its own (its tile in its cluster shape) takes its own line instead, τ = setup +
  // k·per_k (the `tile_*` tables, one entry per kernel): nvjet's kernels stream at 94–189 GB/s
  // and one tile differs by its cluster (96×64 in 2×1 pairs 2.66 ns per k, in 1×2 ~1.9), so the
  // form is the fallback, not the rule.
  struct LoneCta {
    double setup_us = 0, stream_GBps = 0, TMACps = 0;  // t_s, r, F
    std::vector<double> tile_m, tile_n, tile_cluster_m, tile_cluster_n, tile_setup_us,
        tile_per_k_ns;
    // τ of a lone CTA of a kernel (tile_m × tile_n in cluster_m × cluster_n) running k steps
    // (0: not known).
    double seconds(int tile_m, int tile_n, int cluster_m, int cluster_n, double k) const;
    // The kernel's entry in the tile tables, −1 if it has none (the form).
    int measured(int tile_m, int tile_n, int cluster_m, int cluster_n) const;
    // "" if the tile tables are consistent, else what is wrong (for the loader).
    std::string tile_table_problem() const;
  } lone_cta;
  // A split-K launch's reduction alone: t_r = setup + bytes / rate (GBps 0: not known, the launch
  // one kernel as before).
  // Beside held SMs, its grid's waves (mechanism 4) with a block's own β and a time no wave
  // stretches (0, 0: the elementwise family's β and none; fitted on file reduce's 2,048-column
  // GEMMs by calibrate::fit_split_k_waves).
  struct SplitKReduce {
    double setup_us = 0, GBps = 0;
    double lone_block = 0, fixed_us = 0;
  } split_k_reduce;
  // A split-K launch as the two kernels it is: the slices (the launch's shape, its time alone
  // less the reduction's) and the reduction, an elementwise grid kernel of the widening family
  // (it reads fp32 and writes bf16).
  struct SplitK {
    KernelPart slices, reduce;
    // Σ t_i·slowdown_i / Σ t_i over the two, slowdown_of(part) giving a part's.
    template <class F>
    double slowdown(F&& slowdown_of) const {
      return (slices.alone_s * slowdown_of(slices) + reduce.alone_s * slowdown_of(reduce)) /
             (slices.alone_s + reduce.alone_s);
    }
  };
  std::optional<SplitK> split_k(const KernelShape& k, double alone_s) const;

  const FamilyParams& of(Family f) const { return family[static_cast<int>(f)]; }
  // T(held)/T(0) for one launch (mechanisms 1–5 above).
  double slowdown(const KernelShape& k, int held) const {
    return held <= 0 ? 1.0 : time_units(k, held) / time_units(k, 0);
  }
  // The slowdown of a launch whose time alone is alone_s (mechanism 6 on top of 1–5; a split-K
  // launch as its two kernels, split_k()).
  double slowdown(const KernelShape& k, int held, double alone_s) const;
  // The launch with its a_sat from its lone CTA (mechanism 3), as a load intensity; cta_k cleared
  // (applied). Unchanged if it is 0 or the launch runs more than one tile per CTA.
  KernelShape own_saturation(KernelShape k, double alone_s) const;
  // τ of a launch's lone CTA (lone_cta over the shape's tile and cta_k), 0 if not known.
  double lone_cta_s(const KernelShape& k) const;
  // a_sat of a launch: its family's scaled by its load intensity (mechanism 3), 0: none.
  double sat_sms(const KernelShape& k) const {
    return of(k.family).sat_sms * sat_scale(k) * (k.family >= Family::ew_add ? hbm_scale : 1.0);
  }
  // A run of kernels back to back: Σ t_i·slowdown_i / Σ t_i (as the engine runs a fused task).
  double slowdown(std::span<const KernelPart> parts, int held) const {
    double alone = 0, slowed = 0;
    for (const auto& p : parts)
      alone += p.alone_s, slowed += p.alone_s * slowdown(p.shape, held, p.alone_s);
    return alone > 0 ? slowed / alone : 1.0;
  }
  // φ + (1 − φ)·slowdown, φ the family's fixed share of a launch of alone_s.
  double stretch(const KernelShape& k, double slowdown, double alone_s) const {
    if (slowdown == INFINITY) return slowdown;  // blocked: no cluster can start (not 0·∞)
    const double fixed_us = k.is_reduce ? split_k_reduce.fixed_us : of(k.family).fixed_us;
    const double fixed = alone_s > 0 ? std::min(1.0, fixed_us * 1e-6 / alone_s) : 0.0;
    return fixed + (1 - fixed) * slowdown;
  }
  // T(held) in the model's units (only ratios mean anything); held is clamped to [0, S − 1].
  // `lending`: how many of the held SMs hold an NCCL CTA, with room beside it (mechanism 5);
  // −1: all of them (the measurements' holders). SMs held by other kernels lend nothing.
  double time_units(const KernelShape& k, int held, int lending = -1) const;
  // Relative speed 1/slowdown with `free` SMs available (the engine's rate of a fluid kernel).
  double speed(const KernelShape& k, int free) const { return 1.0 / slowdown(k, sm_count - free); }
  // b(a) and Θ(a) of a family (for the engine's persistent kernels and for tests).
  double boost(Family f, double active, double gain = 0) const;  // gain: b_max if > 0
  double throughput(Family f, double active) const;
  // Θ of one launch: its family's, at the launch's own clock gain if it has one.
  double throughput(const KernelShape& k, double active) const {
    // The reference intensity is the family's table (the engine asks on every change of SMs).
    return k.clock_gain > 0 || sat_scale(k) != 1.0
               ? throughput_spread(k.family, active, active, k.clock_gain, sat_scale(k))
               : throughput(k.family, active);
  }
  // Θ for `work` SMs' worth of blocks spread over `active` SMs (a grid's last, partial wave),
  // the family's a_sat times sat_scale.
  double throughput_spread(Family f, double work, double active, double gain = 0,
                           double sat_scale = 1) const;
  // A launch's a_sat over its family's: its load intensity over the reference (mechanism 3).
  static double sat_scale(const KernelShape& k) {
    return k.load_intensity > 0 ? k.load_intensity / kReferenceLoadIntensity : 1.0;
  }
  // h of a launch: its own, else its family's block beside the holder (mechanism 5).
  int beside(const KernelShape& k) const;
  // SMs a kernel in clusters of `cluster` SMs (0: the family's) can use with `held` of them
  // taken (mechanism 1).
  int usable_sms(Family f, int held, int cluster = 0) const;
  // "" if the cluster tables are consistent, else what is wrong (for the loader).
  std::string cluster_table_problem() const;
  // Tabulates Θ for every family and whole numbers of SMs (the engine asks on every change of
  // a GPU's free SMs). A prepared model must be prepared again after its parameters change.
  void prepare();

 private:
  double compute_throughput(Family f, double active) const;
  std::vector<double> table_;  // [family · (sm_count + 1) + active]
};

// T(held) of recent (shape, held) pairs, for one simulation's engine, which asks the same ones
// on every change of a GPU's free SMs (a direct-mapped table: a miss recomputes and replaces).
class ContentionMemo {
 public:
  explicit ContentionMemo(const ContentionModel& m) : m_(m), slots_(kSlots) {}
  double time_units(const KernelShape& k, int held, int lending = -1);

 private:
  static constexpr std::size_t kSlots = 4096;  // a power of two
  struct Slot {
    std::uint64_t key = ~std::uint64_t{0}, key2 = 0;
    double units = 0;
  };
  const ContentionModel& m_;
  std::vector<Slot> slots_;
};

}  // namespace twin::hardware
