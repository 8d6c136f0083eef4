// Fits the engine's parameters from twin-calibrate's measurements (Eigen least squares) and
// writes them as a hardware-profile overlay, each value with its source.
#include <Eigen/Dense>

#include "calibrate/benches.hpp"

namespace twin::calibrate {

namespace {
Json sourced(double v, const std::string& src) {
  return {{"value", v}, {"source", src}};
}
}  // namespace

Json fit_profile(const Json& m) {
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
  if (m.contains("gemm_bf16")) {
    // GEMM efficiency against rows m (kernel_cost.hpp): eff(m) = f·m/(m+h) ⇔ 1/eff = 1/f + (h/f)/m,
    // linear in 1/m: fit on the expert up-projection sweep.
    std::vector<std::pair<double, double>> pts;
    for (const auto& r : m["gemm_bf16"])
      if (r["shape"] == "expert_up")
        pts.emplace_back(r["m"].get<double>(), r["TFLOPs"].get<double>() / 989.0);
    if (pts.size() >= 2) {
      Eigen::MatrixXd X(pts.size(), 2);
      Eigen::VectorXd y(pts.size());
      for (std::size_t i = 0; i < pts.size(); ++i)
        X(i, 0) = 1, X(i, 1) = 1 / pts[i].first, y(i) = 1 / pts[i].second;
      const Eigen::Vector2d ab = X.colPivHouseholderQr().solve(y);
      const double f = 1 / ab(0), h = ab(1) / ab(0);
      const std::string how = tag +
                              "cuBLAS bf16 expert up-projection (n 3584, k 6144) over rows; least "
                              "squares of 1/eff = 1/f + (h/f)/rows";
      p["efficiency"]["gemm_peak_fraction"] = sourced(f, how);
      p["efficiency"]["gemm_half_rows"] = sourced(h, how);
    }
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
