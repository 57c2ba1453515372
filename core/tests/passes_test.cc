// Every builtin pass: on a small graph made for it, it fires, does what its
// name says (the op counts it must change) and keeps the outputs; a
// registered pass without such a case fails the test. On every zoo model
// (zoo_passes_test), every pass keeps the outputs within 1e-5 and the
// interface (input and output names and types).
#include <gtest/gtest.h>

#include <functional>
#include <limits>
#include <map>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/onnx_io.h"
#include "core/onnx_proto_testing.h"
#include "core/passes/fold_constants.h"
#include "core/passes/pass.h"
#include "core/strings.h"
#include "runtime/executor.h"

namespace rlflow {
namespace {

double MaxDiff(const Graph& a, const Graph& b, uint64_t seed = 9) {
  std::vector<at::Tensor> in = RandomInputs(a, seed);
  std::vector<at::Tensor> x = Executor(a).Run(in), y = Executor(b).Run(in);
  double worst = 0;
  for (size_t k = 0; k < x.size(); ++k) worst = std::max(worst, RelativeError(y[k], x[k]));
  return worst;
}

int Count(const Graph& g, const std::string& op) {
  auto c = g.OpCounts();
  return c.count(op) ? c.at(op) : 0;
}

TensorData Floats(const Shape& shape, float value) {
  return TensorData::FromFloat(std::vector<float>(static_cast<size_t>(NumElements(shape)), value), shape);
}

struct Case {
  std::function<Graph()> build;
  // Expected op counts after the pass (only the listed ops are checked).
  std::map<std::string, int> after;
};

std::map<std::string, Case> Cases() {
  std::map<std::string, Case> c;
  auto conv = [](GraphBuilder& b, ValueId x, int oc, bool bias, int ic = 4) {
    ValueId w = b.Weight(b.Fresh("w"), {oc, ic, 3, 3}, 0.2f);
    std::vector<ValueId> in = {x, w};
    if (bias) in.push_back(b.Weight(b.Fresh("b"), {oc}, 0.1f));
    return b.Op("Conv", in, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  };
  c["dce"] = {[] {
                GraphBuilder b(1);
                ValueId x = b.Input("x", {2, 3});
                b.Op("Sigmoid", {x});  // read by nothing
                return b.Build({b.Op("Relu", {x})});
              },
              {{"Sigmoid", 0}, {"Relu", 1}}};
  c["cse"] = {[] {
                GraphBuilder b(1);
                ValueId x = b.Input("x", {2, 3});
                return b.Build({b.Op("Add", {b.Op("Relu", {x}), b.Op("Relu", {x})})});
              },
              {{"Relu", 1}, {"Add", 1}}};
  c["dedup_initializers"] = {[] {
                               GraphBuilder b(1);
                               ValueId x = b.Input("x", {2, 3});
                               ValueId s1 = b.Const(Floats({3}, 2.0f)), s2 = b.Const(Floats({3}, 2.0f));
                               return b.Build({b.Op("Mul", {b.Op("Mul", {x, s1}), s2})});
                             },
                             {{"Mul", 2}}};
  c["remove_identity"] = {[] {
                            GraphBuilder b(1);
                            ValueId x = b.Input("x", {2, 3});
                            return b.Build({b.Op("Identity", {b.Op("Relu", {x})})});
                          },
                          {{"Identity", 0}, {"Relu", 1}}};
  c["remove_dropout"] = {[] {
                           GraphBuilder b(1);
                           ValueId x = b.Input("x", {2, 3});
                           return b.Build({b.Op("Relu", {b.Op("Dropout", {x})})});
                         },
                         {{"Dropout", 0}}};
  c["remove_nop_cast"] = {[] {
                            GraphBuilder b(1);
                            ValueId x = b.Input("x", {2, 3});
                            return b.Build({b.Op("Relu", {b.Op("Cast", {x}, {{"to", Attribute::Int(1)}})})});
                          },
                          {{"Cast", 0}}};
  c["remove_nop_pad"] = {[] {
                           GraphBuilder b(1);
                           ValueId x = b.Input("x", {2, 3});
                           return b.Build({b.Op("Relu", {b.Op("Pad", {x, b.ConstInts({0, 0, 0, 0})})})});
                         },
                         {{"Pad", 0}}};
  c["remove_nop_slice"] = {[] {
                             GraphBuilder b(1);
                             ValueId x = b.Input("x", {2, 3});
                             ValueId s = b.Op("Slice", {x, b.ConstInts({0}), b.ConstInts({100}), b.ConstInts({1})});
                             return b.Build({b.Op("Relu", {s})});
                           },
                           {{"Slice", 0}}};
  c["remove_nop_expand"] = {[] {
                              GraphBuilder b(1);
                              ValueId x = b.Input("x", {2, 3});
                              return b.Build({b.Op("Relu", {b.Op("Expand", {x, b.ConstInts({2, 3})})})});
                            },
                            {{"Expand", 0}}};
  c["remove_single_input_concat"] = {[] {
                                       GraphBuilder b(1);
                                       ValueId x = b.Input("x", {2, 3});
                                       ValueId y = b.Op("Concat", {b.Op("Relu", {x})}, {{"axis", Attribute::Int(0)}});
                                       return b.Build({y});
                                     },
                                     {{"Concat", 0}}};
  c["fold_constants"] = {[] {
                           GraphBuilder b(1);
                           ValueId x = b.Input("x", {2, 3});
                           ValueId w = b.Op("Add", {b.Weight("a", {3}, 1.0f), b.Weight("c", {3}, 1.0f)});
                           return b.Build({b.Op("Mul", {x, w})});
                         },
                         {{"Add", 0}, {"Mul", 1}}};
  auto bn = [](GraphBuilder& b, ValueId x, int c) {
    return b.Op("BatchNormalization", {x, b.Uniform(b.Fresh("g"), {c}, 0.5f, 1.5f), b.Weight(b.Fresh("be"), {c}, 0.3f),
                                       b.Weight(b.Fresh("m"), {c}, 0.3f), b.Uniform(b.Fresh("v"), {c}, 0.5f, 2.0f)});
  };
  c["lower_batchnorm"] = {[bn] {
                            GraphBuilder b(1);
                            ValueId x = b.Input("x", {1, 4, 5, 5});
                            return b.Build({bn(b, x, 4)});
                          },
                          {{"BatchNormalization", 0}, {"Mul", 1}, {"Add", 1}}};
  c["raise_batchnorm"] = {[] {
                            GraphBuilder b(1);
                            ValueId x = b.Input("x", {1, 4, 5, 5});
                            ValueId y = b.Op("Mul", {x, b.Weight("s", {4, 1, 1}, 1.0f)});
                            return b.Build({b.Op("Add", {y, b.Weight("t", {4, 1, 1}, 1.0f)})});
                          },
                          {{"BatchNormalization", 1}, {"Mul", 0}, {"Add", 0}}};
  c["remove_mul_one"] = {[] {
                           GraphBuilder b(1);
                           ValueId x = b.Input("x", {2, 3});
                           ValueId y = b.Op("Mul", {b.Const(Floats({3}, 1.0f)), b.Op("Relu", {x})});
                           return b.Build({b.Op("Div", {y, b.Const(Floats({}, 1.0f))})});
                         },
                         {{"Mul", 0}, {"Div", 0}}};
  c["remove_add_zero"] = {[] {
                            GraphBuilder b(1);
                            ValueId x = b.Input("x", {2, 3});
                            ValueId y = b.Op("Add", {b.Op("Relu", {x}), b.Const(Floats({1, 3}, 0.0f))});
                            return b.Build({b.Op("Sub", {y, b.Const(Floats({}, 0.0f))})});
                          },
                          {{"Add", 0}, {"Sub", 0}}};
  c["combine_constant_chains"] = {
      [] {
        GraphBuilder b(1);
        ValueId x = b.Input("x", {2, 3});
        ValueId y = b.Op("Add", {b.Weight("a", {3}, 1.0f), x});
        ValueId z = b.Op("Add", {y, b.Weight("c", {2, 1}, 1.0f)});
        ValueId m = b.Op("Mul", {b.Op("Mul", {z, b.Weight("d", {3}, 1.0f)}), b.Weight("e", {3}, 1.0f)});
        return b.Build({m});
      },
      {{"Add", 1}, {"Mul", 1}}};
  c["transpose_transpose"] = {
      [] {
        GraphBuilder b(1);
        ValueId x = b.Input("x", {2, 3, 4});
        ValueId t = b.Op("Transpose", {x}, {{"perm", Attribute::Ints({0, 2, 1})}});
        ValueId u = b.Op("Transpose", {t}, {{"perm", Attribute::Ints({0, 2, 1})}});
        ValueId v = b.Op("Transpose", {b.Op("Relu", {u})}, {{"perm", Attribute::Ints({1, 0, 2})}});
        ValueId w = b.Op("Transpose", {v}, {{"perm", Attribute::Ints({0, 2, 1})}});
        return b.Build({w});
      },
      {{"Transpose", 1}}};
  c["remove_nop_transpose"] = {[] {
                                 GraphBuilder b(1);
                                 ValueId x = b.Input("x", {2, 3});
                                 ValueId t = b.Op("Transpose", {x}, {{"perm", Attribute::Ints({0, 1})}});
                                 return b.Build({b.Op("Relu", {t})});
                               },
                               {{"Transpose", 0}}};
  c["reshape_reshape"] = {[] {
                            GraphBuilder b(1);
                            ValueId x = b.Input("x", {2, 3, 4});
                            ValueId r = b.Op("Reshape", {x, b.ConstInts({6, 4})});
                            return b.Build({b.Op("Reshape", {r, b.ConstInts({4, 6})})});
                          },
                          {{"Reshape", 1}}};
  c["remove_nop_reshape"] = {[] {
                               GraphBuilder b(1);
                               ValueId x = b.Input("x", {2, 3});
                               return b.Build({b.Op("Relu", {b.Op("Reshape", {x, b.ConstInts({2, -1})})})});
                             },
                             {{"Reshape", 0}}};
  c["squeeze_unsqueeze"] = {[] {
                              GraphBuilder b(1);
                              ValueId x = b.Input("x", {2, 3});
                              ValueId u = b.Op("Unsqueeze", {x, b.ConstInts({0})});
                              return b.Build({b.Op("Relu", {b.Op("Squeeze", {u, b.ConstInts({0})})})});
                            },
                            {{"Squeeze", 0}, {"Unsqueeze", 0}}};
  c["concat_split"] = {
      [] {
        GraphBuilder b(1);
        ValueId x = b.Input("x", {2, 3});
        ValueId y = b.Input("y", {2, 5});
        ValueId cat = b.Op("Concat", {b.Op("Relu", {x}), b.Op("Sigmoid", {y})}, {{"axis", Attribute::Int(1)}});
        auto parts = b.OpN("Split", {cat, b.ConstInts({3, 5})}, 2, {{"axis", Attribute::Int(-1)}});
        return b.Build({b.Op("Neg", {parts[0]}), b.Op("Neg", {parts[1]})});
      },
      {{"Concat", 0}, {"Split", 0}}};
  c["idempotent_unary"] = {[] {
                             GraphBuilder b(1);
                             ValueId x = b.Input("x", {2, 3});
                             return b.Build({b.Op("Relu", {b.Op("Relu", {b.Op("Abs", {b.Op("Abs", {x})})})})});
                           },
                           {{"Relu", 1}, {"Abs", 1}}};
  c["neg_neg"] = {[] {
                    GraphBuilder b(1);
                    ValueId x = b.Input("x", {2, 3});
                    return b.Build({b.Op("Neg", {b.Op("Neg", {b.Op("Relu", {x})})})});
                  },
                  {{"Neg", 0}}};
  c["fold_batchnorm_into_conv"] = {[conv, bn] {
                                     GraphBuilder b(1);
                                     ValueId x = b.Input("x", {1, 4, 6, 6});
                                     ValueId y = bn(b, conv(b, x, 8, false), 8);
                                     ValueId z = bn(b, conv(b, b.Op("Relu", {y}), 4, true, 8), 4);
                                     return b.Build({z});
                                   },
                                   {{"BatchNormalization", 0}, {"Conv", 2}}};
  c["fold_mul_into_conv"] = {[conv] {
                               GraphBuilder b(1);
                               ValueId x = b.Input("x", {1, 4, 6, 6});
                               ValueId y = b.Op("Mul", {conv(b, x, 8, true), b.Weight("s", {8, 1, 1}, 1.0f)});
                               ValueId z = b.Op("Mul", {b.ConstFloat(0.5f), conv(b, b.Op("Relu", {y}), 4, false, 8)});
                               return b.Build({z});
                             },
                             {{"Mul", 0}, {"Conv", 2}}};
  c["fold_add_into_conv"] = {[conv] {
                               GraphBuilder b(1);
                               ValueId x = b.Input("x", {1, 4, 6, 6});
                               ValueId y = b.Op("Add", {conv(b, x, 8, false), b.Weight("t", {1, 8, 1, 1}, 1.0f)});
                               return b.Build({b.Op("Relu", {y})});
                             },
                             {{"Add", 0}, {"Conv", 1}}};
  c["matmul_add_to_gemm"] = {[] {
                               GraphBuilder b(1);
                               ValueId x = b.Input("x", {2, 3});
                               ValueId y = b.Op("MatMul", {x, b.Weight("w", {3, 4}, 1.0f)});
                               return b.Build({b.Op("Add", {b.Weight("bias", {4}, 1.0f), y})});
                             },
                             {{"MatMul", 0}, {"Add", 0}, {"Gemm", 1}}};
  c["transpose_into_gemm"] = {[] {
                                GraphBuilder b(1);
                                ValueId x = b.Input("x", {3, 2});
                                ValueId t = b.Op("Transpose", {x}, {{"perm", Attribute::Ints({1, 0})}});
                                ValueId y = b.Op("MatMul", {t, b.Weight("w", {3, 4}, 1.0f)});
                                ValueId w2 = b.Op("Transpose", {b.Weight("w2", {5, 4}, 1.0f)});
                                return b.Build({b.Op("Gemm", {y, w2})});
                              },
                              {{"Transpose", 0}, {"MatMul", 0}, {"Gemm", 2}}};
  c["merge_parallel_convs"] = {[conv] {
                                 GraphBuilder b(1);
                                 ValueId x = b.Input("x", {1, 4, 6, 6});
                                 ValueId a = conv(b, x, 8, true), c2 = conv(b, x, 5, false);
                                 return b.Build({b.Op("Relu", {a}), b.Op("Sigmoid", {c2})});
                               },
                               {{"Conv", 1}, {"Split", 1}}};
  c["merge_parallel_matmuls"] = {[] {
                                   GraphBuilder b(1);
                                   ValueId x = b.Input("x", {2, 7, 3});
                                   ValueId a = b.Op("MatMul", {x, b.Weight("wa", {3, 4}, 1.0f)});
                                   ValueId c2 = b.Op("MatMul", {x, b.Weight("wb", {3, 6}, 1.0f)});
                                   ValueId d = b.Op("MatMul", {x, b.Weight("wc", {3, 2}, 1.0f)});
                                   return b.Build({b.Op("Relu", {a}), b.Op("Relu", {c2}), b.Op("Relu", {d})});
                                 },
                                 {{"MatMul", 1}, {"Split", 1}}};
  c["select_rows_early"] = {
      [] {
        GraphBuilder b(1);
        ValueId x = b.Input("x", {2, 6, 8});
        ValueId h = b.Op("Add", {b.Op("MatMul", {x, b.Weight("w1", {8, 16}, 0.3f)}), b.Weight("b1", {16}, 0.1f)});
        h = b.Op("MatMul", {b.Op("Relu", {h}), b.Weight("w2", {16, 8}, 0.3f)});
        ValueId y =
            b.Op("LayerNormalization", {b.Op("Add", {h, x}), b.Weight("s", {8}, 0.1f, 1.0f), b.Weight("t", {8}, 0.1f)});
        return b.Build({b.Op("Gather", {y, b.ConstInts({0}, Shape{})}, {{"axis", Attribute::Int(1)}})});
      },
      {{"Squeeze", 1}, {"MatMul", 2}, {"LayerNormalization", 1}}};
  return c;
}

std::vector<std::string> Names(const Graph& g, const std::vector<ValueId>& values) {
  std::vector<std::string> out;
  for (ValueId v : values) out.push_back(g.value(v).name + " " + g.value(v).type.ToString());
  return out;
}

TEST(Passes, EveryBuiltinPassDoesWhatItsNameSays) {
  const std::map<std::string, Case> cases = Cases();
  const PassRegistry& reg = PassRegistry::Builtin();
  ASSERT_GE(reg.passes().size(), 30u);
  for (const PassInfo& p : reg.passes()) {
    SCOPED_TRACE(p.name);
    EXPECT_FALSE(p.description.empty());
    auto it = cases.find(p.name);
    ASSERT_NE(it, cases.end()) << "pass '" << p.name << "' has no case in passes_test.cc";
    Graph before = it->second.build();
    Graph after = before;
    EXPECT_TRUE(reg.Make(p.name)->Run(after)) << "the pass did not fire";
    after.Validate();
    for (const auto& [op, n] : it->second.after) EXPECT_EQ(Count(after, op), n) << op;
    EXPECT_LT(MaxDiff(before, after), 1e-5);
    EXPECT_EQ(Names(after, after.inputs()), Names(before, before.inputs()));
    EXPECT_EQ(Names(after, after.outputs()), Names(before, before.outputs()));
    // Run again: nothing of its kind is left (a second run may still fire
    // where the first created new opportunities, but must then converge).
    Graph again = after;
    bool changed = true;
    for (int k = 0; k < 3 && changed; ++k) changed = reg.Make(p.name)->Run(again);
    EXPECT_FALSE(changed) << "the pass does not converge";
  }
  for (const auto& [name, c] : cases) EXPECT_TRUE(reg.Has(name)) << "a case for an unregistered pass: " << name;
}

// The output's shape of the first node computing `op` from an input named
// `weight` (a weight or a graph input).
Shape OutputOf(const Graph& g, const std::string& op, const std::string& weight) {
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    const Node& n = g.node(id);
    if (n.op != op) continue;
    for (ValueId in : n.inputs)
      if (in != kNoValue && g.value(in).name == weight) return g.value(n.outputs[0]).type.shape;
  }
  return {};
}

// An attention layer whose output is read at one token (a classifier's
// class token, x[:, 0]): its query projection, its attention rows, its
// residual and its feed-forward block run on that token only; its keys and
// values still on every token.
TEST(Passes, SelectRowsEarlyComputesOnlyTheSelectedRows) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {2, 6, 8});
  const auto heads = [&](ValueId t, std::vector<int64_t> perm) {
    return b.Op("Transpose", {b.Op("Reshape", {t, b.ConstInts({2, 6, 2, 4})})}, {{"perm", Attribute::Ints(perm)}});
  };
  ValueId q = heads(b.Op("MatMul", {x, b.Weight("wq", {8, 8}, 0.3f)}), {0, 2, 1, 3});
  ValueId k = heads(b.Op("MatMul", {x, b.Weight("wk", {8, 8}, 0.3f)}), {0, 2, 3, 1});
  ValueId v = heads(b.Op("MatMul", {x, b.Weight("wv", {8, 8}, 0.3f)}), {0, 2, 1, 3});
  ValueId p = b.Op("Softmax", {b.Op("MatMul", {q, k})}, {{"axis", Attribute::Int(-1)}});
  ValueId ctx = b.Op("Reshape", {b.Op("Transpose", {b.Op("MatMul", {p, v})}, {{"perm", Attribute::Ints({0, 2, 1, 3})}}),
                                 b.ConstInts({0, 0, 8})});
  ValueId y = b.Op("Add", {x, b.Op("MatMul", {ctx, b.Weight("wo", {8, 8}, 0.3f)})});
  ValueId f = b.Op("MatMul",
                   {b.Op("Relu", {b.Op("MatMul", {y, b.Weight("w1", {8, 16}, 0.3f)})}), b.Weight("w2", {16, 8}, 0.3f)});
  ValueId out = b.Op("Gather", {b.Op("Add", {y, f}), b.ConstInts({0}, Shape{})}, {{"axis", Attribute::Int(1)}});
  const Graph before = b.Build({out});
  Graph after = before;
  ASSERT_TRUE(PassRegistry::Builtin().Make("select_rows_early")->Run(after));
  after.Validate();
  EXPECT_LT(MaxDiff(before, after), 1e-5);
  EXPECT_EQ(Names(after, after.outputs()), Names(before, before.outputs()));
  EXPECT_EQ(OutputOf(after, "MatMul", "wq"), (Shape{2, 1, 8}));
  EXPECT_EQ(OutputOf(after, "MatMul", "wk"), (Shape{2, 6, 8}));
  EXPECT_EQ(OutputOf(after, "MatMul", "wv"), (Shape{2, 6, 8}));
  EXPECT_EQ(OutputOf(after, "MatMul", "wo"), (Shape{2, 1, 8}));
  EXPECT_EQ(OutputOf(after, "MatMul", "w1"), (Shape{2, 1, 16}));
  for (NodeId id = 0; id < after.num_nodes(); ++id) {
    if (after.node(id).op != "Softmax") continue;
    EXPECT_EQ(after.value(after.node(id).outputs[0]).type.shape, (Shape{2, 2, 1, 6}));
  }
  EXPECT_EQ(Count(after, "Squeeze"), 1);
}

// A classifier reading two tokens (DeiT's class and distillation tokens,
// x[:, 0] and x[:, -1]): both rows are selected first, then moved.
TEST(Passes, SelectRowsEarlySelectsTheRowsOfEveryReaderTogether) {
  GraphBuilder b(5);
  ValueId h = b.Op("Relu", {b.Op("MatMul", {b.Input("x", {2, 6, 8}), b.Weight("w", {8, 8}, 0.3f)})});
  ValueId first = b.Op("Gather", {h, b.ConstInts({0}, Shape{})}, {{"axis", Attribute::Int(1)}});
  ValueId last = b.Op("Gather", {h, b.ConstInts({-1, 0}, Shape{2})}, {{"axis", Attribute::Int(1)}});
  const Graph before = b.Build({first, last});
  Graph after = before;
  ASSERT_TRUE(PassRegistry::Builtin().Make("select_rows_early")->Run(after));
  after.Validate();
  EXPECT_LT(MaxDiff(before, after), 1e-6);
  EXPECT_EQ(Names(after, after.outputs()), Names(before, before.outputs()));
  EXPECT_EQ(OutputOf(after, "MatMul", "w"), (Shape{2, 2, 8}));
}

// TensorFlow's and Paddle's exports write a pooler's `x[:, 0]` as a Slice of
// one row and a Squeeze: the Slice moves as a Gather would, from the front
// or from the back; a Slice whose rows depend on the axis's length
// (`x[:, 1:]`) stays.
TEST(Passes, SelectRowsEarlyMovesASliceOfRowsThatDoNotDependOnTheLength) {
  const int64_t end = std::numeric_limits<int64_t>::max();
  const auto build = [&](int64_t start, int64_t stop) {
    GraphBuilder b(7);
    ValueId x = b.Input("x", {2, 6, 8});
    ValueId h = b.Op("Relu", {b.Op("MatMul", {x, b.Weight("w", {8, 16}, 0.3f)})});
    h = b.Op("Add", {x, b.Op("MatMul", {h, b.Weight("w2", {16, 8}, 0.3f)})});
    ValueId rows = b.Op("Slice", {h, b.ConstInts({start}), b.ConstInts({stop}), b.ConstInts({1})});
    const bool one = (start == 0 && stop == 1) || (start == -1 && stop == end);
    return b.Build({one ? b.Op("Squeeze", {rows, b.ConstInts({1})}) : rows});
  };
  for (const auto& [start, stop] : std::vector<std::pair<int64_t, int64_t>>{{0, 1}, {-1, end}, {-3, -1}}) {
    SCOPED_TRACE(std::to_string(start) + ":" + std::to_string(stop));
    const Graph before = build(start, stop);
    Graph after = before;
    ASSERT_TRUE(PassRegistry::Builtin().Make("select_rows_early")->Run(after));
    after.Validate();
    EXPECT_LT(MaxDiff(before, after), 1e-5);
    EXPECT_EQ(Names(after, after.outputs()), Names(before, before.outputs()));
    const int64_t count = start >= 0 ? stop - start : (stop < 0 ? stop : 0) - start;
    EXPECT_EQ(OutputOf(after, "MatMul", "w"), (Shape{2, count, 16}));
    EXPECT_EQ(OutputOf(after, "MatMul", "w2"), (Shape{2, count, 8}));
  }
  for (const auto& [start, stop] : std::vector<std::pair<int64_t, int64_t>>{{1, end}, {0, -1}, {-2, 5}}) {
    SCOPED_TRACE(std::to_string(start) + ":" + std::to_string(stop));
    Graph g = build(start, stop);
    const uint64_t hash = g.StructuralHash();
    EXPECT_FALSE(PassRegistry::Builtin().Make("select_rows_early")->Run(g));
    EXPECT_EQ(g.StructuralHash(), hash);
  }
}

// Rows of a Gemm's output are rows of A (columns with transA), its columns
// B's (rows with transB); its C broadcasts or is selected too.
TEST(Passes, SelectRowsEarlyMovesThroughGemm) {
  for (const int trans : {0, 1}) {
    SCOPED_TRACE(trans);
    GraphBuilder b(11);
    ValueId x = b.Input("x", {6, 8});
    ValueId a = trans ? b.Op("Transpose", {x}, {{"perm", Attribute::Ints({1, 0})}}) : x;
    ValueId y =
        b.Op("Gemm",
             {b.Op("Relu", {a}), b.Weight("w", trans ? Shape{16, 8} : Shape{8, 16}, 0.3f), b.Weight("c", {16}, 0.1f)},
             {{"transA", Attribute::Int(trans)}, {"transB", Attribute::Int(trans)}});
    ValueId rows = b.Op("Gather", {y, b.ConstInts({0, 3})}, {{"axis", Attribute::Int(0)}});
    ValueId cols = b.Op("Gather", {b.Op("Sigmoid", {rows}), b.ConstInts({5}, Shape{})}, {{"axis", Attribute::Int(1)}});
    const Graph before = b.Build({cols});
    Graph after = before;
    ASSERT_TRUE(PassRegistry::Builtin().Make("select_rows_early")->Run(after));
    after.Validate();
    EXPECT_LT(MaxDiff(before, after), 1e-5);
    EXPECT_EQ(Names(after, after.outputs()), Names(before, before.outputs()));
    int gemms = 0;
    for (NodeId id = 0; id < after.num_nodes(); ++id) {
      if (after.node(id).op != "Gemm") continue;
      ++gemms;
      EXPECT_EQ(after.value(after.node(id).outputs[0]).type.shape, (Shape{2, 1}));
    }
    EXPECT_EQ(gemms, 1);
  }
}

// A row selection stays where the rows it drops are read by something else
// (a graph output), where its operator mixes rows (a Softmax along the
// axis), and where a Reshape merges the axis with a dimension bound to 1
// ([T * B, C] -> [T, B, C] at B = 1 looks like T -> T).
TEST(Passes, SelectRowsEarlyLeavesRowsOthersRead) {
  const auto unchanged = [](const Graph& g) {
    Graph h = g;
    EXPECT_FALSE(PassRegistry::Builtin().Make("select_rows_early")->Run(h));
    EXPECT_EQ(h.StructuralHash(), g.StructuralHash());
  };
  {
    GraphBuilder b(1);
    ValueId r = b.Op("Relu", {b.Input("x", {2, 6, 8})});
    unchanged(b.Build({r, b.Op("Gather", {r, b.ConstInts({1}, Shape{})}, {{"axis", Attribute::Int(1)}})}));
  }
  {
    GraphBuilder b(1);
    ValueId s = b.Op("Softmax", {b.Input("x", {2, 6, 8})}, {{"axis", Attribute::Int(1)}});
    unchanged(b.Build({b.Op("Gather", {s, b.ConstInts({1}, Shape{})}, {{"axis", Attribute::Int(1)}})}));
  }
  {
    GraphBuilder b(1);
    ValueId t = b.Op("Reshape", {b.Input("x", {6, 8}), b.ConstInts({6, 1, 8})});
    unchanged(b.Build({b.Op("Gather", {t, b.ConstInts({0}, Shape{})}, {{"axis", Attribute::Int(0)}})}));
  }
}

// Shape arithmetic on symbolic dimensions (x's rows, bound to 4 here) is
// no row selection to move: Gather(Shape(x) * 1, 0) stays as it is, for the
// folding that keeps it general.
TEST(Passes, SelectRowsEarlyLeavesShapeArithmetic) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(13);
  onnx::GraphProto* g = m.mutable_graph();
  g->set_name("shape");
  testing::DeclareTensor(g->add_input(), "x", onnx::TensorProto::FLOAT, {-1, 8});
  testing::DeclareTensor(g->add_output(), "y", onnx::TensorProto::FLOAT, {-1, 2, 4});
  testing::Int64Tensor(g->add_initializer(), "one", {1, 1});
  testing::Int64Tensor(g->add_initializer(), "zero", {0});
  testing::Int64Tensor(g->add_initializer(), "rest", {2, 4});
  testing::AddNodeTo(g, "Shape", {"x"}, {"s"});
  testing::AddNodeTo(g, "Mul", {"s", "one"}, {"t"});
  testing::AddNodeTo(g, "Gather", {"t", "zero"}, {"n"});
  testing::IntAttr(testing::AddNodeTo(g, "Concat", {"n", "rest"}, {"shape"}), "axis", 0);
  testing::AddNodeTo(g, "Reshape", {"x", "shape"}, {"y"});
  ImportOptions o;
  o.input_shapes["x"] = {4, 8};
  Graph before = ImportOnnxModel(m, "shape arithmetic", o);
  Graph after = before;
  EXPECT_FALSE(PassRegistry::Builtin().Make("select_rows_early")->Run(after));
  EXPECT_EQ(after.StructuralHash(), before.StructuralHash());
}

TEST(Passes, LoweredBatchNormFoldsIntoConvInTwoSteps) {
  GraphBuilder b(2);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId w = b.Weight("w", {8, 4, 3, 3}, 0.2f);
  ValueId y = b.Op("Conv", {x, w}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  ValueId z = b.Op("BatchNormalization", {y, b.Uniform("g", {8}, 0.5f, 1.5f), b.Weight("be", {8}, 0.3f),
                                          b.Weight("m", {8}, 0.3f), b.Uniform("v", {8}, 0.5f, 2.0f)});
  Graph g = b.Build({b.Op("Relu", {z})});
  Graph h = g;
  RunPasses(PassRegistry::Builtin(), {"lower_batchnorm", "fold_mul_into_conv"}, h);
  EXPECT_EQ(Count(h, "Mul"), 0);
  EXPECT_EQ(Count(h, "Add"), 1);
  EXPECT_TRUE(PassRegistry::Builtin().Make("fold_add_into_conv")->Run(h));
  EXPECT_EQ(Count(h, "Add"), 0);
  EXPECT_EQ(Count(h, "Conv"), 1);
  EXPECT_LT(MaxDiff(g, h), 1e-5);
}

// A model that stores its weights in float16 and casts them to float32
// (mixed-precision exports): folding the casts would double the weights it
// stores and gains nothing where it runs (ONNX Runtime folds them at load),
// so the model's own casts stay nodes; small ones fold, and so does what a
// rewrite computed from weights (the search costed it folded).
TEST(Passes, FoldingKeepsTheModelsOwnWeightsAtTheirSize) {
  // Three [512, 512] float16 weights cast to float32 for MatMuls (512 KiB
  // more each folded: 1.5 MiB together), a small one for a bias, a
  // transposed weight (no growth).
  GraphBuilder b(3);
  ValueId x = b.Input("x", {2, 512});
  std::vector<ValueId> half;
  for (int k = 0; k < 3; ++k) half.push_back(b.Weight("w" + std::to_string(k), {512, 512}, 0.05f));
  const ValueId bias = b.Weight("bias", {512}, 0.1f);
  const ValueId t = b.Weight("t", {512, 512}, 0.05f);
  ValueId h = x;
  for (int k = 0; k < 3; ++k)
    h = b.Op("MatMul", {h, b.Op("Cast", {half[k]}, {{"to", Attribute::Int(static_cast<int64_t>(DType::kFloat32))}})});
  h = b.Op("Add", {h, b.Op("Cast", {bias}, {{"to", Attribute::Int(static_cast<int64_t>(DType::kFloat32))}})});
  h = b.Op("MatMul", {h, b.Op("Transpose", {t}, {{"perm", Attribute::Ints({1, 0})}})});
  Graph g = b.Build({h});
  const auto to_half = [](Graph& graph, const std::vector<ValueId>& weights) {
    for (ValueId v : weights) {
      const TensorData& d = *graph.value(v).initializer;
      graph.MakeConstant(
          v, std::make_shared<const TensorData>(TensorData::FromDouble(d.ToDouble(), d.shape(), DType::kFloat16)));
      graph.mutable_value(v).type.dtype = DType::kFloat16;
    }
  };
  to_half(g, {half[0], half[1], half[2], bias});
  const auto imported = [](Graph graph) {
    for (NodeId id = 0; id < graph.num_nodes(); ++id)
      graph.mutable_node(id).source_proto = std::make_shared<const std::string>(graph.node(id).op);
    return graph;
  };
  const auto stored_bytes = [](const Graph& graph) {
    int64_t bytes = 0;
    for (ValueId v : graph.initializers())
      bytes += graph.value(v).initializer->NumElements() * DTypeSize(graph.value(v).initializer->dtype());
    return bytes;
  };
  const auto fold = [](Graph graph) {
    EXPECT_TRUE(PassRegistry::Builtin().Make("fold_constants")->Run(graph));
    return graph;
  };

  // Imported: the three large casts kept, the bias's cast and the transpose folded.
  const Graph own = imported(g);
  std::vector<char> keep = WeightGrowingNodes(own);
  EXPECT_EQ(std::count(keep.begin(), keep.end(), 1), 3);
  for (NodeId id = 0; id < own.num_nodes(); ++id)
    EXPECT_EQ(keep[id] != 0, own.node(id).op == "Cast" && own.value(own.node(id).inputs[0]).type.shape[0] == 512 &&
                                 own.value(own.node(id).inputs[0]).type.rank() == 2)
        << own.node(id).Describe();
  const Graph folded_own = fold(own);
  EXPECT_EQ(Count(folded_own, "Cast"), 3);
  EXPECT_EQ(Count(folded_own, "Transpose"), 0);
  EXPECT_EQ(stored_bytes(folded_own), stored_bytes(own) + 512 * 2) << "no more weight data but the bias's 1 KiB";
  EXPECT_LT(MaxDiff(own, folded_own), 1e-6);

  // Two of them (1 MiB more together, not over the bound): every cast folds.
  {
    GraphBuilder c(3);
    ValueId y = c.Input("x", {2, 512});
    for (int k = 0; k < 2; ++k)
      y = c.Op("MatMul", {y, c.Op("Cast", {c.Weight("w" + std::to_string(k), {512, 512}, 0.05f)},
                                  {{"to", Attribute::Int(static_cast<int64_t>(DType::kFloat32))}})});
    Graph two = c.Build({y});
    to_half(two, two.initializers());
    EXPECT_EQ(Count(fold(imported(two)), "Cast"), 0);
  }

  // Built by rewrites (no node imported): what they computed folds.
  const Graph folded_rewritten = fold(g);
  EXPECT_EQ(Count(folded_rewritten, "Cast"), 0);
  EXPECT_GT(stored_bytes(folded_rewritten), stored_bytes(g));
  EXPECT_LT(MaxDiff(g, folded_rewritten), 1e-6);
}

// The same in float16 (a model converted to half precision): lowered in
// its type, folded in float32 and rounded once; the direct fold too.
TEST(Passes, HalfPrecisionBatchNormsFoldIntoConvs) {
  GraphBuilder b(2);
  ValueId x = b.Input("x", {1, 4, 6, 6});
  ValueId y = b.Op("Conv", {x, b.Weight("w", {8, 4, 3, 3}, 0.2f)}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  ValueId z = b.Op("BatchNormalization", {y, b.Uniform("g", {8}, 0.5f, 1.5f), b.Weight("be", {8}, 0.3f),
                                          b.Weight("m", {8}, 0.3f), b.Uniform("v", {8}, 0.5f, 2.0f)});
  Graph g = b.Build({b.Op("Relu", {z})});
  for (ValueId v : g.initializers()) {
    const TensorData& t = *g.value(v).initializer;
    g.MakeConstant(
        v, std::make_shared<const TensorData>(TensorData::FromDouble(t.ToDouble(), t.shape(), DType::kFloat16)));
  }
  for (ValueId v = 0; v < g.num_values(); ++v)
    if (g.value(v).type.dtype == DType::kFloat32) g.mutable_value(v).type.dtype = DType::kFloat16;
  for (const std::vector<std::string>& passes : std::vector<std::vector<std::string>>{
           {"lower_batchnorm", "fold_mul_into_conv", "fold_add_into_conv"}, {"fold_batchnorm_into_conv"}}) {
    Graph h = g;
    RunPasses(PassRegistry::Builtin(), passes, h);
    EXPECT_EQ(Count(h, "BatchNormalization") + Count(h, "Mul") + Count(h, "Add"), 0) << passes[0];
    EXPECT_EQ(Count(h, "Conv"), 1);
    for (ValueId v : h.initializers()) EXPECT_EQ(h.value(v).initializer->dtype(), DType::kFloat16);
    EXPECT_EQ(h.value(h.outputs()[0]).type.dtype, DType::kFloat16);
    EXPECT_LT(MaxDiff(g, h), 4.0 / 1024) << passes[0];
  }
}

TEST(Passes, GraphOutputsKeepTheirNames) {
  // Identity between a graph input and a graph output cannot go: the output
  // would lose its name.
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  Graph g = b.Build({b.Op("Identity", {x}, {}, "id")});
  std::string name = g.value(g.outputs()[0]).name;
  EXPECT_FALSE(PassRegistry::Builtin().Make("remove_identity")->Run(g));
  EXPECT_EQ(g.value(g.outputs()[0]).name, name);
  // After a node, the node's output takes the name.
  GraphBuilder b2(1);
  ValueId x2 = b2.Input("x", {2, 3});
  Graph g2 = b2.Build({b2.Op("Identity", {b2.Op("Relu", {x2})}, {}, "id")});
  std::string name2 = g2.value(g2.outputs()[0]).name;
  EXPECT_TRUE(PassRegistry::Builtin().Make("remove_identity")->Run(g2));
  EXPECT_EQ(g2.value(g2.outputs()[0]).name, name2);
  EXPECT_EQ(Count(g2, "Identity"), 0);
}

TEST(Passes, RewritesNeverCrossOpaqueNodes) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  ValueId r = b.Op("Relu", {x});
  Graph g = b.Build({b.Op("Relu", {b.Op("Relu", {r})})});
  // Make the middle Relu opaque: idempotent_unary may not merge through it.
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).inputs[0] == g.node(0).outputs[0])
      g.mutable_node(id).opaque_proto = std::make_shared<const std::string>("x");
  PassRegistry::Builtin().Make("idempotent_unary")->Run(g);
  EXPECT_EQ(Count(g, "Relu"), 3);
}

TEST(Passes, PipelineRunsInOrderAndToAFixedPoint) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3});
  // Identity hides a Neg pair: one round of (neg_neg, remove_identity) is
  // not enough, a second round is.
  ValueId y = b.Op("Neg", {b.Op("Identity", {b.Op("Neg", {b.Op("Relu", {x})})})});
  Graph g = b.Build({b.Op("Sigmoid", {y})});
  Graph once = g;
  PassRunResult r1 = RunPasses(PassRegistry::Builtin(), {"neg_neg", "remove_identity"}, once);
  EXPECT_EQ(r1.rounds, 1);
  EXPECT_EQ(Count(once, "Neg"), 2);
  Graph fixed = g;
  std::vector<std::string> log;
  PassRunOptions o;
  o.fixed_point = true;
  o.after_pass = [&](const std::string& name, bool changed) { log.push_back(name + (changed ? "+" : "-")); };
  PassRunResult r2 = RunPasses(PassRegistry::Builtin(), {"neg_neg", "remove_identity"}, fixed, o);
  EXPECT_EQ(Count(fixed, "Neg"), 0);
  EXPECT_EQ(r2.rounds, 3);  // the third round changes nothing
  EXPECT_EQ(log, (std::vector<std::string>{"neg_neg-", "remove_identity+", "neg_neg+", "remove_identity-", "neg_neg-",
                                           "remove_identity-"}));
  EXPECT_THROW(RunPasses(PassRegistry::Builtin(), {"neg_neg", "no_such_pass"}, fixed), Error);
  EXPECT_EQ(SplitList(" dce, cse,,fold_constants "), (std::vector<std::string>{"dce", "cse", "fold_constants"}));
  for (const std::string& n : DefaultPassOrder()) EXPECT_TRUE(PassRegistry::Builtin().Has(n)) << n;
  for (const std::string& n : CanonicalisePasses()) EXPECT_TRUE(PassRegistry::Builtin().Has(n)) << n;
  for (const std::string& n : FinishPasses()) EXPECT_TRUE(PassRegistry::Builtin().Has(n)) << n;
}

}  // namespace
}  // namespace rlflow
