#pragma once
// CPU kernels run on ATen (libtorch) tensors. This header is included by the
// op entries (core/ops/*.cc) and the executor only.
#include <ATen/core/Tensor.h>

#include <vector>

#include "core/op_registry.h"
#include "core/tensor.h"

namespace rlflow {

struct KernelContext : public AttrReader {
  KernelContext(const Node& node, const OpDef& def, std::vector<at::Tensor> in)
      : AttrReader(node, def), inputs(std::move(in)) {}
  int num_inputs() const { return static_cast<int>(inputs.size()); }
  bool has(int i) const { return i < num_inputs() && inputs[i].defined(); }
  const at::Tensor& in(int i) const;
  // Values of a 1-D (or scalar) integer input, e.g. Reshape's shape.
  std::vector<int64_t> IntsInput(int i) const;
  int num_outputs() const { return static_cast<int>(node().outputs.size()); }

  std::vector<at::Tensor> inputs;   // undefined tensors for omitted inputs
  std::vector<at::Tensor> outputs;  // filled by the kernel, one per node output
};

at::ScalarType ToAtenType(DType dtype);
DType FromAtenType(at::ScalarType type);
// Zero-copy view of constant data (keeps `data` alive).
at::Tensor ToAten(const TensorDataPtr& data);
TensorData FromAten(const at::Tensor& tensor);

}  // namespace rlflow

namespace rlflow {
// Runs `def`'s kernel for `node`. ATen errors become rlflow::Error naming the
// node; a missing kernel is an error naming the op.
//
// float16 and bfloat16: ATen's CPU kernels run few operators in them, so an
// op without `half_kernel` computes in float32 (its half inputs widened) and
// rounds each output the graph declares half (`output_types`, one per node
// output; kUndefined where unknown) back to that type: float32 arithmetic
// on half storage, as ONNX Runtime's CPU provider runs a float16 model (it
// inserts casts around the nodes it has no float16 kernel for).
std::vector<at::Tensor> RunKernel(const Node& node, const OpDef& def, std::vector<at::Tensor> inputs,
                                  const std::vector<DType>& output_types);
// The element types the graph declares for `node`'s outputs (RunKernel's
// `output_types`).
std::vector<DType> OutputTypes(const Graph& g, const Node& node);
// The registry entry for a node, or an error if it is opaque / unknown.
const OpDef& KernelDefFor(const Node& node);
}  // namespace rlflow
