#pragma once
// The batch-norm canonical form, in one place for every search, agent and
// the pipeline.
//
// The search's cost function when batch norm was lowered for the rules:
// every Mul/Add pair that RaiseBatchNorm would turn back into one
// BatchNormalization after the search is costed as that BatchNormalization,
// so that the search compares folding a batch norm into a convolution with
// keeping it, not with the (slower) lowered pair.
#include <map>
#include <string>

#include "core/graph.h"
#include "runtime/cost_model.h"

namespace rlflow {

// The form the rules and the searches work on: batch norms lowered to
// per-channel Mul/Add (x * S + T), which RaiseBatchNorm turns back after the
// search; `lowered` receives their number. Cost it with BatchNormAwareCost.
Graph CanonicalForm(const Graph& graph, int* lowered = nullptr);

class BatchNormAwareCost : public CostModel {
 public:
  explicit BatchNormAwareCost(CostModel* base) : base_(base) {}
  OpCost NodeCost(const Graph& graph, NodeId id) override { return base_->NodeCost(graph, id); }
  double NodeMs(const Graph& graph, NodeId id) override { return base_->NodeMs(graph, id); }
  double GraphCost(const Graph& graph) override;
  double NodeNoiseMs(const Graph& graph, NodeId id) override { return base_->NodeNoiseMs(graph, id); }
  double ResolveGain(const Graph& before, const Graph& after, const std::string& key, double estimate) override {
    return base_->ResolveGain(before, after, key, estimate);
  }

 private:
  double BatchNormMs(const TensorType& x);
  CostModel* base_;
  std::map<std::string, double> bn_ms_;  // by input type
};

}  // namespace rlflow
