// Device-side readings shared by the calibration kernels: the global nanosecond timer and the
// SM a block runs on.
#pragma once

namespace twin::kernels {

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

}  // namespace twin::kernels
