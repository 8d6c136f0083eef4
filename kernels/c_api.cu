// A C interface to the kernels for programs outside C++ (calibrate/micro_step.py loads it with
// ctypes and passes PyTorch's stream handles): returns the launch's cudaError_t.
#include "kernels/twin_kernels.cuh"

extern "C" int twin_sm_hold(int blocks, long long ns, void* stream) {
  return static_cast<int>(twin::kernels::launch_sm_hold(blocks, ns, static_cast<cudaStream_t>(stream)));
}
