#pragma once
// Runs a graph on the CUDA device, one library call or kernel per node
// (plan.h's PlanNode decides which): cuBLAS for MatMul and Gemm (and 1x1
// convolutions), cuDNN for convolution, pooling, softmax and batch
// normalisation, the backend's own kernels (kernels.h) for elementwise,
// reduction and data-movement operators, float32. A node without a device
// kernel (another operator, another type, an attribute the kernel does not
// cover) runs on the host with the registry's CPU kernel, its operands
// copied from the device and its outputs back, as ONNX Runtime falls back
// from its CUDA provider to its CPU provider; HostNodes() lists them.
// Weights are copied to the device once, when the executor is made; inputs
// once per SetInputs; every value has its own device buffer.
//
// Made only where a device exists: the constructor throws rlflow::Error
// with the probe's one-line reason otherwise (no driver, no device), and
// rlflow::Unsupported naming an opaque node (cut them first).
#include <ATen/core/Tensor.h>

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

  // Graph inputs in order (the graph's types and shapes), copied to the device.
  void SetInputs(const std::vector<at::Tensor>& inputs);
  // One run on the device; returns its time in ms (cudaEvents around it).
  // With `node_ms`, every node is timed by events around it (per node id,
  // 0 for nodes that do not run).
  double Run(std::vector<double>* node_ms = nullptr);
  // The graph outputs of the last run, copied back.
  std::vector<at::Tensor> Outputs() const;
  const DeviceInfo& device() const;
  // "<node>: <why>" for each node that runs on the host, in run order.
  const std::vector<std::string>& HostNodes() const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

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
