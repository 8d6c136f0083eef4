// Tier 1: the metric formulas (reports/metrics.hpp) on hand-made intervals and timelines, and
// the typed step report (reports/step_report.hpp): its JSON names, what is derived from what,
// and the readable summary.
#include <doctest/doctest.h>

#include <string>

#include "reports/metrics.hpp"
#include "reports/step_report.hpp"

namespace r = twin::reports;

TEST_SUITE("reports.metrics") {
  TEST_CASE("merge joins overlapping and touching intervals, drops empty ones") {
    std::vector<r::Interval> v{{5, 8}, {0, 2}, {1, 3}, {3, 4}, {9, 9}, {7, 10}};
    CHECK(r::merge(v) == doctest::Approx(9e-9));  // [0,4] and [5,10]
    REQUIRE(v.size() == 2);
    CHECK(v[0].begin_ns == 0);
    CHECK(v[0].end_ns == 4);
    CHECK(v[1].begin_ns == 5);
    CHECK(v[1].end_ns == 10);
  }

  TEST_CASE("the breakdown's four parts by hand, and they sum to the step") {
    // Compute [0,4] and [6,8]; collectives [2,7]; step 10 ns.
    const auto b = r::breakdown({{0, 4}, {6, 8}}, {{2, 7}}, 10e-9);
    CHECK(b.compute_overlapped == doctest::Approx(3e-9));  // [2,4] and [6,7]
    CHECK(b.compute_only == doctest::Approx(3e-9));        // [0,2] and [7,8]
    CHECK(b.comm_wait == doctest::Approx(2e-9));           // [4,6]
    CHECK(b.idle == doctest::Approx(2e-9));                // [8,10]
    CHECK(b.compute_overlapped + b.compute_only + b.comm_wait + b.idle == doctest::Approx(10e-9));
  }

  TEST_CASE("percentiles are linear between order statistics") {
    CHECK(r::percentile({4, 1, 3, 2}, 0.5) == doctest::Approx(2.5));
    CHECK(r::percentile({4, 1, 3, 2}, 0.1) == doctest::Approx(1.3));
    CHECK(r::percentile({4, 1, 3, 2}, 1.0) == doctest::Approx(4));
    CHECK(r::percentile({7}, 0.9) == doctest::Approx(7));
  }

  TEST_CASE("node spread by hand: per-node means, (max − min)/mean, and the wait ratio") {
    // Two GPUs per node, three nodes: compute means 10, 11, 12 → spread 2/11; waits 1, 2, 4 → 4.
    const std::vector<double> compute{9, 11, 11, 11, 12, 12}, wait{1, 1, 2, 2, 3, 5};
    const auto n = r::node_spread(compute, wait, 2);
    CHECK(n.compute_spread == doctest::Approx(2.0 / 11));
    CHECK(n.comm_wait_ratio == doctest::Approx(4.0));
    CHECK(r::node_spread(compute, {0, 0, 1, 1, 1, 1}, 2).comm_wait_ratio ==
          0);                                                // a node never waits
    CHECK(r::node_spread({5}, {1}, 4).compute_spread == 0);  // no whole node
  }
  TEST_CASE("NCCL's SMs over a timeline: mean while held, maximum, time at 64 or more") {
    using twin::sim::Time;
    r::SmTimeline t;
    t.change(Time::s(1), 40);
    t.change(Time::s(2), 80);
    t.change(Time::s(2), 64);  // the same instant: the last value counts
    t.change(Time::s(4), 0);
    const auto s = t.stats(Time::s(10));
    CHECK(s.max == 64);  // 80 never lasted
    CHECK(s.mean_while_collective == doctest::Approx((40 * 1 + 64 * 2) / 3.0));
    CHECK(s.seconds_at_or_above_64 == doctest::Approx(2));
  }
}

namespace {

r::StepReport example() {
  r::StepReport s;
  s.scenario = "x";
  s.step_time_s = 10;
  s.rank0 = {1, 2, 3, 4};
  s.gpu_time_s = {
      {"attention", 2}, {"copy_h2d", 0.5}, {"cpu_optimizer", 1}, {"dense_all_gather", 3}};
  s.memory.hbm_capacity_GiB = 90;
  s.memory.host_headroom_GiB = 5;
  s.memory.host_unattributed_median_GiB = 2;
  r::RankMemory rank;
  rank.pools.push_back({"compute", 1, 2, 1, 2, 1, std::nullopt, std::nullopt});
  s.memory.rank0 = s.memory.worst_rank = rank;
  s.runnable = r::runnable(s.memory);
  return s;
}

}  // namespace

TEST_SUITE("reports.step_report") {
  TEST_CASE("the JSON names carry units, and derived figures come from their sources") {
    const auto s = example();
    const auto j = r::to_json(s);
    CHECK(j["exposed_comm_s"].get<double>() == 3);  // rank 0's comm_wait, not a copy of it
    CHECK(j["breakdown_s"]["rank0"]["idle"].get<double>() == 4);
    CHECK(j["gpu_time_s"]["dense_all_gather"].get<double>() == 3);
    CHECK(j["memory"]["hbm_capacity_GiB"].get<double>() == 90);
    CHECK_FALSE(j["memory"]["rank0"]["pools"][0].contains("at_first_retry_reserved_GiB"));
    CHECK(j["runnable"]["ok"].get<bool>());
    CHECK(s.gpu_time("attention") == 2);
    CHECK(s.gpu_time("expert_gemm") == 0);  // not run: none
  }

  TEST_CASE("runnable and fits: HBM out of memory, Grace short, Grace short of a median socket") {
    auto m = example().memory;
    CHECK(m.fits());
    m.host_headroom_GiB = 1;  // room, but less than the median socket's unattributed memory
    CHECK_FALSE(m.fits());
    CHECK(r::runnable(m).ok);
    m.host_headroom_GiB = -1;
    m.host_peak_GiB = 110;
    m.host_capacity_GiB = 109;
    m.oom = true;
    m.worst_rank.rank = 7;
    m.worst_rank.failed_allocation = "buf (4 GiB, compute)";
    const auto why = r::runnable(m);
    CHECK_FALSE(why.ok);
    CHECK(
        why.why ==
        "out of HBM on rank 7 (allocating buf (4 GiB, compute)); host memory needs 110.0 of 109.0 "
        "GiB per rank");
  }

  TEST_CASE("the summary: time per kind grouped by what runs it; the host risk's caveat") {
    auto s = example();
    const auto text = r::summary(s);
    CHECK(text.find("scenario x: step 10.00 s") == 0);
    CHECK(text.find("    compute kernels: attention 2.00\n") != std::string::npos);
    CHECK(text.find("    collectives: dense_all_gather 3.00\n") != std::string::npos);
    CHECK(text.find("    copies: copy_h2d 0.50\n") != std::string::npos);
    CHECK(text.find("    on the CPU: cpu_optimizer 1.00\n") != std::string::npos);
    CHECK(text.find("if no socket releases") != std::string::npos);  // kept fraction 1: a bound
    s.memory.host_unattributed_kept_fraction = 0.3;
    CHECK(r::summary(s).find("if no socket releases") == std::string::npos);
    s.runnable = {false, "out of HBM on rank 0"};
    CHECK(r::summary(s).rfind("NOT RUNNABLE: out of HBM on rank 0.", 0) == 0);
  }
}
