#include "core/passes/lower_batchnorm.h"

#include <cmath>

#include "core/error.h"
#include "core/op_registry.h"

namespace rlflow {

int LowerBatchNorm(Graph& g) {
  int lowered = 0;
  const OpRegistry& reg = OpRegistry::Global();
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    if (n.opaque() || n.op != "BatchNormalization" || n.outputs.size() != 1) continue;
    bool constant = true;
    for (int k = 1; k < 5; ++k) constant = constant && g.IsConstant(n.inputs[k]);
    const TensorType& xt = g.value(n.inputs[0]).type;
    if (!constant || !xt.rank_known || xt.rank() < 2 || xt.dtype != DType::kFloat32) continue;
    float eps = n.attrs.count("epsilon") ? n.attrs.at("epsilon").f : 1e-5f;
    std::vector<double> gamma = g.value(n.inputs[1]).initializer->ToDouble();
    std::vector<double> beta = g.value(n.inputs[2]).initializer->ToDouble();
    std::vector<double> mean = g.value(n.inputs[3]).initializer->ToDouble();
    std::vector<double> var = g.value(n.inputs[4]).initializer->ToDouble();
    const size_t c = gamma.size();
    if (beta.size() != c || mean.size() != c || var.size() != c) Fail("node ", n.Describe(), ": parameter sizes differ");
    std::vector<float> scale(c), shift(c);
    for (size_t k = 0; k < c; ++k) {
      double s = gamma[k] / std::sqrt(var[k] + static_cast<double>(eps));
      scale[k] = static_cast<float>(s);
      shift[k] = static_cast<float>(beta[k] - mean[k] * s);
    }
    Shape per_channel(static_cast<size_t>(xt.rank() - 1), 1);
    per_channel[0] = static_cast<int64_t>(c);
    std::string base = n.name;
    ValueId x = n.inputs[0];
    ValueId out = n.outputs[0];
    ValueId s = g.AddInitializer(g.UniqueName(base + ".scale"), TensorData::FromFloat(scale, per_channel));
    ValueId t = g.AddInitializer(g.UniqueName(base + ".shift"), TensorData::FromFloat(shift, per_channel));
    NodeId mul = g.AddNode("Mul", {x, s}, 1, {}, g.UniqueName(base + ".mul"));
    InferAndSetNodeShapes(g, mul, *reg.Find("", "Mul"));
    NodeId add = g.AddNode("Add", {g.node(mul).outputs[0], t}, 1, {}, g.UniqueName(base + ".add"));
    InferAndSetNodeShapes(g, add, *reg.Find("", "Add"));
    g.ReplaceAllUses(out, g.node(add).outputs[0]);
    ++lowered;
  }
  if (lowered > 0) g.RemoveDeadCode();
  return lowered;
}

namespace {

// The per-channel vector of a constant float32 [C, 1, ..., 1] of rank r, or empty.
std::vector<float> PerChannel(const Graph& g, ValueId v, int64_t rank, int64_t channels) {
  if (!g.IsConstant(v)) return {};
  const TensorType& t = g.value(v).type;
  if (t.dtype != DType::kFloat32 || t.rank() != rank || t.shape[0] != channels) return {};
  for (int64_t k = 1; k < rank; ++k)
    if (t.shape[k] != 1) return {};
  std::vector<double> d = g.value(v).initializer->ToDouble();
  return std::vector<float>(d.begin(), d.end());
}

}  // namespace

int RaiseBatchNorm(Graph& g) {
  int raised = 0;
  const OpRegistry& reg = OpRegistry::Global();
  auto consumers = g.Consumers();
  std::vector<char> is_output(g.num_values(), 0);
  for (ValueId o : g.outputs()) is_output[o] = 1;
  std::vector<char> gone(g.num_nodes(), 0);
  for (NodeId id : g.TopologicalOrder()) {
    const Node& add = g.node(id);
    if (add.opaque() || add.op != "Add" || add.inputs.size() != 2) continue;
    for (int side = 0; side < 2; ++side) {
      ValueId u = add.inputs[side], t = add.inputs[1 - side];
      if (u == kNoValue || u >= static_cast<ValueId>(consumers.size())) continue;  // a value added here
      NodeId mul_id = g.value(u).producer;
      if (mul_id == kNoNode || mul_id >= static_cast<NodeId>(gone.size()) || gone[mul_id] || is_output[u] || consumers[u].size() != 1) continue;
      const Node& mul = g.node(mul_id);
      if (mul.opaque() || mul.op != "Mul" || mul.inputs.size() != 2) continue;
      for (int ms = 0; ms < 2; ++ms) {
        ValueId x = mul.inputs[ms], s = mul.inputs[1 - ms];
        const TensorType& xt = g.value(x).type;
        if (g.IsConstant(x) || !xt.IsStatic() || xt.dtype != DType::kFloat32 || xt.rank() < 3) continue;
        if (g.value(add.outputs[0]).type != xt) continue;
        int64_t c = xt.shape[1];
        std::vector<float> scale = PerChannel(g, s, xt.rank() - 1, c), shift = PerChannel(g, t, xt.rank() - 1, c);
        if (scale.empty() || shift.empty()) continue;
        std::string base = g.UniqueName(add.name + ".bn");
        Shape vec = {c};
        ValueId vs = g.AddInitializer(g.UniqueName(base + ".scale"), TensorData::FromFloat(scale, vec));
        ValueId vt = g.AddInitializer(g.UniqueName(base + ".bias"), TensorData::FromFloat(shift, vec));
        ValueId vm = g.AddInitializer(g.UniqueName(base + ".mean"), TensorData::FromFloat(std::vector<float>(c, 0.0f), vec));
        ValueId vv = g.AddInitializer(g.UniqueName(base + ".var"), TensorData::FromFloat(std::vector<float>(c, 1.0f), vec));
        ValueId out = add.outputs[0];
        NodeId bn = g.AddNode("BatchNormalization", {x, vs, vt, vm, vv}, 1, {{"epsilon", Attribute::Float(0.0f)}}, base);
        InferAndSetNodeShapes(g, bn, *reg.Find("", "BatchNormalization"));
        g.ReplaceAllUses(out, g.node(bn).outputs[0]);
        gone[mul_id] = 1;
        ++raised;
        side = 2;  // done with this Add
        break;
      }
    }
  }
  if (raised > 0) g.RemoveDeadCode();
  return raised;
}

}  // namespace rlflow
