// cuBLASLt's split-K reduction, measured (contention.hpp, split_k: a split-K launch as nvjet's
// slices of k and then this kernel): its time alone against the bytes it reads and writes, the
// numbers `twin-fit-contention --split-k` writes into the profile.
#pragma once

#include <string>
#include <utility>
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
// A split-K GEMM's two kernels alone and beside k held SMs, each timed by the PyTorch profiler
// (contention_bench.py --launches-held): nvjet's slices of k and cuBLASLt's reduction after them.
struct SplitKBeside {
  std::string name;             // kernel[m=…,n=…,k=…]
  hardware::KernelShape shape;  // the launch nvjet made (recorded_gemm_shape)
  double alone_s = 0;           // the whole GEMM alone (CUDA events)
  int held = 0;
  int shape_n = 0;  // the GEMM's columns
  double slices_alone_s = 0, slices_s = 0, reduce_alone_s = 0, reduce_s = 0;
};
// Every held point of a split-K case that recorded its launches. Throws std::runtime_error naming
// the file on bad input or when it holds none.
std::vector<SplitKBeside> split_k_beside(const std::string& file);
// The reduction's β and unstretched time beside held SMs (ContentionModel::SplitKReduce's
// lone_block, fixed_us) that make model `m`'s reduction slowdowns closest to the measured ones of
// `rows` (least squares of their log ratio; β 0.25–1 by 0.05, fixed 0 to the set-up by 0.1 µs).
// Throws std::runtime_error if rows is empty or m knows no reduction.
std::pair<double, double> fit_split_k_waves(const std::vector<SplitKBeside>& rows,
                                            hardware::ContentionModel m);
// The same on a file's GEMMs of `columns` columns (the others held out), as
// `twin-fit-contention --split-k-waves FILE --split-k-waves-columns N` fits it; throws
// std::runtime_error naming the file if it has none.
std::pair<double, double> fit_split_k_waves(const std::string& file, int columns,
                                            const hardware::ContentionModel& m);
// Least squares of seconds = setup + bytes / rate.
hardware::ContentionModel::SplitKReduce fit_split_k_reduce(const std::vector<ReduceRecord>& r);

}  // namespace twin::calibrate
