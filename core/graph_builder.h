#pragma once
// Convenience for building graphs in C++ (model zoo, tests): named inputs,
// seeded random weights, operators with attributes, shape inference at the end.
#include <cstdint>
#include <random>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

class GraphBuilder {
 public:
  explicit GraphBuilder(uint64_t seed = 0, int64_t opset = 17, const std::string& name = "graph");

  ValueId Input(const std::string& name, const Shape& shape, DType dtype = DType::kFloat32);
  // Weight from N(mean, stddev^2), float32.
  ValueId Weight(const std::string& name, const Shape& shape, float stddev, float mean = 0.0f);
  // Weight from U(lo, hi), float32.
  ValueId Uniform(const std::string& name, const Shape& shape, float lo, float hi);
  ValueId ConstInts(const std::vector<int64_t>& values, const std::string& name = "");
  ValueId ConstInts(const std::vector<int64_t>& values, const Shape& shape, const std::string& name = "");
  ValueId ConstFloat(float value, const std::string& name = "");
  ValueId Const(TensorData data, const std::string& name = "");

  // One-output operator; `op` as rules name it (QualifiedOp: "Relu",
  // "com.microsoft.SkipLayerNormalization").
  ValueId Op(const std::string& op, const std::vector<ValueId>& inputs, AttributeMap attrs = {},
             const std::string& name = "");
  // Multi-output operator.
  std::vector<ValueId> OpN(const std::string& op, const std::vector<ValueId>& inputs, int num_outputs,
                           AttributeMap attrs = {}, const std::string& name = "");

  // Sets the outputs, validates and runs shape inference. The builder is
  // left empty.
  Graph Build(const std::vector<ValueId>& outputs);

  Graph& graph() { return graph_; }
  std::mt19937_64& rng() { return rng_; }
  // A fresh name with the given prefix.
  std::string Fresh(const std::string& prefix);

 private:
  Graph graph_;
  std::mt19937_64 rng_;
  int counter_ = 0;
};

}  // namespace rlflow
