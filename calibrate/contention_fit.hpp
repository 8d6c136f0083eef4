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

// What the fit starts from: the clustered families' cluster size (2: nvjet's _1x2_/_2x1_ names;
// QuACK/CUTLASS grouped GEMMs assumed alike), the measured cluster tables of `clusters_file` and,
// if `lone_cta_files` are given, a lone cuBLAS CTA measured there (fit_lone_cta, mechanism 3;
// leaving out the shapes `held_out_files` measure), and if `split_k_files` are, the split-K
// reduction recorded in them (fit_split_k_reduce).
hardware::ContentionModel fit_base(const std::string& clusters_file,
                                   const std::vector<std::string>& lone_cta_files = {},
                                   const std::vector<std::string>& split_k_files = {},
                                   const std::vector<std::string>& held_out_files = {});

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
