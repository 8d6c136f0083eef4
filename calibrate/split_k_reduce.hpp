// cuBLASLt's split-K reduction, measured (contention.hpp, split_k: a split-K launch as nvjet's
// slices of k and then this kernel): its time alone against the bytes it reads and writes, the
// numbers `twin-fit-contention --split-k` writes into the profile.
#pragma once

#include <string>
#include <vector>

#include "hardware/contention.hpp"

namespace twin::calibrate {

// One recorded splitKreduce_kernel: its GEMM's reduction bytes (m·n·(4·slices + 2)) and its
// duration alone (PyTorch profiler).
struct ReduceRecord {
  double bytes = 0, seconds = 0;
};
// Every split-K reduction recorded in contention_bench.py results (the slices counted from the
// nvjet launch before it: its CTAs over its output tiles). Throws std::runtime_error naming the
// file on bad input or when the files hold fewer than two.
std::vector<ReduceRecord> split_k_reduce_records(const std::vector<std::string>& files);
// Least squares of seconds = setup + bytes / rate.
hardware::ContentionModel::SplitKReduce fit_split_k_reduce(const std::vector<ReduceRecord>& r);

}  // namespace twin::calibrate
