// Micro-benchmark 6 on the CPU: Newton–Schulz of one expert matrix with Eigen on all cores, and
// the host's SGEMM rate (the profile's host.fp32_TFLOPs).
#include <Eigen/Dense>
#include <chrono>
#include <cstdio>
#include <thread>

#include "calibrate/benches.hpp"
#include "calibrate/harness.hpp"

namespace twin::calibrate {

namespace {
template <class F>
double seconds(F&& f) {
  const auto t0 = std::chrono::steady_clock::now();
  f();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

void bench_newton_schulz_cpu(const Options& o, Json& out) {
  Eigen::setNbThreads(static_cast<int>(std::thread::hardware_concurrency()));
  const int g = o.quick ? 1024 : 4096;
  Eigen::MatrixXf P = Eigen::MatrixXf::Random(g, g), Q = Eigen::MatrixXf::Random(g, g), R(g, g);
  R.noalias() = P * Q;  // warm-up
  const double sg = seconds([&] { R.noalias() = P * Q; });
  const double sgemm = 2.0 * g * g * double(g) / sg / 1e12;
  const int m = o.quick ? 448 : 1792, n = o.quick ? 1536 : 6144;
  Eigen::MatrixXf X = Eigen::MatrixXf::Random(m, n) * 0.01f, A(m, m), B(m, m), Y(m, n);
  const float a = 3.4445f, b = -4.7750f, c = 2.0315f;
  const double ns = seconds([&] {
    for (int it = 0; it < 5; ++it) {
      A.noalias() = X * X.transpose();
      B.noalias() = b * A + c * A * A;
      Y.noalias() = a * X + B * X;
      X.swap(Y);
    }
  });
  out["cpu"] = {
      {"threads", Eigen::nbThreads()},
      {"sgemm", {{"size", g}, {"seconds", sg}, {"TFLOPs", sgemm}}},
      {"newton_schulz",
       {{"rows", m}, {"cols", n}, {"seconds", ns}, {"TFLOPs", ns_flops(m, n) / ns / 1e12}}}};
  std::printf(
      "CPU (%d threads): SGEMM %d^3 %.2f TFLOP/s; Newton-Schulz %dx%d %.3f s (%.2f TFLOP/s)\n",
      Eigen::nbThreads(), g, sgemm, m, n, ns, ns_flops(m, n) / ns / 1e12);
}

}  // namespace twin::calibrate
