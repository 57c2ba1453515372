// The verifier refutes known-false rules and proves known-true ones.
#include "verifier/verify.h"

#include <gtest/gtest.h>
#include <z3++.h>

#include "core/error.h"
#include "core/rules/written.h"
#include "core/symbolic.h"

namespace rlflow::verifier {
namespace {

// A tiny DSL for hand-written rules over named inputs.
class RuleBuilder {
 public:
  int Input(const std::string& name, std::vector<rules::Dim> shape) {
    rules::TensorVar* v = rule_.add_inputs();
    v->set_name(name);
    v->set_dtype(1);
    for (auto& d : shape) *v->add_shape() = d;
    return rule_.inputs_size() - 1;
  }
  static rules::Ref In(int i) {
    rules::Ref r;
    r.set_input(i);
    return r;
  }
  // Adds a node to `side` (0 source, 1 target); returns its output 0.
  rules::Ref Op(int side, const std::string& op, std::vector<rules::Ref> in,
                std::vector<std::pair<std::string, std::vector<int64_t>>> ints_attrs = {},
                std::vector<std::pair<std::string, int64_t>> int_attrs = {}, int outputs = 1) {
    rules::Pattern* p = side == 0 ? rule_.mutable_source() : rule_.mutable_target();
    rules::Node* n = p->add_nodes();
    n->set_op(op);
    n->set_num_outputs(outputs);
    for (auto& r : in) *n->add_inputs() = r;
    for (auto& [name, v] : ints_attrs) {
      auto* a = n->add_attrs();
      a->set_name(name);
      for (int64_t x : v) a->mutable_ints()->add_values(x);
    }
    for (auto& [name, v] : int_attrs) {
      auto* a = n->add_attrs();
      a->set_name(name);
      a->set_i(v);
    }
    rules::Ref r;
    r.mutable_node()->set_node(p->nodes_size() - 1);
    r.mutable_node()->set_output(0);
    return r;
  }
  rules::Ref Const(int side, std::vector<int64_t> values) {
    rules::Pattern* p = side == 0 ? rule_.mutable_source() : rule_.mutable_target();
    rules::Constant* c = p->add_constants();
    c->set_dtype(7);
    c->add_dims(static_cast<int64_t>(values.size()));
    for (int64_t v : values) c->add_int_values(v);
    rules::Ref r;
    r.set_constant(p->constants_size() - 1);
    return r;
  }
  rules::Rule Build(std::vector<rules::Ref> src, std::vector<rules::Ref> tgt) {
    for (auto& r : src) *rule_.mutable_source()->add_outputs() = r;
    for (auto& r : tgt) *rule_.mutable_target()->add_outputs() = r;
    rule_.set_id(RuleId(rule_));
    return rule_;
  }

 private:
  rules::Rule rule_;
};

rules::Dim S(const char* s) { return DimSymbol(s); }
rules::Dim K(int64_t v) { return DimConst(v); }

Outcome Prove(const rules::Rule& r) {
  Options o;
  uint64_t rl = 0;
  for (const SymbolBinding& b : ProofBindings(r)) {
    bool simplified = false;
    std::string detail;
    Outcome out = ProveAt(r, b, o, &rl, &simplified, &detail);
    if (out != Outcome::kProved) return out;
  }
  return Outcome::kProved;
}

TEST(Verifier, ProofInstancesAreSmallAndDistinct) {
  RuleBuilder b;
  int x = b.Input("X", {S("n"), S("c"), S("h"), S("w")});
  rules::Rule r = b.Build({b.Op(0, "Relu", {b.In(x)})}, {b.Op(1, "Relu", {b.In(x)})});
  std::vector<SymbolBinding> inst = ProofBindings(r);
  ASSERT_GE(inst.size(), 2u);
  EXPECT_NE(inst[0], inst[1]);
  for (const auto& b2 : inst)
    for (const auto& [s, v] : b2) EXPECT_LE(v, 4) << s;
}

TEST(Verifier, RefutesReluOfSum) {
  RuleBuilder b;
  int x = b.Input("A", {S("m"), S("k")}), y = b.Input("B", {S("m"), S("k")});
  rules::Rule r = b.Build({b.Op(0, "Relu", {b.Op(0, "Add", {b.In(x), b.In(y)})})},
                          {b.Op(1, "Add", {b.Op(1, "Relu", {b.In(x)}), b.Op(1, "Relu", {b.In(y)})})});
  EXPECT_EQ(Prove(r), Outcome::kRefutedZ3);
  EXPECT_EQ(VerifyOne(r, Options()).outcome, Outcome::kRefutedNumeric);
}

TEST(Verifier, RefutesMatMulCommutativity) {
  RuleBuilder b;
  int a = b.Input("A", {S("k"), S("k")}), c = b.Input("B", {S("k"), S("k")});
  rules::Rule r = b.Build({b.Op(0, "MatMul", {b.In(a), b.In(c)})}, {b.Op(1, "MatMul", {b.In(c), b.In(a)})});
  EXPECT_EQ(Prove(r), Outcome::kRefutedZ3);
}

TEST(Verifier, ProvesMatMulAssociativity) {
  RuleBuilder b;
  int a = b.Input("A", {S("m"), S("k")}), m = b.Input("B", {S("k"), S("j")}), c = b.Input("C", {S("j"), S("l")});
  rules::Rule r = b.Build({b.Op(0, "MatMul", {b.Op(0, "MatMul", {b.In(a), b.In(m)}), b.In(c)})},
                          {b.Op(1, "MatMul", {b.In(a), b.Op(1, "MatMul", {b.In(m), b.In(c)})})});
  EXPECT_EQ(Prove(r), Outcome::kProved);
  Result v = VerifyOne(r, Options());
  EXPECT_EQ(v.outcome, Outcome::kProved) << v.detail;
  EXPECT_EQ(v.rule.provenance().proved_on_size(), 2);
}

// What a worker rank sends back to rank 0 (VerifyAll over MPI) is the
// result itself, and bytes that are not one are an error.
TEST(Verifier, AResultSurvivesTheTripBetweenRanks) {
  RuleBuilder b;
  int a = b.Input("A", {S("m"), S("k")}), m = b.Input("B", {S("k"), S("j")}), c = b.Input("C", {S("j"), S("l")});
  rules::Rule r = b.Build({b.Op(0, "MatMul", {b.Op(0, "MatMul", {b.In(a), b.In(m)}), b.In(c)})},
                          {b.Op(1, "MatMul", {b.In(a), b.Op(1, "MatMul", {b.In(m), b.In(c)})})});
  Result v;
  v.outcome = Outcome::kPrunedComposite;
  v.rule = r;
  v.generalised = true;
  v.seconds = 1.25;
  v.detail = "why, with\0 a NUL";
  const std::string bytes = EncodeResult(v);
  Result back = DecodeResult(bytes);
  EXPECT_EQ(back.outcome, Outcome::kPrunedComposite);
  EXPECT_TRUE(back.generalised);
  EXPECT_EQ(back.seconds, 1.25);
  EXPECT_EQ(back.detail, v.detail);
  EXPECT_EQ(SerializeDeterministic(back.rule), SerializeDeterministic(r));
  EXPECT_THROW(DecodeResult(bytes.substr(0, 10)), rlflow::Error);
  std::string bad = bytes;
  bad[0] = 99;  // no such outcome
  EXPECT_THROW(DecodeResult(bad), rlflow::Error);
}

// Attention's 1/sqrt(d) moved from the scores onto the queries: true
// wherever the divisor has no zero, the premise the verifier proves rules
// that divide by an input under (and the matcher checks).
TEST(Verifier, ProvesTheAttentionScaleMovesOntoTheQueries) {
  RuleBuilder b;
  int q = b.Input("Q", {S("n"), S("c"), S("h"), S("w")}), k = b.Input("K", {S("n"), S("c"), S("w"), S("j")});
  int s = b.Input("s", {});
  rules::Rule r = b.Build({b.Op(0, "Div", {b.Op(0, "MatMul", {b.In(q), b.In(k)}), b.In(s)})},
                          {b.Op(1, "MatMul", {b.Op(1, "Div", {b.In(q), b.In(s)}), b.In(k)})});
  EXPECT_EQ(DivisorInputs(r), std::vector<int>{s});
  EXPECT_EQ(Prove(r), Outcome::kProved);
  Result v = VerifyOne(r, Options());
  EXPECT_EQ(v.outcome, Outcome::kProved) << v.detail;
}

TEST(Verifier, RefutesDividingOnlyOneSummand) {
  RuleBuilder b;
  int x = b.Input("A", {S("m"), S("k")}), y = b.Input("B", {S("m"), S("k")}), s = b.Input("s", {});
  rules::Rule r = b.Build({b.Op(0, "Div", {b.Op(0, "Add", {b.In(x), b.In(y)}), b.In(s)})},
                          {b.Op(1, "Add", {b.Op(1, "Div", {b.In(x), b.In(s)}), b.In(y)})});
  EXPECT_EQ(Prove(r), Outcome::kRefutedZ3);
}

TEST(Verifier, ProvesGemmIsMatMulPlusBias) {
  RuleBuilder b;
  int a = b.Input("A", {S("m"), S("k")}), w = b.Input("W", {S("k"), S("j")}), v = b.Input("V", {S("j")});
  rules::Rule r = b.Build({b.Op(0, "Add", {b.Op(0, "MatMul", {b.In(a), b.In(w)}), b.In(v)})},
                          {b.Op(1, "Gemm", {b.In(a), b.In(w), b.In(v)})});
  EXPECT_EQ(Prove(r), Outcome::kProved);
  // Not with the bias broadcast the other way (a per-row bias).
  RuleBuilder b2;
  int a2 = b2.Input("A", {S("k"), S("k")}), w2 = b2.Input("W", {S("k"), S("k")}), v2 = b2.Input("V", {S("k"), K(1)});
  rules::Rule wrong =
      b2.Build({b2.Op(0, "Add", {b2.Op(0, "MatMul", {b2.In(a2), b2.In(w2)}), b2.In(v2)})},
               {b2.Op(1, "Gemm", {b2.In(a2), b2.In(w2), b2.Op(1, "Transpose", {b2.In(v2)}, {{"perm", {1, 0}}})})});
  EXPECT_EQ(Prove(wrong), Outcome::kRefutedZ3);
}

TEST(Verifier, ProvesConvLinearityInWeights) {
  RuleBuilder b;
  int x = b.Input("X", {S("n"), S("c"), S("h"), S("w")});
  int w1 = b.Input("W1", {S("d"), S("c"), K(3), K(3)}), w2 = b.Input("W2", {S("d"), S("c"), K(3), K(3)});
  std::vector<std::pair<std::string, std::vector<int64_t>>> pads = {{"pads", {1, 1, 1, 1}}};
  rules::Rule r = b.Build(
      {b.Op(0, "Add", {b.Op(0, "Conv", {b.In(x), b.In(w1)}, pads), b.Op(0, "Conv", {b.In(x), b.In(w2)}, pads)})},
      {b.Op(1, "Conv", {b.In(x), b.Op(1, "Add", {b.In(w1), b.In(w2)})}, pads)});
  EXPECT_EQ(Prove(r), Outcome::kProved);
}

TEST(Verifier, ProvesConvScaleFolding) {
  // Batch norm in inference form, scale part: Mul(Conv(X, W), S) with a
  // per-channel S == Conv(X, W * S[:, None]).
  RuleBuilder b;
  int x = b.Input("X", {S("n"), S("c"), S("h"), S("w")});
  int w = b.Input("W", {S("d"), S("c"), K(3), K(3)});
  int s = b.Input("S", {S("d"), K(1), K(1)});
  std::vector<std::pair<std::string, std::vector<int64_t>>> pads = {{"pads", {1, 1, 1, 1}}};
  rules::Rule r = b.Build(
      {b.Op(0, "Mul", {b.Op(0, "Conv", {b.In(x), b.In(w)}, pads), b.In(s)})},
      {b.Op(1, "Conv", {b.In(x), b.Op(1, "Mul", {b.In(w), b.Op(1, "Unsqueeze", {b.In(s), b.Const(1, {3})})})}, pads)});
  EXPECT_EQ(Prove(r), Outcome::kProved);
  // Scaling the wrong axis is wrong.
  RuleBuilder b2;
  x = b2.Input("X", {S("n"), S("c"), S("h"), S("w")});
  w = b2.Input("W", {S("c"), S("c"), K(3), K(3)});
  s = b2.Input("S", {S("c"), K(1), K(1)});
  rules::Ref sr = b2.Op(1, "Reshape", {b2.In(s), b2.Const(1, {1, -1, 1, 1})});
  rules::Rule bad = b2.Build({b2.Op(0, "Mul", {b2.Op(0, "Conv", {b2.In(x), b2.In(w)}, pads), b2.In(s)})},
                             {b2.Op(1, "Conv", {b2.In(x), b2.Op(1, "Mul", {b2.In(w), sr})}, pads)});
  EXPECT_EQ(Prove(bad), Outcome::kRefutedZ3);
}

// Attribute-generic rules: the scale fold holds for any window attributes
// and groups (kernel dims become symbols, attributes variables, proved at
// every instance of the table incl. stride 2, asymmetric pads, dilation,
// grouped and depthwise); a rule tied to its attributes (TASO's enlarge:
// pad a 1x1 kernel to 3x3) is not generalised.
TEST(Verifier, GeneralisesWindowAttributesWhereTheyHold) {
  // Mul(Conv(X, W), S) == Conv(X, W * S[:, None]) at one kernel size.
  auto scale_fold = [](int64_t k, int64_t pad) {
    RuleBuilder b;
    int x = b.Input("X", {S("n"), S("c"), S("h"), S("w")});
    int w = b.Input("W", {S("d"), S("c"), K(k), K(k)});
    int s = b.Input("S", {S("d"), K(1), K(1)});
    std::vector<std::pair<std::string, std::vector<int64_t>>> pads = {{"pads", {pad, pad, pad, pad}}};
    return b.Build(
        {b.Op(0, "Mul", {b.Op(0, "Conv", {b.In(x), b.In(w)}, pads), b.In(s)})},
        {b.Op(1, "Conv", {b.In(x), b.Op(1, "Mul", {b.In(w), b.Op(1, "Unsqueeze", {b.In(s), b.Const(1, {3})})})},
              pads)});
  };
  const int w = 1, s = 2;  // input indices
  rules::Rule r = scale_fold(1, 0);
  Result v = VerifyOne(r, Options());
  ASSERT_EQ(v.outcome, Outcome::kProved) << v.detail;
  EXPECT_TRUE(v.generalised);
  const rules::Rule& g = v.rule;
  EXPECT_NE(g.id(), r.id());
  EXPECT_EQ(AttributeVariables(g), (std::vector<std::string>{"dilations", "group", "pads", "strides"}));
  EXPECT_EQ(ShapeToString(g.inputs(w)), "[d,cg,kh,kw]");
  EXPECT_EQ(ShapeToString(g.inputs(s)), "[d,1,1]");  // not weight-shaped: unchanged
  ASSERT_EQ(g.provenance().proved_on_size(), 7);
  bool stride2 = false, asymmetric = false, depthwise = false;
  for (const auto& inst : g.provenance().proved_on()) {
    AttrBinding a = InstanceAttributes(inst);
    SymbolBinding sym = InstanceSymbols(inst);
    stride2 |= a.at("strides").ints == std::vector<int64_t>{2, 2};
    asymmetric |= a.at("pads").ints == std::vector<int64_t>{0, 1, 1, 0};
    depthwise |= a.at("group").i == sym.at("c") && sym.at("cg") == 1;
  }
  EXPECT_TRUE(stride2 && asymmetric && depthwise);
  ValidateRule(g);  // validates at its first instance
  // The same rule built at 3x3 generalises to the same rule.
  rules::Rule r3 = scale_fold(3, 1);
  Result v3 = VerifyOne(r3, Options());
  ASSERT_TRUE(v3.generalised);
  EXPECT_EQ(CanonicalForm(v3.rule), CanonicalForm(g));

  // Enlarge: Conv[pads=1](X, Pad(W 1x1 -> 3x3)) == Conv[pads=0](X, W): tied to the kernel and pads.
  RuleBuilder e;
  int ex = e.Input("X", {S("n"), S("c"), S("h"), S("w")});
  int ew = e.Input("W", {S("d"), S("c"), K(1), K(1)});
  std::vector<std::pair<std::string, std::vector<int64_t>>> pads0 = {{"pads", {0, 0, 0, 0}}};
  std::vector<std::pair<std::string, std::vector<int64_t>>> pads1 = {{"pads", {1, 1, 1, 1}}};
  rules::Rule enlarge =
      e.Build({e.Op(0, "Conv", {e.In(ex), e.Op(0, "Pad", {e.In(ew), e.Const(0, {0, 0, 1, 1, 0, 0, 1, 1})})}, pads1)},
              {e.Op(1, "Conv", {e.In(ex), e.In(ew)}, pads0)});
  Result ve = VerifyOne(enlarge, Options());
  ASSERT_EQ(ve.outcome, Outcome::kProved) << ve.detail;
  EXPECT_FALSE(ve.generalised);
  EXPECT_FALSE(Generalise(enlarge, false, Options()).has_value());
}

TEST(Verifier, ProvesParallelMatMulMerge) {
  RuleBuilder b;
  int a = b.Input("A", {S("m"), S("k")});
  int m1 = b.Input("B1", {S("k"), S("j")}), m2 = b.Input("B2", {S("k"), S("j")});
  rules::Ref cat = b.Op(1, "Concat", {b.In(m1), b.In(m2)}, {}, {{"axis", 1}});
  rules::Ref mm = b.Op(1, "MatMul", {b.In(a), cat});
  rules::Ref split = b.Op(1, "Split", {mm}, {}, {{"axis", 1}}, 2);
  rules::Ref second = split;
  second.mutable_node()->set_output(1);
  rules::Rule r =
      b.Build({b.Op(0, "MatMul", {b.In(a), b.In(m1)}), b.Op(0, "MatMul", {b.In(a), b.In(m2)})}, {split, second});
  EXPECT_EQ(Prove(r), Outcome::kProved);
}

TEST(Verifier, PrunesCommonSubgraph) {
  // Relu(X) + Relu(X) == 2 * Relu(X) is X + X == 2 * X with Relu(X) for X.
  RuleBuilder b;
  int x = b.Input("X", {S("m"), S("k")});
  int s = b.Input("s", {});
  rules::Ref r1 = b.Op(0, "Relu", {b.In(x)});
  rules::Ref r2 = b.Op(1, "Relu", {b.In(x)});
  rules::Rule r = b.Build({b.Op(0, "Mul", {r1, b.Op(0, "Add", {b.In(s), b.In(s)})})},
                          {b.Op(1, "Add", {b.Op(1, "Mul", {r2, b.In(s)}), b.Op(1, "Mul", {r2, b.In(s)})})});
  EXPECT_EQ(VerifyOne(r, Options()).outcome, Outcome::kPrunedCommonSubgraph);
}

TEST(Verifier, DuplicatesUpToRenamingCollapse) {
  auto make = [](const char* a, const char* c) {
    RuleBuilder b;
    int x = b.Input(a, {S("m"), S("k")}), y = b.Input(c, {S("m"), S("k")});
    return b.Build({b.Op(0, "Relu", {b.Op(0, "Relu", {b.Op(0, "Add", {b.In(x), b.In(y)})})})},
                   {b.Op(1, "Relu", {b.Op(1, "Add", {b.In(x), b.In(y)})})});
  };
  rules::Rule r1 = make("P", "Q"), r2 = make("U", "V");
  EXPECT_EQ(r1.id(), r2.id());
  int64_t dups = 0;
  rules::RuleDatabase db = Assemble(rules::GeneratorSettings(), {r1, r2}, &dups);
  EXPECT_EQ(db.rules_size(), 1);
  EXPECT_EQ(dups, 1);
}

// `text` with its first "%s" replaced by `value` (a rule template's hole).
std::string Filled(std::string text, const std::string& value) {
  text.replace(text.find("%s"), 2, value);
  return text;
}

// Written rules: proved exactly, refuted when wrong (a constant off, the
// epsilons of the two sides differ), and a float32 attribute standing for
// 1/6 proved within its tolerance but not exactly.
Outcome VerifyText(const std::string& text) {
  std::vector<rules::Rule> r = ParseWrittenRules(text, "t.rules");
  EXPECT_EQ(r.size(), 1u);
  Result res = VerifyOne(r.at(0), Options{});
  return res.outcome;
}

TEST(Verifier, WrittenRulesAreProvedOrRefuted) {
  const std::string hs =
      "rule hs\n  input X: float32[n, c]\n  source Div(Mul(X, Clip(Add(X, %s), 0.0, 6.0)), 6.0)\n"
      "  target HardSwish(X)\n";
  EXPECT_EQ(VerifyText(Filled(hs, "3.0")), Outcome::kProved);
  EXPECT_NE(VerifyText(Filled(hs, "4.0")), Outcome::kProved);
  const std::string ln =
      "rule ln\n  input X: float32[n, d]\n  let D = Sub(X, ReduceMean(X, axes=[-1]))\n"
      "  source Div(D, Sqrt(Add(ReduceMean(Pow(D, 2.0), axes=[-1]), 1e-05)))\n"
      "  target LayerNormalization(X, fill(1.0, [d]), axis=-1, epsilon=%s)\n";
  EXPECT_EQ(VerifyText(Filled(ln, "1e-05")), Outcome::kProved);
  // Refuted by the float64 check first; Z3 would too (Sqrt is uninterpreted:
  // only the same argument gives the same root).
  EXPECT_NE(VerifyText(Filled(ln, "1e-06")), Outcome::kProved);
  const std::string sig =
      "rule sig\n  input X: float32[n]\n  source Clip(Add(Div(X, 6.0), 0.5), 0.0, 1.0)\n"
      "  target HardSigmoid(X, alpha=0.16666667, beta=0.5)\n";
  EXPECT_EQ(VerifyText(sig + "  tolerance 1e-7\n"), Outcome::kProved);
  EXPECT_NE(VerifyText(sig), Outcome::kProved);  // not exactly: 1/6 is not a float32
  // A constant whose value depends on a dimension: the mean over the
  // channels as a convolution with weights 1/c (float32: within rounding).
  const std::string mean =
      "rule m\n  input X: float32[n, c, h, w]\n  source ReduceMean(X, axes=[1])\n"
      "  target Conv(X, fill(%s, [1, c, 1, 1]))\n  tolerance 1e-7\n";
  EXPECT_EQ(VerifyText(Filled(mean, "1.0 / c")), Outcome::kProved);
  EXPECT_NE(VerifyText(Filled(mean, "2.0 / c")), Outcome::kProved);
  EXPECT_NE(VerifyText(Filled(mean, "1.0 / h")), Outcome::kProved);
  EXPECT_NE(VerifyText(Filled(mean, "0.33333334")), Outcome::kProved);  // 1/c at c = 3 only
}

// Sqrt is uninterpreted but for what a square root is (for x >= 0, Sqrt(x)
// >= 0 and Sqrt(x)^2 = x), and Reciprocal is a real quotient: dividing by
// the root of a mean of squares plus a positive epsilon is multiplying by
// its reciprocal (the root has no zero); without the epsilon, or of any
// input, the root may be zero and Z3 refutes it. A reciprocal of a rule
// input is a divisor the matcher checks, as Div's.
TEST(Verifier, DividingByAPositiveRootIsMultiplyingByItsReciprocal) {
  auto by_reciprocal = [](const std::string& root, const std::string& more_inputs = "") {
    return ParseWrittenRules("rule r\n  input D: float32[n, c, h, w]\n" + more_inputs + "  let S = " + root +
                                 "\n  source Div(D, S)\n  target Mul(D, Reciprocal(S))\n",
                             "t.rules")
        .at(0);
  };
  EXPECT_EQ(Prove(by_reciprocal("Sqrt(Add(ReduceMean(Mul(D, D), axes=[1]), 1e-06))")), Outcome::kProved);
  EXPECT_EQ(Prove(by_reciprocal("Sqrt(Add(ReduceMean(Pow(D, 2.0), axes=[1]), 1e-05))")), Outcome::kProved);
  EXPECT_EQ(Prove(by_reciprocal("Sqrt(ReduceMean(Mul(D, D), axes=[1]))")), Outcome::kRefutedZ3);
  EXPECT_EQ(Prove(by_reciprocal("Sqrt(Add(V, 1e-06))", "  input V: float32[n, 1, h, w]\n")), Outcome::kRefutedZ3);
  // X * S * (1 / S) = X where S has no zero (at S = 0 the left side is 0).
  rules::Rule input = ParseWrittenRules(
                          "rule r\n  input X: float32[n, c]\n  input S: float32[c]\n"
                          "  source Mul(Mul(X, S), Reciprocal(S))\n  target Identity(X)\n",
                          "t.rules")
                          .at(0);
  EXPECT_EQ(DivisorInputs(input), std::vector<int>{1});
  EXPECT_EQ(Prove(input), Outcome::kProved);
}

// Softplus is proved equal to its ONNX definition over uninterpreted Exp and
// Log, and Tanh is a function like any other: equal arguments only.
TEST(Verifier, SoftplusIsItsDefinitionOverUninterpretedExpAndLog) {
  const std::string mish =
      "rule mish\n  input X: float32[n, c]\n  source Mul(X, Tanh(Softplus(X)))\n"
      "  target Mul(X, Tanh(Log(Add(Exp(X), %s))))\n";
  auto with = [&](const std::string& one) { return ParseWrittenRules(Filled(mish, one), "t.rules").at(0); };
  EXPECT_EQ(VerifyOne(with("1.0"), Options{}).outcome, Outcome::kProved);
  EXPECT_EQ(Prove(with("1.0")), Outcome::kProved);
  // Z3 alone (no float64 check first) refutes a wrong constant and a
  // dropped Tanh.
  EXPECT_EQ(Prove(with("2.0")), Outcome::kRefutedZ3);
  rules::Rule no_tanh =
      ParseWrittenRules("rule t\n  input X: float32[n]\n  source Tanh(Softplus(X))\n  target Softplus(X)\n", "t").at(0);
  EXPECT_EQ(Prove(no_tanh), Outcome::kRefutedZ3);
}

// PRelu(X, S) = Max(X, X * S) holds for slopes at most 1: proved under the
// premise `S <= 1.0`, refuted by Z3 without it or with a bound of 2.
TEST(Verifier, AnUpperBoundIsAPremise) {
  auto prelu_max = [](const std::string& bound) {
    return ParseWrittenRules("rule m\n  input X: float32[n, c]\n  input S: float32[c]" + bound +
                                 "\n  source PRelu(X, S)\n  target Max(X, Mul(X, S))\n",
                             "t.rules")
        .at(0);
  };
  EXPECT_EQ(VerifyOne(prelu_max(" <= 1.0"), Options{}).outcome, Outcome::kProved);
  EXPECT_EQ(Prove(prelu_max(" <= 1.0")), Outcome::kProved);
  EXPECT_EQ(Prove(prelu_max("")), Outcome::kRefutedZ3);
  EXPECT_EQ(Prove(prelu_max(" <= 2.0")), Outcome::kRefutedZ3);
  EXPECT_NE(VerifyOne(prelu_max(""), Options{}).outcome, Outcome::kProved);  // the float64 check first
}

// Structural re-parameterisation (RepVGG): a 1x1 kernel is a 3x3 one with
// zeros around its centre, and an identity branch scaled per channel is a
// 3x3 kernel with the scale at the centre of its diagonal (EyeLike's
// semantics: constants, whatever its input holds). Z3 alone refutes the 1x1
// kernel padded into a corner, the scale on the wrong diagonal and the shift
// left out of the bias.
TEST(Verifier, ProvesRepVggBranchesMergeIntoOneKernel) {
  const std::string one_by_one =
      "rule r\n  input X: float32[n, ci, h, w]\n  input W3: float32[co, ci, 3, 3]\n  input B3: float32[co]\n"
      "  input W1: float32[co, ci, 1, 1]\n  input B1: float32[co]\n"
      "  source Add(Conv(X, W3, B3, pads=[1, 1, 1, 1]), Conv(X, W1, B1))\n"
      "  target Conv(X, Add(W3, Pad(W1, %s)), Add(B3, B1), pads=[1, 1, 1, 1])\n";
  auto padded = [&](const std::string& pads) { return ParseWrittenRules(Filled(one_by_one, pads), "t.rules").at(0); };
  EXPECT_EQ(VerifyOne(padded("[0, 0, 1, 1, 0, 0, 1, 1]"), Options{}).outcome, Outcome::kProved);
  EXPECT_EQ(Prove(padded("[0, 0, 1, 1, 0, 0, 1, 1]")), Outcome::kProved);
  EXPECT_EQ(Prove(padded("[0, 0, 0, 0, 0, 0, 2, 2]")), Outcome::kRefutedZ3);
  const std::string identity =
      "rule r\n  input X: float32[n, c, h, w]\n  input W: float32[c, c, 3, 3]\n  input B: float32[c]\n"
      "  input S: float32[c, 1, 1]\n  input T: float32[c, 1, 1]\n"
      "  let D = Mul(EyeLike(ReduceMean(W, axes=[2, 3], keepdims=0), k=%k), Reshape(S, [-1, 1]))\n"
      "  source Add(Conv(X, W, B, pads=[1, 1, 1, 1]), Add(Mul(X, S), T))\n"
      "  target Conv(X, Add(W, Pad(Reshape(D, [0, 0, 1, 1]), [0, 0, 1, 1, 0, 0, 1, 1])), %b, pads=[1, 1, 1, 1])\n";
  auto scaled = [&](const std::string& k, const std::string& bias) {
    std::string t = identity;
    t.replace(t.find("%k"), 2, k);
    t.replace(t.find("%b"), 2, bias);
    return ParseWrittenRules(t, "t.rules").at(0);
  };
  EXPECT_EQ(VerifyOne(scaled("0", "Add(B, Reshape(T, [-1]))"), Options{}).outcome, Outcome::kProved);
  EXPECT_EQ(Prove(scaled("0", "Add(B, Reshape(T, [-1]))")), Outcome::kProved);
  EXPECT_EQ(Prove(scaled("1", "Add(B, Reshape(T, [-1]))")), Outcome::kRefutedZ3);
  EXPECT_EQ(Prove(scaled("0", "B")), Outcome::kRefutedZ3);
}

// Constants reach Z3 as exact rationals (decimal text in exponent form is
// read by Z3 as 1/0).
TEST(Verifier, ConstantsAreExactRationals) {
  z3::context z3;
  EXPECT_EQ(ExactReal(z3, 0.5).get_decimal_string(3), "0.5");
  // float32(1e-5) = 2748779 / 2^38 exactly.
  EXPECT_TRUE((ExactReal(z3, 1e-5f) == z3.real_val("2748779/274877906944")).simplify().is_true());
  EXPECT_TRUE(
      (ExactReal(z3, 1e-12) == z3.real_val("4951760157141521/4951760157141521099596496896")).simplify().is_true());
  z3::expr tiny = ExactReal(z3, 1e-12);
  EXPECT_TRUE(tiny.is_numeral());
  z3::solver s(z3);
  s.add(tiny <= z3.real_val(0) || tiny >= z3.real_val("0.000000001"));
  EXPECT_EQ(s.check(), z3::unsat);
  EXPECT_TRUE((ExactReal(z3, -3.0) == z3.real_val(-3)).simplify().is_true());
  EXPECT_TRUE((ExactReal(z3, 6.0e20) == z3.real_val("600000000000000000000")).simplify().is_true());
}

}  // namespace
}  // namespace rlflow::verifier
