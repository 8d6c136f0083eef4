#include "kernels/twin_kernels.cuh"

namespace twin::kernels {

namespace {
constexpr int kBlock = 128;  // values per scale (JOB.md §6.8)
constexpr float kE4M3Max = 448.f;

// One warp per block of 128 values: 4 values per lane, a warp-wide max for the scale.
__global__ void quantize(const __nv_bfloat16* in, __nv_fp8_e4m3* out, float* scales,
                         size_t blocks) {
  const size_t b = (static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
  const int lane = threadIdx.x % 32;
  if (b >= blocks) return;
  float v[4], m = 0.f;
  for (int i = 0; i < 4; ++i) {
    v[i] = __bfloat162float(in[b * kBlock + lane * 4 + i]);
    m = fmaxf(m, fabsf(v[i]));
  }
  for (int o = 16; o > 0; o /= 2) m = fmaxf(m, __shfl_xor_sync(0xffffffffu, m, o));
  const float scale = m > 0.f ? m / kE4M3Max : 1.f;
  for (int i = 0; i < 4; ++i) out[b * kBlock + lane * 4 + i] = __nv_fp8_e4m3(v[i] / scale);
  if (lane == 0) scales[b] = scale;
}

__global__ void dequantize(const __nv_fp8_e4m3* in, const float* scales, __nv_bfloat16* out,
                           size_t n) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x)
    out[i] = __float2bfloat16(static_cast<float>(in[i]) * scales[i / kBlock]);
}

__global__ void sum_fp32(const __nv_bfloat16* slices, int count, size_t n, float* out) {
  for (size_t i = static_cast<size_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n;
       i += static_cast<size_t>(gridDim.x) * blockDim.x) {
    float acc = 0.f;
    for (int j = 0; j < count; ++j) acc += __bfloat162float(slices[static_cast<size_t>(j) * n + i]);
    out[i] = acc;
  }
}

int grid_for(size_t n) {
  return static_cast<int>(std::min<size_t>((n + 255) / 256, 132 * 16));
}
}  // namespace

cudaError_t launch_fp8_quantize(const __nv_bfloat16* in, __nv_fp8_e4m3* out, float* scales,
                                std::size_t n, cudaStream_t s) {
  const size_t blocks = n / kBlock;
  quantize<<<static_cast<unsigned>((blocks * 32 + 255) / 256), 256, 0, s>>>(in, out, scales,
                                                                            blocks);
  return cudaGetLastError();
}

cudaError_t launch_fp8_dequantize(const __nv_fp8_e4m3* in, const float* scales, __nv_bfloat16* out,
                                  std::size_t n, cudaStream_t s) {
  dequantize<<<grid_for(n), 256, 0, s>>>(in, scales, out, n);
  return cudaGetLastError();
}

cudaError_t launch_bf16_sum_fp32(const __nv_bfloat16* slices, int count, std::size_t n, float* out,
                                 cudaStream_t s) {
  sum_fp32<<<grid_for(n), 256, 0, s>>>(slices, count, n, out);
  return cudaGetLastError();
}

}  // namespace twin::kernels
