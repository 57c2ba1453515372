#pragma once

namespace rlflow::cuda_probe {
// y = a * x + y on the first CUDA device. Returns the cudaError_t value
// (0 on success; e.g. 35 or 100 when there is no driver or no device).
int Saxpy(int n, float a, const float* x, float* y);
// Number of CUDA devices, returns the cudaError_t value.
int DeviceCount(int* count);
}  // namespace rlflow::cuda_probe
