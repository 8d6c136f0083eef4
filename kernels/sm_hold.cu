#include "kernels/device_clock.cuh"
#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {

// The holder, shaped like an NCCL CTA (JOB.md §8: 544–640 threads, 96 registers each,
// ~80 KiB of shared memory): 640 threads kept at 96 live registers each (61,440 of the SM's
// 65,536) and 80 KiB of shared memory, so that whatever can share an SM with an NCCL CTA — in
// practice nothing but the smallest blocks — can share it with the holder. It runs until *stop
// is set or max_ns passes. Measured runs pass `started` and `smids`: each block writes its %smid
// and bumps *started; a block that gives up before *stop adds 1 << 16 to *started (a lost stop
// cannot hang the GPU, and the caller sees it). Without them it is a holder of fixed duration.
//
// How the block waits (Mode): kDozing — every thread loops on the global timer with a 2 µs
// nanosleep while thread 0 polls *stop (the holder of 2026-11-30's measurements; 640 threads
// polling a global load had cut a copy engine's device copy from 4.2 to 1.6 TB/s, and even the
// dozing loop left it at 1.8 TB/s with 124 SMs held); kBarrier — thread 0 alone polls, every
// ~2 µs, and the other 639 threads wait at a barrier, issuing nothing.
constexpr int kHoldThreads = 640, kHoldLiveRegs = 88;
enum Mode { kLight = 0, kDozing = 1, kBarrier = 2 };
template <int LiveRegs, bool Barrier>
__global__ void __launch_bounds__(LiveRegs > 1 ? kHoldThreads : 1024, 1)
    sm_hold_until(int* started, int* smids, const volatile int* stop, long long max_ns) {
  extern __shared__ char smem[];
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(max_ns);
  const int never = 0;
  if (stop == nullptr) stop = &never;
  if (threadIdx.x == 0 && started != nullptr) {
    smids[blockIdx.x] = smid();
    __threadfence();
    atomicAdd(started, 1);
  }
  __shared__ volatile int stop_seen;
  if (threadIdx.x == 0) stop_seen = 0;
  __syncthreads();
  unsigned live[LiveRegs];
#pragma unroll
  for (int i = 0; i < LiveRegs; ++i) live[i] = threadIdx.x * (i + 1);
  if (!Barrier || threadIdx.x == 0) {
    while (!stop_seen && globaltimer() < end) {
      if (threadIdx.x == 0 && *stop != 0) stop_seen = 1;
      __nanosleep(2000);
#pragma unroll
      for (int i = 0; i < LiveRegs; ++i) asm volatile("" : "+r"(live[i]));  // stay in registers
    }
  }
  __syncthreads();
  unsigned sum = 0;
#pragma unroll
  for (int i = 0; i < LiveRegs; ++i) sum += live[i];
  if (sum == 0xFFFFFFFFu) smem[threadIdx.x] = 1;  // never true; keeps live[] and smem used
  if (threadIdx.x == 0 && started != nullptr && *stop == 0) atomicAdd(started, 1 << 16);
}

__global__ void wait_count(const volatile int* counter, int target, long long max_ns) {
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(max_ns);
  while (*counter < target && globaltimer() < end) {
  }
}

__global__ void sleep_ns(long long ns) {
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(ns);
  while (globaltimer() < end) __nanosleep(1000);
}

// Reads the SM clock while a measured stream runs (issue #15's mechanism 2: do fewer busy SMs
// raise the clock?): one thread records (global ns, SM cycles) when *mark turns 1 and again when
// it turns 2, or gives up after max_ns. clock64 counts cycles of the one graphics clock all SMs
// share, so the SM this lands on does not matter; it sleeps between polls and takes one warp.
__global__ void clock_observe(const volatile int* mark, unsigned long long* out, long long max_ns) {
  const unsigned long long end = globaltimer() + static_cast<unsigned long long>(max_ns);
  int seen = 0;
  while (seen < 2 && globaltimer() < end) {
    const int m = *mark;
    if (m > seen) {
      out[2 * (m - 1)] = globaltimer();
      out[2 * (m - 1) + 1] = static_cast<unsigned long long>(clock64());
      seen = m;
    }
    __nanosleep(500);
  }
}

// The most dynamic shared memory a block of `kernel` may opt in to (beside its static shared
// memory), allowed to the kernel.
cudaError_t hold_smem(const void* kernel, int* bytes) {
  int device = 0;
  cudaFuncAttributes attr{};
  cudaError_t e = cudaGetDevice(&device);
  if (e == cudaSuccess)
    e = cudaDeviceGetAttribute(bytes, cudaDevAttrMaxSharedMemoryPerBlockOptin, device);
  if (e == cudaSuccess) e = cudaFuncGetAttributes(&attr, kernel);
  if (e == cudaSuccess) *bytes -= static_cast<int>(attr.sharedSizeBytes);
  if (e == cudaSuccess)
    e = cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, *bytes);
  return e;
}
}  // namespace

cudaError_t launch_sm_hold(int blocks, long long ns, cudaStream_t s) {
  return launch_sm_hold_until(blocks, nullptr, nullptr, nullptr, ns, 0, s);
}

cudaError_t launch_sm_hold_shaped(int blocks, int* started, int* smids, const int* stop,
                                  long long max_ns, int smem_bytes, int threads, int mode,
                                  cudaStream_t s) {
  if (blocks <= 0) return cudaSuccess;
  const void* k =
      mode == kBarrier  ? reinterpret_cast<const void*>(sm_hold_until<kHoldLiveRegs, true>)
      : mode == kDozing ? reinterpret_cast<const void*>(sm_hold_until<kHoldLiveRegs, false>)
                        : reinterpret_cast<const void*>(sm_hold_until<1, false>);
  int most = 0;
  cudaError_t e = hold_smem(k, &most);
  if (e != cudaSuccess) return e;
  const int smem = smem_bytes > 0 && smem_bytes < most ? smem_bytes : most;
  if (mode == kBarrier)
    sm_hold_until<kHoldLiveRegs, true><<<blocks, threads, smem, s>>>(started, smids, stop, max_ns);
  else if (mode == kDozing)
    sm_hold_until<kHoldLiveRegs, false><<<blocks, threads, smem, s>>>(started, smids, stop, max_ns);
  else
    sm_hold_until<1, false><<<blocks, threads, smem, s>>>(started, smids, stop, max_ns);
  return cudaGetLastError();
}

cudaError_t launch_sm_hold_until(int blocks, int* started, int* smids, const int* stop,
                                 long long max_ns, int smem_bytes, cudaStream_t s) {
  return launch_sm_hold_shaped(blocks, started, smids, stop, max_ns,
                               smem_bytes > 0 ? smem_bytes : 80 * 1024, kHoldThreads, kBarrier, s);
}

cudaError_t launch_clock_observe(const int* mark, unsigned long long* out, long long max_ns,
                                 cudaStream_t s) {
  clock_observe<<<1, 32, 0, s>>>(mark, out, max_ns);
  return cudaGetLastError();
}

cudaError_t launch_wait_count(const int* counter, int target, long long max_ns, cudaStream_t s) {
  wait_count<<<1, 1, 0, s>>>(counter, target, max_ns);
  return cudaGetLastError();
}

cudaError_t launch_gpu_sleep(long long ns, cudaStream_t s) {
  sleep_ns<<<1, 1, 0, s>>>(ns);
  return cudaGetLastError();
}

}  // namespace twin::kernels
