// Micro-benchmark 8: NCCL collectives over sizes and maxCTAs (ncclConfig_t), one process driving
// every visible GPU (ncclCommInitRankConfig in a group); a GEMM's slowdown beside a collective per
// CTA count; the bf16 all-to-all + fp32 local sum against an fp32 reduce-scatter. With fewer
// than two GPUs it says so and skips.
#include <cublas_v2.h>
#include <cuda_bf16.h>

#include <cmath>
#include <cstdio>
#include <vector>

#include "calibrate/benches.hpp"
#include "calibrate/grouped_case.hpp"
#include "calibrate/harness.hpp"
#include "hardware/nccl_tests.hpp"
#include "kernels/twin_kernels.cuh"

#ifdef TWIN_HAVE_NCCL
#include <nccl.h>
#endif

namespace twin::calibrate {

#ifdef TWIN_HAVE_NCCL
namespace {

void nccl_check(ncclResult_t r, const char* what) {
  if (r != ncclSuccess) throw std::runtime_error(std::string(what) + ": " + ncclGetErrorString(r));
}

struct Comms {
  std::vector<ncclComm_t> comms;
  std::vector<cudaStream_t> streams;
  Comms(int devices, int max_ctas) : comms(devices), streams(devices) {
    ncclUniqueId id;
    nccl_check(ncclGetUniqueId(&id), "unique id");
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    if (max_ctas > 0) {  // 0: leave NCCL's default (or NCCL_MAX_CTAS from the environment)
      cfg.maxCTAs = max_ctas;
      cfg.minCTAs = 1;
    }
    nccl_check(ncclGroupStart(), "group");
    for (int d = 0; d < devices; ++d) {
      check(cudaSetDevice(d), "set device");
      nccl_check(ncclCommInitRankConfig(&comms[d], devices, id, d, &cfg), "init");
    }
    nccl_check(ncclGroupEnd(), "group");
    for (int d = 0; d < devices; ++d) {
      check(cudaSetDevice(d), "set device");
      check(cudaStreamCreateWithFlags(&streams[d], cudaStreamNonBlocking), "stream");
    }
    check(cudaSetDevice(0), "set device");
  }
  ~Comms() {
    for (auto c : comms) ncclCommDestroy(c);
    for (auto s : streams) cudaStreamDestroy(s);
  }
  int n() const { return static_cast<int>(comms.size()); }
};

// Per-GPU send and receive buffers of `bytes` each.
struct Buffers {
  std::vector<void*> send, recv;
  Buffers(int devices, std::size_t bytes) : send(devices), recv(devices) {
    for (int d = 0; d < devices; ++d) {
      check(cudaSetDevice(d), "set device");
      check(cudaMalloc(&send[d], bytes), "malloc");
      check(cudaMalloc(&recv[d], bytes), "malloc");
      check(cudaMemset(send[d], 0x3c, bytes), "memset");
    }
    check(cudaSetDevice(0), "set device");
  }
  ~Buffers() {
    for (auto p : send) cudaFree(p);
    for (auto p : recv) cudaFree(p);
  }
};

using Coll = hardware::CollKind;

// One collective over `bytes` (the full buffer: gathered size for all-gather and
// reduce-scatter, send buffer for all-to-all), bf16 elements (all-to-all: bytes).
void issue(Comms& c, Buffers& b, Coll kind, std::size_t bytes, ncclDataType_t type = ncclBfloat16) {
  const int n = c.n();
  const std::size_t elem = type == ncclFloat32 ? 4 : 2, count = bytes / elem, part = count / n;
  nccl_check(ncclGroupStart(), "group");
  for (int d = 0; d < n; ++d) {
    char* s = static_cast<char*>(b.send[d]);
    char* r = static_cast<char*>(b.recv[d]);
    switch (kind) {
      case Coll::all_gather:
        nccl_check(ncclAllGather(s + d * part * elem, r, part, type, c.comms[d], c.streams[d]),
                   "ag");
        break;
      case Coll::reduce_scatter:
        nccl_check(ncclReduceScatter(s, r, part, type, ncclSum, c.comms[d], c.streams[d]), "rs");
        break;
      case Coll::all_reduce:
        nccl_check(ncclAllReduce(s, r, count, type, ncclSum, c.comms[d], c.streams[d]), "ar");
        break;
      case Coll::all_to_all:
        for (int p = 0; p < n; ++p) {
          nccl_check(
              ncclSend(s + p * part * elem, part * elem, ncclInt8, p, c.comms[d], c.streams[d]),
              "send");
          nccl_check(
              ncclRecv(r + p * part * elem, part * elem, ncclInt8, p, c.comms[d], c.streams[d]),
              "recv");
        }
        break;
    }
  }
  nccl_check(ncclGroupEnd(), "group");
}

void sync_all(Comms& c) {
  for (int d = 0; d < c.n(); ++d) {
    check(cudaSetDevice(d), "set device");
    check(cudaStreamSynchronize(c.streams[d]), "sync");
  }
  check(cudaSetDevice(0), "set device");
}

// Time of `reps` collectives, median, on GPU 0's stream after all GPUs finished each.
double time_coll(Comms& c, Buffers& b, Coll kind, std::size_t bytes, int reps) {
  return median_ms(c.streams[0], 2, reps, [&] {
    issue(c, b, kind, bytes);
    for (int d = 1; d < c.n(); ++d) {
      check(cudaSetDevice(d), "set device");
      check(cudaStreamSynchronize(c.streams[d]), "sync");
    }
    check(cudaSetDevice(0), "set device");
  });
}

// Every collective at every size with `ctas` CTAs: one row each (nccl-tests' bus bandwidth).
void collective_rows(Comms& c, Buffers& buf, const std::vector<std::size_t>& sizes, int reps,
                     int ctas, Json& rows) {
  for (Coll kind : {Coll::all_gather, Coll::reduce_scatter, Coll::all_reduce, Coll::all_to_all})
    for (std::size_t bytes : sizes) {
      const double ms = time_coll(c, buf, kind, bytes, reps);
      const double bus = bandwidth_GBps(double(bytes), ms) * hardware::bus_factor(kind, c.n());
      rows.push_back({{"collective", sim::name_of(kind, hardware::kCollKindNames)},
                      {"max_ctas", ctas},
                      {"bytes", bytes},
                      {"median_ms", ms},
                      {"busbw_GBps", bus}});
      std::printf("nccl %-14s maxCTAs %2d %11zu B %9.3f ms busbw %7.1f GB/s\n",
                  sim::name_of(kind, hardware::kCollKindNames), ctas, bytes, ms, bus);
    }
}

// A compute kernel of GPU 0 for the contention curve, and its median time alone.
struct Work {
  const char* name;
  std::function<void()> launch;
  double alone_ms;
};

// The kernel's median time on GPU 0's `work` stream while all-gathers of `bytes` run back to back
// on every GPU (enough of them to outlast it).
double beside_all_gathers(Comms& c, Buffers& buf, std::size_t bytes, cudaStream_t work, int reps,
                          const Work& w) {
  const int loops = std::max(3, static_cast<int>(3 * w.alone_ms / 8.0) + 3);
  sync_all(c);
  const double with = median_ms(work, 1, reps, w.launch, [&] {
    sync_all(c);
    for (int i = 0; i < loops; ++i) issue(c, buf, Coll::all_gather, bytes);
  });
  sync_all(c);
  return with;
}

// Each GPU's gradient: bf16 in the first half of `send`, its fp32 copy (for the reduce-scatter)
// in `recv`.
void fill_gradients(Buffers& g, std::size_t count) {
  for (int d = 0; d < static_cast<int>(g.send.size()); ++d) {
    check(cudaSetDevice(d), "set device");
    std::vector<__nv_bfloat16> h(count);
    std::vector<float> f(count);
    for (std::size_t i = 0; i < count; ++i) {
      h[i] = __float2bfloat16(std::sin(0.37 * double(i) + d) * 1e-3);
      f[i] = __bfloat162float(h[i]);
    }
    check(cudaMemcpy(g.send[d], h.data(), count * 2, cudaMemcpyHostToDevice), "copy");
    check(cudaMemcpy(g.recv[d], f.data(), count * 4, cudaMemcpyHostToDevice), "copy");
  }
  check(cudaSetDevice(0), "set device");
}

// ‖x − y‖ / ‖x‖ over n floats of GPU 0, and ‖x‖² (a zero reference proves nothing).
std::pair<double, double> relative_difference(const float* x_dev, const float* y_dev,
                                              std::size_t n) {
  std::vector<float> x(n), y(n);
  check(cudaMemcpy(x.data(), x_dev, n * 4, cudaMemcpyDeviceToHost), "copy");
  check(cudaMemcpy(y.data(), y_dev, n * 4, cudaMemcpyDeviceToHost), "copy");
  double num = 0, den = 0;
  for (std::size_t i = 0; i < n; ++i)
    num += (x[i] - y[i]) * double(x[i] - y[i]), den += double(x[i]) * x[i];
  return {std::sqrt(num / std::max(den, 1e-300)), den};
}

// bf16 all-to-all + local fp32 sum against an fp32 reduce-scatter of the same gradient (rung 9):
// both timed, and the sums compared (they must agree to fp32 rounding).
Json gradient_reduction(int devices, const Options& o) {
  Comms c(devices, 64);
  const std::size_t count = (o.quick ? 16u : 256u) << 20;  // gradient elements per GPU
  Buffers g(devices, count * 4);
  fill_gradients(g, count);
  std::vector<float*> sums(devices);
  for (int d = 0; d < devices; ++d) {
    check(cudaSetDevice(d), "set device");
    check(cudaMalloc(&sums[d], count / devices * 4), "malloc");
  }
  check(cudaSetDevice(0), "set device");
  Buffers scratch(devices, count * 4);
  const std::size_t part = count / devices;
  auto rs = [&] {
    nccl_check(ncclGroupStart(), "group");
    for (int d = 0; d < devices; ++d)
      nccl_check(ncclReduceScatter(g.recv[d], scratch.recv[d], part, ncclFloat32, ncclSum,
                                   c.comms[d], c.streams[d]),
                 "rs");
    nccl_check(ncclGroupEnd(), "group");
  };
  auto a2a_sum = [&] {
    nccl_check(ncclGroupStart(), "group");
    for (int d = 0; d < devices; ++d)
      for (int p = 0; p < devices; ++p) {
        nccl_check(ncclSend(static_cast<char*>(g.send[d]) + p * part * 2, part * 2, ncclInt8, p,
                            c.comms[d], c.streams[d]),
                   "send");
        nccl_check(ncclRecv(static_cast<char*>(scratch.send[d]) + p * part * 2, part * 2, ncclInt8,
                            p, c.comms[d], c.streams[d]),
                   "recv");
      }
    nccl_check(ncclGroupEnd(), "group");
    for (int d = 0; d < devices; ++d) {
      check(cudaSetDevice(d), "set device");
      check(kernels::launch_bf16_sum_fp32(static_cast<__nv_bfloat16*>(scratch.send[d]), devices,
                                          part, sums[d], c.streams[d]),
            "sum");
    }
    check(cudaSetDevice(0), "set device");
  };
  auto timed = [&](const std::function<void()>& f) {
    return median_ms(c.streams[0], 2, o.reps, [&] {
      f();
      sync_all(c);
    });
  };
  const double rs_ms = timed(rs), a2a_ms = timed(a2a_sum);
  sync_all(c);
  const auto [rel, den] =
      relative_difference(static_cast<const float*>(scratch.recv[0]), sums[0], part);
  const Json grad = {
      {"elements_per_gpu", count},
      {"fp32_reduce_scatter",
       {{"bytes_sent_per_gpu", count * 4.0 * (devices - 1) / devices}, {"median_ms", rs_ms}}},
      {"bf16_all_to_all_fp32_sum",
       {{"bytes_sent_per_gpu", count * 2.0 * (devices - 1) / devices}, {"median_ms", a2a_ms}}},
      {"relative_difference", rel},
      {"nonzero_reference", den > 0}};
  std::printf(
      "gradients: fp32 reduce-scatter %.3f ms, bf16 all-to-all + fp32 sum %.3f ms, relative "
      "difference %.2e\n",
      rs_ms, a2a_ms, rel);
  for (auto p : sums) cudaFree(p);
  if (!(den > 0) || !(rel < 1e-6))
    throw std::runtime_error("bf16 all-to-all sum disagrees with the fp32 reduce-scatter");
  return grad;
}

}  // namespace
#endif

void bench_nccl(const Options& o, Json& out) {
  int devices = 0;
  check(cudaGetDeviceCount(&devices), "device count");
  if (devices < 2) {
    std::printf("nccl: skipped: %d GPU visible; collectives need at least 2\n", devices);
    out["nccl"] = {{"skipped", "fewer than 2 GPUs visible"}, {"gpus", devices}};
    return;
  }
#ifndef TWIN_HAVE_NCCL
  std::printf("nccl: skipped: twin-calibrate was built without NCCL\n");
  out["nccl"] = {{"skipped", "built without NCCL"}};
#else
  int version = 0;
  ncclGetVersion(&version);
  std::vector<std::size_t> sizes = {std::size_t(1) << 20, std::size_t(16) << 20,
                                    std::size_t(256) << 20, std::size_t(1) << 30,
                                    std::size_t(4) << 30};
  if (o.quick) sizes = {std::size_t(1) << 20, std::size_t(64) << 20};
  const std::size_t max_bytes = sizes.back();
  Json rows = Json::array(), contention = Json::array();
  // The GEMMs of the contention curve, on GPU 0.
  cublasHandle_t blas;
  if (cublasCreate(&blas) != CUBLAS_STATUS_SUCCESS) throw std::runtime_error("cublasCreate");
  cudaStream_t work;
  check(cudaStreamCreateWithFlags(&work, cudaStreamNonBlocking), "stream");
  cublasSetStream(blas, work);
  __nv_bfloat16 *A, *B, *C;
  check(cudaMalloc(&A, std::size_t(8192) * 6144 * 2), "malloc");
  check(cudaMalloc(&B, std::size_t(6144) * 3584 * 2), "malloc");
  check(cudaMalloc(&C, std::size_t(8192) * 3584 * 2), "malloc");
  check(cudaMemset(A, 0x3c, std::size_t(8192) * 6144 * 2), "memset");
  check(cudaMemset(B, 0x3c, std::size_t(6144) * 3584 * 2), "memset");
  const float one = 1, zero = 0;
  auto gemm = [&] {
    cublasGemmEx(blas, CUBLAS_OP_N, CUBLAS_OP_N, 3584, 8192, 6144, &one, B, CUDA_R_16BF, 3584, A,
                 CUDA_R_16BF, 6144, &zero, C, CUDA_R_16BF, 3584, CUBLAS_COMPUTE_32F,
                 CUBLAS_GEMM_DEFAULT);
  };
  // 4 experts (~6 ms alone): shorter than one 4 GiB all-gather (≥ 10 ms), so the collective holds
  // its SMs across the whole GEMM, as the expert all-gather does in the real step (JOB.md §6.5).
  GroupedCase grouped(4, 1024, 3584, 6144);
  std::vector<Work> works = {{"cublas", gemm, 0},
                             {"grouped_static", [&] { grouped.launch(false, work); }, 0},
                             {"grouped_dynamic", [&] { grouped.launch(true, work); }, 0}};
  for (auto& w : works) w.alone_ms = median_ms(work, 3, o.reps, w.launch);
  Buffers buf(devices, max_bytes);
  for (int ctas : o.nccl_ctas) {
    Comms c(devices, ctas);
    collective_rows(c, buf, sizes, o.reps, ctas, rows);
    for (const auto& w : works) {
      const double with = beside_all_gathers(c, buf, max_bytes, work, o.reps, w);
      contention.push_back({{"kernel", w.name},
                            {"max_ctas", ctas},
                            {"alone_ms", w.alone_ms},
                            {"beside_allgather_ms", with},
                            {"slowdown", with / w.alone_ms}});
      std::printf("nccl contention: %-16s beside all-gather, maxCTAs %2d: x%.3f\n", w.name, ctas,
                  with / w.alone_ms);
    }
  }
  const Json grad = gradient_reduction(devices, o);
  cudaFree(A);
  cudaFree(B);
  cudaFree(C);
  cudaStreamDestroy(work);
  cublasDestroy(blas);
  out["nccl"] = {{"version", version},
                 {"gpus", devices},
                 {"results", rows},
                 {"gemm_contention", contention},
                 {"gradient_reduction", grad}};
#endif
}

}  // namespace twin::calibrate
