// twin-fit-gemm: fits the time alone of cuBLAS bf16 GEMMs (calibrate/gemm_fit.hpp) to the
// GEMMs contention_bench.py timed alone, half of the shapes fitted and half held out, and prints
// the residuals per band of rows. No GPU needed.
//
//   build/twin-fit-gemm reports/calibration/contention/h200-*-contention-*.json
//       --profile hardware/profiles/h200.json --out reports/calibration/gemm-alone/fit.json
#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <stdexcept>

#include "calibrate/gemm_fit.hpp"

using namespace twin;
using Json = nlohmann::ordered_json;

namespace {

struct Band {
  const char* name;
  double lo, hi;
};
constexpr Band kBands[] = {
    {"32-255 rows", 0, 256}, {"256-4095 rows", 256, 4096}, {"4096+ rows", 4096, INFINITY}};

Json summary(const std::vector<calibrate::GemmAlone>& pts, const hardware::Profile& p) {
  const auto err = calibrate::gemm_alone_errors(pts, p);
  Json out = Json::array();
  for (const auto& b : kBands) {
    const auto g = calibrate::gemm_band(pts, err, b.lo, b.hi);
    out.push_back({{"rows", b.name},
                   {"points", g.points},
                   {"median_abs_error", std::round(g.median_abs_error * 1e4) / 1e4},
                   {"worst_error", std::round(g.worst_error * 1e4) / 1e4}});
  }
  return out;
}

void print(const char* title, const Json& bands) {
  fmt::print("{}\n", title);
  for (const auto& b : bands)
    fmt::print("  {:<14} {:>4} points  median |error| {:5.1f}%  worst {:+6.1f}%\n",
               b["rows"].get<std::string>(), b["points"].get<int>(),
               100 * b["median_abs_error"].get<double>(), 100 * b["worst_error"].get<double>());
}

// What the fit frees besides h: f (--fit-peak-fraction) or t_0 (--fit-fixed); and which GEMMs.
struct Freed {
  bool peak_fraction = false, fixed = false, fp8 = false;
};

// Fits on alternate shapes, the others held out: the values, the method and the residuals into
// j, and printed.
void fit_shapes(Json& j, const std::vector<calibrate::GemmAlone>& pts, hardware::Profile& p,
                Freed freed) {
  const bool fp8 = freed.fp8;
  const auto split = calibrate::alternate_shapes(pts);
  const auto fit = calibrate::fit_gemm_alone(split.fitted, p, freed.peak_fraction, freed.fixed);
  (fp8 ? p.efficiency.gemm_fp8_peak_fraction : p.efficiency.gemm_peak_fraction) = fit.peak_fraction;
  (fp8 ? p.efficiency.gemm_fp8_half_rows : p.efficiency.gemm_half_rows) = fit.half_rows;
  if (freed.fixed) p.efficiency.gemm_fixed_us = fit.fixed_us;
  j["method"] =
      "t = t_0 + max(2mnk / (P·f·m/(m+h)), bytes / BW) (hardware::KernelCost::gemm_s), P, "
      "BW from the profile; least squares of log(model / measured) over h (0-5000 rows, step "
      "1)" +
      std::string(freed.peak_fraction ? " and f (0.5-0.9975, step 0.0025)" : "") +
      std::string(freed.fixed ? " and t_0 (0.25-12 us, step 0.25)" : "") +
      " on alternate shapes (in order of m, n, k), the others held out";
  j[fp8 ? "gemm_fp8_peak_fraction" : "gemm_peak_fraction"] = fit.peak_fraction;
  j[fp8 ? "gemm_fp8_half_rows" : "gemm_half_rows"] = fit.half_rows;
  j["gemm_fixed_us"] = fit.fixed_us;
  j["shapes"] = {{"fitted", split.fitted.size()}, {"held_out", split.held_out.size()}};
  j["fitted"] = summary(split.fitted, p);
  j["held_out"] = summary(split.held_out, p);
  fmt::print(
      "{} {} GEMM shapes timed alone ({} fitted, {} held out); f = {}, h = {} rows, t_0 = {} "
      "us\n",
      pts.size(), fp8 ? "FP8" : "bf16", split.fitted.size(), split.held_out.size(),
      fit.peak_fraction, fit.half_rows, fit.fixed_us);
  print("the profile's f and h, every shape:", j["before"]);
  print("fitted shapes:", j["fitted"]);
  print("held-out shapes:", j["held_out"]);
}

// Written whole or not at all.
void write_json(const std::string& out, const Json& j) {
  const std::string tmp = out + ".tmp";
  std::ofstream f(tmp);
  f << j.dump(2) << "\n";
  if (!f.flush()) throw std::runtime_error(out + ": cannot write");
  f.close();
  std::filesystem::rename(tmp, out);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"twin-fit-gemm: fit a cuBLAS GEMM's time alone (bf16, or FP8) to GEMMs timed alone"};
  std::vector<std::string> files;
  std::string profile_file, out;
  bool fit_f = false, fit_fixed = false, no_fit = false, fp8 = false;
  app.add_option("files", files,
                 "contention_bench.py results (their GEMMs' alone_ms), or twin-calibrate or "
                 "fp8_gemm_bench.py results timed with --lead-us > 0")
      ->required();
  app.add_option("--profile", profile_file,
                 "the profile whose P, BW (and f, t_0) the fit keeps (hardware/profiles/NAME.json)")
      ->required();
  auto* f_flag = app.add_flag("--fit-peak-fraction", fit_f, "fit f as well as h");
  app.add_flag("--fit-fixed", fit_fixed,
               "fit the GEMM's fixed time t_0 (gemm_fixed_us) as well as h, f kept")
      ->excludes(f_flag);
  app.add_flag("--fp8", fp8,
               "the FP8 GEMMs (fp8_gemm_bench.py's torch._scaled_mm): gemm_fp8_peak_fraction and "
               "gemm_fp8_half_rows; without it the bf16 ones");
  app.add_flag("--no-fit", no_fit,
               "only the profile's residuals on these GEMMs (another GPU's files, held out)");
  app.add_option("--out", out, "the fit and its residuals as JSON");
  CLI11_PARSE(app, argc, argv);
  try {
    std::vector<calibrate::GemmAlone> pts;
    for (const auto& g : calibrate::gemms_alone(files))
      if (g.fp8 == fp8) pts.push_back(g);
    if (pts.empty())
      throw std::runtime_error(std::string("no ") + (fp8 ? "FP8" : "bf16") +
                               " GEMM timed alone in these files");
    auto p = calibrate::gemm_profile(profile_file);
    Json j;
    j["data"] = files;
    j["profile"] = profile_file;
    j["before"] = summary(pts, p);
    if (no_fit) {
      fmt::print("{} {} GEMM shapes timed alone\n", pts.size(), fp8 ? "FP8" : "bf16");
      print("the profile's f and h, every shape:", j["before"]);
    } else {
      fit_shapes(j, pts, p, {fit_f, fit_fixed, fp8});
    }
    if (!out.empty()) write_json(out, j);
  } catch (const std::exception& e) {
    std::cerr << "twin-fit-gemm: error: " << e.what() << "\n";
    return 2;
  }
  return 0;
}
