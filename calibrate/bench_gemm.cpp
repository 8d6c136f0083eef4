// Micro-benchmarks 1–3: cuBLAS GEMMs, the persistent grouped GEMM, SM contention.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "calibrate/benches.hpp"
#include "calibrate/grouped_case.hpp"
#include "calibrate/harness.hpp"
#include "kernels/twin_kernels.cuh"

namespace twin::calibrate {

namespace {

void cublas_check(cublasStatus_t s, const char* what) {
  if (s != CUBLAS_STATUS_SUCCESS)
    throw std::runtime_error(std::string(what) + ": cuBLAS error " + std::to_string(s));
}

struct Blas {
  cublasHandle_t h{};
  Blas() { cublas_check(cublasCreate(&h), "cublasCreate"); }
  ~Blas() { cublasDestroy(h); }
  // Row-major C[m×n] = A[m×k]·B[k×n], via column-major Cᵀ = Bᵀ·Aᵀ.
  void gemm(cudaStream_t s, int m, int n, int k, const __nv_bfloat16* A, const __nv_bfloat16* B,
            __nv_bfloat16* C) {
    const float one = 1, zero = 0;
    cublas_check(cublasSetStream(h, s), "stream");
    cublas_check(
        cublasGemmEx(h, CUBLAS_OP_N, CUBLAS_OP_N, n, m, k, &one, B, CUDA_R_16BF, n, A, CUDA_R_16BF,
                     k, &zero, C, CUDA_R_16BF, n, CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
  }
};

struct Shape {
  const char* name;
  int m, n, k;
};

}  // namespace

void bench_gemm(const Options& o, Json& out) {
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  Blas blas;
  std::vector<Shape> shapes = {{"square_8192", 8192, 8192, 8192},
                               {"router", 16384, 384, 6144},
                               {"qkv_proj", 16384, 13824, 6144},
                               {"o_proj", 16384, 6144, 8192},
                               {"ns_xxt", 1792, 1792, 6144}};
  for (int rows : {256, 512, 1024, 2048, 4096, 8192, 16384}) {
    if (o.quick && rows > 2048) break;
    shapes.push_back({"expert_up", rows, 3584, 6144});
    shapes.push_back({"expert_down", rows, 6144, 1792});
  }
  Json rows = Json::array();
  for (const auto& sh : shapes) {
    Bf16Buffer A(std::size_t(sh.m) * sh.k, 1), B(std::size_t(sh.k) * sh.n, 2),
        C(std::size_t(sh.m) * sh.n, 3);
    const double ms = median_ms(
        s, 3, o.reps, [&] { blas.gemm(s, sh.m, sh.n, sh.k, A.p, B.p, C.p); }, {}, o.lead_us);
    rows.push_back({{"shape", sh.name},
                    {"m", sh.m},
                    {"n", sh.n},
                    {"k", sh.k},
                    {"median_ms", ms},
                    {"TFLOPs", gemm_tflops(sh.m, sh.n, sh.k, ms)}});
    std::printf("gemm %-12s %6d x %5d x %5d  %8.3f ms  %6.1f TFLOP/s\n", sh.name, sh.m, sh.n, sh.k,
                ms, gemm_tflops(sh.m, sh.n, sh.k, ms));
  }
  out["gemm_bf16"] = rows;
  cudaStreamDestroy(s);
}

void bench_grouped(const Options& o, Json& out) {
  cudaStream_t s;
  check(cudaStreamCreate(&s), "stream");
  Blas blas;
  const int groups = o.quick ? 16 : 96;
  GroupedCase gc(groups, 1024, 3584, 6144);
  Json r;
  for (bool dyn : {false, true}) {
    const double ms = median_ms(
        s, 2, o.reps, [&] { gc.launch(dyn, s); }, {}, o.lead_us);
    r[dyn ? "dynamic" : "static"] = {{"median_ms", ms},
                                     {"TFLOPs", gc.flops() / (ms * 1e-3) / 1e12}};
    std::printf("grouped gemm %s: %d experts x 1024 rows, %.3f ms, %.1f TFLOP/s\n",
                dyn ? "dynamic" : "static", groups, ms, gc.flops() / (ms * 1e-3) / 1e12);
  }
  // Correctness: group 0 against cuBLAS, relative Frobenius error (bf16 operands: < 1e-2).
  Bf16Buffer ref(std::size_t(1024) * 3584, 9);
  blas.gemm(s, 1024, 3584, 6144, gc.A.p, gc.B.p, ref.p);
  check(cudaStreamSynchronize(s), "sync");
  std::vector<__nv_bfloat16> a(std::size_t(1024) * 3584), b(a.size());
  check(cudaMemcpy(a.data(), gc.C.p, a.size() * 2, cudaMemcpyDeviceToHost), "copy");
  check(cudaMemcpy(b.data(), ref.p, b.size() * 2, cudaMemcpyDeviceToHost), "copy");
  double num = 0, den = 0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    const double x = __bfloat162float(a[i]), y = __bfloat162float(b[i]);
    num += (x - y) * (x - y);
    den += y * y;
  }
  const double rel = std::sqrt(num / std::max(den, 1e-30));
  r["relative_error_vs_cublas"] = rel;
  std::printf("grouped gemm vs cuBLAS: relative error %.2e (%s)\n", rel,
              rel < 1e-2 ? "ok" : "WRONG");
  if (!(rel < 1e-2)) throw std::runtime_error("grouped GEMM disagrees with cuBLAS");
  out["grouped_gemm"] = r;
  cudaStreamDestroy(s);
}

void bench_contention(const Options& o, Json& out) {
  cudaStream_t hold, work;
  check(cudaStreamCreateWithFlags(&hold, cudaStreamNonBlocking), "stream");
  check(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking), "stream");
  Blas blas;
  GroupedCase gc(o.quick ? 16 : 96, 1024, 3584, 6144);
  Bf16Buffer A(std::size_t(8192) * 6144, 1), B(std::size_t(6144) * 3584, 2),
      C(std::size_t(8192) * 3584, 3);
  struct Kernel {
    const char* name;
    std::function<void()> launch;
  };
  std::vector<Kernel> ks = {{"cublas", [&] { blas.gemm(work, 8192, 3584, 6144, A.p, B.p, C.p); }},
                            {"grouped_static", [&] { gc.launch(false, work); }},
                            {"grouped_dynamic", [&] { gc.launch(true, work); }}};
  Json rows = Json::array();
  for (auto& k : ks) {
    const double alone = median_ms(work, 2, o.reps, k.launch);
    for (int held : {0, 8, 16, 24, 32, 40, 48, 64, 80, 100}) {
      if (o.quick && held % 32 != 0) continue;
      // The holder starts first and outlasts the kernel (3× its time alone): SMs held throughout.
      const long long hold_ns = static_cast<long long>(alone * 3e6);
      const double ms = median_ms(work, 1, o.reps, k.launch, [&] {
        check(cudaStreamSynchronize(hold), "sync");  // the previous holder is gone
        check(kernels::launch_sm_hold(held, hold_ns, hold), "hold");
      });
      check(cudaStreamSynchronize(hold), "sync");
      rows.push_back({{"kernel", k.name},
                      {"held_sms", held},
                      {"median_ms", ms},
                      {"alone_ms", alone},
                      {"slowdown", ms / alone}});
      std::printf("contention %-16s held %3d  %8.3f ms  x%.3f\n", k.name, held, ms, ms / alone);
    }
  }
  out["contention"] = rows;
  cudaStreamDestroy(hold);
  cudaStreamDestroy(work);
}

// 5 (part): a copy over the host link beside a long cuBLAS GEMM on another stream — the GEMM's
// time and the copy's bandwidth alone and together (the engine shares HBM between them).
// Together: the copy is repeated to span the GEMMs; both streams are timed with their own events.
void bench_copy_beside_gemm(const Options& o, Json& out) {
  const int m = 8192, gemms = o.quick ? 8 : 30;
  const std::size_t bytes = (o.quick ? 256ull : 1024ull) << 20;
  Bf16Buffer A(std::size_t(m) * m, 1), B(std::size_t(m) * m, 2), C(std::size_t(m) * m, 3);
  void *dev = nullptr, *host = nullptr;
  check(cudaMalloc(&dev, bytes), "malloc");
  check(cudaMallocHost(&host, bytes), "pinned");
  std::memset(host, 1, bytes);
  cudaStream_t g, c;
  check(cudaStreamCreate(&g), "stream");
  check(cudaStreamCreate(&c), "stream");
  Blas blas;
  auto run_gemms = [&] {
    for (int i = 0; i < gemms; ++i) blas.gemm(g, m, m, m, A.p, B.p, C.p);
  };
  const double gemm_alone = median_ms(g, 1, o.reps, run_gemms);
  Json r{{"gemm", {{"m", m}, {"n", m}, {"k", m}, {"count", gemms}, {"alone_ms", gemm_alone}}}};
  for (const bool h2d : {true, false}) {
    auto copy = [&] {
      check(cudaMemcpyAsync(h2d ? dev : host, h2d ? host : dev, bytes,
                            h2d ? cudaMemcpyHostToDevice : cudaMemcpyDeviceToHost, c),
            "copy");
    };
    const double copy_alone = median_ms(c, 1, o.reps, copy);
    const int copies = std::max(1, static_cast<int>(gemm_alone / copy_alone));
    std::vector<float> gm, cm;
    cudaEvent_t g0, g1, c0, c1;
    for (auto* e : {&g0, &g1, &c0, &c1}) check(cudaEventCreate(e), "event");
    for (int rep = 0; rep < o.reps; ++rep) {
      check(cudaDeviceSynchronize(), "sync");
      check(cudaEventRecord(g0, g), "record");
      check(cudaEventRecord(c0, c), "record");
      run_gemms();
      for (int i = 0; i < copies; ++i) copy();
      check(cudaEventRecord(g1, g), "record");
      check(cudaEventRecord(c1, c), "record");
      check(cudaDeviceSynchronize(), "sync");
      float a = 0, b = 0;
      check(cudaEventElapsedTime(&a, g0, g1), "elapsed");
      check(cudaEventElapsedTime(&b, c0, c1), "elapsed");
      gm.push_back(a);
      cm.push_back(b / static_cast<float>(copies));
    }
    for (auto* e : {g0, g1, c0, c1}) cudaEventDestroy(e);
    std::sort(gm.begin(), gm.end());
    std::sort(cm.begin(), cm.end());
    const double gemm_with = gm[gm.size() / 2], copy_with = cm[cm.size() / 2];
    const char* name = h2d ? "h2d_pinned" : "d2h_pinned";
    r[name] = {{"bytes", bytes},
               {"copies", copies},
               {"alone_GBps", bandwidth_GBps(double(bytes), copy_alone)},
               {"beside_gemm_GBps", bandwidth_GBps(double(bytes), copy_with)},
               {"gemm_beside_copy_ms", gemm_with},
               {"gemm_slowdown", gemm_with / gemm_alone}};
    std::printf(
        "copy %s beside %d GEMMs %d^3: copy %.1f -> %.1f GB/s, GEMMs %.2f -> %.2f ms (x%.3f)\n",
        name, gemms, m, bandwidth_GBps(double(bytes), copy_alone),
        bandwidth_GBps(double(bytes), copy_with), gemm_alone, gemm_with, gemm_with / gemm_alone);
  }
  out["copy_beside_gemm"] = r;
  cudaStreamDestroy(g);
  cudaStreamDestroy(c);
  cudaFreeHost(host);
  cudaFree(dev);
}

}  // namespace twin::calibrate
