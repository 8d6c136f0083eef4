// What calibrate/contention_bench.py and cluster_probe.py measured, read for the contention fit.
//
// Every case of the measurement files (a later file's cases of a class replace an earlier file's:
// the holders differed, see reports/calibration/contention/README.md) becomes a KernelShape from
// its launch configuration (PyTorch profiler records: grid, block, registers, shared memory —
// with the file's holder, the blocks that fit beside one; nvjet's cluster from the kernel's name)
// and its points (SMs held, slowdown), alternately fitted and held out.
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hardware/contention.hpp"

namespace twin::calibrate {

constexpr int kSms = 132;  // the measured H200's SMs

struct ContentionPoint {
  int held = 0;
  double measured = 1;  // slowdown
  bool fitted = false;  // in the fitting half (else held out)
};

struct ContentionCase {
  std::string name;  // kernel[shape]
  std::string
      group;  // the family fitted, or a report-only group ("twin_grouped", "copy_engine", …)
  hardware::KernelShape shape;
  std::vector<ContentionPoint> points;
  double bytes = 0;                // read + written by one launch
  double alone_s = 0;              // its time alone
  double copy_share = 0;           // its bandwidth alone over the file's device copy's (0: unknown)
  hardware::BlockResources block;  // its longest kernel's block (threads 0: no launch record)
  // A run of several kernels measured as one case (Newton–Schulz): its launches as the twin
  // models them, each with its measured time alone; empty: one kernel, `shape`.
  std::vector<hardware::KernelPart> parts;
  double slowdown(const hardware::ContentionModel& m, int held) const {
    return parts.empty() ? m.slowdown(shape, held, alone_s) : m.slowdown(parts, held);
  }
};

// Reads the measurement files into cases (throws std::runtime_error with the file on bad input).
std::vector<ContentionCase> read_contention_cases(const std::vector<std::string>& files);

// A single-GEMM case's shape from the launch nvjet really made (its profiler record: tile and
// cluster from the kernel's name, CTAs from the grid; a split-K launch's CTAs each one tile), where
// the fit takes the twin's own launch choice (hardware::gemm_launch): separates a miss of the
// launch choice from one of the contention mechanisms.
hardware::KernelShape recorded_gemm_shape(const nlohmann::json& c);

// Reads cluster_probe.py's result into the model's cluster tables (mechanism 1): per cluster
// size, the median over repeats of the CTAs resident at each k, 0 where blocked.
void read_cluster_tables(const std::string& file, hardware::ContentionModel& m);
// Per group, how much the SM clock rises while SMs are held, measured (contention_bench.py
// --clock: `sm_clock_MHz` at every point): the median over the group's cases of the clock with
// 56–112 SMs held (its plateau) over the clock alone; a later file's group replaces an earlier
// file's. Throws std::runtime_error naming the file when a file has no clock readings.
std::map<std::string, double> measured_clock_gains(const std::vector<std::string>& files);
// Gives each compute case its own measured clock gain (shape.clock_gain), read from the clock
// files' case of the same kernel and shape (a later file's replaces an earlier's): the clock a
// kernel runs at alone depends on its power state (how long and how hard the GPU has been busy:
// measured 1,185–1,913 MHz), and the slowdown beside held SMs on how far that is below the
// ~1,800 MHz it reaches with 56–112 held. Cases without a reading keep their family's b_max.
void apply_case_clock_gains(std::vector<ContentionCase>& cases,
                            const std::vector<std::string>& files);
// The clock compute kernels reach with 56–112 SMs held: the median over the clock files' compute
// cases (measured ~1,800 MHz whatever the kernel's clock alone, isolated or in a busy GPU).
double measured_clock_plateau_MHz(const std::vector<std::string>& files);

}  // namespace twin::calibrate
