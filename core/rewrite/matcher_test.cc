// Matcher and rewriter: known rewrites apply and preserve outputs; intermediate
// values used elsewhere block a match; opaque nodes are never crossed.
#include "core/rewrite/matcher.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <random>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/passes/lower_batchnorm.h"
#include "core/rules/written.h"
#include "rules/testing.h"
#include "runtime/executor.h"
#include "zoo/zoo.h"

namespace rlflow {
namespace {

const rules::RuleDatabase& Db() { return testing::DefaultRules(); }
using testing::RuleById;

double Diff(const Graph& a, const Graph& b) {
  std::vector<at::Tensor> in = RandomInputs(a, 3);
  std::vector<at::Tensor> x = Executor(a).Run(in), y = Executor(b).Run(in);
  double worst = 0;
  for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, RelativeError(x[k], y[k]));
  return worst;
}

AttributeMap Pads1() { return {{"pads", Attribute::Ints({1, 1, 1, 1})}}; }

TEST(Matcher, FoldsPerChannelScaleIntoConv) {
  GraphBuilder b(2);
  ValueId x = b.Input("x", {1, 3, 8, 8});
  ValueId conv = b.Op("Conv", {x, b.Weight("w", {4, 3, 3, 3}, 0.3f)}, Pads1());
  ValueId scaled = b.Op("Mul", {conv, b.Uniform("s", {4, 1, 1}, 0.5f, 1.5f)});
  Graph g = b.Build({b.Op("Relu", {scaled})});
  Matcher m({RuleById("fb7ae47167c7")});
  std::vector<Match> found = m.FindAll(g);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].reverse);
  Graph out = m.Apply(g, found[0]);
  EXPECT_EQ(out.OpCounts()["Mul"], 1);  // now on the weights
  EXPECT_EQ(out.OpCounts()["Unsqueeze"], 1);
  EXPECT_LE(Diff(g, out), 1e-5);
}

// The attribute-generic scale fold reaches convs the stride-1 "same"
// templates never could: a 7x7 stride-2 stem with asymmetric pads, a
// grouped conv, a depthwise conv, an auto_pad conv; the replacement keeps
// each conv's own attributes.
TEST(Matcher, AttributeGenericRuleBindsEachConvsAttributes) {
  GraphBuilder b(5);
  ValueId x = b.Input("x", {1, 4, 15, 15});
  int layer = 0;
  auto scaled = [&](ValueId in, Shape w, AttributeMap attrs) {
    std::string k = std::to_string(layer++);
    ValueId conv = b.Op("Conv", {in, b.Weight("w" + k, w, 0.3f)}, attrs);
    return b.Op("Mul", {conv, b.Uniform("s" + k, {w[0], 1, 1}, 0.5f, 1.5f)});
  };
  ValueId stem =
      scaled(x, {8, 4, 7, 7}, {{"strides", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({3, 2, 3, 3})}});
  ValueId grouped = scaled(stem, {8, 2, 3, 3}, {{"group", Attribute::Int(4)}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  ValueId depthwise = scaled(
      grouped, {8, 1, 3, 3},
      {{"group", Attribute::Int(8)}, {"dilations", Attribute::Ints({2, 2})}, {"pads", Attribute::Ints({2, 2, 2, 2})}});
  ValueId same = scaled(depthwise, {6, 8, 2, 3}, {{"auto_pad", Attribute::String("SAME_UPPER")}});
  Graph g = b.Build({b.Op("Relu", {same})});
  Matcher m({RuleById("fb7ae47167c7")});
  Graph out = g;
  int applied = 0;
  for (;;) {
    std::vector<Match> found = m.FindAll(out);  // folds (reversed) and, once folded, unfolds
    auto fold = std::find_if(found.begin(), found.end(), [](const Match& x) { return x.reverse; });
    if (fold == found.end()) break;
    EXPECT_EQ(fold->attrs.size(), 4u);  // pads, strides, dilations, group
    out = m.Apply(out, *fold);
    ASSERT_LE(++applied, 4);
  }
  EXPECT_EQ(applied, 4);
  std::map<std::string, int> ops = out.OpCounts();
  EXPECT_EQ(ops["Mul"], 4);  // all on the weights now
  EXPECT_EQ(ops["Conv"], 4);
  EXPECT_LE(Diff(g, out), 1e-5);
  // The stem kept its stride and asymmetric pads.
  bool stem_found = false;
  for (NodeId id = 0; id < out.num_nodes(); ++id) {
    const Node& n = out.node(id);
    if (n.op != "Conv" || out.value(n.inputs[1]).type.shape[2] != 7) continue;
    stem_found = true;
    EXPECT_EQ(n.attrs.at("strides").ints, (std::vector<int64_t>{2, 2}));
    EXPECT_EQ(n.attrs.at("pads").ints, (std::vector<int64_t>{3, 2, 3, 3}));
  }
  EXPECT_TRUE(stem_found);
}

// Attribute variables bind consistently: the generic merge of two convs
// sharing an input needs equal strides (and weight shapes).
TEST(Matcher, AttributeVariablesBindConsistently) {
  auto build = [](int64_t stride2) {
    GraphBuilder b(4);
    ValueId x = b.Input("x", {1, 3, 8, 8});
    ValueId c1 = b.Op("Conv", {x, b.Weight("w1", {4, 3, 3, 3}, 0.3f)}, {{"strides", Attribute::Ints({2, 2})}});
    ValueId c2 =
        b.Op("Conv", {x, b.Weight("w2", {4, 3, 3, 3}, 0.3f)}, {{"strides", Attribute::Ints({stride2, stride2})}});
    return b.Build({c1, c2});
  };
  Matcher m({RuleById("d1b546e55a9f")});
  EXPECT_TRUE(m.FindAll(build(1)).empty());
  Graph same = build(2);
  std::vector<Match> found = m.FindAll(same);
  ASSERT_FALSE(found.empty());
  Graph merged = m.Apply(same, found[0]);
  EXPECT_EQ(merged.OpCounts()["Conv"], 1);
  EXPECT_LE(Diff(same, merged), 1e-5);
}

TEST(Matcher, MatMulAssociativityBothWays) {
  GraphBuilder b(4);
  ValueId a = b.Input("a", {5, 7});
  ValueId p = b.Weight("p", {7, 3}, 0.5f), q = b.Weight("q", {3, 6}, 0.5f);
  Graph g = b.Build({b.Op("MatMul", {b.Op("MatMul", {a, p}), q})});
  Matcher m({RuleById("18e294aae308")});
  std::vector<Match> found = m.FindAll(g);
  ASSERT_EQ(found.size(), 1u);
  Graph out = m.Apply(g, found[0]);
  EXPECT_NE(out.StructuralHash(), g.StructuralHash());
  EXPECT_LE(Diff(g, out), 1e-5);
  // And back again.
  std::vector<Match> back = m.FindAll(out);
  ASSERT_EQ(back.size(), 1u);
  EXPECT_EQ(m.Apply(out, back[0]).StructuralHash(), g.StructuralHash());
}

TEST(Matcher, IntermediateUsedElsewhereBlocksTheMatch) {
  GraphBuilder b(4);
  ValueId a = b.Input("a", {5, 7});
  ValueId ap = b.Op("MatMul", {a, b.Weight("p", {7, 3}, 0.5f)});
  Graph g = b.Build({b.Op("MatMul", {ap, b.Weight("q", {3, 6}, 0.5f)}), ap});
  Matcher m({RuleById("18e294aae308")}, /*both_directions=*/false);
  EXPECT_TRUE(m.FindAll(g).empty());
}

// A rule left out (the target cannot run it, or it needs a newer opset)
// never matches, and every rule keeps its number.
TEST(Matcher, RulesLeftOutNeverMatchAndKeepTheirNumbers) {
  GraphBuilder b(4);
  ValueId a = b.Input("a", {5, 7});
  ValueId ap = b.Op("MatMul", {a, b.Weight("p", {7, 3}, 0.5f)});
  Graph g = b.Build({b.Op("MatMul", {ap, b.Weight("q", {3, 6}, 0.5f)})});
  const rules::Rule assoc = RuleById("18e294aae308");
  Matcher on({assoc, assoc}, /*both_directions=*/false);
  Matcher off({assoc, assoc}, /*both_directions=*/false, {0, 1});
  std::vector<Match> all = on.FindAll(g), kept = off.FindAll(g);
  ASSERT_FALSE(all.empty());
  EXPECT_EQ(off.rules().size(), 2u);
  ASSERT_EQ(kept.size() * 2, all.size());
  for (const Match& m : kept) EXPECT_EQ(m.rule, 1);
  EXPECT_THROW(Matcher({assoc}, true, {1, 1}), Error);
}

TEST(Matcher, ShapesMustBindConsistently) {
  // Merging parallel convs needs both weights of the same shape.
  GraphBuilder b(4);
  ValueId x = b.Input("x", {1, 3, 6, 6});
  ValueId c1 = b.Op("Conv", {x, b.Weight("w1", {4, 3, 3, 3}, 0.3f)}, Pads1());
  ValueId c2 = b.Op("Conv", {x, b.Weight("w2", {5, 3, 3, 3}, 0.3f)}, Pads1());
  Graph g = b.Build({c1, c2});
  Matcher m({RuleById("d1b546e55a9f")});
  EXPECT_TRUE(m.FindAll(g).empty());
  GraphBuilder b2(4);
  x = b2.Input("x", {1, 3, 6, 6});
  c1 = b2.Op("Conv", {x, b2.Weight("w1", {4, 3, 3, 3}, 0.3f)}, Pads1());
  c2 = b2.Op("Conv", {x, b2.Weight("w2", {4, 3, 3, 3}, 0.3f)}, Pads1());
  Graph g2 = b2.Build({c1, c2});
  std::vector<Match> found = m.FindAll(g2);
  ASSERT_FALSE(found.empty());
  Graph merged = m.Apply(g2, found[0]);
  EXPECT_EQ(merged.OpCounts()["Conv"], 1);
  EXPECT_LE(Diff(g2, merged), 1e-5);
}

// Transformer projections of different widths that read one input merge
// into one MatMul + an uneven Split (sizes [j, l] bound from the weights),
// and their biases into one Add before the Split. Applied twice, Q, K and V
// become one projection.
Graph Projections(const std::vector<int64_t>& widths, bool bias = true) {
  GraphBuilder b(6);
  ValueId x = b.Input("x", {1, 8, 16});
  std::vector<ValueId> outs;
  for (size_t k = 0; k < widths.size(); ++k) {
    std::string n = std::to_string(k);
    ValueId y = b.Op("MatMul", {x, b.Weight("w" + n, {16, widths[k]}, 0.3f)});
    if (bias) y = b.Op("Add", {y, b.Weight("b" + n, {widths[k]}, 0.3f)});
    outs.push_back(b.Op("Relu", {y}));
  }
  return b.Build(outs);
}

constexpr char kMergeProjections[] = "52e3737ebcfd";  // (MatMul(T,M1), MatMul(T,M3)) <= Split[j,l](MatMul(T, M1|M3))
constexpr char kMergeBiases[] = "d25c1a2fe499";       // (Add(V1, Split(Y)#0), Add(V3, #1)) <= Split[j,l](Add(Y, V1|V3))

TEST(Matcher, MergesTransformerProjectionsWithTheirBiases) {
  Graph g = Projections({12, 12, 20});
  Matcher m({RuleById(kMergeProjections), RuleById(kMergeBiases)});
  Graph out = g;
  for (int step = 0; step < 4; ++step) {
    std::vector<Match> found = m.FindAll(out);
    auto merge = std::find_if(found.begin(), found.end(), [](const Match& x) { return x.reverse; });
    if (merge == found.end()) break;
    out = m.Apply(out, *merge);
    ASSERT_LE(Diff(g, out), 1e-5) << "step " << step;
  }
  auto counts = out.OpCounts();
  EXPECT_EQ(counts["MatMul"], 1);
  EXPECT_EQ(counts["Add"], 1);
  EXPECT_EQ(counts["Split"], 2);   // [24, 20] then [12, 12]
  EXPECT_EQ(counts["Concat"], 4);  // weights and biases (weight-only: folded on export)
}

// Expression dimensions (Y[n, m, j + l]) and symbolic constants (Split
// sizes [j, l]) are checked once the match binds every symbol: a bias that
// broadcasts ([1]) binds j = 1, which contradicts the split sizes.
TEST(Matcher, SymbolicSizesMustAgreeWithTheBinding) {
  for (int64_t b0 : {12, 1}) {
    GraphBuilder b(6);
    ValueId x = b.Input("x", {1, 8, 16});
    ValueId y = b.Op("MatMul", {x, b.Weight("w", {16, 32}, 0.3f)});
    auto parts = b.OpN("Split", {y, b.ConstInts({12, 20})}, 2, {{"axis", Attribute::Int(2)}});
    ValueId a0 = b.Op("Add", {parts[0], b.Weight("b0", {b0}, 0.3f)});
    ValueId a1 = b.Op("Add", {parts[1], b.Weight("b1", {20}, 0.3f)});
    Graph g = b.Build({a0, a1});
    Matcher m({RuleById(kMergeBiases)});
    std::vector<Match> found = m.FindAll(g);
    auto merge = std::find_if(found.begin(), found.end(), [](const Match& x) { return x.reverse; });
    if (b0 == 1) {
      EXPECT_EQ(merge, found.end()) << "a [1] bias bound j = 1 against sizes [12, 20]";
      continue;
    }
    ASSERT_NE(merge, found.end());
    EXPECT_EQ(merge->symbols.at("j"), 12);
    EXPECT_EQ(merge->symbols.at("l"), 20);
    EXPECT_LE(Diff(g, m.Apply(g, *merge)), 1e-5);
  }
}

// Attention scores scaled by 1/sqrt(d): x [1, 6, 8] -> q, k projections
// (2 heads of 4) -> Div(MatMul(q, k), divisor).
Graph SmallAttention(bool divisor_is_input, float divisor) {
  GraphBuilder b(8);
  ValueId x = b.Input("x", {1, 6, 8});
  auto heads = [&](const std::string& name, std::vector<int64_t> perm) {
    ValueId y =
        b.Op("Add", {b.Op("MatMul", {x, b.Weight(name + "_w", {8, 8}, 0.3f)}), b.Weight(name + "_b", {8}, 0.3f)});
    ValueId r = b.Op("Reshape", {y, b.ConstInts({1, 6, 2, 4})});
    return b.Op("Transpose", {r}, {{"perm", Attribute::Ints(perm)}});
  };
  ValueId q = heads("q", {0, 2, 1, 3}), k = heads("k", {0, 2, 3, 1});
  ValueId d = divisor_is_input ? b.Input("d", {}) : b.ConstFloat(divisor);
  return b.Build({b.Op("Div", {b.Op("MatMul", {q, k}), d})});
}

// The rules that carry the scale from the scores to the query weights, and
// the direction each is applied in (true: target -> source).
const std::vector<std::pair<const char*, bool>> kScaleSteps = {
    {"e3cdc2341002", false},  // Div(MatMul(X1,K4),s) => MatMul(Div(X1,s),K4)
    {"4140d5c4d40e", true},   // Transpose[0,2,1,3](Div(X2,s)) => Div(Transpose[0,2,1,3](X2),s)
    {"61a8b1e60eab", true},   // Reshape(Div(T4,s),[n,m,c,w]) => Div(Reshape(T4,[n,m,c,w]),s)
    {"c90f1b409157", true},   // Add(Div(T1,s),Div(V2,s)) => Div(Add(T1,V2),s)
    {"10a9e41549f2", false},  // Div(MatMul(T1,M1),s) => MatMul(Div(T1,s),M1)
    {"6d8203e27ea8", true},   // MatMul(T1,Div(M3,s)) => MatMul(Div(T1,s),M3)
};

// Rank-4 per-head MatMul, rank-4 Transpose, a Reshape into heads (its
// factors heads x head_dim bound from the target), Div by a constant: the
// attention scale reaches the query weights and bias, where it is
// weight-only (folded into them on export).
TEST(Matcher, MovesTheAttentionScaleIntoTheQueryWeights) {
  Graph g = SmallAttention(false, 2.0f);
  Graph out = g;
  for (const auto& [id, reverse_binding] : kScaleSteps) {
    // A copy: a lambda cannot capture a structured binding in C++17 (clang).
    const bool reverse = reverse_binding;
    Matcher m({RuleById(id)});
    std::vector<Match> found = m.FindAll(out);
    auto step = std::find_if(found.begin(), found.end(), [&](const Match& x) { return x.reverse == reverse; });
    ASSERT_NE(step, found.end()) << "rule " << id << " does not apply";
    if (std::string(id) == "61a8b1e60eab") {
      EXPECT_EQ(step->symbols.at("c"), 2);  // bound from the Reshape target
      EXPECT_EQ(step->symbols.at("w"), 4);
    }
    out = m.Apply(out, *step);
    ASSERT_LE(Diff(g, out), 1e-5) << "after " << id;
  }
  int divs = 0;
  for (NodeId id = 0; id < out.num_nodes(); ++id) {
    const Node& n = out.node(id);
    if (n.op != "Div") continue;
    ++divs;
    EXPECT_TRUE(out.IsConstant(n.inputs[0])) << "a Div still scales activations: " << n.Describe();
  }
  EXPECT_EQ(divs, 2);  // the query weights and the query bias
}

// A rule that divides by an input holds where the divisor has no zero: it
// applies to a constant divisor without zeros only.
TEST(Matcher, DivisionRulesNeedAConstantDivisorWithoutZeros) {
  Matcher m({RuleById(kScaleSteps[0].first)});
  auto forward = [&](const Graph& g) {
    std::vector<Match> found = m.FindAll(g);
    return std::count_if(found.begin(), found.end(), [](const Match& x) { return !x.reverse; });
  };
  EXPECT_EQ(forward(SmallAttention(false, 2.0f)), 1);
  EXPECT_EQ(forward(SmallAttention(false, 0.0f)), 0);
  EXPECT_EQ(forward(SmallAttention(true, 0.0f)), 0);
}

// A rule with an input bounded above (`S <= 1.0`, a premise) applies only
// where that input is a constant with no element above the bound (all
// finite), and computes what the source did there.
TEST(Matcher, BoundedInputsNeedAConstantWithinTheBound) {
  Matcher m(ParseWrittenRules("rule prelu_max\n  input X: float32[n, c, h, w]\n  input S: float32[c, 1, 1] <= 1.0\n"
                              "  source PRelu(X, S)\n  target Max(X, Mul(X, S))\n",
                              "t.rules"),
            /*both_directions=*/false);
  auto prelu = [](const std::vector<float>& slope) {
    GraphBuilder b(1);
    ValueId x = b.Input("x", {1, 3, 4, 4});
    ValueId s = slope.empty() ? b.Input("s", {3, 1, 1}) : b.Const(TensorData::FromFloat(slope, {3, 1, 1}));
    return b.Build({b.Op("PRelu", {x, s})});
  };
  Graph within = prelu({0.25f, 1.0f, -0.5f});
  std::vector<Match> found = m.FindAll(within);
  ASSERT_EQ(found.size(), 1u);
  Graph out = m.Apply(within, found[0]);
  EXPECT_EQ(out.OpCounts()["Max"], 1);
  EXPECT_EQ(Diff(within, out), 0.0);
  EXPECT_TRUE(m.FindAll(prelu({0.25f, 1.5f, -0.5f})).empty());  // a slope above 1
  EXPECT_TRUE(m.FindAll(prelu({0.25f, std::nanf(""), 0.5f})).empty());
  EXPECT_TRUE(m.FindAll(prelu({0.25f, -std::numeric_limits<float>::infinity(), 0.5f})).empty());
  EXPECT_TRUE(m.FindAll(prelu({})).empty());  // not a constant
}

// A dimension written as a multiple of a symbol (2*h) binds the symbol
// where the dimension divides: x @ w in two halves of the contraction
// matches a contraction of 6 (h = 3), not one of 5; the halves compute
// the same.
TEST(Matcher, AMultipleOfASymbolBindsWhereTheDimensionDivides) {
  Matcher m(ParseWrittenRules("rule halves\n  input X: float32[b, m, 2*h]\n  input W: float32[2*h, n]\n"
                              "  let XS = Split(X, axis=2, outputs=2)\n  let WS = Split(W, axis=0, outputs=2)\n"
                              "  source MatMul(X, W)\n  target Add(MatMul(XS#0, WS#0), MatMul(XS#1, WS#1))\n",
                              "t.rules"),
            /*both_directions=*/false);
  auto matmul = [](int64_t k) {
    GraphBuilder b(1);
    ValueId x = b.Input("x", {1, 4, k});
    std::vector<float> w(static_cast<size_t>(k * 5));
    for (size_t i = 0; i < w.size(); ++i) w[i] = 0.01f * static_cast<float>(i % 7) - 0.02f;
    return b.Build({b.Op("MatMul", {x, b.Const(TensorData::FromFloat(w, {k, 5}))})});
  };
  Graph even = matmul(6);
  std::vector<Match> found = m.FindAll(even);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_EQ(found[0].symbols.at("h"), 3);
  Graph out = m.Apply(even, found[0]);
  EXPECT_EQ(out.OpCounts()["MatMul"], 2);
  EXPECT_EQ(out.OpCounts()["Split"], 2);
  EXPECT_LT(Diff(even, out), 1e-6);
  EXPECT_TRUE(m.FindAll(matmul(5)).empty());
}

// An attribute given by a shape symbol (group=c) holds only where the
// node's value equals that dimension at the match: a rule written with
// group=h matches a depthwise conv only where h equals its channel count.
TEST(Matcher, AttributesGivenBySymbolsEqualTheirDimension) {
  auto rule = [](const std::string& group) {
    return ParseWrittenRules(
        "rule dw\n  input X: float32[n, c, h, w]\n  input W: float32[c, 1, 3, 3]\n"
        "  input V: float32[c, 1, 3, 3]\n"
        "  source Add(Conv(X, W, group=" +
            group + ", pads=[1, 1, 1, 1]), Conv(X, V, group=" + group +
            ", pads=[1, 1, 1, 1]))\n"
            "  target Conv(X, Add(W, V), group=" +
            group + ", pads=[1, 1, 1, 1])\n",
        "t.rules");
  };
  auto depthwise = [](int64_t channels, int64_t height) {
    GraphBuilder b(7);
    ValueId x = b.Input("x", {1, channels, height, 5});
    AttributeMap a = {{"group", Attribute::Int(channels)}, {"pads", Attribute::Ints({1, 1, 1, 1})}};
    ValueId y1 = b.Op("Conv", {x, b.Weight("w", {channels, 1, 3, 3}, 0.5f)}, a);
    ValueId y2 = b.Op("Conv", {x, b.Weight("v", {channels, 1, 3, 3}, 0.5f)}, a);
    return b.Build({b.Op("Add", {y1, y2})});
  };
  Matcher by_c(rule("c"), /*both_directions=*/false);
  Graph g = depthwise(4, 6);
  std::vector<Match> found = by_c.FindAll(g);
  ASSERT_EQ(found.size(), 2u);  // the two operand orders of the Add
  Graph out = by_c.Apply(g, found[0]);
  EXPECT_EQ(out.OpCounts()["Conv"], 1);
  EXPECT_LT(Diff(g, out), 1e-5);
  Matcher by_h(rule("h"), /*both_directions=*/false);
  EXPECT_TRUE(by_h.FindAll(depthwise(4, 6)).empty());  // group 4, h 6
  EXPECT_EQ(by_h.FindAll(depthwise(4, 4)).size(), 2u);
}

TEST(Matcher, WholeDatabaseOnASmallNetwork) {
  // Every match of every rule applies and preserves the outputs.
  GraphBuilder b(9);
  ValueId x = b.Input("x", {1, 3, 8, 8});
  ValueId c1 = b.Op("Conv", {x, b.Weight("w1", {4, 3, 3, 3}, 0.3f)}, Pads1());
  ValueId c2 = b.Op("Conv", {x, b.Weight("w2", {4, 3, 3, 3}, 0.3f)}, Pads1());
  ValueId s = b.Op("Add", {b.Op("Relu", {c1}), b.Op("Relu", {c2})});
  ValueId pooled =
      b.Op("MaxPool", {s}, {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  Graph g = b.Build({pooled});
  std::vector<rules::Rule> all(Db().rules().begin(), Db().rules().end());
  Matcher m(all);
  auto t0 = std::chrono::steady_clock::now();
  std::vector<Match> found = m.FindAll(g);
  double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  std::cout << found.size() << " matches of " << all.size() << " rules (both directions) in " << ms << " ms\n";
  ASSERT_GT(found.size(), 3u);
  for (const Match& match : found) {
    Graph out = m.Apply(g, match);
    EXPECT_LE(Diff(g, out), 1e-5) << all[match.rule].id() << " " << RuleToString(all[match.rule]);
  }
}

TEST(Matcher, NeverReturnsAMatchThatWouldCreateACycle) {
  // Relu(x) feeds the second Relu through an Add: a two-output rule over
  // (Relu(A), Relu(B)) must not bind B to a value computed from Relu(A).
  GraphBuilder b(5);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId r1 = b.Op("Relu", {x});
  ValueId y = b.Op("Add", {r1, b.Weight("shift", {4, 1, 1}, 0.5f)});
  ValueId r2 = b.Op("Relu", {y});
  Graph g = b.Build({r2, r1});
  std::vector<rules::Rule> all(Db().rules().begin(), Db().rules().end());
  Matcher m(all);
  std::vector<Match> found = m.FindAll(g);
  for (const Match& match : found) {
    Graph out = m.Apply(g, match);  // throws on a cycle
    EXPECT_LE(Diff(g, out), 1e-5) << RuleToString(all[match.rule]);
  }
}

TEST(Matcher, RefusesAnInvalidRewriteAsAValue) {
  // A match of a rule over Relu(r1) whose input is rebound to a value
  // computed from r1 itself: applying it would make a cycle. TryApply
  // refuses it as a value (with the reason), Apply throws.
  GraphBuilder b(5);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId r1 = b.Op("Relu", {x});
  ValueId y = b.Op("Add", {r1, b.Weight("shift", {4, 1, 1}, 0.5f)});
  Graph g = b.Build({b.Op("Relu", {y})});
  std::vector<rules::Rule> all(Db().rules().begin(), Db().rules().end());
  Matcher m(all);
  const NodeId relu = g.value(r1).producer;
  int tried = 0;
  for (Match match : m.FindAll(g)) {
    if (match.nodes != std::vector<NodeId>{relu} || match.inputs != std::vector<ValueId>{x}) continue;
    ASSERT_TRUE(m.TryApply(g, match).has_value()) << RuleToString(all[match.rule]);
    match.inputs = {y};
    std::string why;
    EXPECT_FALSE(m.TryApply(g, match, nullptr, &why).has_value()) << RuleToString(all[match.rule]);
    EXPECT_NE(why.find("cycle"), std::string::npos) << why;
    EXPECT_THROW(m.Apply(g, match), Error);
    ++tried;
  }
  EXPECT_GE(tried, 1) << "no rule over a single Relu matched";
}

TEST(Matcher, LoweredBatchNormExposesConvFolding) {
  // With batch norm in inference form, generated folding rules match the
  // zoo's ResNet-18 and every such rewrite preserves the outputs.
  Graph g = zoo::ResNet(18, 1);
  Graph lowered = g;
  EXPECT_EQ(LowerBatchNorm(lowered), 20);
  EXPECT_EQ(lowered.OpCounts().count("BatchNormalization"), 0u);
  EXPECT_LE(Diff(g, lowered), 1e-5);
  std::vector<rules::Rule> all(Db().rules().begin(), Db().rules().end());
  Matcher m(all);
  int folds = 0;
  for (const Match& match : m.FindAll(lowered)) {
    const rules::Rule& r = all[match.rule];
    const rules::Pattern& from = match.reverse ? r.target() : r.source();
    const rules::Pattern& to = match.reverse ? r.source() : r.target();
    // Mul(Conv(...), S) -> Conv(X, Mul(W, ...)): the scale moves into the weights.
    bool from_mul_of_conv = from.nodes_size() == 2 && from.nodes(1).op() == "Mul" && from.nodes(0).op() == "Conv";
    bool to_conv_root = to.nodes(to.nodes_size() - 1).op() == "Conv";
    if (!from_mul_of_conv || !to_conv_root) continue;
    ++folds;
    EXPECT_LE(Diff(lowered, m.Apply(lowered, match)), 1e-4) << RuleToString(r);
  }
  EXPECT_GT(folds, 0) << "no conv-scale folding rule matched ResNet-18";
}

}  // namespace
}  // namespace rlflow

namespace rlflow {
namespace {

// Incremental matching after a rewrite finds exactly what matching the
// whole rewritten graph finds, along chains of random rewrites.
bool SameMatches(const std::vector<Match>& a, const std::vector<Match>& b, std::string* why) {
  if (a.size() != b.size()) {
    *why = std::to_string(a.size()) + " vs " + std::to_string(b.size()) + " matches";
    return false;
  }
  for (size_t k = 0; k < a.size(); ++k)
    if (a[k].rule != b[k].rule || a[k].reverse != b[k].reverse || a[k].nodes != b[k].nodes ||
        a[k].inputs != b[k].inputs) {
      *why = "match " + std::to_string(k) + " differs";
      return false;
    }
  return true;
}

void ExpectIncrementalMatchingEqualsFullMatching(const char* model) {
  std::vector<rules::Rule> all(Db().rules().begin(), Db().rules().end());
  Matcher m(all);
  Graph g = zoo::Build(model, 1);
  LowerBatchNorm(g);
  std::vector<Match> matches = m.FindAll(g);
  std::mt19937_64 rng(42);
  int steps = 0;
  for (int attempt = 0; attempt < 100 && steps < 25 && !matches.empty(); ++attempt) {
    const Match& pick = matches[rng() % matches.size()];
    ApplyInfo info;
    Graph next;
    try {
      next = m.Apply(g, pick, &info);
    } catch (const Error&) {
      continue;
    }
    std::vector<Match> incremental = m.FindAllAfter(next, matches, info);
    std::vector<Match> full = m.FindAll(next);
    std::string why;
    ASSERT_TRUE(SameMatches(incremental, full, &why)) << model << " step " << steps << ": " << why;
    g = std::move(next);
    matches = std::move(full);
    ++steps;
  }
  EXPECT_GE(steps, 20) << model;
}

// A test a model, consecutive, so that the three shards run one each (as
// one test: 35 s under ASan here).
TEST(Matcher, IncrementalMatchingEqualsFullMatchingOnResNet18) {
  ExpectIncrementalMatchingEqualsFullMatching("resnet18");
}
TEST(Matcher, IncrementalMatchingEqualsFullMatchingOnInceptionV3) {
  ExpectIncrementalMatchingEqualsFullMatching("inception_v3");
}
TEST(Matcher, IncrementalMatchingEqualsFullMatchingOnSqueezeNet) {
  ExpectIncrementalMatchingEqualsFullMatching("squeezenet1_1");
}

}  // namespace
}  // namespace rlflow

namespace rlflow {
namespace {

Graph ReluChain(int n) {
  GraphBuilder b(1);
  ValueId v = b.Input("x", {1, 16});
  for (int k = 0; k < n; ++k) v = b.Op("Relu", {v});
  return b.Build({v});
}

// Patterns of two unconnected parts (e.g. two parallel ops to merge) are
// matched only near each other: the matches of a chain grow linearly with
// its length, not with the number of node pairs.
TEST(Matcher, MatchesOfALongChainGrowLinearly) {
  Matcher m(RuleList(Db()));
  size_t m200 = m.FindAll(ReluChain(200)).size();
  size_t m400 = m.FindAll(ReluChain(400)).size();
  EXPECT_GT(m200, 200u);  // there are matches (Relu(Relu(x)) = Relu(x), merges of neighbours)
  EXPECT_LE(static_cast<double>(m400), 2.1 * static_cast<double>(m200)) << m200 << " -> " << m400;
}

// Written rules with floating constants: 3.0 matches the graph's 3.0f
// constant exactly (3.5 does not); the hard-swish formula becomes one
// HardSwish node computing the same; the layer norm's unit scale is made
// at the matched width.
TEST(Matcher, FloatConstantsMatchExactlyAndWrittenRulesApply) {
  std::vector<rules::Rule> hs = ParseWrittenRules(
      "rule hs\n  input X: float32[*]\n  source Div(Mul(X, Clip(Add(X, 3.0), 0.0, 6.0)), 6.0)\n"
      "  target HardSwish(X)\n",
      "t.rules");
  auto formula = [](float three) {
    GraphBuilder b(7);
    ValueId x = b.Op("Relu", {b.Input("x", {1, 8, 5, 5})});
    ValueId gate = b.Op("Clip", {b.Op("Add", {x, b.ConstFloat(three)}), b.ConstFloat(0.0f), b.ConstFloat(6.0f)});
    return b.Build({b.Op("Div", {b.Op("Mul", {x, gate}), b.ConstFloat(6.0f)})});
  };
  Matcher m(hs);
  Graph g = formula(3.0f);
  std::vector<Match> found = m.FindAll(g);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].reverse);
  Graph out = m.Apply(g, found[0]);
  EXPECT_EQ(out.OpCounts()["HardSwish"], 1);
  EXPECT_EQ(out.num_nodes(), 2);  // Relu, HardSwish
  EXPECT_LE(Diff(g, out), 1e-6);
  EXPECT_TRUE(m.FindAll(formula(3.5f)).empty());

  std::vector<rules::Rule> ln = ParseWrittenRules(
      "rule ln\n  input X: float32[b, n, d]\n  let D = Sub(X, ReduceMean(X, axes=[-1]))\n"
      "  source Div(D, Sqrt(Add(ReduceMean(Pow(D, 2.0), axes=[-1]), 1e-05)))\n"
      "  target LayerNormalization(X, fill(1.0, [d]), axis=-1, epsilon=1e-05)\n",
      "t.rules");
  GraphBuilder b(8);
  ValueId x = b.Input("x", {2, 3, 6});
  ValueId d = b.Op("Sub", {x, b.Op("ReduceMean", {x}, {{"axes", Attribute::Ints({-1})}})});
  ValueId var = b.Op("ReduceMean", {b.Op("Pow", {d, b.ConstFloat(2.0f)})}, {{"axes", Attribute::Ints({-1})}});
  Graph norm = b.Build({b.Op("Div", {d, b.Op("Sqrt", {b.Op("Add", {var, b.ConstFloat(1e-5f)})})})});
  Matcher lm(ln);
  found = lm.FindAll(norm);
  ASSERT_EQ(found.size(), 1u);
  Graph fused = lm.Apply(norm, found[0]);
  ASSERT_EQ(fused.num_nodes(), 1);
  const Node& n = fused.node(0);
  EXPECT_EQ(n.op, "LayerNormalization");
  EXPECT_EQ(fused.value(n.inputs[1]).initializer->shape(), (Shape{6}));
  EXPECT_LE(Diff(norm, fused), 1e-5);
  // Reversed: a LayerNormalization whose scale is all ones is the formula.
  found = lm.FindAll(fused);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].reverse);
  EXPECT_LE(Diff(fused, lm.Apply(fused, found[0])), 1e-5);
}

// A constant whose value depends on a dimension (fill(1.0 / c, ...), format
// 8): the mean over the channels becomes a 1 x 1 convolution with weights
// float32(1/c); a convolution whose weights are all float32(1/c) is the
// mean again, and one with other weights (1/(c+1), or not all equal) is not.
TEST(Matcher, FilledConstantsDividedByADimension) {
  std::vector<rules::Rule> mean = ParseWrittenRules(
      "rule m\n  input X: float32[n, c, h, w]\n  source ReduceMean(X, axes=[1])\n"
      "  target Conv(X, fill(1.0 / c, [1, c, 1, 1]))\n  tolerance 1e-7\n",
      "t.rules");
  Matcher m(mean);
  GraphBuilder b(8);
  ValueId x = b.Input("x", {2, 3, 4, 5});
  const Graph g = b.Build({b.Op("ReduceMean", {x}, {{"axes", Attribute::Ints({1})}})});
  std::vector<Match> found = m.FindAll(g);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_FALSE(found[0].reverse);
  const Graph conv = m.Apply(g, found[0]);
  ASSERT_EQ(conv.num_nodes(), 1);
  const Node& n = conv.node(0);
  EXPECT_EQ(n.op, "Conv");
  const TensorData& w = *conv.value(n.inputs[1]).initializer;
  EXPECT_EQ(w.shape(), (Shape{1, 3, 1, 1}));
  for (double v : w.ToDouble()) EXPECT_EQ(v, static_cast<double>(static_cast<float>(1.0 / 3)));
  EXPECT_LE(Diff(g, conv), 1e-6);
  found = m.FindAll(conv);
  ASSERT_EQ(found.size(), 1u);
  EXPECT_TRUE(found[0].reverse);
  EXPECT_LE(Diff(conv, m.Apply(conv, found[0])), 1e-6);
  auto conv_with = [](const std::vector<float>& weights) {
    GraphBuilder cb(8);
    ValueId cx = cb.Input("x", {2, 3, 4, 5});
    return cb.Build({cb.Op("Conv", {cx, cb.Const(TensorData::FromFloat(weights, {1, 3, 1, 1}))})});
  };
  EXPECT_EQ(m.FindAll(conv_with({1.0f / 3, 1.0f / 3, 1.0f / 3})).size(), 1u);
  EXPECT_TRUE(m.FindAll(conv_with({0.25f, 0.25f, 0.25f})).empty());
  EXPECT_TRUE(m.FindAll(conv_with({0.5f, 0.25f, 0.25f})).empty());
}

// A float16 graph (a model converted to half precision): rules, proved over
// the reals, bind its values as they bind float32 ones; its constants are
// compared in float16 (the pattern's 1e-05 is the graph's float16 1e-05,
// 1.0014e-05) and the target's are made in float16.
TEST(Matcher, RulesApplyToHalfPrecisionGraphs) {
  std::vector<rules::Rule> ln = ParseWrittenRules(
      "rule ln\n  input X: float32[b, n, d]\n  let D = Sub(X, ReduceMean(X, axes=[-1]))\n"
      "  source Div(D, Sqrt(Add(ReduceMean(Pow(D, 2.0), axes=[-1]), 1e-05)))\n"
      "  target LayerNormalization(X, fill(1.0, [d]), axis=-1, epsilon=1e-05)\n",
      "t.rules");
  auto half = [](double v) { return TensorData::FromDouble({v}, {}, DType::kFloat16); };
  auto formula = [&](double eps) {
    GraphBuilder b(8, 17, "g");
    ValueId x = b.Input("x", {2, 3, 6}, DType::kFloat16);
    ValueId d = b.Op("Sub", {x, b.Op("ReduceMean", {x}, {{"axes", Attribute::Ints({-1})}})});
    ValueId var = b.Op("ReduceMean", {b.Op("Pow", {d, b.Const(half(2.0))})}, {{"axes", Attribute::Ints({-1})}});
    return b.Build({b.Op("Div", {d, b.Op("Sqrt", {b.Op("Add", {var, b.Const(half(eps))})})})});
  };
  Graph norm = formula(1e-5);
  Matcher lm(ln);
  std::vector<Match> found = lm.FindAll(norm);
  ASSERT_EQ(found.size(), 1u);
  Graph fused = lm.Apply(norm, found[0]);
  ASSERT_EQ(fused.num_nodes(), 1);
  const Node& n = fused.node(0);
  EXPECT_EQ(n.op, "LayerNormalization");
  EXPECT_EQ(fused.value(n.inputs[1]).initializer->dtype(), DType::kFloat16);
  EXPECT_EQ(fused.value(n.outputs[0]).type.dtype, DType::kFloat16);
  EXPECT_LE(Diff(norm, fused), 4.0 / 1024);
  EXPECT_TRUE(lm.FindAll(formula(2e-5)).empty());  // another epsilon
}

}  // namespace
}  // namespace rlflow
