// A C interface to the kernels for programs outside C++ (calibrate/micro_step.py and
// calibrate/contention_bench.py load it with ctypes and pass PyTorch's stream handles and device
// pointers): each returns the launch's cudaError_t.
#include "kernels/twin_kernels.cuh"

namespace k = twin::kernels;

namespace {
cudaStream_t stream(void* s) {
  return static_cast<cudaStream_t>(s);
}
}  // namespace

extern "C" {

int twin_sm_hold(int blocks, long long ns, void* s) {
  return static_cast<int>(k::launch_sm_hold(blocks, ns, stream(s)));
}

int twin_sm_hold_until(int blocks, int* started, int* smids, const int* stop, long long max_ns,
                       int smem_bytes, void* s) {
  return static_cast<int>(
      k::launch_sm_hold_until(blocks, started, smids, stop, max_ns, smem_bytes, stream(s)));
}

int twin_sm_hold_shaped(int blocks, int* started, int* smids, const int* stop, long long max_ns,
                        int smem_bytes, int threads, int mode, void* s) {
  return static_cast<int>(k::launch_sm_hold_shaped(blocks, started, smids, stop, max_ns, smem_bytes,
                                                   threads, mode, stream(s)));
}

int twin_cluster_probe(int cluster, int ctas, unsigned long long* starts, int* smids,
                       long long spin_ns, int smem_bytes, void* s) {
  return static_cast<int>(
      k::launch_cluster_probe(cluster, ctas, starts, smids, spin_ns, smem_bytes, stream(s)));
}

int twin_tile_schedule_probe(int cluster, int ctas, int tiles, int mode, long long tile_ns,
                             int* counter, unsigned long long* start, unsigned long long* end,
                             int* sm, int smem_bytes, int policy, void* s) {
  return static_cast<int>(k::launch_tile_schedule_probe(
      cluster, ctas, tiles, mode, tile_ns, counter, start, end, sm, smem_bytes, policy, stream(s)));
}

int twin_stamp(unsigned long long* out, void* s) {
  return static_cast<int>(k::launch_stamp(out, stream(s)));
}

int twin_clock_observe(const int* mark, unsigned long long* out, long long max_ns, void* s) {
  return static_cast<int>(k::launch_clock_observe(mark, out, max_ns, stream(s)));
}

int twin_wait_count(const int* counter, int target, long long max_ns, void* s) {
  return static_cast<int>(k::launch_wait_count(counter, target, max_ns, stream(s)));
}

// The project's persistent grouped GEMM (static or dynamic tile lists), `blocks` blocks.
int twin_grouped_gemm(const void* A, const void* B, void* C, const int* row_offset,
                      const int* tile_offset, int groups, int n, int kdim, int* tile_counter,
                      int dynamic, int blocks, void* s) {
  const k::GroupedGemm g{static_cast<const __nv_bfloat16*>(A),
                         static_cast<const __nv_bfloat16*>(B),
                         static_cast<__nv_bfloat16*>(C),
                         row_offset,
                         tile_offset,
                         groups,
                         n,
                         kdim,
                         tile_counter};
  return static_cast<int>(k::launch_grouped_gemm(g, dynamic != 0, blocks, stream(s)));
}

int twin_fp8_quantize(const void* in, void* out, float* scales, size_t n, void* s) {
  return static_cast<int>(k::launch_fp8_quantize(static_cast<const __nv_bfloat16*>(in),
                                                 static_cast<__nv_fp8_e4m3*>(out), scales, n,
                                                 stream(s)));
}

int twin_fp8_dequantize(const void* in, const float* scales, void* out, size_t n, void* s) {
  return static_cast<int>(k::launch_fp8_dequantize(static_cast<const __nv_fp8_e4m3*>(in), scales,
                                                   static_cast<__nv_bfloat16*>(out), n, stream(s)));
}

int twin_bf16_sum_fp32(const void* slices, int count, size_t n, float* out, void* s) {
  return static_cast<int>(
      k::launch_bf16_sum_fp32(static_cast<const __nv_bfloat16*>(slices), count, n, out, stream(s)));
}

}  // extern "C"
