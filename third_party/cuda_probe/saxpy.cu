// A trivial CUDA kernel: proves that nvcc, cudart and the link line work.
#include <cuda_runtime.h>

#include "third_party/cuda_probe/saxpy.h"

namespace rlflow::cuda_probe {
namespace {
__global__ void SaxpyKernel(int n, float a, const float* x, float* y) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) y[i] = a * x[i] + y[i];
}
}  // namespace

int Saxpy(int n, float a, const float* x, float* y) {
  float* dx = nullptr;
  float* dy = nullptr;
  size_t bytes = static_cast<size_t>(n) * sizeof(float);
  cudaError_t err = cudaMalloc(&dx, bytes);
  if (err != cudaSuccess) return static_cast<int>(err);
  err = cudaMalloc(&dy, bytes);
  if (err == cudaSuccess) err = cudaMemcpy(dx, x, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) err = cudaMemcpy(dy, y, bytes, cudaMemcpyHostToDevice);
  if (err == cudaSuccess) {
    SaxpyKernel<<<(n + 255) / 256, 256>>>(n, a, dx, dy);
    err = cudaGetLastError();
  }
  if (err == cudaSuccess) err = cudaMemcpy(y, dy, bytes, cudaMemcpyDeviceToHost);
  cudaFree(dx);
  cudaFree(dy);
  return static_cast<int>(err);
}

int DeviceCount(int* count) {
  *count = 0;
  return static_cast<int>(cudaGetDeviceCount(count));
}
}  // namespace rlflow::cuda_probe
