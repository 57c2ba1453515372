// Graph IR: structural hashing, topological order, cycles, dead code, DOT.
#include "core/graph.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/op_registry.h"

namespace rlflow {
namespace {

AttributeMap Axis(int64_t a) { return {{"axis", Attribute::Int(a)}}; }

// y = concat(relu(x) - w, sigmoid(x)), built with the branches in either order
// and with different names.
Graph Diamond(bool relu_first, const std::string& prefix, float weight_value = 1.0f) {
  GraphBuilder b(3);
  ValueId x = b.Input(prefix + "x", {2, 3});
  ValueId w = b.Const(TensorData::FromFloat(std::vector<float>(6, weight_value), {2, 3}), prefix + "w");
  ValueId left, right;
  if (relu_first) {
    left = b.Op("Sub", {b.Op("Relu", {x}, {}, prefix + "relu"), w});
    right = b.Op("Sigmoid", {x}, {}, prefix + "sig");
  } else {
    right = b.Op("Sigmoid", {x}, {}, prefix + "sig");
    left = b.Op("Sub", {b.Op("Relu", {x}, {}, prefix + "relu"), w});
  }
  return b.Build({b.Op("Concat", {left, right}, Axis(1))});
}

TEST(GraphTest, StructuralHashIgnoresNodeOrderAndNames) {
  Graph a = Diamond(true, "a_");
  Graph b = Diamond(false, "b_");
  ASSERT_NE(a.node(0).op, b.node(0).op);  // really built in different orders
  EXPECT_EQ(a.StructuralHash(), b.StructuralHash());
}

TEST(GraphTest, StructuralHashSeesSemanticDifferences) {
  uint64_t base = Diamond(true, "").StructuralHash();
  EXPECT_NE(base, Diamond(true, "", 2.0f).StructuralHash()) << "weight contents must count";
  // Swapping the operands of a non-commutative op.
  GraphBuilder b1(0), b2(0);
  ValueId x1 = b1.Input("x", {4}), y1 = b1.Input("y", {4});
  ValueId x2 = b2.Input("x", {4}), y2 = b2.Input("y", {4});
  Graph g1 = b1.Build({b1.Op("Sub", {x1, y1})});
  Graph g2 = b2.Build({b2.Op("Sub", {y2, x2})});
  EXPECT_NE(g1.StructuralHash(), g2.StructuralHash());
  // An attribute change.
  GraphBuilder b3(0), b4(0);
  ValueId p = b3.Input("p", {2, 2}), q = b4.Input("p", {2, 2});
  Graph g3 = b3.Build({b3.Op("Softmax", {p}, Axis(0))});
  Graph g4 = b4.Build({b4.Op("Softmax", {q}, Axis(1))});
  EXPECT_NE(g3.StructuralHash(), g4.StructuralHash());
}

TEST(GraphTest, TopologicalOrderRespectsEdges) {
  Graph g = Diamond(false, "");
  std::vector<NodeId> order = g.TopologicalOrder();
  ASSERT_EQ(order.size(), static_cast<size_t>(g.num_nodes()));
  std::vector<int> pos(g.num_nodes());
  for (size_t k = 0; k < order.size(); ++k) pos[order[k]] = static_cast<int>(k);
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    for (ValueId in : g.node(id).inputs)
      if (in != kNoValue && g.value(in).producer != kNoNode) {
        EXPECT_LT(pos[g.value(in).producer], pos[id]);
      }
}

TEST(GraphTest, TopologicalOrderTakesTheSmallestReadyNodeFirst) {
  Graph g;
  ValueId x = g.AddInput("x", {DType::kFloat32, {4}});
  NodeId a = g.AddNode("Relu", {x}, 1, {}, "a");
  NodeId b = g.AddNode("Neg", {x}, 1, {}, "b");
  NodeId c = g.AddNode("Abs", {x}, 1, {}, "c");
  g.mutable_node(a).inputs[0] = g.node(b).outputs[0];  // a now reads b
  g.SetOutputs({g.node(a).outputs[0], g.node(c).outputs[0]});
  // Ready at first: b, c; b placed makes a ready, and a < c.
  EXPECT_EQ(g.TopologicalOrder(), (std::vector<NodeId>{b, a, c}));
  EXPECT_TRUE(g.IsAcyclic());
}

TEST(GraphTest, CycleIsReportedWithNodeNames) {
  Graph g;
  ValueId x = g.AddInput("x", {DType::kFloat32, {4}});
  NodeId a = g.AddNode("Relu", {x}, 1, {}, "first");
  NodeId b = g.AddNode("Neg", {g.node(a).outputs[0]}, 1, {}, "second");
  g.mutable_node(a).inputs[0] = g.node(b).outputs[0];  // first <- second <- first
  g.SetOutputs({g.node(b).outputs[0]});
  EXPECT_FALSE(g.IsAcyclic());
  try {
    g.TopologicalOrder();
    FAIL() << "no cycle reported";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("cycle"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'first'"), std::string::npos) << msg;
    EXPECT_NE(msg.find("'second'"), std::string::npos) << msg;
  }
}

TEST(GraphTest, ShapeErrorsNameTheNode) {
  GraphBuilder b(0);
  ValueId x = b.Input("x", {1, 3, 8, 8});
  ValueId w = b.Weight("w", {4, 5, 3, 3}, 0.1f);
  b.Op("Conv", {x, w}, {}, "bad_conv");
  try {
    b.Build({b.graph().node(0).outputs[0]});
    FAIL() << "no shape error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'bad_conv' (Conv)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("3 channels"), std::string::npos) << msg;
  }
}

TEST(GraphTest, RemoveDeadCodeKeepsWhatOutputsNeed) {
  GraphBuilder b(0);
  ValueId x = b.Input("x", {4});
  ValueId unused_in = b.Input("unused", {4});
  ValueId live = b.Op("Relu", {x});
  b.Op("Neg", {x});          // dead
  b.Op("Abs", {unused_in});  // dead
  Graph g = b.Build({live});
  EXPECT_EQ(g.num_nodes(), 3);
  uint64_t before = g.StructuralHash();
  g.RemoveDeadCode();
  EXPECT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.node(0).op, "Relu");
  EXPECT_EQ(g.inputs().size(), 2u) << "graph inputs are part of the interface";
  EXPECT_NE(g.StructuralHash(), before) << "dead nodes count in the hash";
  g.Validate();
}

TEST(GraphTest, DotListsEveryNodeAndEdge) {
  Graph g = Diamond(true, "");
  std::string dot = g.ToDot();
  EXPECT_EQ(dot.rfind("digraph", 0), 0u);
  for (const char* op : {"Relu", "Sub", "Sigmoid", "Concat"}) EXPECT_NE(dot.find(op), std::string::npos) << op;
  size_t edges = 0;
  for (size_t pos = dot.find("->"); pos != std::string::npos; pos = dot.find("->", pos + 2)) ++edges;
  // x->relu, relu->sub, w->sub, x->sig, sub->concat, sig->concat, concat->out
  EXPECT_EQ(edges, 7u);
  EXPECT_EQ(dot.back(), '\n');
}

TEST(GraphTest, ShapeInferenceBroadcastAndMatMul) {
  GraphBuilder b(0);
  ValueId a = b.Input("a", {5, 1, 3, 4});
  ValueId w = b.Input("w", {2, 4, 6});
  ValueId m = b.Op("MatMul", {a, w});
  ValueId s = b.Op("Add", {m, b.Input("bias", {6})});
  Graph g = b.Build({s});
  EXPECT_EQ(g.value(g.outputs()[0]).type.shape, (Shape{5, 2, 3, 6}));
  EXPECT_EQ(g.value(g.outputs()[0]).type.dtype, DType::kFloat32);
}

TEST(GraphTest, RunTimeShapeInputsGivePartialShapes) {
  // Without folding, Shape(y) is computed at run time: the rules still know
  // the ranks and leave the dimensions unknown.
  GraphBuilder b(0);
  ValueId x = b.Input("x", {2, 6});
  ValueId y = b.Input("y", {3, 4});
  ValueId target = b.Op("Shape", {y});
  ValueId r = b.Op("Reshape", {x, target});
  ValueId u = b.Op("Unsqueeze", {r, b.Op("Shape", {b.Input("one", {1})})});
  ValueId p = b.Op("Pad", {x, b.Op("Concat", {target, target}, Axis(0))});
  Graph g = b.Build({r, u, p});
  const TensorType& rt = g.value(r).type;
  EXPECT_TRUE(rt.rank_known);
  EXPECT_EQ(rt.shape, (Shape{kUnknownDim, kUnknownDim}));
  EXPECT_EQ(g.value(u).type.shape, (Shape{kUnknownDim, kUnknownDim, kUnknownDim}));
  EXPECT_EQ(g.value(p).type.shape, (Shape{kUnknownDim, kUnknownDim}));
}

// Reshape's 0 copies the input's dimension; where that dimension is unknown
// (after an opaque node) it is not a second -1 ("shape has more than one
// -1" refused the attention reshapes, [0, 0, heads, size], of a BERT whose
// projections ONNX Runtime had fused into FusedMatMul).
TEST(GraphTest, ReshapeCopiesUnknownDimensions) {
  GraphBuilder b(0);
  ValueId x = b.Input("x", {kUnknownDim, kUnknownDim, 128});
  ValueId heads = b.Op("Reshape", {x, b.ConstInts({0, 0, 4, 32})});
  ValueId rest = b.Op("Reshape", {x, b.ConstInts({0, 0, 4, -1})});
  ValueId known = b.Op("Reshape", {b.Input("y", {2, 6, 128}), b.ConstInts({0, 0, 4, -1})});
  Graph g = b.Build({heads, rest, known});
  EXPECT_EQ(g.value(heads).type.shape, (Shape{kUnknownDim, kUnknownDim, 4, 32}));
  EXPECT_EQ(g.value(rest).type.shape, (Shape{kUnknownDim, kUnknownDim, 4, kUnknownDim}));
  EXPECT_EQ(g.value(known).type.shape, (Shape{2, 6, 4, 32}));
}

TEST(GraphTest, RegistryEntriesAreComplete) {
  // Every modelled op has a shape rule and a CPU kernel.
  auto all = OpRegistry::Global().All();
  EXPECT_GE(all.size(), 45u);
  for (const OpDef* def : all) {
    EXPECT_TRUE(static_cast<bool>(def->shape)) << def->name;
    EXPECT_NE(def->kernel, nullptr) << def->name;
    EXPECT_LE(def->min_inputs, def->max_inputs) << def->name;
  }
  for (const char* op : {"Conv",        "BatchNormalization",
                         "Relu",        "Sigmoid",
                         "Tanh",        "Clip",
                         "Erf",         "Add",
                         "Sub",         "Mul",
                         "Div",         "Pow",
                         "Sqrt",        "MatMul",
                         "Gemm",        "MaxPool",
                         "AveragePool", "GlobalAveragePool",
                         "Pad",         "Concat",
                         "Split",       "Slice",
                         "Transpose",   "Reshape",
                         "Flatten",     "Squeeze",
                         "Unsqueeze",   "Softmax",
                         "ReduceMean",  "LayerNormalization",
                         "Gather",      "Shape",
                         "Constant",    "Identity",
                         "Dropout",     "Cast"})
    EXPECT_NE(OpRegistry::Global().Find("", op), nullptr) << op;
}

// Half-precision constants (a float16 model's weights, a rule's constants
// made in its type, a batch norm's folded scale): rounded to nearest, ties
// to even, as IEEE 754 and ONNX Runtime round; read back exactly.
TEST(TensorDataTest, HalfPrecisionValuesRoundToNearestEven) {
  const double ulp = std::ldexp(1.0, -10);  // float16's spacing in [1, 2)
  EXPECT_EQ(RoundToFloatType(1.0 / 3, DType::kFloat16), 0.333251953125);
  EXPECT_EQ(RoundToFloatType(1.0 / 3, DType::kBFloat16), 0.333984375);
  EXPECT_EQ(RoundToFloatType(1 + ulp / 2, DType::kFloat16), 1.0);            // a tie: to the even 1.0
  EXPECT_EQ(RoundToFloatType(1 + 1.5 * ulp, DType::kFloat16), 1 + 2 * ulp);  // a tie: to the even one above
  EXPECT_EQ(RoundToFloatType(1 + 0.6 * ulp, DType::kFloat16), 1 + ulp);
  EXPECT_EQ(RoundToFloatType(-6.0, DType::kFloat16), -6.0);
  EXPECT_EQ(RoundToFloatType(65504, DType::kFloat16), 65504);         // the largest
  EXPECT_TRUE(std::isinf(RoundToFloatType(65520, DType::kFloat16)));  // halfway to 2^16: infinity
  EXPECT_EQ(RoundToFloatType(-HUGE_VAL, DType::kFloat16), -HUGE_VAL);
  EXPECT_TRUE(std::isnan(RoundToFloatType(std::nan(""), DType::kFloat16)));
  EXPECT_EQ(RoundToFloatType(std::ldexp(1.0, -24), DType::kFloat16), std::ldexp(1.0, -24));  // the smallest subnormal
  EXPECT_EQ(RoundToFloatType(std::ldexp(1.0, -26), DType::kFloat16), 0.0);
  EXPECT_EQ(RoundToFloatType(std::ldexp(1023.7, -24), DType::kFloat16),
            std::ldexp(1.0, -14));  // up to the smallest normal
  EXPECT_EQ(RoundToFloatType(0.1, DType::kFloat32), static_cast<double>(0.1f));
  const std::vector<double> values = {0.1, -2.5, 1.0 / 3, 1e-6, 70000, -0.0};
  for (DType d : {DType::kFloat16, DType::kBFloat16, DType::kFloat32, DType::kFloat64}) {
    TensorData t = TensorData::FromDouble(values, {2, 3}, d);
    EXPECT_EQ(t.dtype(), d);
    EXPECT_EQ(t.size_bytes(), 6 * DTypeSize(d));
    std::vector<double> back = t.ToDouble();
    ASSERT_EQ(back.size(), values.size());
    for (size_t k = 0; k < values.size(); ++k) EXPECT_EQ(back[k], RoundToFloatType(values[k], d)) << DTypeName(d);
  }
  // float16's bits: 1.0 is 0x3c00.
  TensorData one = TensorData::FromDouble({1.0}, {1}, DType::kFloat16);
  uint16_t bits;
  std::memcpy(&bits, one.data(), 2);
  EXPECT_EQ(bits, 0x3c00);
}

}  // namespace
}  // namespace rlflow
