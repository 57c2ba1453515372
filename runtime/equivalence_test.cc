// CompareGraphs' notes: a reference output holding NaN or infinity makes the
// comparison weaker and is noted, unless it is a weight read by an opaque
// node (an output of the cut graph, not computed: a mask's -inf).
#include "runtime/equivalence.h"

#include <gtest/gtest.h>

#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "core/graph_builder.h"
#include "core/op_registry.h"
#include "core/tensor.h"

namespace rlflow {
namespace {

// x -> Add(x, bias) -> Custom (opaque, also reading `fill`) -> Neg -> y.
Graph Model(float fill, float bias) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  ValueId f = b.Const(TensorData::FromFloat(std::vector<float>(6, fill), {2, 3}), "fill");
  ValueId a = b.Op("Add", {x, b.ConstFloat(bias, "bias")});
  Graph g = b.Build({a});
  NodeId op = g.AddNode("Custom", {a, f}, 1, {}, "custom");
  Node& n = g.mutable_node(op);
  n.domain = "com.example";
  n.opaque_proto = std::make_shared<const std::string>("opaque");
  ValueId out = n.outputs[0];
  g.mutable_value(out).type = g.value(a).type;
  NodeId tail = g.AddNode("Neg", {out}, 1, {}, "tail");
  g.SetOutputs({g.node(tail).outputs[0]});
  InferShapes(g);
  return g;
}

TEST(Equivalence, AnInfiniteWeightReadByAnOpaqueNodeIsNotNoted) {
  const float inf = std::numeric_limits<float>::infinity();
  Graph g = Model(-inf, 1);
  EquivalenceResult r = CompareGraphs(g, g, 1);
  EXPECT_EQ(r.opaque_nodes, 1);
  EXPECT_EQ(r.outputs, 3);  // y, then what the opaque node reads: the sum and the weight
  EXPECT_TRUE(r.notes.empty()) << r.notes[0];
  EXPECT_EQ(r.max_error, 0);
  // A computed value that is infinite is (here the sum the opaque node reads).
  Graph computed = Model(0, inf);
  r = CompareGraphs(computed, computed, 1);
  ASSERT_EQ(r.notes.size(), 1u);
  EXPECT_NE(r.notes[0].find("holds NaN or infinity"), std::string::npos) << r.notes[0];
}

// Weights an opaque node reads are compared by their bytes (not run and
// compared element by element): alike ones equal, a differing one caught.
TEST(Equivalence, WeightsReadByAnOpaqueNodeAreComparedByTheirBytes) {
  const Graph a = Model(2, 1), same = Model(2, 1), other = Model(3, 1);
  ASSERT_NE(a.value(a.FindValue("fill")).initializer, same.value(same.FindValue("fill")).initializer);
  EquivalenceResult r = CompareGraphs(a, same, 1);
  EXPECT_EQ(r.outputs, 3);
  EXPECT_EQ(r.max_error, 0);
  r = CompareGraphs(a, other, 1);
  EXPECT_EQ(r.outputs, 3);
  EXPECT_NEAR(r.max_error, 0.5, 1e-6);  // |3 - 2| / 2, relative to the reference
  EXPECT_EQ(r.worst_output, "fill");
}

// x * s: a half output may differ by a few units of its precision (a
// rewrite moves where a half model rounds), a float32 one by --tolerance.
Graph Scaled(DType dtype, float s) {
  GraphBuilder b(1, 13, "g");
  ValueId x = b.Input("x", {4, 16}, dtype);
  ValueId c = b.ConstFloat(s, "s");
  if (dtype != DType::kFloat32) c = b.Op("Cast", {c}, {{"to", Attribute::Int(static_cast<int64_t>(dtype))}});
  return b.Build({b.Op("Mul", {x, c})});
}

TEST(Equivalence, HalfOutputsAreAllowedAFewUnitsOfTheirPrecision) {
  EXPECT_EQ(AllowedError(DType::kFloat32, 1e-4), 1e-4);
  EXPECT_EQ(AllowedError(DType::kFloat16, 1e-4), 4.0 / 1024);
  EXPECT_EQ(AllowedError(DType::kBFloat16, 1e-4), 4.0 / 128);
  EXPECT_EQ(AllowedError(DType::kFloat16, 0.01), 0.01);
  const float ulp = 1.0f / 1024;  // float16's precision at 1: the scaled values differ by about one unit
  EquivalenceResult half = CompareGraphs(Scaled(DType::kFloat16, 1), Scaled(DType::kFloat16, 1 + ulp), 1);
  EXPECT_GT(half.max_error, 1e-4);
  EXPECT_TRUE(half.within) << half.max_error;
  EXPECT_EQ(half.allowed, 4.0 / 1024);
  EXPECT_FALSE(CompareGraphs(Scaled(DType::kFloat16, 1), Scaled(DType::kFloat16, 1 + 8 * ulp), 1).within);
  EquivalenceResult single = CompareGraphs(Scaled(DType::kFloat32, 1), Scaled(DType::kFloat32, 1 + ulp), 1);
  EXPECT_FALSE(single.within) << single.max_error;
  EXPECT_EQ(single.allowed, 1e-4);
  EXPECT_TRUE(CompareGraphs(Scaled(DType::kFloat32, 1), Scaled(DType::kFloat32, 1 + ulp), 1, 2e-3).within);
  // A float32 output computed through float16 (a model converted with its
  // inputs and outputs kept float32) carries float16's precision.
  auto through_half = [](float s) {
    GraphBuilder b(1, 13, "g");
    ValueId x = b.Op("Cast", {b.Input("x", {4, 16})}, {{"to", Attribute::Int(10)}});
    ValueId c = b.Op("Cast", {b.ConstFloat(s, "s")}, {{"to", Attribute::Int(10)}});
    return b.Build({b.Op("Cast", {b.Op("Mul", {x, c})}, {{"to", Attribute::Int(1)}})});
  };
  EquivalenceResult cast = CompareGraphs(through_half(1), through_half(1 + ulp), 1);
  EXPECT_TRUE(cast.within) << cast.max_error;
  EXPECT_EQ(cast.allowed, 4.0 / 1024);
}

}  // namespace
}  // namespace rlflow
