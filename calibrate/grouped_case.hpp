// Inputs of the GEMM benchmarks: random bf16 device buffers and a grouped-GEMM case (experts
// with equal rows), shared by the contention measurements with and without NCCL.
#pragma once

#include <cuda_bf16.h>

#include <algorithm>
#include <vector>

#include "calibrate/harness.hpp"
#include "kernels/twin_kernels.cuh"

namespace twin::calibrate {

// Device buffer of bf16 filled with small random values (never zeros: METHOD.md).
struct Bf16Buffer {
  __nv_bfloat16* p = nullptr;
  std::size_t n = 0;
  explicit Bf16Buffer(std::size_t count, unsigned seed = 1) : n(count) {
    check(cudaMalloc(&p, n * sizeof(__nv_bfloat16)), "cudaMalloc");
    std::vector<__nv_bfloat16> h(std::min<std::size_t>(n, 1 << 20));
    unsigned x = seed * 2654435761u + 1;
    for (auto& v : h) {
      x = x * 1664525u + 1013904223u;
      v = __float2bfloat16((static_cast<float>(x >> 8) / 16777216.f - 0.5f) * 0.1f);
    }
    for (std::size_t off = 0; off < n; off += h.size())
      check(cudaMemcpy(p + off, h.data(), std::min(h.size(), n - off) * sizeof(__nv_bfloat16),
                       cudaMemcpyHostToDevice),
            "fill");
  }
  ~Bf16Buffer() { cudaFree(p); }
  Bf16Buffer(const Bf16Buffer&) = delete;
};

// 96 experts with `rows` tokens each; our grouped GEMM's inputs.
struct GroupedCase {
  int groups, rows, n, k;
  Bf16Buffer A, B, C;
  int *row_offset = nullptr, *tile_offset = nullptr, *counter = nullptr;
  GroupedCase(int g, int r, int n_, int k_)
      : groups(g),
        rows(r),
        n(n_),
        k(k_),
        A(std::size_t(g) * r * k_, 3),
        B(std::size_t(g) * k_ * n_, 4),
        C(std::size_t(g) * r * n_, 5) {
    std::vector<int> ro(g + 1), to(g + 1);
    const int tiles = ((r + kernels::kTileM - 1) / kernels::kTileM) *
                      ((n_ + kernels::kTileN - 1) / kernels::kTileN);
    for (int i = 0; i <= g; ++i) ro[i] = i * r, to[i] = i * tiles;
    check(cudaMalloc(&row_offset, ro.size() * sizeof(int)), "malloc");
    check(cudaMalloc(&tile_offset, to.size() * sizeof(int)), "malloc");
    check(cudaMalloc(&counter, sizeof(int)), "malloc");
    check(cudaMemcpy(row_offset, ro.data(), ro.size() * sizeof(int), cudaMemcpyHostToDevice),
          "copy");
    check(cudaMemcpy(tile_offset, to.data(), to.size() * sizeof(int), cudaMemcpyHostToDevice),
          "copy");
  }
  ~GroupedCase() {
    cudaFree(row_offset);
    cudaFree(tile_offset);
    cudaFree(counter);
  }
  void launch(bool dynamic, cudaStream_t s) {
    check(cudaMemsetAsync(counter, 0, sizeof(int), s), "memset");
    kernels::GroupedGemm g{A.p, B.p, C.p, row_offset, tile_offset, groups, n, k, counter};
    check(kernels::launch_grouped_gemm(g, dynamic, 132, s), "grouped gemm");
  }
  double flops() const { return 2.0 * groups * rows * double(n) * k; }
};

}  // namespace twin::calibrate
