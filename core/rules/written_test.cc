// The written-rules format: what a text becomes (inputs, shared lets,
// constants, rank-generic expansion) and one-line errors naming the line.
#include "core/rules/written.h"

#include <gtest/gtest.h>

#include <map>

#include "core/error.h"
#include "core/op_registry.h"

namespace rlflow {
namespace {

std::string ErrorOf(const std::string& text) {
  try {
    ParseWrittenRules(text, "t.rules");
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

TEST(WrittenRules, ParsesPatternsConstantsAndLets) {
  std::vector<rules::Rule> r = ParseWrittenRules(R"(
# a comment
rule layernorm   # trailing comment
  input X: float32[n, d]
  let D = Sub(X, ReduceMean(X, axes=[-1]))
  source Div(D, Sqrt(Add(ReduceMean(Pow(D, 2.0), axes=[-1]), 1e-05)))
  target LayerNormalization(X, fill(1.0, [d]), axis=-1, epsilon=1e-05)
)",
                                                 "t.rules");
  ASSERT_EQ(r.size(), 1u);
  const rules::Rule& rule = r[0];
  EXPECT_EQ(rule.written_name(), "layernorm");
  EXPECT_EQ(rule.id(), RuleId(rule));
  ASSERT_EQ(rule.inputs_size(), 1);
  EXPECT_EQ(ShapeToString(rule.inputs(0)), "[n,d]");
  // The let is one Sub node, read by Pow and by Div.
  int subs = 0, readers = 0, sub_index = -1;
  for (int k = 0; k < rule.source().nodes_size(); ++k)
    if (rule.source().nodes(k).op() == "Sub") ++subs, sub_index = k;
  for (const auto& n : rule.source().nodes())
    for (const auto& in : n.inputs()) readers += in.kind_case() == rules::Ref::kNode && in.node().node() == sub_index;
  EXPECT_EQ(subs, 1);
  EXPECT_EQ(readers, 2);
  EXPECT_EQ(rule.source().nodes_size(), 7);  // ReduceMean, Sub, Pow, ReduceMean, Add, Sqrt, Div
  // Constants: 2.0 and 1e-05 floats; the fill of shape [d].
  int floats = 0;
  for (const auto& c : rule.source().constants()) floats += IsFloatConstant(c);
  EXPECT_EQ(floats, 2);
  ASSERT_EQ(rule.target().constants_size(), 1);
  EXPECT_TRUE(IsFilledConstant(rule.target().constants(0)));
  EXPECT_EQ(rule.target().constants(0).fill_value(), 1.0);
  EXPECT_EQ(PatternToString(rule, rule.target()), "LayerNormalization[axis=-1,epsilon=1e-05](X,fill(1.0, [d]))");
  // Attributes are stored sorted by name.
  const rules::Node& ln = rule.target().nodes(0);
  ASSERT_EQ(ln.attrs_size(), 2);
  EXPECT_EQ(ln.attrs(0).name(), "axis");
  EXPECT_EQ(ln.attrs(1).name(), "epsilon");
  EXPECT_FLOAT_EQ(ln.attrs(1).f(), 1e-5f);
}

TEST(WrittenRules, RankGenericRulesExpandAndToleranceIsKept) {
  std::vector<rules::Rule> r = ParseWrittenRules(R"(
rule hs
  input X: float32[*]
  source Mul(X, Div(Clip(Add(X, 3.0), 0.0, 6.0), 6.0))
  target HardSwish(X)
  tolerance 1e-7
)",
                                                 "t.rules");
  ASSERT_EQ(r.size(), 4u);
  for (int k = 0; k < 4; ++k) {
    EXPECT_EQ(r[k].written_name(), "hs/rank" + std::to_string(k + 1));
    EXPECT_EQ(r[k].inputs(0).shape_size(), k + 1);
    EXPECT_DOUBLE_EQ(r[k].tolerance(), 1e-7);
  }
  EXPECT_NE(r[0].id(), r[1].id());
}

// Operators outside the default domain are named with it; a rule holding
// one runs only on the targets of that operator's entry.
TEST(WrittenRules, QualifiedOperatorsAndTheirTargets) {
  EXPECT_EQ(QualifiedOp("", "Relu"), "Relu");
  EXPECT_EQ(QualifiedOp("ai.onnx", "Relu"), "Relu");
  EXPECT_EQ(QualifiedOp("com.microsoft", "FusedConv"), "com.microsoft.FusedConv");
  EXPECT_EQ(SplitQualifiedOp("com.microsoft.FusedConv"),
            std::make_pair(std::string("com.microsoft"), std::string("FusedConv")));
  EXPECT_EQ(SplitQualifiedOp("Relu"), std::make_pair(std::string(""), std::string("Relu")));
  EXPECT_TRUE(IsQualifiedOp("com.microsoft", "FusedConv", "com.microsoft.FusedConv"));
  EXPECT_FALSE(IsQualifiedOp("com.microsoft", "FusedConv", "FusedConv"));
  EXPECT_FALSE(IsQualifiedOp("", "FusedConv", "com.microsoft.FusedConv"));
  EXPECT_FALSE(IsQualifiedOp("com.microsof", "tFusedConv", "com.microsoft.FusedConv"));
  std::vector<rules::Rule> r = ParseWrittenRules(R"(
rule skip
  input A: float32[b, n, d]
  input B: float32[b, n, d]
  input G: float32[d]
  source LayerNormalization(Add(A, B), G, axis=-1, epsilon=1e-05)
  target com.microsoft.SkipLayerNormalization(A, B, G, epsilon=1e-05)
rule plain
  input X: float32[n]
  source Relu(Relu(X))
  target Relu(X)
)",
                                                 "t.rules");
  ASSERT_EQ(r.size(), 2u);
  ASSERT_EQ(r[0].target().nodes_size(), 1);
  EXPECT_EQ(r[0].target().nodes(0).op(), "com.microsoft.SkipLayerNormalization");
  EXPECT_TRUE(RuleRunsOn(r[0], "ort"));
  EXPECT_FALSE(RuleRunsOn(r[0], "onnx"));
  EXPECT_TRUE(RuleRunsOn(r[1], "onnx"));
  EXPECT_TRUE(RuleRunsOn(r[1], "ort"));
  EXPECT_EQ(RuleOpset(r[0]), 17);  // LayerNormalization's
  EXPECT_EQ(RulesEnabledFor(r, "onnx", 17), (std::vector<char>{0, 1}));
  EXPECT_EQ(RulesEnabledFor(r, "ort", 17), (std::vector<char>{1, 1}));
  EXPECT_EQ(RulesEnabledFor(r, "ort", 16), (std::vector<char>{0, 1}));
  // An operator of a domain the registry lacks is an error naming it.
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n]\n  source com.example.Frob(X)\n  target X\n")
                .find("'com.example.Frob' is not a registry operator"),
            std::string::npos);
}

// `<= BOUND` after an input's type is a premise on it (TensorVar
// bounded_above, upper_bound), part of the rule's identity.
TEST(WrittenRules, InputsBoundedAbove) {
  auto rule = [](const std::string& bound) {
    return ParseWrittenRules("rule m\n  input X: float32[n, c]\n  input S: float32[c]" + bound +
                                 "\n  source PRelu(X, S)\n  target Max(X, Mul(X, S))\n",
                             "t.rules")
        .at(0);
  };
  const rules::Rule one = rule(" <= 1.0"), none = rule(""), two = rule(" <= 2");
  EXPECT_FALSE(one.inputs(0).bounded_above());
  EXPECT_TRUE(one.inputs(1).bounded_above());
  EXPECT_EQ(one.inputs(1).upper_bound(), 1.0);
  EXPECT_EQ(UpperBounds(one), (std::map<int, double>{{1, 1.0}}));
  EXPECT_TRUE(UpperBounds(none).empty());
  EXPECT_NE(one.id(), none.id());
  EXPECT_NE(one.id(), two.id());
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n] < 1.0\n  source X\n  target X\n").find("t.rules:2: expected '='"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n] <= one\n  source X\n  target X\n").find("expected a number"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n] 1.0\n  source X\n  target X\n").find("unexpected '1.0'"),
            std::string::npos);
}

// group=c: an integer attribute given by a shape symbol (format 7), printed
// as written, part of the id; a symbol the inputs do not have is an error.
TEST(WrittenRules, AttributesGivenByShapeSymbols) {
  auto rule = [](const std::string& group) {
    return ParseWrittenRules(
               "rule dw\n  input X: float32[n, c, h, w]\n  input W: float32[c, 1, 1, 1]\n"
               "  source Conv(X, W, group=" +
                   group + ")\n  target Mul(X, Reshape(W, [-1, 1, 1]))\n",
               "t.rules")
        .at(0);
  };
  const rules::Rule dw = rule("c");
  const rules::Attribute& group = dw.source().nodes(0).attrs(0);
  ASSERT_TRUE(IsDimAttribute(group));
  EXPECT_EQ(DimToString(group.dim()), "c");
  EXPECT_EQ(AttributeAt(group, {{"c", 6}}).i, 6);
  EXPECT_THROW(AttributeFromProto(group), Error);
  EXPECT_NE(RuleToString(dw).find("Conv[group=c](X,W)"), std::string::npos) << RuleToString(dw);
  EXPECT_NE(dw.id(), rule("h").id());
  EXPECT_NE(ErrorOf("rule dw\n  input X: float32[n, c, h, w]\n  input W: float32[c, 1, 1, 1]\n"
                    "  source Conv(X, W, group=q)\n  target X\n")
                .find("q"),
            std::string::npos);
}

// fill(VALUE / SYMBOL, [...]) (format 8): the value divided by that
// dimension at the binding, printed as written, part of the id; a symbol
// the inputs do not have, or a number after '/', is an error.
TEST(WrittenRules, FilledConstantsDividedByADimension) {
  auto text = [](const std::string& fill) {
    return "rule m\n  input X: float32[n, c, h, w]\n  source ReduceMean(X, axes=[1])\n  target Conv(X, " + fill +
           ")\n  tolerance 1e-7\n";
  };
  auto rule = [&](const std::string& fill) { return ParseWrittenRules(text(fill), "t.rules").at(0); };
  const rules::Rule m = rule("fill(1.0 / c, [1, c, 1, 1])");
  ASSERT_EQ(m.target().constants_size(), 1);
  const rules::Constant& w = m.target().constants(0);
  ASSERT_TRUE(IsFilledConstant(w));
  ASSERT_TRUE(w.has_fill_divisor());
  EXPECT_EQ(DimToString(w.fill_divisor()), "c");
  EXPECT_DOUBLE_EQ(FillValue(w, {{"c", 4}}), 0.25);
  const TensorData t = ConstantData(w, {{"n", 1}, {"c", 3}, {"h", 2}, {"w", 2}}, DType::kFloat64);
  EXPECT_EQ(t.shape(), (Shape{1, 3, 1, 1}));
  for (double v : t.ToDouble()) EXPECT_DOUBLE_EQ(v, 1.0 / 3);
  EXPECT_NE(RuleToString(m).find("fill(1.0 / (c), [1,c,1,1])"), std::string::npos) << RuleToString(m);
  EXPECT_NE(m.id(), rule("fill(1.0 / h, [1, c, 1, 1])").id());
  EXPECT_NE(m.id(), rule("fill(1.0, [1, c, 1, 1])").id());
  EXPECT_FALSE(rule("fill(1.0, [1, c, 1, 1])").target().constants(0).has_fill_divisor());
  EXPECT_NE(ErrorOf(text("fill(1.0 / q, [1, c, 1, 1])")).find("q"), std::string::npos);
  EXPECT_NE(ErrorOf(text("fill(1.0 / 3, [1, c, 1, 1])")).find("a dimension symbol after '/'"), std::string::npos);
}

// A dimension written as a multiple of a symbol (2*h) is that symbol with
// its coefficient; a factor below 2, or a number after the '*', is an error
// naming the line.
TEST(WrittenRules, DimensionsThatAreMultiplesOfASymbol) {
  std::vector<rules::Rule> r = ParseWrittenRules(
      "rule halves\n  input X: float32[m, 2*h]\n  input W: float32[2*h, n]\n"
      "  let XS = Split(X, axis=1, outputs=2)\n  let WS = Split(W, axis=0, outputs=2)\n"
      "  source MatMul(X, W)\n  target Add(MatMul(XS#0, WS#0), MatMul(XS#1, WS#1))\n",
      "t.rules");
  ASSERT_EQ(r.size(), 1u);
  EXPECT_EQ(ShapeToString(r[0].inputs(0)), "[m,2h]");
  const rules::Dim& k = r[0].inputs(1).shape(0);
  ASSERT_EQ(k.terms_size(), 1);
  EXPECT_EQ(k.terms(0).symbol(), "h");
  EXPECT_EQ(k.terms(0).coeff(), 2);
  EXPECT_EQ(k.constant(), 0);
  EXPECT_EQ(RuleSymbols(r[0]), (std::vector<std::string>{"h", "m", "n"}));
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[1*h]\n  source Relu(X)\n  target Relu(X)\n")
                .find("t.rules:2: a dimension's factor must be at least 2, got 1"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[2*3]\n  source Relu(X)\n  target Relu(X)\n")
                .find("t.rules:2: expected a dimension symbol after '2*'"),
            std::string::npos);
}

TEST(WrittenRules, ErrorsNameTheLine) {
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n]\n  source Frobnicate(X)\n  target X\n")
                .find("t.rules:3: rule 'a' (source): 'Frobnicate' is not a registry operator"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n]\n  source Relu(Y)\n  target X\n").find("'Y' is neither"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n]\n  source Relu(X)\n").find("needs a source and a target"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n]\n  sauce Relu(X)\n").find("t.rules:3: unknown keyword 'sauce'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("  input X: float32[n]\n").find("t.rules:1: 'input' before the first 'rule'"), std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: float32[n]\n  source Relu(X\n  target X\n").find("t.rules:3: expected ')'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n  input X: floaty[n]\n  source X\n  target X\n").find("unknown element type 'floaty'"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule a\n input X: float32[n]\n source X\n target X\nrule a\n").find("defined twice"),
            std::string::npos);
  EXPECT_NE(ErrorOf("rule t\n  input X: float32[n]\n  source Relu(X)\n  target Relu(X)\n  tolerance 0.5\n")
                .find("tolerance must be in (0, 0.01)"),
            std::string::npos);
}

}  // namespace
}  // namespace rlflow
