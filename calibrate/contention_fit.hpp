// Fits the SM-contention model (hardware/contention.hpp) to the curves measured by
// calibrate/contention_bench.py (read by contention_data.hpp), family by family, and reports its
// residuals.
// Split: a family's cases alternate between fitting and holding out; so do the SMs held (every
// second value of the measured list). A point is fitted only if both its case and its SMs are;
// every other point is held out. Fit: least squares of log(model/measured) over the fitted
// points, by exhaustive search over a grid of each family's parameters (the cluster waste w is
// shared by the clustered families; each elementwise family has its own knee and lone-block share).
#pragma once

#include <map>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "calibrate/contention_data.hpp"
#include "hardware/contention.hpp"

namespace twin::calibrate {

// The measurements the fit reads as measured rather than fitted (all but `clusters` optional).
struct BaseFiles {
  std::string clusters;               // cluster_probe.py: the cluster tables
  std::vector<std::string> lone_cta;  // contention_bench.py --only lone_cta…: lone CTAs
  std::vector<std::string> split_k;   // contention files with split-K GEMMs: the reduction
  std::vector<std::string> held_out;  // files held out: their shapes stay out of lone_cta's
};
// What the fit starts from: the clustered families' cluster size (2: nvjet's _1x2_/_2x1_ names;
// QuACK/CUTLASS grouped GEMMs assumed alike), the measured cluster tables and, where given, a
// lone cuBLAS CTA per kernel (fit_lone_cta, mechanism 3) and the split-K reduction
// (fit_split_k_reduce).
hardware::ContentionModel fit_base(const BaseFiles& files);

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
