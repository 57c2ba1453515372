#include "search/canonical.h"

#include "core/op_registry.h"
#include "core/passes/lower_batchnorm.h"
#include "core/passes/pass.h"

namespace rlflow {

Graph CanonicalForm(const Graph& graph, int* lowered) {
  Graph canonical = graph;
  RunPasses(PassRegistry::Builtin(), CanonicalisePasses(), canonical);
  if (lowered != nullptr) {
    auto before = graph.OpCounts(), after = canonical.OpCounts();
    *lowered = (before.count("BatchNormalization") ? before.at("BatchNormalization") : 0) -
               (after.count("BatchNormalization") ? after.at("BatchNormalization") : 0);
  }
  return canonical;
}

double BatchNormAwareCost::GraphCost(const Graph& g) {
  double total = base_->GraphCost(g);
  for (const BatchNormPair& p : FindBatchNormPairs(g))
    total += BatchNormMs(g.value(p.x).type) - base_->NodeMs(g, p.mul) - base_->NodeMs(g, p.add);
  return total;
}

double BatchNormAwareCost::BatchNormMs(const TensorType& x) {
  std::string key = x.ToString();
  auto it = bn_ms_.find(key);
  if (it != bn_ms_.end()) return it->second;
  Graph g;
  ValueId in = g.AddInput("x", x);
  int64_t c = x.shape.at(1);
  std::vector<ValueId> params = {in};
  for (const char* name : {"scale", "bias", "mean", "var"})
    params.push_back(g.AddInitializer(name, TensorData::FromDouble(std::vector<double>(c, 1.0), Shape{c}, x.dtype)));
  NodeId bn = g.AddNode("BatchNormalization", params, 1, {{"epsilon", Attribute::Float(0.0f)}}, "bn");
  g.SetOutputs(g.node(bn).outputs);
  InferShapes(g);
  double ms = base_->NodeMs(g, bn);
  bn_ms_.emplace(key, ms);
  return ms;
}

}  // namespace rlflow
