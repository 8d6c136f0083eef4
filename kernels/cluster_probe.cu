// How many CTAs of a kernel launched in thread-block clusters of c SMs run at once beside SMs
// held by other kernels (issue #15, contention.hpp mechanism 1): a cluster needs c free SMs inside
// one GPC, so SMs held across the GPCs strand some free ones. Measured rather than fitted.
#include "kernels/device_clock.cuh"
#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {

// Each CTA (one per SM: its shared memory leaves no room for a second, nor beside a holder)
// writes its start time and %smid, then stays `spin_ns`: the CTAs that start within the first
// half of that span are the ones that ran at once.
__global__ void cluster_probe(unsigned long long* starts, int* smids, long long spin_ns) {
  extern __shared__ char smem[];
  if (threadIdx.x != 0) return;
  const unsigned long long t0 = globaltimer();
  starts[blockIdx.x] = t0;
  smids[blockIdx.x] = smid();
  smem[0] = 1;
  while (globaltimer() < t0 + static_cast<unsigned long long>(spin_ns)) {
  }
}
// A persistent kernel's tile schedule made visible (issue #15: where cuBLAS's late clusters go):
// each CTA takes tiles as `mode` says — 0 static lists (CTA j: tiles j, j + grid, …), 1 a shared
// counter, 2 its first tile j fixed and the rest from the counter, 3 static lists numbered from
// the last CTA (CTA j: grid − 1 − j, …: the longer lists on the last CTAs) — and "runs" each for
// `tile_ns` (thread 0 spinning on %globaltimer), recording the tile's start, end and SM.
__global__ void tile_schedule_probe(int tiles, int mode, long long tile_ns, int* counter,
                                    unsigned long long* start, unsigned long long* end, int* sm) {
  extern __shared__ char smem[];
  if (threadIdx.x != 0) return;
  smem[0] = 1;
  const int grid = static_cast<int>(gridDim.x), me = static_cast<int>(blockIdx.x);
  for (int j = 0;; ++j) {
    int t = (mode == 3 ? grid - 1 - me : me) + j * grid;
    if (mode == 1 || (mode == 2 && j > 0)) t = atomicAdd(counter, 1) + (mode == 2 ? grid : 0);
    if (t >= tiles) return;
    const unsigned long long t0 = globaltimer();
    while (globaltimer() < t0 + static_cast<unsigned long long>(tile_ns)) {
    }
    start[t] = t0;
    end[t] = globaltimer();
    sm[t] = smid();
  }
}

// One thread writes the global time to *out: a time stamp in stream order.
__global__ void stamp(unsigned long long* out) {
  *out = globaltimer();
}

// attr: room for two attributes (the cluster's size; its scheduling policy when policy ≥ 0:
// cudaClusterSchedulingPolicy default 0, spread 1, load-balancing 2).
cudaLaunchConfig_t cluster_config(int cluster, int ctas, int smem_bytes, cudaStream_t s,
                                  cudaLaunchAttribute* attr, int policy = -1) {
  cudaLaunchConfig_t cfg{};
  cfg.gridDim = dim3(static_cast<unsigned>(ctas / cluster * cluster));
  cfg.blockDim = dim3(32);
  cfg.dynamicSmemBytes = static_cast<std::size_t>(smem_bytes);
  cfg.stream = s;
  attr->id = cudaLaunchAttributeClusterDimension;
  attr->val.clusterDim.x = static_cast<unsigned>(cluster);
  attr->val.clusterDim.y = 1;
  attr->val.clusterDim.z = 1;
  cfg.attrs = attr;
  cfg.numAttrs = 1;
  if (policy >= 0) {
    attr[1].id = cudaLaunchAttributeClusterSchedulingPolicyPreference;
    attr[1].val.clusterSchedulingPolicyPreference =
        static_cast<cudaClusterSchedulingPolicy>(policy);
    cfg.numAttrs = 2;
  }
  return cfg;
}
}  // namespace

cudaError_t launch_tile_schedule_probe(int cluster, int ctas, int tiles, int mode,
                                       long long tile_ns, int* counter, unsigned long long* start,
                                       unsigned long long* end, int* sm, int smem_bytes, int policy,
                                       cudaStream_t s) {
  cudaError_t e = cudaFuncSetAttribute(tile_schedule_probe,
                                       cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attr[2]{};
  const auto cfg = cluster_config(cluster, ctas, smem_bytes, s, attr, policy);
  return cudaLaunchKernelEx(&cfg, tile_schedule_probe, tiles, mode, tile_ns, counter, start, end,
                            sm);
}

cudaError_t launch_cluster_probe(int cluster, int ctas, unsigned long long* starts, int* smids,
                                 long long spin_ns, int smem_bytes, cudaStream_t s) {
  cudaError_t e =
      cudaFuncSetAttribute(cluster_probe, cudaFuncAttributeMaxDynamicSharedMemorySize, smem_bytes);
  if (e == cudaSuccess && cluster > 8)
    e = cudaFuncSetAttribute(cluster_probe, cudaFuncAttributeNonPortableClusterSizeAllowed, 1);
  if (e != cudaSuccess) return e;
  cudaLaunchAttribute attr[2]{};
  const auto cfg = cluster_config(cluster, ctas, smem_bytes, s, attr);
  return cudaLaunchKernelEx(&cfg, cluster_probe, starts, smids, spin_ns);
}

cudaError_t launch_stamp(unsigned long long* out, cudaStream_t s) {
  stamp<<<1, 1, 0, s>>>(out);
  return cudaGetLastError();
}

}  // namespace twin::kernels
