#pragma once
// The machine's CUDA device as the backend sees it, and the library
// versions that key its timings. No torch. Without a driver or a device the
// probe reports why in one line; nothing here crashes or exits.
#include <string>

namespace rlflow::cuda {

struct DeviceInfo {
  bool available = false;
  std::string error;  // why not, one line (when !available)
  std::string name;   // e.g. "NVIDIA H100 80GB HBM3"
  int compute_major = 0, compute_minor = 0;
  int driver_version = 0;   // cudaDriverGetVersion (e.g. 13000); 0 without a driver
  int runtime_version = 0;  // cudaRuntimeGetVersion
  size_t cudnn_version = 0;
  int cublas_version = 0;  // major * 10000 + minor * 100 + patch
  size_t memory_bytes = 0;
  // "NAME sm_XY driver D runtime R cudnn C cublas B": the timing-cache
  // fingerprint's device part.
  std::string Fingerprint() const;
};

// Device 0 (the first visible one; CUDA_VISIBLE_DEVICES picks it).
// Library versions are filled in whenever cuBLAS and cuDNN load, with or
// without a device.
DeviceInfo ProbeDevice();

// The one-line text of a CUDA runtime error code ("no CUDA-capable device is
// detected (cudaErrorNoDevice, 100)").
std::string CudaErrorText(int code);

}  // namespace rlflow::cuda
