#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {
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
// *stop is set (or max_ns passes, so that a lost stop cannot hang the GPU; a block that gives up
// adds 1 << 16 to *started, so the caller sees it).
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
  if (threadIdx.x == 0 && *stop == 0) atomicAdd(started, 1 << 16);
}

__global__ void wait_count(const volatile int* counter, int target, long long max_ns) {
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(max_ns);
  while (*counter < target && globaltimer() < end) {
  }
}

// All the shared memory a block may have: with the 1 KiB the SM reserves per block, nothing is
// left for a second block of any kernel — even one without shared memory (an elementwise kernel
// fits beside a 200 KiB holder). SPEC.md §8: an NCCL CTA fills its SM.
cudaError_t hold_smem(const void* kernel, int* bytes) {
  int device = 0;
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess) e = cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, *bytes);
  return e;
}
}  // namespace

cudaError_t launch_sm_hold(int blocks, long long ns, cudaStream_t s) {
  if (blocks <= 0) return cudaSuccess;
  int smem = 0;
  cudaError_t e = hold_smem(reinterpret_cast<const void*>(sm_hold), &smem);
  if (e != cudaSuccess) return e;
  sm_hold<<<blocks, 32, smem, s>>>(ns);
  return cudaGetLastError();
}

cudaError_t launch_sm_hold_until(int blocks, int* started, int* smids, const int* stop,
                                 long long max_ns, int smem_bytes, cudaStream_t s) {
  if (blocks <= 0) return cudaSuccess;
  int smem = 0;
  cudaError_t e = hold_smem(reinterpret_cast<const void*>(sm_hold_until), &smem);
  if (e != cudaSuccess) return e;
  if (smem_bytes > 0 && smem_bytes < smem) smem = smem_bytes;
  sm_hold_until<<<blocks, 32, smem, s>>>(started, smids, stop, max_ns);
  return cudaGetLastError();
}

cudaError_t launch_wait_count(const int* counter, int target, long long max_ns, cudaStream_t s) {
  wait_count<<<1, 1, 0, s>>>(counter, target, max_ns);
  return cudaGetLastError();
}

}  // namespace twin::kernels
