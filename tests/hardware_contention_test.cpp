// Tier 1–2: the SM-contention model (hardware/contention.hpp) on hand-solvable cases, and the
// engine (hardware/ops.hpp) against it.
#include <doctest/doctest.h>

#include <cmath>
#include <utility>

#include "hardware/kernel_shapes.hpp"
#include "hardware/ops.hpp"
#include "tests/hardware_rig.hpp"

using namespace twin;
using namespace twin::hardware;
using namespace twin::hardware::test;

TEST_SUITE("hardware.contention") {
  ContentionModel model() {
    ContentionModel m;
    // Measured-style cluster tables: clusters of 2 use 128 SMs with 2 held, 64 with 64; clusters
    // of 8 use 120 with none held, none at all from 80 held.
    m.cluster_held_sms = {0, 2, 64, 80};
    m.cluster_usable_sms[0] = {132, 128, 64, 48};
    m.cluster_usable_sms[1] = {128, 124, 60, 40};
    m.cluster_usable_sms[2] = {120, 120, 56, 0};
    m.cluster_usable_sms[3] = {112, 112, 0, 0};
    auto& g = m.family[static_cast<int>(Family::grouped_gemm)];
    g.boost_max = 1.25, g.cluster_sms = 2;
    auto& e = m.family[static_cast<int>(Family::ew_add)];
    e.sat_sms = 50, e.knee = 200;  // nearly a hard minimum
    return m;
  }
  // The engine's end time of one kernel on GPU 0 of a machine with model m, `held` SMs taken by
  // NCCL throughout.
  double engine_s(const ContentionModel& m, int held, const KernelWork& w) {
    Profile p = test_profile();
    p.contention = m;
    Rig r(4, p);
    if (held > 0) r.cluster.gpu(0).request(held, Gpu::Holder::nccl, [](int) {});
    auto& t = r.graph.add("k");
    run_kernel(t, r.cluster, 0, w);
    r.graph.start();
    r.engine.run();
    return t.end_time().to_s();
  }
  TEST_CASE("compute-bound dynamic kernel: SMs held and the clock they free") {
    const ContentionModel m = model();
    const KernelShape dyn{Family::attention, Schedule::persistent_dynamic, 1, 132};
    // No boost, no cluster: exactly S/s.
    CHECK(m.slowdown(dyn, 40) == doctest::Approx(132.0 / 92));
    CHECK(m.slowdown(dyn, 0) == 1.0);
  }
  TEST_CASE("static kernel in clusters: rounds of the usable SMs at the round's clock") {
    const ContentionModel m = model();
    const KernelShape st{Family::grouped_gemm, Schedule::persistent_static, 1, 132};
    // 2 held: 128 usable (the table); 132 CTAs run as 128 then 4. b(128) = (132/128)^⅓,
    // b(4) = min(1.25, 33^⅓) = 1.25: 1/b(128) + 1/1.25.
    CHECK(m.slowdown(st, 2) == doctest::Approx(std::cbrt(128.0 / 132) + 0.8));
    // 64 held: 64 usable: rounds 64, 64, 4 at b(64) = (132/64)^⅓ > 1.25 → 1.25.
    CHECK(m.slowdown(st, 64) == doctest::Approx(3 / 1.25));
  }
  TEST_CASE(
      "usable SMs of clusters: the measured table, linear between its points, whole clusters") {
    const ContentionModel m = model();
    CHECK(m.usable_sms(Family::gemm, 0, 2) == 132);
    CHECK(m.usable_sms(Family::gemm, 33, 2) == 96);   // 128 + (64 − 128)·31/62 = 96
    CHECK(m.usable_sms(Family::gemm, 40, 8) == 80);   // 120 − 64·38/62 = 80.8 → whole clusters
    CHECK(m.usable_sms(Family::gemm, 72, 8) == 24);   // 56 − 56·8/16 = 28 → 24
    CHECK(m.usable_sms(Family::gemm, 100, 2) == 28);  // beyond the table: 48·32/52 = 29.5 → 28
    CHECK(m.usable_sms(Family::gemm, 10, 1) == 122);  // no clusters: every free SM
    // No cluster of 8 can start from 80 held: the kernel waits (infinitely slow while held).
    const KernelShape c8{Family::gemm, Schedule::persistent_static, 1, 112, 112, 8};
    CHECK(std::isinf(m.slowdown(c8, 90)));
    ContentionModel fixed = m;  // a launch all fixed time, blocked: still blocked, not NaN
    fixed.family[static_cast<int>(Family::gemm)].fixed_us = 5;
    CHECK(std::isinf(fixed.slowdown(c8, 90, 1e-6)));
    CHECK(m.slowdown(c8, 2) == 1.0);  // 120 usable ≥ 112 CTAs
  }
  TEST_CASE("one tile per CTA in clusters: each cluster is placed whole, its padding with it") {
    const ContentionModel m = model();
    // 96 × 1,024 on 64×32 tiles in 1×4 clusters: 16 × 3 tiles, the 3 rows padded to 4: 64 CTAs.
    GemmLaunch l{64, 32, 4, 48, 0, 1};
    l.m = 96, l.n = 1024;
    l.ctas = padded_grid(l, 16, 3);
    REQUIRE(l.ctas == 64);
    const KernelShape k = gemm_shape(l);
    CHECK(k.blocks == 64);
    CHECK(k.tiles == 64);  // a padded CTA takes its place in a round like a tile
    // 64 held: clusters of 4 find 56 SMs (the table), 14 of the 16 clusters, then 2: two rounds,
    // where 48 CTAs in clusters without padding would run in one.
    CHECK(m.slowdown(k, 64) == doctest::Approx(2.0));
    l.n = 768, l.tiles = 36, l.ctas = padded_grid(l, 12, 3);  // 12 × 4 = 48 CTAs: one round
    CHECK(m.slowdown(gemm_shape(l), 64) == doctest::Approx(1.0));
  }
  TEST_CASE("a kernel's fixed time is not stretched by held SMs") {
    ContentionModel m = model();
    m.family[static_cast<int>(Family::attention)].fixed_us = 5;
    const KernelShape dyn{Family::attention, Schedule::persistent_dynamic, 1, 132};
    // ×2 with 66 held; a 10 µs launch of which 5 µs are fixed: 0.5 + 0.5·2.
    CHECK(m.slowdown(dyn, 66) == doctest::Approx(2.0));
    CHECK(m.slowdown(dyn, 66, 10e-6) == doctest::Approx(1.5));
    CHECK(m.slowdown(dyn, 66, 1e-6) == doctest::Approx(1.0));  // all fixed
    // The engine: the same launch beside 66 held SMs ends at 15 µs.
    CHECK(engine_s(m, 66, {10e-6, 0, KernelClass::grid, dyn}) ==
          doctest::Approx(15e-6).epsilon(1e-6));
  }
  TEST_CASE("static tile lists: late CTAs start when the first lists end") {
    const ContentionModel m = model();  // gemm: no boost, no cluster
    // 264 tiles on 132 CTAs, 2 each; with 4 held, 128 run and the last 4 start at 2: ×2.
    const KernelShape even{Family::gemm, Schedule::persistent_static, 1, 132, 264, 1};
    CHECK(m.slowdown(even, 4) == doctest::Approx(2.0));
    // 200 tiles on 132 CTAs: 68 lists of 2, 64 of 1. Where the first CTAs carry the long lists
    // (CUTLASS's grouped GEMMs), the late 4 are short: they start at 1 and end with the long ones
    // at 2, no slower. Where the last CTAs carry them, the late 4 are long, start at 1 (when the
    // short ones end) and end at 3: ×1.5.
    const KernelShape grouped{Family::grouped_gemm, Schedule::persistent_static, 1, 132, 200, 1};
    CHECK(m.slowdown(grouped, 4) == doctest::Approx(1.0).epsilon(0.005));  // (its test clock gain)
    KernelShape uneven{Family::gemm, Schedule::persistent_static, 1, 132, 200, 1};
    uneven.order = ListOrder::last;
    CHECK(m.slowdown(uneven, 4) == doctest::Approx(1.5));
    // cuBLAS's nvjet pairs: CTAs numbered from the two halves in turn, two by two. 256 tiles:
    // numbers 124–131 carry one tile, launched 119th–120th, 123rd–124th, 127th–128th and last;
    // with 2 held the 2 late CTAs are short and start at 1 (×1.0), with 4 held the first 2 late
    // ones carry two tiles, start at 1 and end at 3 (×1.5).
    KernelShape pairs{Family::gemm, Schedule::persistent_static, 1, 132, 256, 1};
    pairs.order = ListOrder::nvjet_pairs;
    CHECK(m.slowdown(pairs, 2) == doctest::Approx(1.0));
    CHECK(m.slowdown(pairs, 4) == doctest::Approx(1.5));
  }
  TEST_CASE("dynamic tiles run in whole waves over the usable SMs") {
    const ContentionModel m = model();
    // 264 tiles: 2 waves of 132 alone; with 4 held 2 waves of 128 and one of 8: ×1.5.
    const KernelShape dyn{Family::gemm, Schedule::persistent_dynamic, 1, 132, 264, 1};
    CHECK(m.slowdown(dyn, 4) == doctest::Approx(1.5));
  }
  TEST_CASE("bandwidth-bound grid kernel: no slowdown until its saturation SMs") {
    const ContentionModel m = model();
    const KernelShape ew{Family::ew_add, Schedule::grid, 16, 1e6};
    CHECK(m.slowdown(ew, 70) == doctest::Approx(1.0).epsilon(0.01));   // 62 free ≥ 50
    CHECK(m.slowdown(ew, 107) == doctest::Approx(2.0).epsilon(0.01));  // 25 free: 50/25
    // One wave of 2,112 blocks (16 per SM) alone; with 2 held a second wave of 32 blocks runs
    // on 2 SMs at their own full rate: 2,080/50 + 32/2 over 2,112/50.
    const KernelShape one_wave{Family::ew_add, Schedule::grid, 16, 2112};
    CHECK(m.slowdown(one_wave, 2) ==
          doctest::Approx((2080.0 / 50 + 16) / (2112.0 / 50)).epsilon(0.01));
  }
  TEST_CASE("on a GPU of lower HBM bandwidth a streaming kernel saturates on fewer SMs") {
    // a_sat = R / r0 (mechanism 3): the same SMs beside half the bandwidth saturate at half the
    // SMs, so holding 70 of them (62 free ≥ 25) costs nothing; compute families do not scale.
    ContentionModel m = model();
    m.hbm_scale = 0.5;
    const KernelShape ew{Family::ew_add, Schedule::grid, 16, 1e6};
    CHECK(m.slowdown(ew, 70) == doctest::Approx(1.0).epsilon(0.01));
    CHECK(m.slowdown(ew, 107) == doctest::Approx(1.0).epsilon(0.01));  // 25 free = 25
    CHECK(m.slowdown(ew, 120) == doctest::Approx(25.0 / 12).epsilon(0.01));
    m.family[static_cast<int>(Family::gemm)].sat_sms = 50;
    m.family[static_cast<int>(Family::gemm)].knee = 200;
    const KernelShape gemm{Family::gemm, Schedule::persistent_dynamic, 1, 132};
    CHECK(m.throughput(gemm, 100) == doctest::Approx(50).epsilon(0.01));
  }
  TEST_CASE("occupancy: the blocks of a kernel that fit on an SM, alone and beside a holder") {
    const BlockResources nccl{640, 96, 80 * 1024}, light{32, 16, 200 * 1024};
    CHECK(blocks_beside({256, 16, 0}) == 8);        // threads: 2,048 / 256
    CHECK(blocks_beside({128, 40, 0}) == 12);       // registers: 40 × 128 = 5,120 each
    CHECK(blocks_beside({256, 16, 0}, nccl) == 1);  // 5 warps × 3,072 of a 16,384 partition
    CHECK(blocks_beside({128, 32, 0}, nccl) == 1);
    CHECK(blocks_beside({128, 40, 0}, nccl) == 0);
    // 17 warps: 4,096 registers left in three partitions but 1,024 in the first (measured: the
    // same rounds as beside 640 threads, reports/calibration/contention/ file g).
    CHECK(blocks_beside({256, 16, 0}, {544, 96, 80 * 1024}) == 1);
    CHECK(blocks_beside({256, 16, 0}, {384, 96, 80 * 1024}) == 6);  // 12 warps: then threads bind
    CHECK(blocks_beside({256, 16, 0}, light) == 7);                 // threads: 2,016 / 256
    CHECK(blocks_beside({384, 168, 200 * 1024}, nccl) == 0);        // a GEMM's shared memory
    CHECK(blocks_beside({}) == 0);                                  // unknown block: nothing
  }
  TEST_CASE("a grid's blocks beside the holders: rounds step where the slots run out") {
    ContentionModel m = model();
    // The FP8 dequantization's fixed grid: 2,112 blocks of 256 threads, 8 per free SM and 1 per
    // held SM: 8(132 − k) + k slots, so 3 rounds up to k = 48, 4 from 56 (measured: ×1.35 → ×1.69).
    KernelShape dq{Family::ew_fp8_dequant, Schedule::grid, 8, 2112};
    dq.beside = 1;
    const double at48 = m.slowdown(dq, 48), at56 = m.slowdown(dq, 56);
    dq.beside = 0;  // without sharing, 672 slots at k = 48 already need 4 rounds
    const double none48 = m.slowdown(dq, 48);
    CHECK(none48 > at48 * 1.1);
    // SMs taken by other kernels (not NCCL CTAs) lend no room: lending 0 of the 48.
    dq.beside = 1;
    CHECK(m.time_units(dq, 48, 0) / m.time_units(dq, 0) == doctest::Approx(none48));
    CHECK(at56 > at48 * 1.1);
    // The family's block beside the model's holder stands in when a launch does not say.
    dq.beside = -1;
    m.family[static_cast<int>(Family::ew_fp8_dequant)].block = {256, 16, 0};
    m.holder = {640, 96, 80 * 1024};
    CHECK(m.slowdown(dq, 48) == doctest::Approx(at48));
    m.holder = {};
    CHECK(m.beside(dq) == 0);
  }
  TEST_CASE("a launch's own clock gain replaces its family's") {
    const ContentionModel m = model();
    KernelShape k{Family::gemm, Schedule::persistent_dynamic, 1, 132};
    const double family = m.slowdown(k, 64);
    k.clock_gain = 1.3f;  // a kernel whose clock alone was lower (a busy GPU) gains more
    CHECK(m.slowdown(k, 64) < family);
    k.clock_gain = static_cast<float>(m.of(Family::gemm).boost_max);
    CHECK(m.slowdown(k, 64) == doctest::Approx(family));
  }
  TEST_CASE("a launch that loads more per multiply-add saturates on fewer SMs") {
    ContentionModel m = model();
    auto& g = m.family[static_cast<int>(Family::gemm)];
    g.sat_sms = 360, g.knee = 2;
    KernelShape ref{Family::gemm, Schedule::persistent_static, 1, 128, 128, 2};
    ref.load_intensity = static_cast<std::uint8_t>(kReferenceLoadIntensity);
    KernelShape low = ref;
    low.load_intensity = 55;  // nvjet's 96×64 tiles in pairs
    CHECK(ContentionModel::sat_scale(low) == doctest::Approx(55 / 128.0));
    // The reference intensity is the family's own a_sat; 0 means the reference.
    KernelShape none = ref;
    none.load_intensity = 0;
    CHECK(m.slowdown(ref, 100) == doctest::Approx(m.slowdown(none, 100)));
    // Its first round, with every SM loading, runs further below its compute rate than the late
    // rounds on a few SMs: the late rounds cost less of it.
    CHECK(m.slowdown(low, 100) < m.slowdown(ref, 100) * 0.95);
    CHECK(m.slowdown(low, 0) == 1.0);
    // A CTA's loads per multiply-add from its tile and cluster (the recorded nvjet launches).
    CHECK(load_intensity({96, 64, 2, 0, 0, 1}) == doctest::Approx(6144.0 / (48 + 64)));
    CHECK(load_intensity({64, 64, 8, 0, 0, 4}) == doctest::Approx(4096.0 / (32 + 16)));
    CHECK(load_intensity({192, 192, 2, 0, 0, 2}) == doctest::Approx(kReferenceLoadIntensity));
    // The twin's launch orients the cluster to share the larger tile: 256×128 in pairs along N.
    const auto l = gemm_launch(132, 4096, 6144, 8192);
    CHECK(l.tile_m == 256);
    CHECK(l.cluster_m == 1);
    CHECK(gemm_shape(l).load_intensity == 128);
  }
  TEST_CASE("the engine follows the model at a constant number of held SMs") {
    const ContentionModel m = model();
    for (const auto& [shape, cls] :
         {std::pair{KernelShape{Family::ew_add, Schedule::grid, 16, 1e6}, KernelClass::grid},
          std::pair{KernelShape{Family::grouped_gemm, Schedule::persistent_dynamic, 1, 132},
                    KernelClass::grid},
          std::pair{KernelShape{Family::attention, Schedule::persistent_dynamic, 1, 132},
                    KernelClass::persistent_dynamic}}) {
      for (const int held : {8, 40, 100}) {
        CAPTURE(held);
        CHECK(engine_s(m, held, {1.0, 0, cls, shape}) ==
              doctest::Approx(m.slowdown(shape, held)).epsilon(1e-6));
      }
    }
  }
  TEST_CASE("a fused run slows as the time-weighted mix of its kernels") {
    Profile p = test_profile();
    p.contention = model();
    sim::Engine e;
    sim::Fluid f(e);
    sim::TaskGraph g(e);
    Cluster c(e, f, p, 4, {});
    c.gpu(0).request(107, Gpu::Holder::nccl, [](int) {});
    const KernelPart parts[] = {{{Family::ew_add, Schedule::grid, 16, 1e6}, 1.0},
                                {{Family::attention, Schedule::persistent_dynamic, 1, 132}, 1.0}};
    auto& t = g.add("fused");
    run_fused(t, c, 0, parts);
    g.start();
    e.run();
    // 1 s at ×2 (bandwidth-bound) + 1 s at ×132/25.
    CHECK(t.end_time().to_s() == doctest::Approx(2.0 + 132.0 / 25).epsilon(0.01));
  }
  TEST_CASE("a split-K launch is its slices, then its reduction as an elementwise kernel") {
    ContentionModel m = model();
    auto& gemm = m.family[static_cast<int>(Family::gemm)];
    gemm.sat_sms = 360, gemm.knee = 2, gemm.fixed_us = 2;
    m.family[static_cast<int>(Family::ew_widen)].sat_sms = 30;
    m.family[static_cast<int>(Family::ew_widen)].knee = 200;
    // 32 × 2,048 × 7,168: 64×32 tiles in pairs, k split in four (hardware/kernel_shapes.cpp).
    const auto l = gemm_launch(132, 32, 2048, 7168);
    REQUIRE(l.split_k == 4);
    const KernelShape k = gemm_shape(l);
    CHECK(k.reduce_bytes == doctest::Approx(32 * 2048 * (4.0 * 4 + 2)));  // fp32 in, bf16 out
    const double alone = 20e-6;
    CHECK_FALSE(m.split_k(k, alone));  // no reduction measured: one kernel, as before
    m.split_k_reduce = {1.0, 1000};
    const auto s = m.split_k(k, alone);
    REQUIRE(s);
    const double t_r = 1e-6 + k.reduce_bytes / 1e12;
    CHECK(s->reduce.alone_s == doctest::Approx(t_r));
    CHECK(s->slices.alone_s == doctest::Approx(alone - t_r));
    CHECK(s->slices.shape.reduce_bytes == 0);
    CHECK(s->reduce.shape.family == Family::ew_widen);
    KernelShape one = k;
    one.reduce_bytes = 0;
    CHECK_FALSE(m.split_k(one, alone));
    for (const int held : {16, 64, 100}) {
      CAPTURE(held);
      const double pair =
          (s->slices.alone_s * m.slowdown(s->slices.shape, held, s->slices.alone_s) +
           t_r * m.slowdown(s->reduce.shape, held, t_r)) /
          alone;
      CHECK(m.slowdown(k, held, alone) == doctest::Approx(pair));
      // The engine runs it so.
      CHECK(engine_s(m, held, {alone, 0, KernelClass::grid, k}) ==
            doctest::Approx(alone * pair).epsilon(1e-6));
    }
    // Read as one kernel (the reduction stretched as a GEMM is), it slows otherwise.
    CHECK(m.slowdown(k, 100, alone) != doctest::Approx(m.slowdown(one, 100, alone)));
  }
  TEST_CASE("a lone CTA takes its kernel's measured line, else the form") {
    ContentionModel m = model();
    m.lone_cta = {2.0, 150, 3.5};  // the form: t_s 2 µs, r 150 GB/s, F 3.5 TMAC/s
    // 192 × 4,096 × 4,096: nvjet's 96×64 tiles in 2×1 pairs (hardware/kernel_shapes.cpp).
    const auto l = gemm_launch(132, 192, 4096, 4096);
    REQUIRE(l.tile_m == 96);
    REQUIRE(l.tile_n == 64);
    REQUIRE(l.cluster == 2);
    REQUIRE(l.cluster_m == 2);
    const KernelShape k = gemm_shape(l);
    const double form = 2e-6 + 2.0 * (96 + 64) * 4096 / 150e9;  // bound by what it streams
    CHECK(m.lone_cta_s(k) == doctest::Approx(form));
    // The kernel measured: its own line, 1.5 µs + 2.5 ns per step of k.
    m.lone_cta.tile_m = {96}, m.lone_cta.tile_n = {64};
    m.lone_cta.tile_cluster_m = {2}, m.lone_cta.tile_cluster_n = {1};
    m.lone_cta.tile_setup_us = {1.5}, m.lone_cta.tile_per_k_ns = {2.5};
    CHECK(m.lone_cta.tile_table_problem().empty());
    CHECK(m.lone_cta_s(k) == doctest::Approx(1.5e-6 + 4096 * 2.5e-9));
    // The same tile in 1×2 pairs is another kernel: the form.
    KernelShape h = k;
    h.cluster_m = 1;
    CHECK(m.lone_cta_s(h) == doctest::Approx(form));
    // A table with a kernel twice, or of unequal columns, is refused.
    m.lone_cta.tile_m = {96, 96}, m.lone_cta.tile_n = {64, 64};
    m.lone_cta.tile_cluster_m = {2, 2}, m.lone_cta.tile_cluster_n = {1, 1};
    m.lone_cta.tile_setup_us = {1.5, 1.5}, m.lone_cta.tile_per_k_ns = {2.5, 2.5};
    CHECK(m.lone_cta.tile_table_problem().find("given twice") != std::string::npos);
    m.lone_cta.tile_per_k_ns = {2.5};
    CHECK(m.lone_cta.tile_table_problem().find("one value per kernel") != std::string::npos);
  }
  TEST_CASE("SMs reserved by another library are never free") {
    Rig r(4, 20);
    CHECK(r.cluster.gpu(0).free_sms() == 112);
    auto& t = r.graph.add("k");
    run_kernel(t, r.cluster, 0, {1.0});
    r.graph.start();
    r.engine.run();
    CHECK(t.end_time().to_s() == doctest::Approx(132.0 / 112));
  }
}
