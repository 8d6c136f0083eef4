// nccl-tests' result tables (github.com/NVIDIA/nccl-tests: src/util.cu writeResultHeader and
// writeBenchmarkLine*, doc/PERFORMANCE.md): the common currency of collective measurements. The
// twin writes its own in these columns (twin-calibrate, `twin collective`) and reads real
// all_gather_perf / reduce_scatter_perf / all_reduce_perf / alltoall_perf output (issue #20).
// Conventions: size is the bytes of the full buffer (all-gather: the gathered output;
// reduce-scatter: the input), algbw = size / time, busbw = algbw · 2(n−1)/n for all-reduce and
// · (n−1)/n for all-gather, reduce-scatter and all-to-all.
#pragma once

#include <string>
#include <vector>

#include "hardware/collective.hpp"

namespace twin::hardware {

struct NcclTestsRow {
  double size_B = 0;
  double count = 0;  // elements
  std::string type = "float", redop = "sum";
  double time_us = 0;  // out-of-place
  double algbw_GBps = 0, busbw_GBps = 0;
};

struct NcclTestsRun {
  CollKind kind = CollKind::all_gather;
  int ranks = 0;       // the "#  Rank" lines of the log
  std::string device;  // as the first rank line names it
  int max_ctas = 0;    // NCCL_MAX_CTAS as NCCL's INFO output states it (0: not stated)
  std::vector<NcclTestsRow> rows;
};

double bus_factor(CollKind k, int ranks);
// all_gather_perf, reduce_scatter_perf, all_reduce_perf, alltoall_perf.
const char* nccl_tests_program(CollKind k);
// A row of `bytes` done in `seconds` over `ranks`, with nccl-tests' algbw and busbw.
NcclTestsRow nccl_tests_row(CollKind k, int ranks, double bytes, double seconds);

// The run as nccl-tests prints it (out-of-place columns; the in-place ones left blank, as
// nccl-tests leaves a side it did not run), `note` as a comment line under the header, and its
// max_ctas as NCCL's INFO line says it.
std::string format_nccl_tests(const NcclTestsRun& run, const std::string& note);

// Every test of a log (one per "# Collective test starting:" line). Columns are found by the
// header's names, so logs with per-iteration or timestamp columns read alike; NCCL's INFO line
// "NCCL_MAX_CTAS set by environment to N" (NCCL_DEBUG=INFO) gives the test's max_ctas. Throws
// std::invalid_argument naming the line on what is not a supported nccl-tests table.
std::vector<NcclTestsRun> parse_nccl_tests(const std::string& text);
// parse_nccl_tests of a file's text; std::invalid_argument also when it cannot be read (the
// message does not name the file: the caller does).
std::vector<NcclTestsRun> read_nccl_tests(const std::string& file);

}  // namespace twin::hardware
