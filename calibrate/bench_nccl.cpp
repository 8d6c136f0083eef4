// Micro-benchmark 8: NCCL collectives over sizes and maxCTAs (ncclConfig_t), one process
// driving every visible GPU (ncclCommInitAll). With fewer than two GPUs it says so and skips.
#include <cstdio>
#include <vector>

#include "calibrate/benches.hpp"
#include "calibrate/harness.hpp"

#ifdef TWIN_HAVE_NCCL
#include <nccl.h>
#endif

namespace twin::calibrate {

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
  Json rows = Json::array();
  for (int ctas : {2, 4, 8, 16, 24, 32, 40, 64}) {
    if (o.quick && ctas != 16) continue;
    std::vector<ncclComm_t> comms(devices);
    ncclConfig_t cfg = NCCL_CONFIG_INITIALIZER;
    cfg.maxCTAs = ctas;
    cfg.minCTAs = 1;
    ncclUniqueId id;
    ncclGetUniqueId(&id);
    ncclGroupStart();
    for (int d = 0; d < devices; ++d) {
      check(cudaSetDevice(d), "set device");
      ncclCommInitRankConfig(&comms[d], devices, id, d, &cfg);
    }
    ncclGroupEnd();
    for (std::size_t bytes : {std::size_t(1) << 20, std::size_t(64) << 20, std::size_t(1) << 30}) {
      std::vector<void*> buf(devices);
      std::vector<cudaStream_t> st(devices);
      for (int d = 0; d < devices; ++d) {
        check(cudaSetDevice(d), "set device");
        check(cudaMalloc(&buf[d], bytes), "malloc");
        check(cudaStreamCreate(&st[d]), "stream");
      }
      auto run = [&] {
        ncclGroupStart();
        for (int d = 0; d < devices; ++d)
          ncclAllGather(static_cast<char*>(buf[d]) + d * (bytes / devices), buf[d], bytes / devices,
                        ncclInt8, comms[d], st[d]);
        ncclGroupEnd();
      };
      check(cudaSetDevice(0), "set device");
      const double ms = median_ms(st[0], 2, o.reps, [&] {
        run();
        for (int d = 1; d < devices; ++d) cudaStreamSynchronize(st[d]);
      });
      const double busbw = bandwidth_GBps(double(bytes), ms) * (devices - 1) / devices;
      rows.push_back({{"collective", "all_gather"}, {"max_ctas", ctas}, {"bytes", bytes},
                      {"median_ms", ms}, {"busbw_GBps", busbw}});
      std::printf("nccl all_gather maxCTAs %2d %10zu B %8.3f ms busbw %7.1f GB/s\n", ctas, bytes, ms, busbw);
      for (int d = 0; d < devices; ++d) cudaFree(buf[d]), cudaStreamDestroy(st[d]);
    }
    for (auto c : comms) ncclCommDestroy(c);
  }
  out["nccl"] = {{"version", version}, {"gpus", devices}, {"results", rows}};
#endif
}

}  // namespace twin::calibrate
