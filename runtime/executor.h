#pragma once
// The CPU executor: runs a graph with the registry's ATen kernels. It is the
// numerical reference (every optimised graph is checked against the
// original with it) and the CPU cost backend.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

class Executor {
 public:
  // Validates the graph and plans the run: topological order, when each
  // intermediate tensor can be freed, and zero-copy views of the weights.
  // Throws if a node has no kernel (naming the op).
  explicit Executor(const Graph& graph);

  // Inputs in graph-input order; returns the graph outputs in order. Checks
  // every input's type and every node output against the inferred types.
  // If `node_ms` is given it receives each node's wall time (per node id):
  // gathering its inputs, its kernel, checking its outputs and releasing
  // them after their last reader.
  std::vector<at::Tensor> Run(const std::vector<at::Tensor>& inputs, std::vector<double>* node_ms = nullptr) const;

  const Graph& graph() const { return graph_; }

 private:
  const Graph& graph_;
  std::vector<NodeId> order_;
  std::vector<const struct OpDef*> defs_;
  std::vector<std::vector<DType>> output_types_;  // per node: what its outputs are declared (RunKernel)
  std::vector<std::vector<ValueId>> free_after_;  // per step: values dead afterwards
  std::vector<at::Tensor> constants_;             // per value id (weights)
};

// Values for the graph's inputs, deterministic from `seed`: an input's
// sample data when it has some (Value::sample_data, --input_data); integer
// inputs that a node reads as a shape, axes, sizes or a count (Reshape's
// shape, Slice's starts, TopK's k, ...; see ShapeConsistentValues) get the
// values that make that node produce the shape the importer inferred;
// other floats come from N(0, 1); integers from [0, bound) where bound is
// the smallest size of a dimension they index (Gather, GatherElements,
// ScatterElements), else 10; bools uniformly. An input marked
// Value::arrives_permuted is a permuted view of those values (dimensions laid
// out in reverse order), as a node timed alone reads it in its graph. `how` receives, per input, how
// it was filled (for the report).
std::vector<at::Tensor> RandomInputs(const Graph& graph, uint64_t seed, std::vector<std::string>* how = nullptr);

// max |a - b| / max(max |b|, 1e-12) over the finite elements of b (the
// reference); infinity if a differs where b is NaN or infinite.
double RelativeError(const at::Tensor& a, const at::Tensor& b);

}  // namespace rlflow
