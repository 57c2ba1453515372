#include "core/passes/lower_batchnorm.h"

#include <cmath>
#include <map>

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
    // A copy: adding the initializers below may move the graph's values.
    const TensorType xt = g.value(n.inputs[0]).type;
    if (!constant || !xt.rank_known || xt.rank() < 2 || !IsFloatingPoint(xt.dtype)) continue;
    float eps = n.attrs.count("epsilon") ? n.attrs.at("epsilon").f : 1e-5f;
    std::vector<double> gamma = g.value(n.inputs[1]).initializer->ToDouble();
    std::vector<double> beta = g.value(n.inputs[2]).initializer->ToDouble();
    std::vector<double> mean = g.value(n.inputs[3]).initializer->ToDouble();
    std::vector<double> var = g.value(n.inputs[4]).initializer->ToDouble();
    const size_t c = gamma.size();
    if (beta.size() != c || mean.size() != c || var.size() != c)
      Fail("node ", n.Describe(), ": parameter sizes differ");
    std::vector<double> scale(c), shift(c);
    for (size_t k = 0; k < c; ++k) {
      const double s = gamma[k] / std::sqrt(var[k] + static_cast<double>(eps));
      scale[k] = s;  // rounded to x's type once, by FromDouble
      shift[k] = beta[k] - mean[k] * s;
    }
    Shape per_channel(static_cast<size_t>(xt.rank() - 1), 1);
    per_channel[0] = static_cast<int64_t>(c);
    std::string base = n.name;
    ValueId x = n.inputs[0];
    ValueId out = n.outputs[0];
    ValueId s = g.AddInitializer(g.UniqueName(base + ".scale"), TensorData::FromDouble(scale, per_channel, xt.dtype));
    ValueId t = g.AddInitializer(g.UniqueName(base + ".shift"), TensorData::FromDouble(shift, per_channel, xt.dtype));
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

// The per-channel vector of a constant [C, 1, ..., 1] of rank r (of a
// floating-point type), or empty.
std::vector<double> PerChannel(const Graph& g, ValueId v, int64_t rank, int64_t channels) {
  if (!g.IsConstant(v)) return {};
  const TensorType& t = g.value(v).type;
  if (!IsFloatingPoint(t.dtype) || t.rank() != rank || t.shape[0] != channels) return {};
  for (int64_t k = 1; k < rank; ++k)
    if (t.shape[k] != 1) return {};
  return g.value(v).initializer->ToDouble();
}

}  // namespace

std::vector<BatchNormPair> FindBatchNormPairs(const Graph& g) {
  std::vector<BatchNormPair> pairs;
  auto consumers = g.Consumers();
  std::vector<char> is_output(g.num_values(), 0);
  for (ValueId o : g.outputs()) is_output[o] = 1;
  std::vector<char> used(g.num_nodes(), 0);
  auto per_channel = [&](ValueId v, DType dtype, int64_t rank, int64_t channels) {
    if (!g.IsConstant(v)) return false;
    const TensorType& t = g.value(v).type;
    if (t.dtype != dtype || t.rank() != rank || t.shape[0] != channels) return false;
    for (int64_t k = 1; k < rank; ++k)
      if (t.shape[k] != 1) return false;
    return true;
  };
  for (NodeId id : g.TopologicalOrder()) {
    const Node& add = g.node(id);
    if (add.opaque() || add.op != "Add" || add.inputs.size() != 2) continue;
    bool found = false;
    for (int side = 0; side < 2 && !found; ++side) {
      ValueId u = add.inputs[side], t = add.inputs[1 - side];
      if (u == kNoValue) continue;
      NodeId mul_id = g.value(u).producer;
      if (mul_id == kNoNode || used[mul_id] || is_output[u] || consumers[u].size() != 1) continue;
      const Node& mul = g.node(mul_id);
      if (mul.opaque() || mul.op != "Mul" || mul.inputs.size() != 2) continue;
      for (int ms = 0; ms < 2 && !found; ++ms) {
        ValueId x = mul.inputs[ms], s = mul.inputs[1 - ms];
        const TensorType& xt = g.value(x).type;
        if (g.IsConstant(x) || !xt.IsStatic() || !IsFloatingPoint(xt.dtype) || xt.rank() < 3) continue;
        if (g.value(add.outputs[0]).type != xt) continue;
        int64_t c = xt.shape[1];
        if (!per_channel(s, xt.dtype, xt.rank() - 1, c) || !per_channel(t, xt.dtype, xt.rank() - 1, c)) continue;
        pairs.push_back({mul_id, id, x, s, t});
        used[mul_id] = 1;
        found = true;
      }
    }
  }
  return pairs;
}

int RaiseBatchNorm(Graph& g) {
  const OpRegistry& reg = OpRegistry::Global();
  std::vector<BatchNormPair> pairs = FindBatchNormPairs(g);
  std::map<ValueId, ValueId> replaced;  // Add output -> BatchNormalization output (chained pairs)
  for (const BatchNormPair& p : pairs) {
    ValueId x = replaced.count(p.x) ? replaced.at(p.x) : p.x;
    const TensorType xt = g.value(x).type;
    int64_t c = xt.shape[1];
    std::vector<double> scale = PerChannel(g, p.scale, xt.rank() - 1, c),
                        shift = PerChannel(g, p.shift, xt.rank() - 1, c);
    std::string base = g.UniqueName(g.node(p.add).name + ".bn");
    Shape vec = {c};
    const DType d = xt.dtype;
    ValueId vs = g.AddInitializer(g.UniqueName(base + ".scale"), TensorData::FromDouble(scale, vec, d));
    ValueId vt = g.AddInitializer(g.UniqueName(base + ".bias"), TensorData::FromDouble(shift, vec, d));
    ValueId vm =
        g.AddInitializer(g.UniqueName(base + ".mean"), TensorData::FromDouble(std::vector<double>(c, 0.0), vec, d));
    ValueId vv =
        g.AddInitializer(g.UniqueName(base + ".var"), TensorData::FromDouble(std::vector<double>(c, 1.0), vec, d));
    ValueId out = g.node(p.add).outputs[0];
    NodeId bn = g.AddNode("BatchNormalization", {x, vs, vt, vm, vv}, 1, {{"epsilon", Attribute::Float(0.0f)}}, base);
    InferAndSetNodeShapes(g, bn, *reg.Find("", "BatchNormalization"));
    g.ReplaceAllUses(out, g.node(bn).outputs[0]);
    replaced[out] = g.node(bn).outputs[0];
  }
  if (!pairs.empty()) g.RemoveDeadCode();
  return static_cast<int>(pairs.size());
}

}  // namespace rlflow
