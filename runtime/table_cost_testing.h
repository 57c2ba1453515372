#pragma once
// Deterministic table cost models for tests of the searches, the rewrite
// engine and the agents (results that do not depend on machine timings).
#include "runtime/cost_model.h"

namespace rlflow::testing {

// Conv: 10 + 0.1 per kernel element (a 1x1 conv 10.1, a 3x3 conv 10.9);
// every other op 1 (`conv_per_element` 0: every Conv 10).
class TableCost : public CostModel {
 public:
  explicit TableCost(double conv_per_element = 0.1) : per_element_(conv_per_element) {}
  OpCost NodeCost(const Graph& g, NodeId id) override {
    OpCost c;
    const Node& n = g.node(id);
    c.ms = 1.0;
    if (n.op == "Conv") {
      const Shape& w = g.value(n.inputs[1]).type.shape;
      c.ms = 10.0 + per_element_ * static_cast<double>(w[2] * w[3]);
    }
    return c;
  }

 private:
  double per_element_;
};

}  // namespace rlflow::testing
