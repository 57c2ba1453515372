// Builds and links a .cu file against cudart/cuBLAS/cuDNN. On a machine
// without a GPU, CUDA reports "no driver"/"no device" and the numerical part
// is skipped; with a GPU the kernel's result is checked.
#include "third_party/cuda_probe/saxpy.h"

#include <cublas_v2.h>
#include <cudnn.h>
#include <gtest/gtest.h>

#include <vector>

namespace rlflow::cuda_probe {
namespace {

constexpr int kCudaErrorInsufficientDriver = 35;
constexpr int kCudaErrorNoDevice = 100;

TEST(CudaProbe, LinksCudnnAndCublas) {
  // Library versions are available without a device.
  EXPECT_GE(cudnnGetVersion(), 9000u);
  int cublas_version = 0;
  // cublasGetProperty needs no handle or device.
  ASSERT_EQ(cublasGetProperty(MAJOR_VERSION, &cublas_version), CUBLAS_STATUS_SUCCESS);
  EXPECT_GE(cublas_version, 12);
}

TEST(CudaProbe, SaxpyOrNoDevice) {
  int count = 0;
  int err = DeviceCount(&count);
  if (err == kCudaErrorInsufficientDriver || err == kCudaErrorNoDevice) {
    EXPECT_EQ(count, 0);
    GTEST_SKIP() << "no CUDA device (cudaError " << err << ")";
  }
  ASSERT_EQ(err, 0);
  ASSERT_GT(count, 0);
  std::vector<float> x(1000), y(1000);
  for (int i = 0; i < 1000; ++i) {
    x[i] = static_cast<float>(i);
    y[i] = 1.0f;
  }
  ASSERT_EQ(Saxpy(1000, 2.0f, x.data(), y.data()), 0);
  for (int i = 0; i < 1000; ++i) ASSERT_FLOAT_EQ(y[i], 2.0f * i + 1.0f);
}

}  // namespace
}  // namespace rlflow::cuda_probe
