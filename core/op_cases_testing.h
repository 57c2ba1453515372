// One small graph per case that exercises a registry operator, including
// the edge cases of the ONNX spec (asymmetric pads, ceil mode, negative
// slice steps, negative indices, broadcasting, auto_pad...). Every
// registered operator has at least one case (ops_conformance_test checks
// it). Used by the ONNX Runtime conformance test of the CPU kernels and by
// the CUDA backend's conformance suite (every operator against the CPU
// executor).
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "core/graph_builder.h"

namespace rlflow::testing {

struct OpCase {
  std::string name;
  // Adds the case's inputs and nodes to the builder; returns its output.
  std::function<ValueId(GraphBuilder&)> build;
  // Its output's length is set by the input values (NonZero, Compress,
  // Unique, NonMaxSuppression): the shape rule leaves it unknown.
  bool value_dependent_shape = false;
};

std::vector<OpCase> OpCases();

}  // namespace rlflow::testing
