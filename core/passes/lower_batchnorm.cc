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

}  // namespace rlflow
