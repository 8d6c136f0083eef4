#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {
constexpr int kHoldSmem = 200 * 1024;  // > half of 228 KiB: one block per SM, no GEMM beside it

__device__ __forceinline__ unsigned long long globaltimer() {
  unsigned long long t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__device__ __forceinline__ int smid() {
  int id;
  asm volatile("mov.u32 %0, %%smid;" : "=r"(id));
  return id;
}

__global__ void sm_hold(long long ns) {
  extern __shared__ char smem[];
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(ns);
  while (globaltimer() < end) {
    if (threadIdx.x == 0) smem[0] = 1;  // keep the allocation live
  }
}

// The measured holder: each block says where it runs and that it started, then spins until
// *stop is set (or max_ns passes, so that a lost stop cannot hang the GPU).
__global__ void sm_hold_until(int* started, int* smids, const volatile int* stop, long long max_ns) {
  extern __shared__ char smem[];
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(max_ns);
  if (threadIdx.x == 0) {
    smids[blockIdx.x] = smid();
    __threadfence();
    atomicAdd(started, 1);
  }
  while (*stop == 0 && globaltimer() < end) {
    if (threadIdx.x == 0) smem[0] = 1;
  }
}

__global__ void wait_count(const volatile int* counter, int target, long long max_ns) {
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(max_ns);
  while (*counter < target && globaltimer() < end) {
  }
}

cudaError_t allow_hold_smem(const void* kernel) {
  return cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, kHoldSmem);
}
}  // namespace

cudaError_t launch_sm_hold(int blocks, long long ns, cudaStream_t s) {
  if (blocks <= 0) return cudaSuccess;
  cudaError_t e = allow_hold_smem(reinterpret_cast<const void*>(sm_hold));
  if (e != cudaSuccess) return e;
  sm_hold<<<blocks, 32, kHoldSmem, s>>>(ns);
  return cudaGetLastError();
}

cudaError_t launch_sm_hold_until(int blocks, int* started, int* smids, const int* stop,
                                 long long max_ns, cudaStream_t s) {
  if (blocks <= 0) return cudaSuccess;
  cudaError_t e = allow_hold_smem(reinterpret_cast<const void*>(sm_hold_until));
  if (e != cudaSuccess) return e;
  sm_hold_until<<<blocks, 32, kHoldSmem, s>>>(started, smids, stop, max_ns);
  return cudaGetLastError();
}

cudaError_t launch_wait_count(const int* counter, int target, long long max_ns, cudaStream_t s) {
  wait_count<<<1, 1, 0, s>>>(counter, target, max_ns);
  return cudaGetLastError();
}

}  // namespace twin::kernels
