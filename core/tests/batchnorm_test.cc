// Batch-norm lowering (to x * S + T) and raising (back to one
// BatchNormalization) preserve outputs and round-trip the op counts.
#include <gtest/gtest.h>

#include "core/graph_builder.h"
#include "core/passes/lower_batchnorm.h"
#include "runtime/executor.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

double MaxDiff(const Graph& a, const Graph& b) {
  std::vector<at::Tensor> in = RandomInputs(a, 9);
  std::vector<at::Tensor> x = Executor(a).Run(in), y = Executor(b).Run(in);
  double worst = 0;
  for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, RelativeError(y[k], x[k]));
  return worst;
}

TEST(BatchNorm, LowerThenRaiseResNet18) {
  Graph g = zoo::Build("resnet18", 1);
  int bn = g.OpCounts()["BatchNormalization"];
  ASSERT_EQ(bn, 20);
  Graph lowered = g;
  EXPECT_EQ(LowerBatchNorm(lowered), bn);
  EXPECT_EQ(lowered.OpCounts()["BatchNormalization"], 0);
  EXPECT_EQ(lowered.OpCounts()["Mul"], bn);
  EXPECT_LT(MaxDiff(g, lowered), 1e-5);
  Graph raised = lowered;
  EXPECT_EQ(RaiseBatchNorm(raised), bn);
  EXPECT_EQ(raised.OpCounts()["BatchNormalization"], bn);
  EXPECT_EQ(raised.OpCounts()["Mul"], 0);
  EXPECT_EQ(raised.OpCounts()["Add"], g.OpCounts()["Add"]);  // residual adds stay
  EXPECT_LT(MaxDiff(g, raised), 1e-5);
}

TEST(BatchNorm, RaiseLeavesOtherPatternsAlone) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {1, 4, 5, 5});
  ValueId s = b.Weight("s", {4, 1, 1}, 0.5f, 1.0f);
  ValueId t = b.Weight("t", {4, 1, 1}, 0.5f);
  ValueId full = b.Weight("full", {4, 5, 5}, 0.5f);  // not per-channel
  ValueId m1 = b.Op("Mul", {x, s});
  ValueId used_twice = b.Op("Add", {m1, t});
  ValueId m2 = b.Op("Mul", {x, full});
  ValueId a2 = b.Op("Add", {m2, t});
  ValueId m3 = b.Op("Mul", {s, x});  // operands swapped: still raised
  ValueId a3 = b.Op("Add", {t, m3});
  Graph g = b.Build({used_twice, a2, a3, m1});  // m1 is also a graph output
  Graph raised = g;
  EXPECT_EQ(RaiseBatchNorm(raised), 1);  // only Add(t, Mul(s, x))
  EXPECT_EQ(raised.OpCounts()["BatchNormalization"], 1);
  EXPECT_LT(MaxDiff(g, raised), 1e-6);
}

TEST(BatchNorm, ChainedPairsRaiseToChainedBatchNorms) {
  GraphBuilder b(4);
  ValueId x = b.Input("x", {1, 3, 4, 4});
  ValueId y = x;
  for (int k = 0; k < 3; ++k) {
    ValueId s = b.Weight("s" + std::to_string(k), {3, 1, 1}, 0.5f, 1.0f);
    ValueId t = b.Weight("t" + std::to_string(k), {3, 1, 1}, 0.5f);
    y = b.Op("Add", {b.Op("Mul", {y, s}), t});
  }
  Graph g = b.Build({b.Op("Relu", {y})});
  EXPECT_EQ(FindBatchNormPairs(g).size(), 3u);
  Graph raised = g;
  EXPECT_EQ(RaiseBatchNorm(raised), 3);
  std::map<std::string, int> ops = raised.OpCounts();
  EXPECT_EQ(ops["BatchNormalization"], 3);
  EXPECT_EQ(ops["Mul"] + ops["Add"], 0);
  EXPECT_EQ(raised.num_nodes(), 4);
  EXPECT_LT(MaxDiff(g, raised), 1e-6);
}

}  // namespace
}  // namespace rlflow
