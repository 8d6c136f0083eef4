// nccl-tests' tables (hardware/nccl_tests.hpp): the twin writes them as nccl-tests does and reads
// real ones, whatever optional columns they carry.
#include <doctest/doctest.h>

#include <stdexcept>

#include "hardware/nccl_tests.hpp"

using namespace twin::hardware;

TEST_SUITE("hardware.nccl_tests") {
  TEST_CASE("nccl-tests' formulas: algbw = size / time, busbw with (n-1)/n or 2(n-1)/n") {
    const auto ag = nccl_tests_row(CollKind::all_gather, 4, 1e9, 1e-3);
    CHECK(ag.algbw_GBps == doctest::Approx(1000));
    CHECK(ag.busbw_GBps == doctest::Approx(750));
    CHECK(ag.redop == "none");
    CHECK(nccl_tests_row(CollKind::all_reduce, 4, 1e9, 1e-3).busbw_GBps == doctest::Approx(1500));
    CHECK(nccl_tests_row(CollKind::all_to_all, 8, 1e9, 1e-3).busbw_GBps == doctest::Approx(875));
  }

  TEST_CASE("written and read back: kind, ranks, device, NCCL_MAX_CTAS and every row") {
    NcclTestsRun run{CollKind::reduce_scatter, 4, "NVIDIA H200", 16, {}};
    for (const double b : {1048576.0, 268435456.0})
      run.rows.push_back(nccl_tests_row(run.kind, 4, b, b / 2e11));
    const std::string text =
        format_nccl_tests(run, "a note") +
        format_nccl_tests({CollKind::all_reduce, 4, "x", 0, {run.rows[0]}}, "");
    const auto back = parse_nccl_tests(text);
    REQUIRE(back.size() == 2);
    CHECK(back[0].kind == CollKind::reduce_scatter);
    CHECK(back[0].ranks == 4);
    CHECK(back[0].device == "NVIDIA H200");
    CHECK(back[0].max_ctas == 16);
    CHECK(back[1].max_ctas == 0);
    REQUIRE(back[0].rows.size() == 2);
    CHECK(back[0].rows[1].size_B == 268435456.0);
    CHECK(back[0].rows[1].time_us == doctest::Approx(run.rows[1].time_us).epsilon(1e-4));
    CHECK(back[0].rows[1].busbw_GBps == doctest::Approx(run.rows[1].busbw_GBps).epsilon(1e-3));
  }

  TEST_CASE("a log as nccl-tests prints it with NCCL_DEBUG=INFO and per-iteration columns") {
    // Columns as src/util.cu's writeResultHeader lays them out with -I 1; NCCL's own lines between.
    const std::string log =
        "# nccl-tests version 2.19.6 nccl-headers=22803 nccl-library=22803\n"
        "# Collective test starting: all_reduce_perf_mpi\n"
        "# nThread 1 nGpus 1 minBytes 8 maxBytes 1024 step: 2(factor) warmup iters: 1 iters: 20 "
        "agg iters: 1\n"
        "#\n# Using devices\n"
        "#  Rank  0 Group  0 Pid   1001 on     node01 device  0 [0000:18:00] NVIDIA H200\n"
        "#  Rank  1 Group  0 Pid   1002 on     node01 device  1 [0000:2a:00] NVIDIA H200\n"
        "node01:1001:1001 [0] NCCL INFO NCCL_MAX_CTAS set by environment to 8.\n"
        "#\n"
        "#                                                 out-of-place (+ per-iteration)\n"
        "#       size         count      type   redop    root     time   algbw   busbw  #wrong    "
        "i_min    i_max"
        "    i_p99    i_cv%     time   algbw   busbw  #wrong    i_min    i_max    i_p99    i_cv%\n"
        "#        (B)    (elements)                               (us)  (GB/s)  (GB/s)             "
        "(us)     (us)"
        "     (us)      (%)     (us)  (GB/s)  (GB/s)             (us)     (us)     (us)      (%)\n"
        "           8             2     float     sum      -1    10.50    0.00    0.00       0    "
        "10.1    11.0"
        "     11.0      2.1    10.40    0.00    0.00       0    10.0    10.9     10.9      2.0\n"
        "        1024           256     float     sum      -1    12.00    0.09    0.09     N/A    "
        "11.8    12.5"
        "     12.5      1.5    11.90    0.09    0.09     N/A    11.7    12.4     12.4      1.4\n"
        "# Out of bounds values : 0 OK\n# Avg bus bandwidth    : 0.045\n#\n"
        "# Collective test concluded: all_reduce_perf_mpi\n";
    const auto runs = parse_nccl_tests(log);
    REQUIRE(runs.size() == 1);
    CHECK(runs[0].kind == CollKind::all_reduce);
    CHECK(runs[0].ranks == 2);
    CHECK(runs[0].max_ctas == 8);
    REQUIRE(runs[0].rows.size() == 2);
    CHECK(runs[0].rows[1].size_B == 1024);
    CHECK(runs[0].rows[1].time_us == 12.0);  // out-of-place, not the per-iteration minimum
    CHECK(runs[0].rows[1].busbw_GBps == doctest::Approx(0.09));
  }

  TEST_CASE("what is not a supported nccl-tests table is refused, naming the line") {
    CHECK_THROWS_WITH_AS(parse_nccl_tests("hello\n"), doctest::Contains("not nccl-tests output"),
                         std::invalid_argument);
    CHECK_THROWS_WITH_AS(parse_nccl_tests("# Collective test starting: broadcast_perf\n"),
                         doctest::Contains("line 1: test \"broadcast_perf\""),
                         std::invalid_argument);
    const std::string head =
        "# Collective test starting: all_gather_perf\n#  Rank  0 Group 0 x [0] G\n"
        "#  Rank  1 Group 0 x [0] G\n#  size  count  type  redop  root  time  algbw  busbw\n";
    CHECK_THROWS_WITH_AS(parse_nccl_tests(head + "  1024  256  float  none  -1  12.x  0.1  0.1\n"),
                         doctest::Contains("line 5: time \"12.x\""), std::invalid_argument);
    CHECK(
        parse_nccl_tests(head + "  1024  256  float  none  -1  12.0  0.1  0.1\n")[0].rows.size() ==
        1);
    CHECK_THROWS_WITH_AS(
        parse_nccl_tests(
            "# Collective test starting: all_gather_perf\n#  Rank  0 Group 0 x [0] G\n"),
        doctest::Contains("fewer than two"), std::invalid_argument);
  }
}
