#pragma once
// Runs a graph on the CUDA device, one library call or kernel per node:
// cuBLAS for MatMul and Gemm (and 1x1 convolutions), cuDNN for convolution,
// pooling, softmax and batch normalisation, the backend's own kernels
// (kernels.h) for elementwise and data-movement operators. float32 only.
// Weights are copied to the device once, when the executor is made; inputs
// once per SetInputs; every value has its own device buffer.
//
// Made only where a device exists: the constructor throws rlflow::Error
// with the probe's one-line reason otherwise (no driver, no device), and
// rlflow::Unsupported naming the first node the backend cannot run.
#include <ATen/ATen.h>

#include <memory>
#include <string>
#include <vector>

#include "core/graph.h"
#include "runtime/cuda/device.h"

namespace rlflow::cuda {

class CudaExecutor {
 public:
  explicit CudaExecutor(const Graph& graph);
  ~CudaExecutor();
  CudaExecutor(const CudaExecutor&) = delete;
  CudaExecutor& operator=(const CudaExecutor&) = delete;

  // Graph inputs in order (float32, the graph's shapes), copied to the device.
  void SetInputs(const std::vector<at::Tensor>& inputs);
  // One run on the device; returns its time in ms (cudaEvents around it).
  // With `node_ms`, every node is timed by events around it (per node id,
  // 0 for nodes that do not run).
  double Run(std::vector<double>* node_ms = nullptr);
  // The graph outputs of the last run, copied back.
  std::vector<at::Tensor> Outputs() const;
  const DeviceInfo& device() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

// The operators the backend runs (sorted), for messages and docs.
std::vector<std::string> SupportedOps();

}  // namespace rlflow::cuda

namespace rlflow {
class TimingBackend;
}

namespace rlflow::cuda {

// The --device=cuda timing backend (registered as "cuda" where this
// library is linked); throws rlflow::Error with the probe's reason where
// there is no usable device.
std::unique_ptr<TimingBackend> MakeCudaBackend();

}  // namespace rlflow::cuda
