// Tier 1–2: GPUs, kernel classes and collectives on hand-solvable cases.
#include <doctest/doctest.h>

#include <set>
#include <string>

#include "hardware/collective.hpp"
#include "hardware/ops.hpp"
#include "tests/hardware_rig.hpp"

using namespace twin;
using namespace twin::hardware;
using namespace twin::hardware::test;

namespace {

double kernel_end_s(KernelClass cls, int held, Time until) {
  Rig r(4);
  if (held > 0) hold_sms(r, 0, held, until);
  auto& t = r.graph.add("gemm");
  run_kernel(t, r.cluster, 0, {1.0, 0, cls});
  r.graph.start();
  r.engine.run();
  return t.end_time().to_s();
}

}  // namespace

TEST_SUITE("hardware.kernels") {
  TEST_CASE("a grid kernel slows in proportion to the SMs others hold") {
    CHECK(kernel_end_s(KernelClass::grid, 0, Time{}) == doctest::Approx(1.0));
    // 40 of 132 SMs held throughout: T·132/92.
    CHECK(kernel_end_s(KernelClass::grid, 40, Time::s(10)) == doctest::Approx(132.0 / 92));
  }
  TEST_CASE("static persistent kernel: held SMs cost a whole extra wave") {
    // T = 1 s. 40 SMs held until 0.5 s: 92 blocks run 0→1; 40 blocks start at 0.5 when the SMs
    // free and run their full list: 0.5→1.5. The kernel ends at 1.5 s.
    CHECK(kernel_end_s(KernelClass::persistent_static, 40, Time::s(0.5)) == doctest::Approx(1.5));
    // Held until 10 s: the 40 late blocks take the SMs the first 92 free at 1 s: end at 2 s.
    CHECK(kernel_end_s(KernelClass::persistent_static, 40, Time::s(10)) == doctest::Approx(2.0));
  }
  TEST_CASE("dynamic persistent kernel: held SMs only slow it") {
    // Work 132 SM·s. 40 held until 0.5 s: 92 SM/s × 0.5 s = 46 done; 86 left at 132 SM/s.
    CHECK(kernel_end_s(KernelClass::persistent_dynamic, 40, Time::s(0.5)) ==
          doctest::Approx(0.5 + 86.0 / 132));
    // Held throughout: 132/92 s.
    CHECK(kernel_end_s(KernelClass::persistent_dynamic, 40, Time::s(10)) ==
          doctest::Approx(132.0 / 92));
  }
  TEST_CASE("HBM-bound work shares the HBM bandwidth") {
    // HBM 3 TB/s. Two D2D copies of 1.5 TB (3 TB of traffic each, 1 s alone) run together:
    // equal shares, 1.5 TB/s of traffic each: 2 s. A memory-bound grid kernel (3 TB in 1 s
    // alone) beside one such copy: both slowed by the same factor, each ends at 2 s.
    for (bool kernel : {false, true}) {
      Rig r(4);
      auto& a = r.graph.add("a");
      auto& b = r.graph.add("b");
      if (kernel)
        run_kernel(a, r.cluster, 0, {1.0, 3e12});
      else
        run_copy(a, r.cluster, 0, CopyDir::d2d, 1.5e12);
      run_copy(b, r.cluster, 0, CopyDir::d2d, 1.5e12);
      r.graph.start();
      r.engine.run();
      CHECK(a.end_time().to_s() == doctest::Approx(2.0));
      CHECK(b.end_time().to_s() == doctest::Approx(2.0));
    }
  }
  TEST_CASE("a fused run draws HBM at its parts' mean rate, shared with a copy") {
    // Two parts of 0.5 s alone, 1.5 TB and none through HBM: 1.5 TB/s on average, half the
    // 3 TB/s. Beside a D2D copy of 0.75 TB (1.5 TB of traffic, 0.5 s alone) the HBM is full:
    // both at 3/(1.5 + 3) of their speed until the copy ends at 0.75 s (the run has done 0.5 of
    // its 1 s), then the run alone: 1.25 s. Without the bytes the run would end at 1 s.
    Rig r(4);
    const KernelPart parts[] = {{{}, 0.5, 1.5e12}, {{}, 0.5, 0}};
    auto& a = r.graph.add("a");
    auto& b = r.graph.add("b");
    run_fused(a, r.cluster, 0, parts);
    run_copy(b, r.cluster, 0, CopyDir::d2d, 0.75e12);
    r.graph.start();
    r.engine.run();
    CHECK(b.end_time().to_s() == doctest::Approx(0.75));
    CHECK(a.end_time().to_s() == doctest::Approx(1.25));
  }
}

TEST_SUITE("hardware.collectives") {
  TEST_CASE("channels: capped by NCCL_MAX_CTAS, all-to-all rounded up to a power of two") {
    CHECK(channels(CollKind::all_gather, 40, {}, 132) == 40);
    CHECK(channels(CollKind::all_gather, 40, {16}, 132) == 16);
    CHECK(channels(CollKind::all_gather, 8, {16}, 132) == 8);
    CHECK(channels(CollKind::all_to_all, 24, {}, 132) == 32);
    CHECK(channels(CollKind::all_to_all, 64, {24}, 132) == 32);
  }
  TEST_CASE("ring all-gather over 4 nodes (one GPU each) against its closed form") {
    // S = 4 GB, n = 4: A = 3 GB over each rank's 25 GB/s NIC (bound 16 CTAs × 5 GB/s = 80):
    // 0.12 s, plus latency 10 µs + 3 network steps × 5 µs = 25 µs.
    Rig r(16);
    std::vector<sim::Task*> ts;
    CollectiveSpec s{CollKind::all_gather, {0, 4, 8, 12}, 4e9, 16};
    for (int i = 0; i < 4; ++i) ts.push_back(&r.graph.add("ag"));
    run_collective(ts, r.cluster, s);
    r.graph.start();
    r.engine.run();
    CHECK(ts[0]->end_time().to_s() == doctest::Approx(0.12 + 25e-6));
    CHECK(ts[3]->end_time() == ts[0]->end_time());
  }
  TEST_CASE("few CTAs bound an IB collective; more CTAs never slow it") {
    auto time_with = [](int ctas) {
      Rig r(16);
      std::vector<sim::Task*> ts;
      for (int i = 0; i < 4; ++i) ts.push_back(&r.graph.add("ag"));
      run_collective(ts, r.cluster, {CollKind::all_gather, {0, 4, 8, 12}, 4e9, ctas});
      r.graph.start();
      r.engine.run();
      return ts[0]->end_time().to_s();
    };
    // 2 CTAs × 5 GB/s = 10 GB/s < 25: 3 GB / 10 GB/s = 0.3 s.
    CHECK(time_with(2) == doctest::Approx(0.3 + 25e-6));
    double prev = time_with(1);
    for (int c : {2, 4, 8, 16, 32, 64}) {
      const double t = time_with(c);
      CHECK(t <= prev);
      prev = t;
    }
  }
  TEST_CASE("a late participant delays the collective while its peers hold their SMs") {
    // Rank 4's launch waits 1 s; rank 0 launches at 0 and holds 16 SMs until the end.
    Rig r(8);
    auto& delay = r.graph.add("late");
    run_delay(delay, r.cluster, Time::s(1));
    std::vector<sim::Task*> ts{&r.graph.add("ag0"), &r.graph.add("ag4")};
    ts[1]->after(delay);
    run_collective(ts, r.cluster, {CollKind::all_gather, {0, 4}, 2e9, 16});
    int held_at_half = -1;
    r.engine.at(Time::s(0.5), [&] { held_at_half = r.cluster.gpu(0).nccl_sms(); });
    r.graph.start();
    r.engine.run();
    CHECK(held_at_half == 16);
    CHECK(ts[0]->start_time() == Time{});
    // A = 1 GB at 25 GB/s = 0.04 s after 1 s, + 10 + 5 µs.
    CHECK(ts[0]->end_time().to_s() == doctest::Approx(1.04 + 15e-6));
    CHECK(r.cluster.gpu(0).nccl_sms() == 0);
  }
  TEST_CASE("an all-to-all inside a node runs on NVLink pairs") {
    // 4 GPUs, S = 3 GB each: A = 2.25 GB, 0.75 GB to each peer over a 150 GB/s pair; the GPU's
    // 450 GB/s NVLink total also binds at the same rate: 2.25 GB / 450 GB/s = 5 ms.
    // Bound: 16 CTAs × 40 GB/s = 640 GB/s, not binding. Latency 10 + 2 µs.
    Rig r(4);
    std::vector<sim::Task*> ts;
    for (int i = 0; i < 4; ++i) ts.push_back(&r.graph.add("a2a"));
    run_collective(ts, r.cluster, {CollKind::all_to_all, {0, 1, 2, 3}, 3e9, 16});
    r.graph.start();
    r.engine.run();
    CHECK(ts[0]->end_time().to_s() == doctest::Approx(0.005 + 12e-6));
  }
  TEST_CASE("merging alike links keeps every time and groups only links used alike") {
    // Rings over nodes 0-3 and 0-1 (GPU 0 of each node) and an all-to-all inside node 0, all
    // at once: nodes 0 and 1's NICs carry two rings, nodes 2 and 3's one.
    auto run = [](bool merge, std::vector<double>& ends) {
      Rig r(16);
      std::vector<std::vector<sim::Task*>> ts(3);
      const std::vector<CollectiveSpec> specs{{CollKind::all_gather, {0, 4, 8, 12}, 4e9, 16},
                                              {CollKind::reduce_scatter, {0, 4}, 3e9, 8},
                                              {CollKind::all_to_all, {0, 1, 2, 3}, 3e9, 16}};
      for (std::size_t i = 0; i < specs.size(); ++i) {
        for (std::size_t k = 0; k < specs[i].ranks.size(); ++k) ts[i].push_back(&r.graph.add("c"));
        run_collective(ts[i], r.cluster, specs[i]);
      }
      if (merge) merge_alike_links(r.cluster);
      r.graph.start();
      r.engine.run();
      for (const auto& v : ts) ends.push_back(v[0]->end_time().to_s());
      return std::vector<sim::Fluid::ResourceId>{
          r.cluster.solver_resource(r.cluster.links(0).nic_out),
          r.cluster.solver_resource(r.cluster.links(4).nic_out),
          r.cluster.solver_resource(r.cluster.links(8).nic_out),
          r.cluster.solver_resource(r.cluster.links(12).nic_out),
          r.cluster.solver_resource(r.cluster.links(12).nic_in),
          r.cluster.solver_resource(r.cluster.links(0).nvl_out),
          r.cluster.links(8).h2d,
          r.cluster.solver_resource(r.cluster.links(8).h2d)};
    };
    std::vector<double> apart, merged;
    run(false, apart);
    const auto nic = run(true, merged);
    CHECK(merged == apart);  // bit for bit
    CHECK(nic[0] == nic[1]);
    CHECK(nic[2] == nic[3]);
    CHECK(nic[0] != nic[2]);
    CHECK(nic[3] == nic[4]);  // out and in of a ring member carry the same flows
    CHECK(nic[5] != nic[0]);
    CHECK(nic[7] == nic[6]);  // used by no collective: itself
    Rig r(8);
    merge_alike_links(r.cluster);
    std::vector<sim::Task*> late{&r.graph.add("ag0"), &r.graph.add("ag4")};
    CHECK_THROWS_AS(run_collective(late, r.cluster, {CollKind::all_gather, {0, 4}, 1e9, 16}),
                    std::logic_error);
  }
  TEST_CASE("a static persistent GEMM next to a long collective ends later than a dynamic one") {
    auto gemm_end = [](KernelClass cls) {
      Rig r(8);
      std::vector<sim::Task*> ts{&r.graph.add("ag0"), &r.graph.add("ag4")};
      run_collective(ts, r.cluster, {CollKind::all_gather, {0, 4}, 20e9, 40});
      auto& g = r.graph.add("gemm");
      run_kernel(g, r.cluster, 0, {0.1, 0, cls});
      r.graph.start();
      r.engine.run();
      return g.end_time().to_s();
    };
    CHECK(gemm_end(KernelClass::persistent_static) > gemm_end(KernelClass::persistent_dynamic));
    CHECK(gemm_end(KernelClass::persistent_static) == doctest::Approx(0.2));
  }
}

TEST_SUITE("hardware.sequence") {
  TEST_CASE("a step with no overlap equals the sum of its parts") {
    // One GPU of a 2-node cluster runs, strictly in order: a kernel (1 s alone), an H2D copy of
    // 40 GB (0.1 s at 400 GB/s), an all-gather with its peer on the other node (A = 1 GB at
    // 25 GB/s = 0.04 s + 10 µs + 1 network step of 5 µs), a CPU task of 72 core·s on 72 cores
    // (1 s) and a CPU all-reduce (gloo's ring on 2 ranks: 2 hops of 50 µs + 4 B at gloo's
    // 1 GB/s). Nothing overlaps, so the end is the sum.
    Rig r(8);
    auto& k = r.graph.add("k");
    auto& copy = r.graph.add("copy");
    std::vector<sim::Task*> ag{&r.graph.add("ag0"), &r.graph.add("ag4")};
    auto& cpu = r.graph.add("cpu");
    std::vector<sim::Task*> ar{&r.graph.add("ar0"), &r.graph.add("ar4")};
    run_kernel(k, r.cluster, 0, {1.0});
    run_copy(copy, r.cluster, 0, CopyDir::h2d, 40e9);
    run_collective(ag, r.cluster, {CollKind::all_gather, {0, 4}, 2e9, 16});
    run_cpu(cpu, r.cluster, 0, 72, 72);
    run_cpu_collective(ar, r.cluster, CpuCollKind::all_reduce, 4);
    copy.after(k);
    ag[0]->after(copy);
    ag[1]->after(copy);
    cpu.after(*ag[0]);
    ar[0]->after(cpu);
    ar[1]->after(cpu);
    r.graph.start();
    r.engine.run();
    const double expect = 1.0 + 0.1 + (0.04 + 15e-6) + 1.0 + (100e-6 + 4 / 1e9);
    CHECK(ar[0]->end_time().to_s() == doctest::Approx(expect).epsilon(1e-9));
    CHECK(ar[1]->end_time() == ar[0]->end_time());
  }

  // 8 ranks (one per node); rank i arrives at i ms. Both start when the last arrives.
  std::vector<sim::Task*> cpu_collective(Rig & r, CpuCollKind kind, double bytes) {
    std::vector<sim::Task*> ts;
    for (int i = 0; i < 8; ++i) {
      auto& wait = r.graph.add("arrive");
      run_delay(wait, r.cluster, sim::Time::ms(i));
      ts.push_back(&r.graph.add("cpu_collective"));
      ts.back()->after(wait);
    }
    run_cpu_collective(ts, r.cluster, kind, bytes);
    r.graph.start();
    r.engine.run();
    return ts;
  }

  TEST_CASE("a CPU all-reduce is gloo's ring: 2(n − 1) hops after the last rank arrives") {
    // A scalar passes every rank twice, one hop after another: 14 hops of the profile's 50 µs
    // (recursive doubling would take 6), and 2·7/8 · 4 B at gloo's 1 GB/s.
    Rig r(32);
    const auto ar = cpu_collective(r, CpuCollKind::all_reduce, 4);
    const double expect = 7e-3 + 14 * 50e-6 + 2.0 * 7 / 8 * 4 / 1e9;
    for (auto* t : ar) CHECK(t->end_time().to_s() == doctest::Approx(expect).epsilon(1e-9));
    CHECK(ar[0]->start_time().to_s() == 0);  // rank 0 waits for the last from 0 ms
  }

  TEST_CASE("a CPU all-to-all posts every peer's part at once: one hop and the bytes") {
    // gloo/alltoall.cc: 1 MB per rank, 7/8 of it to the peers at 1 GB/s, after one hop.
    Rig r(32);
    const auto a2a = cpu_collective(r, CpuCollKind::all_to_all, 1e6);
    const double expect = 7e-3 + 50e-6 + 7.0 / 8 * 1e6 / 1e9;
    for (auto* t : a2a) CHECK(t->end_time().to_s() == doctest::Approx(expect).epsilon(1e-9));
  }
}

TEST_SUITE("hardware.network") {
  // 4 nodes of 4 GPUs; one GPU per node in the ring (ranks 0, 4, 8, 12), so each rank's NIC
  // (25 GB/s) carries its ring traffic. Groups of 100 nodes, leaves of 10, global links of
  // 10 GB/s (one per group pair), leaf uplinks 10 spines × 100 GB/s.
  double ring_s(int groups, PlacementPolicy policy, Routing routing,
                std::vector<std::vector<int>> rings, double bytes,
                NetworkSpec net = {0, 100, 10, 10, 100, 1, 10}) {
    net.nodes_total = 100 * groups;
    Profile p = test_profile();
    p.network = net;
    PlacementOptions o;
    o.policy = policy;
    o.routing = routing;
    Rig r(16, p, FabricSpec{o, 1});
    std::vector<sim::Task*> all;
    for (const auto& ranks : rings) {
      std::vector<sim::Task*> ts;
      for (std::size_t i = 0; i < ranks.size(); ++i) ts.push_back(&r.graph.add("ag"));
      run_collective(ts, r.cluster, {CollKind::all_gather, ranks, bytes, 16});
      all.insert(all.end(), ts.begin(), ts.end());
    }
    r.graph.start();
    r.engine.run();
    double end = 0;
    for (auto* t : all) end = std::max(end, t->end_time().to_s());
    return end;
  }
  TEST_CASE("a ring inside one leaf crosses no switch; across groups the global links bound it") {
    // S = 4 GB over 4 ranks: A = 3 GB. Packed: nodes 0–3 share leaf 0, NIC-bound: 3/25 = 0.12 s
    // (+ 25 µs latency). Spread over 4 groups with minimal routing: every ring edge crosses one
    // 10 GB/s group pair: 0.3 s.
    CHECK(ring_s(4, PlacementPolicy::packed, Routing::minimal, {{0, 4, 8, 12}}, 4e9) ==
          doctest::Approx(0.12 + 25e-6));
    CHECK(ring_s(4, PlacementPolicy::spread, Routing::minimal, {{0, 4, 8, 12}}, 4e9) ==
          doctest::Approx(0.3 + 25e-6));
  }
  TEST_CASE("a blocking leaf bounds a ring between two leaves of a group; a non-blocking one not") {
    // One node per leaf, leaves with one 10 GB/s uplink: below the node's 4 × 25 GB/s of NICs.
    // Ring {0, 4} over nodes 0 and 1 (two leaves, one group), A = 1 GB: 0.1 s. With 100 GB/s
    // uplinks (non-blocking) the NIC bounds it: 1/25 = 0.04 s.
    const double lat = 10e-6 + 5e-6;
    CHECK(ring_s(1, PlacementPolicy::packed, Routing::minimal, {{0, 4}}, 2e9,
                 {0, 100, 1, 1, 10, 1, 10}) == doctest::Approx(0.1 + lat));
    CHECK(ring_s(1, PlacementPolicy::packed, Routing::minimal, {{0, 4}}, 2e9,
                 {0, 100, 1, 1, 100, 1, 10}) == doctest::Approx(0.04 + lat));
  }
  TEST_CASE("a saturated global link halves two flows") {
    // 2 groups, spread: nodes 0, 2 in group 0 and 1, 3 in group 1. Rings {0,4} and {8,12}, S =
    // 2 GB, A = 1 GB each, both over the one 10 GB/s link each way: 0.1 s alone, 0.2 s together.
    const double lat = 10e-6 + 5e-6;
    CHECK(ring_s(2, PlacementPolicy::spread, Routing::minimal, {{0, 4}}, 2e9) ==
          doctest::Approx(0.1 + lat));
    CHECK(ring_s(2, PlacementPolicy::spread, Routing::minimal, {{0, 4}, {8, 12}}, 2e9) ==
          doctest::Approx(0.2 + lat));
  }
  TEST_CASE("minimal against adaptive and Valiant routing between two groups") {
    // 10 groups; ring {0, 4} between groups 0 and 1, A = 1 GB. Minimal: the 10 GB/s pair link,
    // 0.1 s. Valiant: spread over the groups' 9 × 10 GB/s egress and ingress, NIC-bound
    // (25 GB/s): 0.04 s. Adaptive, half non-minimal: 0.5 of A on the pair link, 20 GB/s: 0.05 s.
    const double lat = 10e-6 + 5e-6;
    CHECK(ring_s(10, PlacementPolicy::spread, Routing::minimal, {{0, 4}}, 2e9) ==
          doctest::Approx(0.1 + lat));
    CHECK(ring_s(10, PlacementPolicy::spread, Routing::valiant, {{0, 4}}, 2e9) ==
          doctest::Approx(0.04 + lat));
    CHECK(ring_s(10, PlacementPolicy::spread, Routing::adaptive, {{0, 4}}, 2e9) ==
          doctest::Approx(0.05 + lat));
  }
  TEST_CASE("placement policies and Slurm node lists") {
    NetworkSpec net{5884, 240, 16, 16, 100, 20, 50};
    auto groups = [&](const std::vector<int>& ids) {
      std::set<int> g;
      for (int id : ids) g.insert(id / 240);
      return g.size();
    };
    PlacementOptions o;
    CHECK(groups(place_nodes(96, o, net)) == 1);   // packed: one group holds 240 nodes
    CHECK(groups(place_nodes(384, o, net)) == 2);  // DP = 4: 384 nodes, two groups
    o.policy = PlacementPolicy::spread;
    CHECK(groups(place_nodes(96, o, net)) == 25);  // round-robin over all 25 groups
    CHECK(groups(place_nodes(5884, o, net)) == 25);
    o.policy = PlacementPolicy::random;
    const auto a = place_nodes(96, o, net), b = place_nodes(96, o, net);
    CHECK(a == b);  // seeded
    CHECK(std::set<int>(a.begin(), a.end()).size() == 96);
    CHECK_THROWS(place_nodes(6000, o, net));
    CHECK(expand_hostlist("jpbo-[001-002]-[01-03], x-1-9") ==
          std::vector<std::string>{"jpbo-001-01", "jpbo-001-02", "jpbo-001-03", "jpbo-002-01",
                                   "jpbo-002-02", "jpbo-002-03", "x-1-9"});
    CHECK_THROWS(expand_hostlist("jpbo-[001-002"));
    // Fuzzing regressions (tests/data/fuzz/side-files-huge): huge ranges and numbers are errors.
    CHECK_THROWS_AS(expand_hostlist("x-[1-99999999999]"), std::invalid_argument);
    CHECK_THROWS_AS(expand_hostlist("x-[1-9999999]"), std::invalid_argument);
    // Each range within the limit, their product far beyond it: refused, not expanded (10¹² names).
    CHECK_THROWS_AS(expand_hostlist("jpbo-[000-999999]-[000-999999]"), std::invalid_argument);
    // Found by fuzzing: empty ranges made loops without output, so no bound on names held.
    CHECK_THROWS_AS(expand_hostlist("x-[0-999]-[0-999]-[5-4]"), std::invalid_argument);
    CHECK_THROWS_AS(expand_hostlist("x-[000-700]-[000-700]"),
                    std::invalid_argument);  // > 100,000 names
    CHECK_THROWS_AS(node_from_name("n-12345678901234-1", net, 5), std::invalid_argument);
    // Rack 7 of 5-rack groups is group 1, its 3rd rack (48 nodes per rack); slot 2.
    CHECK(node_from_name("jpbo-007-02", net, 5) == 240 + 2 * 48 + 1);
    CHECK_THROWS(node_from_name("jpbo-007-49", net, 5));
    o.policy = PlacementPolicy::file;
    o.node_names = expand_hostlist("jpbo-[000-001]-[01-48]");
    CHECK(place_nodes(96, o, net).size() == 96);
    CHECK_THROWS(place_nodes(97, o, net));
  }
}
