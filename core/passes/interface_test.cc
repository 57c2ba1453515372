// RestoreInterface keeps output names across rewrites; CutAtOpaque removes
// opaque nodes so that the rest runs, with matching interfaces.
#include "core/passes/interface.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/op_registry.h"

namespace rlflow {
namespace {

Graph TwoOutputs() {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  ValueId a = b.Op("Relu", {x});
  ValueId c = b.Op("Neg", {a});
  Graph g = b.Build({a, c});
  g.RenameValue(g.outputs()[0], "first");
  g.RenameValue(g.outputs()[1], "second");
  return g;
}

TEST(Interface, OutputNamesComeBackAfterARewrite) {
  Graph original = TwoOutputs();
  Graph g = original;
  // A "rewrite": the second output is now computed by a new node under another name.
  NodeId id = g.AddNode("Neg", {g.outputs()[0]}, 1, {}, "rewritten");
  g.SetOutputs({g.outputs()[0], g.node(id).outputs[0]});
  g.RemoveDeadCode();
  InferShapes(g);
  EXPECT_NE(g.value(g.outputs()[1]).name, "second");
  EXPECT_EQ(RestoreInterface(original, g), 1);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "first");
  EXPECT_EQ(g.value(g.outputs()[1]).name, "second");
}

TEST(Interface, TwoOutputsMergedIntoOneValueGetAnIdentity) {
  Graph original = TwoOutputs();
  Graph g = original;
  g.SetOutputs({g.outputs()[0], g.outputs()[0]});  // both outputs now the same value
  g.RemoveDeadCode();
  EXPECT_EQ(RestoreInterface(original, g), 1);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "first");
  EXPECT_EQ(g.value(g.outputs()[1]).name, "second");
  EXPECT_NE(g.outputs()[0], g.outputs()[1]);
  EXPECT_EQ(g.node(g.value(g.outputs()[1]).producer).op, "Identity");
}

TEST(Interface, AnOutputListedTwiceStaysOneValue) {
  // Valid ONNX (the checker and ONNX Runtime accept it): graph outputs
  // ["y", "y"]. After a rewrite that recomputes y under another name, both
  // slots name the one new value "y"; an Identity would define "y" twice.
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  ValueId a = b.Op("Relu", {x});
  Graph original = b.Build({a, a});
  original.RenameValue(a, "y");
  Graph g = original;
  NodeId id = g.AddNode("Relu", {g.inputs()[0]}, 1, {}, "rewritten");
  ValueId v = g.node(id).outputs[0];
  g.SetOutputs({v, v});
  g.RemoveDeadCode();
  InferShapes(g);
  EXPECT_EQ(RestoreInterface(original, g), 1);  // one value renamed
  ASSERT_EQ(g.outputs().size(), 2u);
  EXPECT_EQ(g.outputs()[0], g.outputs()[1]);
  EXPECT_EQ(g.value(g.outputs()[0]).name, "y");
  EXPECT_EQ(g.node(g.value(g.outputs()[0]).producer).op, "Relu");
  // Unchanged, the interface needs nothing.
  Graph same = original;
  EXPECT_EQ(RestoreInterface(original, same), 0);
  EXPECT_EQ(same.outputs(), original.outputs());
}

TEST(Interface, ChangedInputsAreAnError) {
  Graph original = TwoOutputs();
  GraphBuilder b(1);
  ValueId x = b.Input("other", {2, 3});
  Graph g = b.Build({b.Op("Relu", {x}), b.Op("Neg", {x})});
  EXPECT_THROW(RestoreInterface(original, g), Error);
}

TEST(Interface, CutAtOpaqueTurnsOpaqueNodesIntoInputsAndOutputs) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  ValueId a = b.Op("Relu", {x});
  Graph g = b.Build({a});
  NodeId op = g.AddNode("Custom", {a}, 1, {}, "custom");
  Node& n = g.mutable_node(op);
  n.domain = "com.example";
  n.opaque_proto = std::make_shared<const std::string>("opaque");
  ValueId out = n.outputs[0];
  g.mutable_value(out).type = g.value(a).type;
  NodeId tail = g.AddNode("Neg", {out}, 1, {}, "tail");
  g.SetOutputs({g.node(tail).outputs[0]});
  InferShapes(g);
  Graph cut = CutAtOpaque(g);
  for (NodeId id = 0; id < cut.num_nodes(); ++id) EXPECT_FALSE(cut.node(id).opaque());
  ASSERT_EQ(cut.inputs().size(), 2u);  // x, then the opaque node's output
  EXPECT_EQ(cut.value(cut.inputs()[1]).name, g.value(out).name);
  ASSERT_EQ(cut.outputs().size(), 2u);  // the graph output, then what the opaque node reads
  EXPECT_EQ(cut.value(cut.outputs()[1]).name, g.value(a).name);

  // An opaque output without a static type cannot be cut: a clean error naming the node.
  g.mutable_value(out).type = TensorType();
  try {
    CutAtOpaque(g);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("'custom'"), std::string::npos) << e.what();
  }
}

// A graph input only an opaque node reads (a uint16 tensor into BitShift:
// the executor has no uint16) is not an input of the cut, nor is an opaque
// output that only the graph's outputs read.
TEST(Interface, CutAtOpaqueDropsInputsOnlyOpaqueNodesRead) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  Graph g = b.Build({b.Op("Relu", {x})});
  TensorType u16;
  u16.dtype = DType::kUInt16;
  u16.shape = {4};
  ValueId bits = g.AddInput("bits", u16);
  NodeId op = g.AddNode("BitShift", {bits, bits}, 1, {}, "shift");
  g.mutable_node(op).opaque_proto = std::make_shared<const std::string>("opaque");
  ValueId shifted = g.node(op).outputs[0];
  g.mutable_value(shifted).type = u16;
  g.SetOutputs({g.outputs()[0], shifted});
  Graph cut = CutAtOpaque(g);
  // Neither 'bits' nor the opaque output (a graph output no node reads).
  ASSERT_EQ(cut.inputs().size(), 1u);
  EXPECT_EQ(cut.value(cut.inputs()[0]).name, "x");
  EXPECT_EQ(cut.FindValue("bits"), kNoValue);
  EXPECT_EQ(cut.FindValue(g.value(shifted).name), kNoValue);
  ASSERT_EQ(cut.outputs().size(), 1u);
}

// A sequence graph input that is also a graph output (passed through) is
// not an input of the cut either: only opaque nodes handle sequences.
TEST(Interface, CutAtOpaqueLeavesOutSequenceInputs) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  Graph g = b.Build({b.Op("Relu", {x})});
  ValueId items = g.AddInput("items", TensorType{DType::kUndefined, {}, false});
  g.mutable_value(items).non_tensor = true;
  NodeId len = g.AddNode("SequenceLength", {items}, 1, {}, "len");
  g.mutable_node(len).opaque_proto = std::make_shared<const std::string>("opaque");
  ValueId n = g.node(len).outputs[0];
  g.mutable_value(n).type = TensorType{DType::kInt64, {}};
  ValueId sum = g.node(g.AddNode("Add", {n, n}, 1, {}, "twice")).outputs[0];
  g.SetOutputs({g.outputs()[0], items, sum});
  InferShapes(g);
  Graph cut = CutAtOpaque(g);
  std::vector<std::string> names;
  for (ValueId in : cut.inputs()) names.push_back(cut.value(in).name);
  // x, and the opaque node's output that 'twice' reads; not 'items'.
  EXPECT_EQ(names, (std::vector<std::string>{"x", g.value(n).name}));
  EXPECT_EQ(cut.outputs().size(), 2u);
}

}  // namespace
}  // namespace rlflow
