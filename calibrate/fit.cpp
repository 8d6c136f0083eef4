// Fits the engine's parameters from twin-calibrate's measurements (least squares) and
// writes them as a hardware-profile overlay, each value with its source.
#include <cstdio>
#include <optional>

#include "calibrate/benches.hpp"
#include "calibrate/gemm_fit.hpp"

namespace twin::calibrate {

namespace {
Json sourced(double v, const std::string& src) {
  return {{"value", v}, {"source", src}};
}

std::string fmt_number(double v) {
  char b[32];
  std::snprintf(b, sizeof b, "%g", v);
  return b;
}
}  // namespace

Json fit_profile(const Json& m, const std::optional<hardware::Profile>& base) {
  Json p;
  const std::string tag = "[meas] twin-calibrate ";
  if (m.contains("copies")) {
    const auto& c = m["copies"];
    p["gpu"]["hbm_bw_GBps"] = sourced(c["d2d"]["GBps"], tag + "device-to-device copy, read+write");
    p["node"]["host_h2d_GBps"] =
        sourced(c["h2d_pinned"]["GBps"], tag + "pinned host-to-device cudaMemcpyAsync");
    p["node"]["host_d2h_GBps"] =
        sourced(c["d2h_pinned"]["GBps"], tag + "pinned device-to-host cudaMemcpyAsync");
  }
  if (m.contains("gemm_bf16") && base) {
    // The time alone of a cuBLAS GEMM (kernel_cost.hpp) over every shape timed: f and h with the
    // base's fixed cost per kernel and peak, and the bandwidth measured here where it was.
    std::vector<GemmAlone> pts;
    for (const auto& r : m["gemm_bf16"])
      pts.push_back({r["m"].get<double>(), r["n"].get<double>(), r["k"].get<double>(),
                     r["median_ms"].get<double>() * 1e-3});
    hardware::Profile p0 = *base;
    if (m.contains("copies")) p0.gpu.hbm_bw_GBps = m["copies"]["d2d"]["GBps"];
    const auto fit = fit_gemm_alone(pts, p0, true);
    const double lead = m.value("lead_us", 0.0);
    const std::string how =
        tag + "cuBLAS bf16 GEMMs (" + std::to_string(pts.size()) + " shapes) timed " +
        (lead > 0 ? "with the host's enqueue hidden (--lead-us " + fmt_number(lead) + ")"
                  : "with the host's enqueue (--lead-us 0)") +
        "; least squares of log(model/measured) of KernelCost::gemm_s over f and h "
        "(calibrate::fit_gemm_alone)";
    p["efficiency"]["gemm_peak_fraction"] = sourced(fit.peak_fraction, how);
    p["efficiency"]["gemm_half_rows"] = sourced(fit.half_rows, how);
  }
  if (m.contains("cpu")) {
    const auto& c = m["cpu"];
    const double sg = c["sgemm"]["TFLOPs"];
    p["host"]["fp32_TFLOPs"] = sourced(sg, tag + "Eigen SGEMM on all host cores");
    p["efficiency"]["cpu_gemm_fraction"] =
        sourced(c["newton_schulz"]["TFLOPs"].get<double>() / sg,
                tag + "Eigen Newton-Schulz of one expert matrix / host SGEMM");
  }
  return p;
}

}  // namespace twin::calibrate
