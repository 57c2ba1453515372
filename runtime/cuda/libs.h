#pragma once
// cuBLAS and cuDNN, loaded on first use (dlopen) rather than linked: a
// binary with the CUDA backend linked in (the optimiser) starts without
// loading their hundreds of megabytes, and runs on machines without them.
// The headers give the functions' types; every function the backend calls
// is a member here, named as the library names it.
#include <cublas_v2.h>
#include <cudnn.h>

#include <string>

namespace rlflow::cuda {

// clang-format off
#define RLFLOW_CUDA_LIB_FUNCTIONS(X) \
  X(cublasCreate) \
  X(cublasDestroy) \
  X(cublasSetStream) \
  X(cublasSetMathMode) \
  X(cublasSgemmStridedBatched) \
  X(cublasGetStatusString) \
  X(cublasGetProperty) \
  X(cudnnGetVersion) \
  X(cudnnGetErrorString) \
  X(cudnnCreate) \
  X(cudnnDestroy) \
  X(cudnnSetStream) \
  X(cudnnCreateTensorDescriptor) \
  X(cudnnDestroyTensorDescriptor) \
  X(cudnnSetTensor4dDescriptor) \
  X(cudnnCreateFilterDescriptor) \
  X(cudnnDestroyFilterDescriptor) \
  X(cudnnSetFilter4dDescriptor) \
  X(cudnnCreateConvolutionDescriptor) \
  X(cudnnDestroyConvolutionDescriptor) \
  X(cudnnSetConvolution2dDescriptor) \
  X(cudnnSetConvolutionGroupCount) \
  X(cudnnSetConvolutionMathType) \
  X(cudnnFindConvolutionForwardAlgorithm) \
  X(cudnnGetConvolutionForwardWorkspaceSize) \
  X(cudnnConvolutionForward) \
  X(cudnnCreatePoolingDescriptor) \
  X(cudnnDestroyPoolingDescriptor) \
  X(cudnnSetPooling2dDescriptor) \
  X(cudnnPoolingForward) \
  X(cudnnSoftmaxForward) \
  X(cudnnBatchNormalizationForwardInference)
// clang-format on

struct CudaLibs {
  bool loaded = false;
  std::string error;  // why not, one line
#define RLFLOW_CUDA_LIB_MEMBER(name) decltype(&::name) name = nullptr;
  RLFLOW_CUDA_LIB_FUNCTIONS(RLFLOW_CUDA_LIB_MEMBER)
#undef RLFLOW_CUDA_LIB_MEMBER
};

// Loads the libraries once (thread-safe); `loaded` false with the reason
// ("cannot load libcudnn.so.9: ...") if either is missing.
const CudaLibs& Libs();

// The library names tried (the toolkit's sonames).
constexpr const char* kCublasLibrary = "libcublas.so.13";
constexpr const char* kCudnnLibrary = "libcudnn.so.9";

}  // namespace rlflow::cuda
