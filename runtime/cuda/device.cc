#include "runtime/cuda/device.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <sstream>

#include "runtime/cuda/libs.h"

namespace rlflow::cuda {

std::string CudaErrorText(int code) {
  const cudaError_t e = static_cast<cudaError_t>(code);
  std::ostringstream s;
  s << cudaGetErrorString(e) << " (" << cudaGetErrorName(e) << ", " << code << ")";
  return s.str();
}

std::string DeviceInfo::Fingerprint() const {
  std::ostringstream s;
  s << name << " sm_" << compute_major << compute_minor << " driver " << driver_version << " runtime "
    << runtime_version << " cudnn " << cudnn_version << " cublas " << cublas_version;
  return s.str();
}

DeviceInfo ProbeDevice() {
  DeviceInfo info;
  const CudaLibs& libs = Libs();
  if (libs.loaded) {
    info.cudnn_version = libs.cudnnGetVersion();
    int major = 0, minor = 0, patch = 0;
    if (libs.cublasGetProperty(MAJOR_VERSION, &major) == CUBLAS_STATUS_SUCCESS &&
        libs.cublasGetProperty(MINOR_VERSION, &minor) == CUBLAS_STATUS_SUCCESS &&
        libs.cublasGetProperty(PATCH_LEVEL, &patch) == CUBLAS_STATUS_SUCCESS)
      info.cublas_version = major * 10000 + minor * 100 + patch;
  }
  cudaRuntimeGetVersion(&info.runtime_version);
  cudaDriverGetVersion(&info.driver_version);  // 0 without a driver
  int count = 0;
  const cudaError_t e = cudaGetDeviceCount(&count);
  if (e != cudaSuccess) {
    info.error = "no CUDA device: " + CudaErrorText(e);
    return info;
  }
  if (count == 0) {
    info.error = "no CUDA device: the driver reports none";
    return info;
  }
  cudaDeviceProp prop{};
  const cudaError_t p = cudaGetDeviceProperties(&prop, 0);
  if (p != cudaSuccess) {
    info.error = "cannot query CUDA device 0: " + CudaErrorText(p);
    return info;
  }
  info.name = prop.name;
  info.compute_major = prop.major;
  info.compute_minor = prop.minor;
  info.memory_bytes = prop.totalGlobalMem;
  if (!libs.loaded) {
    info.error = "CUDA device 0 (" + info.name + ") found, but " + libs.error;
  } else if (prop.major < 7 || (prop.major == 7 && prop.minor < 5)) {
    info.error = "CUDA device 0 (" + info.name + ", sm_" + std::to_string(prop.major) + std::to_string(prop.minor) +
                 ") is older than sm_75, the lowest architecture this build has kernels for";
  } else {
    info.available = true;
  }
  return info;
}

}  // namespace rlflow::cuda
