// Micro-benchmarks 5–7 on the GPU: copies, Newton–Schulz with cuBLAS, FP8 block kernels.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <chrono>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "calibrate/benches.hpp"
#include "calibrate/harness.hpp"
#include "kernels/twin_kernels.cuh"

namespace twin::calibrate {

void bench_copies(const Options& o, Json& out) {
  const std::size_t bytes = (o.quick ? 256ull : 1024ull) << 20;
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  void *dev = nullptr, *dev2 = nullptr, *pinned = nullptr;
  check(cudaMalloc(&dev, bytes), "malloc");
  check(cudaMalloc(&dev2, bytes), "malloc");
  check(cudaMallocHost(&pinned, bytes), "pinned");
  auto* pageable = static_cast<char*>(std::malloc(bytes));
  std::memset(pageable, 1, bytes);  // touched from the CPU first (JOB.md §7: first touch)
  std::memset(pinned, 1, bytes);
  check(cudaMemset(dev, 1, bytes), "memset");
  Json r;
  auto copy = [&](const char* name, void* dst, const void* src, cudaMemcpyKind kind,
                  double traffic) {
    const double ms =
        median_ms(s, 2, o.reps, [&] { check(cudaMemcpyAsync(dst, src, bytes, kind, s), name); });
    r[name] = {{"bytes", bytes}, {"median_ms", ms}, {"GBps", bandwidth_GBps(traffic * bytes, ms)}};
    std::printf("copy %-14s %8.3f ms  %7.1f GB/s%s\n", name, ms,
                bandwidth_GBps(traffic * bytes, ms), traffic > 1 ? " (read+write)" : "");
  };
  copy("h2d_pinned", dev, pinned, cudaMemcpyHostToDevice, 1);
  copy("d2h_pinned", pinned, dev, cudaMemcpyDeviceToHost, 1);
  copy("h2d_pageable", dev, pageable, cudaMemcpyHostToDevice, 1);
  copy("d2h_pageable", pageable, dev, cudaMemcpyDeviceToHost, 1);
  copy("d2d", dev2, dev, cudaMemcpyDeviceToDevice, 2);
  // Pinned allocation cost per GiB.
  {
    void* p = nullptr;
    cudaEvent_t e;
    check(cudaEventCreate(&e), "event");
    const auto t0 = std::chrono::steady_clock::now();
    check(cudaMallocHost(&p, bytes), "pinned");
    const double s_alloc =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    cudaFreeHost(p);
    r["pinned_alloc_s_per_GiB"] = s_alloc / (double(bytes) / (1 << 30));
    std::printf("cudaMallocHost: %.3f s per GiB\n", s_alloc / (double(bytes) / (1 << 30)));
    cudaEventDestroy(e);
  }
  out["copies"] = r;
  std::free(pageable);
  cudaFreeHost(pinned);
  cudaFree(dev);
  cudaFree(dev2);
  cudaStreamDestroy(s);
}

void bench_newton_schulz(const Options& o, Json& out) {
  // One expert matrix (1792 × 6144) in bf16: 5 iterations of A = X·Xᵀ, B = bA + cA², X = aX + B·X.
  const int m = 1792, n = 6144;
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  cublasHandle_t h;
  if (cublasCreate(&h) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  cublasSetStream(h, s);
  __nv_bfloat16 *X, *A, *B, *Y;
  check(cudaMalloc(&X, std::size_t(m) * n * 2), "malloc");
  check(cudaMalloc(&Y, std::size_t(m) * n * 2), "malloc");
  check(cudaMalloc(&A, std::size_t(m) * m * 2), "malloc");
  check(cudaMalloc(&B, std::size_t(m) * m * 2), "malloc");
  check(cudaMemset(X, 0x3c, std::size_t(m) * n * 2), "memset");    // nonzero bf16 pattern
  const float a = 3.4445f, b = -4.7750f, c = 2.0315f, zero = 0.f;  // Muon's quintic coefficients
  auto gemm = [&](cublasOperation_t ta, cublasOperation_t tb, int mm, int nn, int kk, const void* P,
                  int ldp, const void* Q, int ldq, const float* alpha, const float* beta, void* R,
                  int ldr) {
    if (cublasGemmEx(h, ta, tb, mm, nn, kk, alpha, P, CUDA_R_16BF, ldp, Q, CUDA_R_16BF, ldq, beta,
                     R, CUDA_R_16BF, ldr, CUBLAS_COMPUTE_32F,
                     CUBLAS_GEMM_DEFAULT) != CUBLAS_STATUS_SUCCESS)
      throw std::runtime_error("NS gemm");
  };
  const float one = 1.f;
  auto ns = [&] {
    for (int it = 0; it < 5; ++it) {
      // Column-major view: X is n×m (ld n); A = XᵀX (m×m) ≡ X·Xᵀ in row-major.
      gemm(CUBLAS_OP_T, CUBLAS_OP_N, m, m, n, X, n, X, n, &one, &zero, A, m);
      check(cudaMemcpyAsync(B, A, std::size_t(m) * m * 2, cudaMemcpyDeviceToDevice, s), "copy");
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, m, m, m, A, m, A, m, &c, &b, B, m);  // B = bA + cA²
      check(cudaMemcpyAsync(Y, X, std::size_t(m) * n * 2, cudaMemcpyDeviceToDevice, s), "copy");
      gemm(CUBLAS_OP_N, CUBLAS_OP_N, n, m, m, X, n, B, m, &one, &a, Y, n);  // Y = aX + X·B (≈ B·X)
      std::swap(X, Y);
    }
  };
  // A run is 25 launches (15 GEMMs, 10 copies): a longer lead covers their enqueue.
  const double ms = median_ms(s, 2, o.reps, ns, {}, o.lead_us * 16);
  out["newton_schulz_gpu"] = {
      {"rows", m}, {"cols", n}, {"median_ms", ms}, {"TFLOPs", ns_flops(m, n) / (ms * 1e-3) / 1e12}};
  std::printf("Newton-Schulz GPU %dx%d: %.3f ms (%.1f TFLOP/s)\n", m, n, ms,
              ns_flops(m, n) / (ms * 1e-3) / 1e12);
  cublasDestroy(h);
  cudaFree(X);
  cudaFree(Y);
  cudaFree(A);
  cudaFree(B);
  cudaStreamDestroy(s);
}

void bench_fp8(const Options& o, Json& out) {
  const std::size_t n = (o.quick ? 64ull : 512ull) << 20;  // values (multiple of 128)
  const int slices = 96;
  const std::size_t slice_n = (o.quick ? 1ull : 4ull) << 20;
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  __nv_bfloat16 *in, *back, *sl;
  __nv_fp8_e4m3* q;
  float *scales, *sum;
  check(cudaMalloc(&in, n * 2), "malloc");
  check(cudaMalloc(&back, n * 2), "malloc");
  check(cudaMalloc(&q, n), "malloc");
  check(cudaMalloc(&scales, n / 128 * 4), "malloc");
  check(cudaMalloc(&sl, slice_n * slices * 2), "malloc");
  check(cudaMalloc(&sum, slice_n * 4), "malloc");
  std::vector<__nv_bfloat16> h(1 << 20);
  for (std::size_t i = 0; i < h.size(); ++i)
    h[i] = __float2bfloat16(std::sin(0.001 * double(i)) * (1 + i % 7));
  for (std::size_t off = 0; off < n; off += h.size())
    check(cudaMemcpy(in + off, h.data(), h.size() * 2, cudaMemcpyHostToDevice), "fill");
  check(cudaMemset(sl, 0x3c, slice_n * slices * 2), "memset");
  const double qms = median_ms(
      s, 2, o.reps, [&] { check(kernels::launch_fp8_quantize(in, q, scales, n, s), "quant"); }, {},
      o.lead_us);
  const double dms = median_ms(
      s, 2, o.reps,
      [&] { check(kernels::launch_fp8_dequantize(q, scales, back, n, s), "dequant"); }, {},
      o.lead_us);
  const double sms = median_ms(
      s, 2, o.reps,
      [&] { check(kernels::launch_bf16_sum_fp32(sl, slices, slice_n, sum, s), "sum"); }, {},
      o.lead_us);
  // Round-trip error relative to each block's max (JOB.md: up to ~6% of the block maximum).
  std::vector<__nv_bfloat16> r(h.size());
  check(cudaMemcpy(r.data(), back, r.size() * 2, cudaMemcpyDeviceToHost), "copy");
  double worst = 0;
  for (std::size_t b0 = 0; b0 < r.size(); b0 += 128) {
    double mx = 0, err = 0;
    for (std::size_t i = b0; i < b0 + 128; ++i)
      mx = std::max(mx, double(std::fabs(__bfloat162float(h[i]))));
    for (std::size_t i = b0; i < b0 + 128; ++i)
      err = std::max(err, double(std::fabs(__bfloat162float(h[i]) - __bfloat162float(r[i]))));
    if (mx > 0) worst = std::max(worst, err / mx);
  }
  out["fp8"] = {{"values", n},
                {"quantize_ms", qms},
                {"quantize_GBps", bandwidth_GBps(n * 3.0 + n / 32.0, qms)},
                {"dequantize_ms", dms},
                {"dequantize_GBps", bandwidth_GBps(n * 3.0 + n / 32.0, dms)},
                {"worst_error_of_block_max", worst},
                {"bf16_sum_fp32",
                 {{"slices", slices},
                  {"values", slice_n},
                  {"median_ms", sms},
                  {"GBps", bandwidth_GBps(slice_n * (2.0 * slices + 4), sms)}}}};
  std::printf(
      "fp8 quantize %.3f ms (%.0f GB/s), dequantize %.3f ms (%.0f GB/s), worst error %.2f%% of "
      "block max\n",
      qms, bandwidth_GBps(n * 3.0 + n / 32.0, qms), dms, bandwidth_GBps(n * 3.0 + n / 32.0, dms),
      100 * worst);
  std::printf("bf16 sum of %d slices to fp32: %.3f ms (%.0f GB/s)\n", slices, sms,
              bandwidth_GBps(slice_n * (2.0 * slices + 4), sms));
  if (!(worst < 0.07))
    throw std::runtime_error("FP8 round trip error above 7% of the block maximum");
  cudaFree(in);
  cudaFree(back);
  cudaFree(q);
  cudaFree(scales);
  cudaFree(sl);
  cudaFree(sum);
  cudaStreamDestroy(s);
}

}  // namespace twin::calibrate
