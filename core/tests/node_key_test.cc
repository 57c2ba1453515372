// The canonical node key: equal for nodes that compute the same thing
// however they were built; different when the operator, an attribute, an
// input type or a small constant differs; its text and hash forms agree over
// every node of the model zoo; the structural hash follows it.
#include "core/node_key.h"

#include <gtest/gtest.h>

#include <map>
#include <string>

#include "core/graph_builder.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

NodeId Find(const Graph& g, const std::string& op, int nth = 0) {
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).op == op && nth-- == 0) return id;
  ADD_FAILURE() << op << " not found";
  return 0;
}

// One 3x3 conv written with only `pads`, and with every attribute explicit
// (defaults included), in graphs with different names and weights.
Graph ConvGraph(bool explicit_attrs, uint64_t seed, Attribute strides = Attribute::Ints({1, 1})) {
  GraphBuilder b(seed, 17, explicit_attrs ? "explicit" : "short");
  ValueId x = b.Input(explicit_attrs ? "input" : "x", {1, 4, 16, 16});
  ValueId w = b.Weight(explicit_attrs ? "weight" : "w", {8, 4, 3, 3}, 0.1f);
  AttributeMap attrs = {{"pads", Attribute::Ints({1, 1, 1, 1})}};
  if (explicit_attrs) {
    attrs["strides"] = strides;
    attrs["dilations"] = Attribute::Ints({1, 1});
    attrs["kernel_shape"] = Attribute::Ints({3, 3});
    attrs["group"] = Attribute::Int(1);
    attrs["auto_pad"] = Attribute::String("NOTSET");
  }
  ValueId y = b.Op("Conv", {x, w}, attrs, explicit_attrs ? "conv_a" : "conv_b");
  return b.Build({b.Op("Relu", {y})});
}

TEST(NodeKey, EqualForTheSameNodeBuiltDifferently) {
  Graph a = ConvGraph(false, 1), b = ConvGraph(true, 2);
  NodeId ca = Find(a, "Conv"), cb = Find(b, "Conv");
  ASSERT_NE(a.node(ca).attrs.size(), b.node(cb).attrs.size());
  EXPECT_EQ(OperatorHash(a, ca), OperatorHash(b, cb));
  EXPECT_EQ(NodeKeyHash(a, ca), NodeKeyHash(b, cb));
  EXPECT_EQ(NodeKeyText(a, ca), NodeKeyText(b, cb));
  // The graphs differ in weights; with the same weights they are one graph.
  EXPECT_NE(a.StructuralHash(), b.StructuralHash());
  EXPECT_EQ(a.StructuralHash(), ConvGraph(true, 1).StructuralHash());
}

TEST(NodeKey, DiffersWithAttributesTypesAndSmallConstants) {
  Graph a = ConvGraph(true, 1), strided = ConvGraph(true, 1, Attribute::Ints({2, 2}));
  NodeId ca = Find(a, "Conv"), cs = Find(strided, "Conv");
  EXPECT_NE(OperatorHash(a, ca), OperatorHash(strided, cs));
  EXPECT_NE(NodeKeyHash(a, ca), NodeKeyHash(strided, cs));
  EXPECT_NE(NodeKeyText(a, ca), NodeKeyText(strided, cs));
  EXPECT_NE(a.StructuralHash(), strided.StructuralHash());
  EXPECT_NE(OperatorHash(a, ca), OperatorHash(a, Find(a, "Relu")));

  // Reshape: the shape constant counts by content; input types count.
  auto reshape = [](const Shape& in, const std::vector<int64_t>& to) {
    GraphBuilder b(1);
    ValueId x = b.Input("x", in);
    return b.Build({b.Op("Reshape", {x, b.ConstInts(to)})});
  };
  Graph r1 = reshape({2, 6}, {3, 4}), r2 = reshape({2, 6}, {4, 3}), r3 = reshape({12}, {3, 4});
  NodeId n1 = Find(r1, "Reshape"), n2 = Find(r2, "Reshape"), n3 = Find(r3, "Reshape");
  EXPECT_EQ(OperatorHash(r1, n1), OperatorHash(r2, n2));  // same operator
  EXPECT_NE(NodeKeyHash(r1, n1), NodeKeyHash(r2, n2));    // different shape constant
  EXPECT_NE(NodeKeyText(r1, n1), NodeKeyText(r2, n2));
  EXPECT_NE(NodeKeyHash(r1, n1), NodeKeyHash(r3, n3));  // different input type
  EXPECT_NE(NodeKeyText(r1, n1), NodeKeyText(r3, n3));
  EXPECT_NE(ValueKeyHash(r1, r1.node(n1).inputs[1]), ValueKeyHash(r2, r2.node(n2).inputs[1]));
  EXPECT_EQ(ValueKeyHash(r1, r1.node(n1).inputs[0]), ValueKeyHash(r2, r2.node(n2).inputs[0]));
}

// A small layer's bias or scale (a vector of floats) counts by its type: two
// layers that differ only in it are one key (a 4000-layer model was 4000
// keys, each timed in calibration and each rewrite resolved apart). A scalar
// counts by content (Pow's exponent picks ATen's kernel).
TEST(NodeKey, FloatVectorsCountByTypeScalarsByContent) {
  auto with = [](const std::string& op, const std::vector<float>& constant, const Shape& constant_shape) {
    GraphBuilder b(1);
    ValueId x = b.Input("x", {8, 16});
    return b.Build({b.Op(op, {x, b.Const(TensorData::FromFloat(constant, constant_shape))})});
  };
  std::vector<float> bias(16, 0.5f), other_bias(16, -1.25f);
  Graph a = with("Add", bias, {16}), b = with("Add", other_bias, {16});
  NodeId na = Find(a, "Add"), nb = Find(b, "Add");
  EXPECT_EQ(NodeKeyHash(a, na), NodeKeyHash(b, nb));
  EXPECT_EQ(NodeKeyText(a, na), NodeKeyText(b, nb));
  EXPECT_EQ(ValueKeyHash(a, a.node(na).inputs[1]), ValueKeyHash(b, b.node(nb).inputs[1]));
  EXPECT_NE(a.StructuralHash(), b.StructuralHash());  // different graphs all the same
  Graph square = with("Pow", {2.0f}, {}), root = with("Pow", {0.5f}, {});
  EXPECT_NE(NodeKeyHash(square, Find(square, "Pow")), NodeKeyHash(root, Find(root, "Pow")));
  EXPECT_NE(NodeKeyText(square, Find(square, "Pow")), NodeKeyText(root, Find(root, "Pow")));
}

// The text and hash forms partition every node of the zoo the same way.
TEST(NodeKey, TextAndHashAgreeOverTheZoo) {
  for (const char* name : {"resnet50", "inception_v3", "bert_base"}) {
    Graph g = zoo::Build(name);
    std::map<std::string, uint64_t> hash_of_text;
    std::map<uint64_t, std::string> text_of_hash;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      std::string text = NodeKeyText(g, id);
      uint64_t hash = NodeKeyHash(g, id);
      EXPECT_NE(hash, 0u);
      auto [t, new_text] = hash_of_text.emplace(text, hash);
      EXPECT_EQ(t->second, hash) << name << ": one text, two hashes: " << text;
      auto [h, new_hash] = text_of_hash.emplace(hash, text);
      EXPECT_EQ(h->second, text) << name << ": one hash, two texts";
      EXPECT_EQ(new_text, new_hash);
    }
    // Repeated blocks share keys: far fewer keys than nodes.
    EXPECT_LT(hash_of_text.size() * 2, static_cast<size_t>(g.num_nodes())) << name;
  }
}

// An Add reading a transposed tensor (the CPU executor's Transpose is a
// permuted view; reading it costs about three times as much) has its own
// key; through Unsqueeze and Identity (views of their input) as well; not
// after a Reshape (it copies), nor after a Transpose that only moves unit
// dimensions. A graph input marked arrives_permuted counts the same.
// Transposes compose: a pair whose permutations compose to the identity
// leaves the layout it read (ATen's permute of a permute; ONNX Runtime
// cancels the pair), so its reader keeps the key it had without them (a
// search that put such pairs around a RegNet's convolutions made their
// readers new keys, timed apart, and the graph looked 12% cheaper).
TEST(NodeKey, TransposesThatComposeToTheIdentityAreNoPermutedView) {
  auto add_after = [](const std::vector<std::vector<int64_t>>& perms, bool relu_between) {
    GraphBuilder b(1, 17, "g");
    ValueId v = b.Input("x", {1, 8, 6, 4});
    for (size_t k = 0; k < perms.size(); ++k) {
      v = b.Op("Transpose", {v}, {{"perm", Attribute::Ints(perms[k])}});
      if (relu_between && k == 0) v = b.Op("Relu", {v});
    }
    return b.Build({b.Op("Add", {v, b.Weight("c", {1}, 1.0f)})});
  };
  auto permuted = [](const Graph& g) { return PermutedView(g, g.node(Find(g, "Add")).inputs[0]); };
  EXPECT_FALSE(permuted(add_after({{0, 2, 1, 3}, {0, 2, 1, 3}}, false)));
  Graph inverse = add_after({{0, 2, 3, 1}, {0, 3, 1, 2}}, false);  // [1,8,6,4] -> [1,6,4,8] -> [1,8,6,4]
  EXPECT_FALSE(permuted(inverse));
  EXPECT_TRUE(permuted(add_after({{0, 2, 3, 1}, {0, 2, 3, 1}}, false)));  // [1,8,6,4] -> [1,6,4,8] -> [1,4,8,6]
  EXPECT_TRUE(permuted(add_after({{0, 2, 1, 3}}, false)));
  EXPECT_FALSE(permuted(add_after({{0, 2, 1, 3}, {0, 2, 1, 3}, {0, 2, 1, 3}, {0, 2, 1, 3}}, false)));
  // A Relu between them keeps its input's layout (ATen's element-wise
  // operators keep a permuted input's strides): the pair still composes.
  EXPECT_FALSE(permuted(add_after({{0, 2, 1, 3}, {0, 2, 1, 3}}, true)));
  EXPECT_TRUE(permuted(add_after({{0, 2, 1, 3}}, true)));  // the Relu's output is laid out permuted
  // The Add after the identity pair has the key of an Add reading x itself.
  GraphBuilder b(1, 17, "g");
  ValueId x = b.Input("x", {1, 8, 6, 4});
  Graph direct = b.Build({b.Op("Add", {x, b.Weight("c", {1}, 1.0f)})});
  EXPECT_EQ(NodeKeyText(inverse, Find(inverse, "Add")), NodeKeyText(direct, Find(direct, "Add")));
}

// Costed for ONNX Runtime (ModelInfo::permuted_views false: every tensor
// contiguous, a Transpose a copy or cancelled), a node has the key it has
// without the Transposes above it. With views, a search optimising for ORT
// had put a Transpose on each side of 14 `Add(exp(x), 1)`s of a Mish
// network: the Log after them was a new key, timed apart and 35% cheaper
// than the Log it had been, while ORT cancelled the pairs and ran the same
// kernels (the written model 1.001x [0.996, 1.005] against one without them).
TEST(NodeKey, NoPermutedViewsWhereTheDeviceHasNone) {
  auto log_after = [](bool transposes, bool views) {
    GraphBuilder b(1, 17, "g");
    ValueId v = b.Op("Exp", {b.Input("x", {1, 8, 6, 4})});
    if (transposes) v = b.Op("Transpose", {v}, {{"perm", Attribute::Ints({0, 2, 1, 3})}});
    v = b.Op("Add", {b.Weight("one", {}, 1.0f), v});
    if (transposes) v = b.Op("Transpose", {v}, {{"perm", Attribute::Ints({0, 2, 1, 3})}});
    Graph g = b.Build({b.Op("Log", {v})});
    g.info().permuted_views = views;
    return g;
  };
  auto log_key = [](const Graph& g) { return NodeKeyText(g, Find(g, "Log")); };
  Graph with_views = log_after(true, true), without = log_after(true, false);
  EXPECT_TRUE(PermutedView(with_views, with_views.node(Find(with_views, "Log")).inputs[0]));
  EXPECT_NE(log_key(with_views), log_key(log_after(false, true)));
  EXPECT_FALSE(PermutedView(without, without.node(Find(without, "Log")).inputs[0]));
  EXPECT_EQ(log_key(without), log_key(log_after(false, false)));
  EXPECT_EQ(log_key(without), log_key(log_after(false, true)));
  Graph plain = log_after(false, true);
  EXPECT_EQ(NodeKeyHash(without, Find(without, "Log")), NodeKeyHash(plain, Find(plain, "Log")));
}

TEST(NodeKey, PermutedInputsHaveTheirOwnKey) {
  auto add_after = [](const std::vector<std::string>& ops, const std::vector<int64_t>& perm) {
    GraphBuilder b(1, 17, "g");
    ValueId x = b.Input("x", {1, 8, 6});
    ValueId v = x;
    for (const std::string& op : ops) {
      if (op == "Transpose") v = b.Op("Transpose", {v}, {{"perm", Attribute::Ints(perm)}});
      if (op == "Unsqueeze") v = b.Op("Unsqueeze", {v, b.ConstInts({0})});
      if (op == "Squeeze") v = b.Op("Squeeze", {v, b.ConstInts({0})});
      if (op == "Identity") v = b.Op("Identity", {v});
      if (op == "Reshape") v = b.Op("Reshape", {v, b.ConstInts({1, 6, 8})});
      if (op == "Relu") v = b.Op("Relu", {v});
    }
    ValueId c = b.Weight("c", {1, 6, 8}, 1.0f);
    return b.Build({b.Op("Add", {v, c})});
  };
  Graph plain = add_after({"Relu", "Reshape"}, {});
  Graph permuted = add_after({"Transpose"}, {0, 2, 1});
  Graph through = add_after({"Transpose", "Unsqueeze", "Identity", "Squeeze"}, {0, 2, 1});
  Graph copied = add_after({"Transpose", "Reshape"}, {0, 2, 1});
  Graph unit_only = add_after({"Reshape", "Transpose"}, {1, 0, 2});  // [1,6,8] -> [6,1,8]: data in place
  const NodeId a = Find(plain, "Add");
  EXPECT_FALSE(PermutedView(plain, plain.node(a).inputs[0]));
  EXPECT_TRUE(PermutedView(permuted, permuted.node(Find(permuted, "Add")).inputs[0]));
  EXPECT_TRUE(PermutedView(through, through.node(Find(through, "Add")).inputs[0]));
  EXPECT_FALSE(PermutedView(copied, copied.node(Find(copied, "Add")).inputs[0]));
  EXPECT_FALSE(PermutedView(unit_only, unit_only.node(Find(unit_only, "Add")).inputs[0]));
  EXPECT_FALSE(PermutedView(permuted, permuted.node(Find(permuted, "Add")).inputs[1]));  // a weight
  // Without a perm attribute Transpose reverses the dimensions: [1,8,6] ->
  // [6,8,1] moves data, [1,1,6] -> [6,1,1] does not.
  auto reversed = [](const Shape& shape) {
    GraphBuilder b(1, 17, "g");
    return b.Build({b.Op("Relu", {b.Op("Transpose", {b.Input("x", shape)})})});
  };
  Graph moves = reversed({1, 8, 6}), in_place = reversed({1, 1, 6});
  EXPECT_TRUE(PermutedView(moves, moves.node(Find(moves, "Relu")).inputs[0]));
  EXPECT_FALSE(PermutedView(in_place, in_place.node(Find(in_place, "Relu")).inputs[0]));

  const std::string key = NodeKeyText(plain, a);
  EXPECT_EQ(key.find("^t"), std::string::npos) << key;
  EXPECT_EQ(NodeKeyText(permuted, Find(permuted, "Add")), NodeKeyText(through, Find(through, "Add")));
  EXPECT_NE(NodeKeyText(permuted, Find(permuted, "Add")), key);
  EXPECT_NE(NodeKeyHash(permuted, Find(permuted, "Add")), NodeKeyHash(plain, a));
  EXPECT_EQ(NodeKeyText(copied, Find(copied, "Add")), key);
  EXPECT_EQ(NodeKeyHash(copied, Find(copied, "Add")), NodeKeyHash(plain, a));
  EXPECT_NE(ValueKeyHash(permuted, permuted.node(Find(permuted, "Add")).inputs[0]),
            ValueKeyHash(plain, plain.node(a).inputs[0]));
  // The Add cut out alone, its input marked as it arrives there: the same key.
  Graph alone;
  ValueId in = alone.AddInput("t", permuted.value(permuted.node(Find(permuted, "Add")).inputs[0]).type);
  alone.mutable_value(in).arrives_permuted = true;
  ValueId w = alone.AddInitializer("c", permuted.value(permuted.node(Find(permuted, "Add")).inputs[1]).initializer);
  NodeId add = alone.AddNode("Add", {in, w}, 1);
  alone.SetOutputs({alone.node(add).outputs[0]});
  EXPECT_EQ(NodeKeyText(alone, add), NodeKeyText(permuted, Find(permuted, "Add")));
}

}  // namespace
}  // namespace rlflow
