// The micro-benchmarks of twin-calibrate; each appends its measurements to `out` (JSON).
#pragma once

#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "hardware/profile.hpp"

namespace twin::calibrate {

using Json = nlohmann::ordered_json;

struct Options {
  bool quick = false;  // fewer sizes and repetitions (a smoke run)
  int reps = 10;
  // One GPU's kernels: a GPU sleep of lead_us per timed run ahead of the runs, so that the host's
  // enqueue is not timed (harness.hpp, median_ms); 0 times it too, as before 2026-12-05.
  double lead_us = 100;
  // maxCTAs values of the NCCL benchmark (ncclConfig_t); 0 leaves NCCL's default, so that
  // NCCL_MAX_CTAS in the environment applies.
  std::vector<int> nccl_ctas = {2, 4, 8, 16, 24, 32, 40, 64};
};

void bench_gemm(const Options& o, Json& out);        // 1: cuBLAS bf16 at the model's shapes
void bench_grouped(const Options& o, Json& out);     // 2: our persistent grouped GEMM vs cuBLAS
void bench_contention(const Options& o, Json& out);  // 3: k SMs held beside (1) and (2)
void bench_copies(const Options& o, Json& out);      // 5: H2D/D2H/D2D, pinned and pageable
void bench_copy_beside_gemm(const Options& o, Json& out);   // 5: host copies beside a cuBLAS GEMM
void bench_newton_schulz(const Options& o, Json& out);      // 6: GPU (cuBLAS)
void bench_newton_schulz_cpu(const Options& o, Json& out);  // 6: CPU (Eigen), host SGEMM
void bench_fp8(const Options& o, Json& out);   // 7: FP8 block quantize/dequantize, bf16 sum
void bench_nccl(const Options& o, Json& out);  // 8: collectives, when ≥ 2 GPUs are visible

// Fits the engine's parameters from the measurements: the profile overlay (with sources). The
// GEMM efficiencies need the base profile's fixed cost per kernel and peak (nullopt: not fitted).
Json fit_profile(const Json& measurements, const std::optional<hardware::Profile>& base);

}  // namespace twin::calibrate
