#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {
constexpr int kHoldSmem = 200 * 1024;  // > half of 228 KiB: one block per SM, no GEMM beside it

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void sm_hold(long long ns) {
  extern __shared__ char smem[];
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(ns);
  while (globaltimer() < end) {
    if (threadIdx.x == 0) smem[0] = 1;  // keep the allocation live
  }
}
}  // namespace

cudaError_t launch_sm_hold(int blocks, long long ns, cudaStream_t s) {
  if (blocks <= 0) return cudaSuccess;
  cudaError_t e = cudaFuncSetAttribute(sm_hold, cudaFuncAttributeMaxDynamicSharedMemorySize, kHoldSmem);
  if (e != cudaSuccess) return e;
  sm_hold<<<blocks, 32, kHoldSmem, s>>>(ns);
  return cudaGetLastError();
}

}  // namespace twin::kernels
