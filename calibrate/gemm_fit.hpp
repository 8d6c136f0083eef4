// The time alone of a cuBLAS GEMM, bf16 or FP8 (hardware/kernel_cost.hpp, KernelCost::gemm_s):
//   t = t_0 + max(2mnk / (P·f·m/(m + h)), bytes / BW)
// t_0 the GEMM's fixed time (the profile's gemm_fixed_us, else its fixed cost per kernel), P the
// bf16 (FP8) peak, BW the HBM bandwidth, f the GEMM's share of the peak and h the rows (tokens)
// at which it reaches half of f. This fits h, and f or t_0, to GEMMs timed alone on the GPU with
// the host's enqueue hidden (contention_bench.py's `alone_ms`, twin-calibrate's `gemm_bf16` and
// fp8_gemm_bench.py's rows with --lead-us > 0): least squares of log(model / measured) on a grid
// (f in steps of 0.0025, t_0 of 0.25 µs, h of 1 row). Until
// 2026-12-05 h came from sweeps timed with the host's enqueue (~8 µs a cuBLAS launch, ~38 µs a
// PyTorch FP8 one, on an H100), which made small GEMMs look inefficient (bf16 h = 327, FP8 1,620;
// reports/calibration/gemm-alone/README.md).
#pragma once

#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "hardware/profile.hpp"

namespace twin::calibrate {

struct GemmAlone {
  double m = 0, n = 0, k = 0;
  double seconds = 0;  // measured alone
  bool fp8 = false;    // an FP8 GEMM (torch._scaled_mm, one scale per tensor): gemm_s(…, true)
};

// The single cuBLAS GEMMs of a measurement file, each with its time alone: the cases of class
// "gemm" (batch 1) of a contention_bench.py file, or, when timed with the host's enqueue hidden
// (lead_us > 0), twin-calibrate's `gemm_bf16` sweep or fp8_gemm_bench.py's rows (bf16 and FP8).
// Throws std::runtime_error naming `file` and the JSON path on bad input.
std::vector<GemmAlone> recorded_gemms_alone(const nlohmann::json& doc, const std::string& file);
// One point per shape (and type) over several files: the median of its times alone, bf16 shapes
// in order, then FP8 ones.
std::vector<GemmAlone> gemms_alone(const std::vector<std::string>& files);

// The shapes fitted and held out: alternate ones, in order of (m, n, k).
struct GemmSplit {
  std::vector<GemmAlone> fitted, held_out;
};
GemmSplit alternate_shapes(const std::vector<GemmAlone>& pts);

struct GemmFit {
  double peak_fraction = 0, half_rows = 0;
  double fixed_us = 0;  // t_0: fitted where asked, else the profile's
};
// Fits h (0–5,000 rows) with the profile's P and BW, and its f unless fit_peak_fraction (0.5–
// 0.9975) and its t_0 unless fit_fixed (0.25–12 µs; not both: std::invalid_argument): the bf16
// GEMM's, or the FP8 one's (gemm_fp8_*, t_0 the per-kernel cost, not fitted) when the points are
// FP8.
GemmFit fit_gemm_alone(const std::vector<GemmAlone>& pts, hardware::Profile p,
                       bool fit_peak_fraction, bool fit_fixed = false);

// The model's relative error per point, model / measured − 1, with the profile's f and h.
std::vector<double> gemm_alone_errors(const std::vector<GemmAlone>& pts,
                                      const hardware::Profile& p);

// Over the points of [lo, hi) rows: their number, the median |error| (the upper one of an even
// count) and the error farthest from 0.
struct GemmBand {
  std::size_t points = 0;
  double median_abs_error = 0, worst_error = 0;
};
GemmBand gemm_band(const std::vector<GemmAlone>& pts, const std::vector<double>& err, double lo,
                   double hi);

// The few numbers of a profile file the GEMM cost reads (gpu: sm_count, hbm_bw_GBps,
// bf16_dense_TFLOPs, fp8_dense_TFLOPs, tdp_W, power_limit_W; efficiency: gemm_peak_fraction,
// gemm_half_rows, gemm_fp8_*, kernel_overhead_us, gemm_fixed_us), following its `base` chain in the
// same folder. The full profile is the scenario loader's; this reads a calibration's base without
// it (STYLE.md's layering).
hardware::Profile gemm_profile(const std::string& profile_file);

}  // namespace twin::calibrate
