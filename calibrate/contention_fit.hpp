// Fits the SM-contention model (hardware/contention.hpp) to the curves measured by
// calibrate/contention_bench.py, family by family, and reports its residuals.
//
// Data: every case of the measurement files (a later file's cases of a class replace an earlier
// file's: the holders differed, see reports/calibration/contention/README.md); each case becomes
// a KernelShape from its launch configuration (PyTorch profiler records: grid, block, shared
// memory; nvjet's cluster from the kernel's name) and its points (SMs held, slowdown).
// Split: a family's cases alternate between fitting and holding out; so do the SMs held (every
// second value of the measured list). A point is fitted only if both its case and its SMs are;
// every other point is held out. Fit: least squares of log(model/measured) over the fitted
// points, by exhaustive search over a grid of each family's parameters (the cluster waste w is
// shared by the clustered families; each elementwise family has its own knee and lone-block share).
#pragma once

#include <nlohmann/json.hpp>

#include <map>
#include <string>
#include <vector>

#include "hardware/contention.hpp"

namespace twin::calibrate {

struct ContentionPoint {
  int held = 0;
  double measured = 1;  // slowdown
  bool fitted = false;  // in the fitting half (else held out)
};

struct ContentionCase {
  std::string name;   // kernel[shape]
  std::string group;  // the family fitted, or a report-only group ("twin_grouped", "copy_engine", …)
  hardware::KernelShape shape;
  std::vector<ContentionPoint> points;
  double bytes = 0;         // read + written by one launch
  double alone_s = 0;       // its time alone
  double copy_share = 0;    // its bandwidth alone over the file's device copy's (0: unknown)
};

// Reads the measurement files into cases (throws std::runtime_error with the file on bad input).
std::vector<ContentionCase> read_contention_cases(const std::vector<std::string>& files);

// Reads cluster_probe.py's result into the model's cluster tables (mechanism 1): per cluster
// size, the median over repeats of the CTAs resident at each k, 0 where blocked.
void read_cluster_tables(const std::string& file, hardware::ContentionModel& m);
// What the fit starts from: the clustered families' cluster size (2: nvjet's _1x2_/_2x1_ names;
// QuACK/CUTLASS grouped GEMMs assumed alike) and the measured cluster tables of `clusters_file`.
hardware::ContentionModel fit_base(const std::string& clusters_file);

// Per group, how much the SM clock rises while SMs are held, measured (contention_bench.py
// --clock: `sm_clock_MHz` at every point): the median over the group's cases of the clock with
// 56–112 SMs held (its plateau) over the clock alone; a later file's group replaces an earlier
// file's. Throws std::runtime_error naming the file when a file has no clock readings.
std::map<std::string, double> measured_clock_gains(const std::vector<std::string>& files);

// Fits the model's parameters; `base` supplies what the data does not decide (cluster sizes and
// tables). A compute family with a measured clock gain takes it as its b_max (mechanism 2)
// instead of fitting it.
// An elementwise family's hbm_fraction is the mean over its kernels of the copy share of each
// kernel's largest case (the least launch overhead).
hardware::ContentionModel fit_contention(const std::vector<ContentionCase>& cases,
                                         hardware::ContentionModel base,
                                         const std::map<std::string, double>& clock_gains = {});

// The model a group is evaluated with: the fitted one, except for the project's own WMMA
// grouped GEMM (a calibration kernel, not a step kernel), which never reaches the power cap (no
// boost; its clock measured within 4% of alone at every k), launches no clusters, and runs 20×
// slower than CUTLASS's, far from any memory limit.
hardware::ContentionModel model_for(const std::string& group, hardware::ContentionModel m);

// Per group: residuals (model/measured − 1) of held-out and fitted points, the median over
// cases at each SMs-held value, and the worst; JSON for reports and tests.
nlohmann::json contention_residuals(const std::vector<ContentionCase>& cases,
                                    const hardware::ContentionModel& m);

}  // namespace twin::calibrate
