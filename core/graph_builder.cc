#include "core/graph_builder.h"

#include <cmath>
#include <cstring>

#include "core/error.h"
#include "core/op_registry.h"

namespace rlflow {

GraphBuilder::GraphBuilder(uint64_t seed, int64_t opset, const std::string& name) : rng_(seed) {
  graph_.info().opsets = {{"", opset}};
  graph_.info().graph_name = name;
  graph_.info().producer_name = "rlflow";
}

std::string GraphBuilder::Fresh(const std::string& prefix) {
  for (;;) {
    std::string n = prefix + "_" + std::to_string(counter_++);
    if (graph_.FindValue(n) == kNoValue) return n;
  }
}

ValueId GraphBuilder::Input(const std::string& name, const Shape& shape, DType dtype) {
  TensorType t;
  t.dtype = dtype;
  t.shape = shape;
  return graph_.AddInput(name, t);
}

namespace {
// Platform-independent normal samples (Box-Muller over 53-bit uniforms).
double Normal(std::mt19937_64& rng) {
  double u1 = (static_cast<double>(rng() >> 11) + 1.0) * 0x1.0p-53;
  double u2 = static_cast<double>(rng() >> 11) * 0x1.0p-53;
  return std::sqrt(-2.0 * std::log(u1)) * std::cos(2 * M_PI * u2);
}
}  // namespace

ValueId GraphBuilder::Weight(const std::string& name, const Shape& shape, float stddev, float mean) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (float& x : v) x = static_cast<float>(mean + stddev * Normal(rng_));
  return graph_.AddInitializer(name.empty() ? Fresh("w") : name, TensorData::FromFloat(v, shape));
}

ValueId GraphBuilder::Uniform(const std::string& name, const Shape& shape, float lo, float hi) {
  std::vector<float> v(static_cast<size_t>(NumElements(shape)));
  for (float& x : v) x = static_cast<float>(lo + (hi - lo) * (static_cast<double>(rng_() >> 11) * 0x1.0p-53));
  return graph_.AddInitializer(name.empty() ? Fresh("w") : name, TensorData::FromFloat(v, shape));
}

ValueId GraphBuilder::ConstInts(const std::vector<int64_t>& values, const std::string& name) {
  return ConstInts(values, {static_cast<int64_t>(values.size())}, name);
}

ValueId GraphBuilder::ConstInts(const std::vector<int64_t>& values, const Shape& shape, const std::string& name) {
  return graph_.AddInitializer(name.empty() ? Fresh("const") : name, TensorData::FromInt64(values, shape));
}

ValueId GraphBuilder::ConstFloat(float value, const std::string& name) {
  return graph_.AddInitializer(name.empty() ? Fresh("const") : name, TensorData::FromFloat({value}, {}));
}

ValueId GraphBuilder::Const(TensorData data, const std::string& name) {
  return graph_.AddInitializer(name.empty() ? Fresh("const") : name, std::move(data));
}

ValueId GraphBuilder::Op(const std::string& op, const std::vector<ValueId>& inputs, AttributeMap attrs,
                         const std::string& name) {
  return OpN(op, inputs, 1, std::move(attrs), name)[0];
}

std::vector<ValueId> GraphBuilder::OpN(const std::string& op, const std::vector<ValueId>& inputs, int num_outputs,
                                       AttributeMap attrs, const std::string& name) {
  const OpDef* def = OpRegistry::Global().FindQualified(op);
  if (def == nullptr) Fail("GraphBuilder: operator '", op, "' is not in the registry");
  NodeId id = graph_.AddNode(def->name, inputs, num_outputs, std::move(attrs), name.empty() ? Fresh(def->name) : name);
  graph_.mutable_node(id).domain = def->domain;
  CheckNodeAgainstDef(graph_.node(id), *def);
  return graph_.node(id).outputs;
}

Graph GraphBuilder::Build(const std::vector<ValueId>& outputs) {
  graph_.SetOutputs(outputs);
  graph_.Validate();
  InferShapes(graph_);
  Graph out = std::move(graph_);
  graph_ = Graph();
  return out;
}

}  // namespace rlflow
