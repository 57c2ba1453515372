// Loop-invariant products moved out of Scan and Loop bodies
// (core/onnx_hoist.h): what is moved and what is not, the interface the
// loop gets (scan inputs of the same direction, a Gather of row i), and
// that the model computes what it computed, in ONNX Runtime.
#include "core/onnx_hoist.h"

#include <ATen/ops/randn.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <cmath>
#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "core/file_util.h"
#include "core/onnx_proto_testing.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

using testing::AddNodeTo;
using testing::DeclareTensor;
using testing::FloatTensor;
using testing::GraphAttr;
using testing::Int64Tensor;
using testing::IntAttr;
using testing::IntsAttr;

constexpr int32_t kFloat = onnx::TensorProto::FLOAT;
constexpr int32_t kInt64 = onnx::TensorProto::INT64;
constexpr int32_t kBool = onnx::TensorProto::BOOL;

// Deterministic values in [-1, 1).
std::vector<float> Values(size_t n, int seed) {
  std::vector<float> v(n);
  uint32_t s = 2654435761u * static_cast<uint32_t>(seed + 1);
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(s >> 8) / static_cast<float>(1u << 23) - 1.f;
  }
  return v;
}

onnx::ModelProto Main(int opset = 13) {
  onnx::ModelProto m;
  m.set_ir_version(7);
  m.add_opset_import()->set_version(opset);
  m.mutable_graph()->set_name("main");
  return m;
}

const onnx::GraphProto& Body(const onnx::NodeProto& n) {
  for (const auto& a : n.attribute())
    if (a.name() == "body") return a.g();
  static const onnx::GraphProto none;
  return none;
}

onnx::GraphProto* MutableBody(onnx::NodeProto* n) {
  for (auto& a : *n->mutable_attribute())
    if (a.name() == "body") return a.mutable_g();
  return nullptr;
}

const onnx::NodeProto* FindNode(const onnx::GraphProto& g, const std::string& op) {
  for (const auto& n : g.node())
    if (n.op_type() == op) return &n;
  return nullptr;
}

int64_t Attr(const onnx::NodeProto& n, const std::string& name, int64_t otherwise = -100) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return a.i();
  return otherwise;
}

std::vector<int64_t> Ints(const onnx::NodeProto& n, const std::string& name) {
  for (const auto& a : n.attribute())
    if (a.name() == name) return {a.ints().begin(), a.ints().end()};
  return {};
}

// x [5, 2, 3] scanned over axis 0 (`direction`), state h [2, 4]:
// h' = Tanh(x_t @ W + b + h @ U), W a body initializer, b a body Constant
// node, U an outer initializer; outputs the last state and every state.
// With `mixed`, the product is of Concat(x_t, h) (W [7, 4]): a value of
// the state's.
onnx::ModelProto ScanModel(int64_t direction, bool mixed = false) {
  onnx::ModelProto m = Main();
  auto* g = m.mutable_graph();
  DeclareTensor(g->add_input(), "x", kFloat, {5, 2, 3});
  FloatTensor(g->add_initializer(), "h0", {2, 4}, Values(8, 1));
  FloatTensor(g->add_initializer(), "U", {4, 4}, Values(16, 2));
  auto* scan = AddNodeTo(g, "Scan", {"h0", "x"}, {"h_last", "ys"});
  scan->set_name("rnn");
  IntAttr(scan, "num_scan_inputs", 1);
  if (direction != 0) IntsAttr(scan, "scan_input_directions", {direction});
  auto* body = GraphAttr(scan, "body", "step");
  DeclareTensor(body->add_input(), "h", kFloat, {2, 4});
  DeclareTensor(body->add_input(), "x_t", kFloat, {2, 3});
  FloatTensor(body->add_initializer(), "W", {mixed ? 7 : 3, 4}, Values(mixed ? 28 : 12, 3));
  if (mixed) IntAttr(AddNodeTo(body, "Concat", {"x_t", "h"}, {"xh"}), "axis", 1);
  auto* c = AddNodeTo(body, "Constant", {}, {"b"});
  auto* value = c->add_attribute();
  value->set_name("value");
  value->set_type(onnx::AttributeProto::TENSOR);
  FloatTensor(value->mutable_t(), "b", {4}, Values(4, 4));
  AddNodeTo(body, "MatMul", {mixed ? "xh" : "x_t", "W"}, {"xw"});
  AddNodeTo(body, "Add", {"xw", "b"}, {"xb"});
  AddNodeTo(body, "MatMul", {"h", "U"}, {"hu"});
  AddNodeTo(body, "Add", {"xb", "hu"}, {"s"});
  AddNodeTo(body, "Tanh", {"s"}, {"h2"});
  AddNodeTo(body, "Identity", {"h2"}, {"y"});
  for (const char* name : {"xw", "xb", "hu"}) DeclareTensor(body->add_value_info(), name, kFloat, {2, 4});
  DeclareTensor(body->add_output(), "h2", kFloat, {2, 4});
  DeclareTensor(body->add_output(), "y", kFloat, {2, 4});
  DeclareTensor(g->add_output(), "h_last", kFloat, {2, 4});
  DeclareTensor(g->add_output(), "ys", kFloat, {5, 2, 4});
  return m;
}

// ScanModel(0) whose W is no body initializer but what the nodes that
// `nodes` adds (first in the body, before the rest) compute from `name`,
// an outer initializer of `dims`.
onnx::ModelProto ScanModelWithComputedW(
    const std::string& name, const std::vector<int64_t>& dims, int seed,
    const std::function<void(onnx::GraphProto* body, onnx::GraphProto* first)>& nodes) {
  onnx::ModelProto m = ScanModel(0);
  int64_t elements = 1;
  for (int64_t d : dims) elements *= d;
  FloatTensor(m.mutable_graph()->add_initializer(), name, dims, Values(static_cast<size_t>(elements), seed));
  onnx::GraphProto* body = MutableBody(m.mutable_graph()->mutable_node(0));
  body->clear_initializer();  // W
  onnx::GraphProto first;
  nodes(body, &first);
  for (const auto& n : body->node()) *first.add_node() = n;
  body->mutable_node()->Swap(first.mutable_node());
  return m;
}

// The model's outputs in ONNX Runtime on `inputs`.
std::vector<at::Tensor> Run(const onnx::ModelProto& m, const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  const std::string dir = testing::MakeTempDir("hoist_");
  WriteFileAtomically(dir + "/m.onnx", m.SerializeAsString());
  return testing::RunOnnxRuntime(dir + "/m.onnx", inputs);
}

// Both models valid (ONNX's checker) and computing the same in ONNX Runtime.
void ExpectSameOutputs(const onnx::ModelProto& before, const onnx::ModelProto& after,
                       const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  onnx::checker::check_model(after);
  const std::vector<at::Tensor> want = Run(before, inputs), got = Run(after, inputs);
  ASSERT_EQ(want.size(), got.size());
  for (size_t k = 0; k < want.size(); ++k) {
    ASSERT_TRUE(want[k].sizes().equals(got[k].sizes())) << "output " << k;
    EXPECT_TRUE(got[k].allclose(want[k], 1e-5, 1e-6)) << "output " << k;
  }
}

at::Tensor Random(std::vector<int64_t> shape, uint64_t seed) {
  at::Generator gen = at::detail::createCPUGenerator(seed);
  return at::randn(shape, gen);
}

TEST(HoistScan, TheInputProductIsComputedOnceOverTheSequenceBeforeTheScan) {
  const onnx::ModelProto before = ScanModel(0);
  onnx::ModelProto after = before;
  const std::vector<HoistedLoop> h = HoistLoopInvariantProducts(&after);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].op, "Scan");
  EXPECT_EQ(h[0].node_name, "rnn");
  EXPECT_EQ(h[0].nodes, 2);  // x_t @ W and + b; the state's product stays
  EXPECT_EQ(h[0].matmuls, 1);
  EXPECT_EQ(h[0].new_inputs, 1);
  EXPECT_EQ(h[0].ops, (std::vector<std::string>{"MatMul", "Add"}));
  const auto& g = after.graph();
  // Outside: MatMul(x, W') and Add(., b'), W' an outer initializer and b'
  // an outer Constant, before the Scan; the Scan reads their result as a
  // second scan input.
  ASSERT_EQ(g.node_size(), 4);
  EXPECT_EQ(g.node(0).op_type(), "MatMul");
  EXPECT_EQ(g.node(0).input(0), "x");
  EXPECT_EQ(g.node(1).op_type(), "Constant");
  EXPECT_EQ(g.node(2).op_type(), "Add");
  const onnx::NodeProto& scan = g.node(3);
  ASSERT_EQ(scan.op_type(), "Scan");
  EXPECT_EQ(Attr(scan, "num_scan_inputs"), 2);
  ASSERT_EQ(scan.input_size(), 3);
  EXPECT_EQ(scan.input(2), g.node(2).output(0));
  const onnx::GraphProto& body = Body(scan);
  ASSERT_EQ(body.input_size(), 3);
  EXPECT_EQ(body.input(2).name(), "xb");
  EXPECT_EQ(body.input(2).type().tensor_type().shape().dim_size(), 2);
  // Its stated type came with it; the types of what the body no longer
  // computes went (xw moved out, xb now an input).
  EXPECT_EQ(body.input(2).type().tensor_type().shape().dim(1).dim_value(), 4);
  ASSERT_EQ(body.value_info_size(), 1);
  EXPECT_EQ(body.value_info(0).name(), "hu");
  // The body: the state's product, the sum, Tanh, Identity; its weight W
  // and the Constant b gone (nothing reads them there any more).
  EXPECT_EQ(body.node_size(), 4);
  EXPECT_EQ(body.initializer_size(), 0);
  for (const auto& n : body.node())
    for (const auto& in : n.input()) EXPECT_NE(in, "x_t");
  ExpectSameOutputs(before, after, {{"x", Random({5, 2, 3}, 7)}});
}

TEST(HoistScan, AReversedScanInputGivesAReversedOne) {
  const onnx::ModelProto before = ScanModel(1);
  onnx::ModelProto after = before;
  ASSERT_EQ(HoistLoopInvariantProducts(&after).size(), 1u);
  const onnx::NodeProto* scan = FindNode(after.graph(), "Scan");
  ASSERT_NE(scan, nullptr);
  EXPECT_EQ(Ints(*scan, "scan_input_directions"), (std::vector<int64_t>{1, 1}));
  ExpectSameOutputs(before, after, {{"x", Random({5, 2, 3}, 8)}});
}

TEST(HoistScan, ValuesThatDependOnTheStateOrOnRowsAlongAnotherAxisStay) {
  // Concat(x_t, h) is not a row of anything outside; the product of the
  // state alone is not either.
  const onnx::ModelProto m = ScanModel(0, /*mixed=*/true);
  onnx::ModelProto after = m;
  EXPECT_TRUE(HoistLoopInvariantProducts(&after).empty());
  EXPECT_EQ(after.SerializeAsString(), m.SerializeAsString());
}

TEST(HoistScan, RowsAlongAnotherAxisAreReadFromTheInputTransposedOutside) {
  // The same model scanned over x's axis 1 ([2, 5, 3], batch first).
  onnx::ModelProto m = ScanModel(0);
  IntsAttr(m.mutable_graph()->mutable_node(0), "scan_input_axes", {1});
  DeclareTensor(m.mutable_graph()->mutable_input(0), "x", kFloat, {2, 5, 3});
  onnx::ModelProto after = m;
  ASSERT_EQ(HoistLoopInvariantProducts(&after).size(), 1u);
  const onnx::NodeProto& first = after.graph().node(0);
  ASSERT_EQ(first.op_type(), "Transpose");
  EXPECT_EQ(first.input(0), "x");
  EXPECT_EQ(Ints(first, "perm"), (std::vector<int64_t>{1, 0, 2}));
  const onnx::NodeProto* scan = FindNode(after.graph(), "Scan");
  ASSERT_NE(scan, nullptr);
  EXPECT_EQ(Ints(*scan, "scan_input_axes"), (std::vector<int64_t>{1, 0}));  // the rows computed outside: axis 0
  ExpectSameOutputs(m, after, {{"x", Random({2, 5, 3}, 12)}});
}

// `m`'s input product and bias moved out of its Scan, the nodes of `ops`
// that computed its weight in the body copied out with them and gone from
// the body with the constants they read, the outputs the same.
void ExpectWeightNodesMovedOut(const onnx::ModelProto& m, const std::vector<std::string>& ops, uint64_t seed) {
  onnx::ModelProto after = m;
  const std::vector<HoistedLoop> h = HoistLoopInvariantProducts(&after);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].ops, (std::vector<std::string>{"MatMul", "Add"}));
  const onnx::NodeProto* scan = FindNode(after.graph(), "Scan");
  ASSERT_NE(scan, nullptr);
  for (const std::string& op : ops) {
    EXPECT_EQ(FindNode(Body(*scan), op), nullptr) << op;  // nothing reads it there any more
    EXPECT_NE(FindNode(after.graph(), op), nullptr) << op;
  }
  EXPECT_EQ(Body(*scan).initializer_size(), 0);
  ExpectSameOutputs(m, after, {{"x", Random({5, 2, 3}, seed)}});
}

TEST(HoistScan, AWeightReadThroughNodesOfTheBodyIsCopiedOutWithThem) {
  // x_t @ Transpose(Identity(Wt)), Wt [4, 3] outside: the Identity and the
  // Transpose (invariants computed in the body) go out with the product.
  const onnx::ModelProto m = ScanModelWithComputedW("Wt", {4, 3}, 5, [](onnx::GraphProto*, onnx::GraphProto* first) {
    AddNodeTo(first, "Identity", {"Wt"}, {"Wi"});
    IntsAttr(AddNodeTo(first, "Transpose", {"Wi"}, {"W"}), "perm", {1, 0});
  });
  ExpectWeightNodesMovedOut(m, {"Transpose"}, 15);
}

TEST(HoistScan, AWeightReshapedInTheBodyIsCopiedOutWithItsShapes) {
  // x_t @ Squeeze(Reshape(Unsqueeze(Wf, [0]), [3, 1, 4]), [1]), Wf [12]
  // outside, the shape and axes the body's own constants: each node's
  // rank follows from them, and the three go out with the product.
  const onnx::ModelProto m = ScanModelWithComputedW("Wf", {12}, 6, [](onnx::GraphProto* body, onnx::GraphProto* first) {
    Int64Tensor(body->add_initializer(), "axes0", {0});
    Int64Tensor(body->add_initializer(), "shape", {3, 1, 4});
    Int64Tensor(body->add_initializer(), "axes1", {1});
    AddNodeTo(first, "Unsqueeze", {"Wf", "axes0"}, {"Wu"});
    AddNodeTo(first, "Reshape", {"Wu", "shape"}, {"Wr"});
    AddNodeTo(first, "Squeeze", {"Wr", "axes1"}, {"W"});
  });
  ExpectWeightNodesMovedOut(m, {"Unsqueeze", "Reshape", "Squeeze"}, 16);
}

TEST(HoistScan, AReshapeToAShapeTheBodyComputesStays) {
  // The same weight reshaped to Shape(Wc), a shape no constant states:
  // its rank is unknown, so the product of it stays (and all else).
  const onnx::ModelProto m = ScanModelWithComputedW("Wf", {12}, 6, [](onnx::GraphProto* body, onnx::GraphProto* first) {
    FloatTensor(body->add_initializer(), "Wc", {3, 4}, Values(12, 7));
    AddNodeTo(first, "Shape", {"Wc"}, {"w_shape"});
    AddNodeTo(first, "Reshape", {"Wf", "w_shape"}, {"W"});
  });
  onnx::ModelProto after = m;
  EXPECT_TRUE(HoistLoopInvariantProducts(&after).empty());
  EXPECT_EQ(after.SerializeAsString(), m.SerializeAsString());
}

TEST(HoistScan, AProductWithBatchAxesBeyondTheRowsStays) {
  // x_t [2, 3] @ V [2, 3, 4] broadcasts V's batch axis against the row's
  // rows; over the stacked rows [5, 2, 3] it would not.
  onnx::ModelProto m = Main();
  auto* g = m.mutable_graph();
  DeclareTensor(g->add_input(), "x", kFloat, {5, 2, 3});
  FloatTensor(g->add_initializer(), "s0", {2, 2, 4}, Values(16, 1));
  FloatTensor(g->add_initializer(), "V", {2, 3, 4}, Values(24, 2));
  auto* scan = AddNodeTo(g, "Scan", {"s0", "x"}, {"s_last"});
  IntAttr(scan, "num_scan_inputs", 1);
  auto* body = GraphAttr(scan, "body", "step");
  DeclareTensor(body->add_input(), "s", kFloat, {2, 2, 4});
  DeclareTensor(body->add_input(), "x_t", kFloat, {2, 3});
  AddNodeTo(body, "MatMul", {"x_t", "V"}, {"p"});
  AddNodeTo(body, "Add", {"p", "s"}, {"s2"});
  DeclareTensor(body->add_output(), "s2", kFloat, {2, 2, 4});
  DeclareTensor(g->add_output(), "s_last", kFloat, {2, 2, 4});
  onnx::ModelProto after = m;
  EXPECT_TRUE(HoistLoopInvariantProducts(&after).empty());
  // With V [3, 4] it moves.
  FloatTensor(g->mutable_initializer(1), "V", {3, 4}, Values(12, 2));
  after = m;
  ASSERT_EQ(HoistLoopInvariantProducts(&after).size(), 1u);
  ExpectSameOutputs(m, after, {{"x", Random({5, 2, 3}, 9)}});
}

TEST(HoistScan, AxesOfSplitSoftmaxAndTransposeAreMovedPastTheRowsAxis) {
  // x_t [2, 6] @ W [6, 6], split in two [2, 3] along axis 1: Softmax (axis
  // 1) of one is a scan output, the other transposed [3, 2] is added to
  // the state.
  onnx::ModelProto m = Main();
  auto* g = m.mutable_graph();
  DeclareTensor(g->add_input(), "x", kFloat, {4, 2, 6});
  FloatTensor(g->add_initializer(), "h0", {3, 2}, Values(6, 1));
  FloatTensor(g->add_initializer(), "W", {6, 6}, Values(36, 2));
  FloatTensor(g->add_initializer(), "U", {2, 2}, Values(4, 3));
  auto* scan = AddNodeTo(g, "Scan", {"h0", "x"}, {"h_last", "ys"});
  IntAttr(scan, "num_scan_inputs", 1);
  auto* body = GraphAttr(scan, "body", "step");
  DeclareTensor(body->add_input(), "h", kFloat, {3, 2});
  DeclareTensor(body->add_input(), "x_t", kFloat, {2, 6});
  AddNodeTo(body, "MatMul", {"x_t", "W"}, {"p"});
  IntAttr(AddNodeTo(body, "Split", {"p"}, {"p1", "p2"}), "axis", 1);
  IntAttr(AddNodeTo(body, "Softmax", {"p1"}, {"y"}), "axis", 1);
  IntsAttr(AddNodeTo(body, "Transpose", {"p2"}, {"p2t"}), "perm", {1, 0});
  AddNodeTo(body, "MatMul", {"h", "U"}, {"hu"});
  AddNodeTo(body, "Add", {"p2t", "hu"}, {"h2"});
  DeclareTensor(body->add_output(), "h2", kFloat, {3, 2});
  DeclareTensor(body->add_output(), "y", kFloat, {2, 3});
  DeclareTensor(g->add_output(), "h_last", kFloat, {3, 2});
  DeclareTensor(g->add_output(), "ys", kFloat, {4, 2, 3});
  onnx::ModelProto after = m;
  const std::vector<HoistedLoop> h = HoistLoopInvariantProducts(&after);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].ops, (std::vector<std::string>{"MatMul", "Split", "Softmax", "Transpose"}));
  EXPECT_EQ(h[0].new_inputs, 2);  // y and p2t
  const onnx::NodeProto* split = FindNode(after.graph(), "Split");
  ASSERT_NE(split, nullptr);
  EXPECT_EQ(Attr(*split, "axis"), 2);
  EXPECT_EQ(Ints(*FindNode(after.graph(), "Transpose"), "perm"), (std::vector<int64_t>{0, 2, 1}));
  ExpectSameOutputs(m, after, {{"x", Random({4, 2, 6}, 10)}});
}

// torch.onnx's form of a scripted loop over time: Loop(T, true, h0) whose
// body gathers row i of X [4, 2, 3] and applies a Linear to it (Gemm,
// transB) and another to the state.
onnx::ModelProto LoopModel() {
  onnx::ModelProto m = Main();
  auto* g = m.mutable_graph();
  DeclareTensor(g->add_input(), "X", kFloat, {4, 2, 3});
  onnx::TensorProto* trip = g->add_initializer();
  trip->set_name("T");
  trip->set_data_type(kInt64);
  trip->add_int64_data(4);
  onnx::TensorProto* cond = g->add_initializer();
  cond->set_name("go");
  cond->set_data_type(kBool);
  cond->add_int32_data(1);
  FloatTensor(g->add_initializer(), "h0", {2, 5}, Values(10, 1));
  FloatTensor(g->add_initializer(), "Wx", {5, 3}, Values(15, 2));
  FloatTensor(g->add_initializer(), "bx", {5}, Values(5, 3));
  FloatTensor(g->add_initializer(), "Uh", {5, 5}, Values(25, 4));
  auto* loop = AddNodeTo(g, "Loop", {"T", "go", "h0"}, {"h_last"});
  loop->set_name("time_loop");
  auto* body = GraphAttr(loop, "body", "step");
  DeclareTensor(body->add_input(), "i", kInt64, {});
  DeclareTensor(body->add_input(), "c", kBool, {});
  DeclareTensor(body->add_input(), "h", kFloat, {2, 5});
  IntAttr(AddNodeTo(body, "Gather", {"X", "i"}, {"x_i"}), "axis", 0);
  IntAttr(AddNodeTo(body, "Gemm", {"x_i", "Wx", "bx"}, {"p"}), "transB", 1);
  AddNodeTo(body, "MatMul", {"h", "Uh"}, {"q"});
  AddNodeTo(body, "Add", {"p", "q"}, {"s"});
  AddNodeTo(body, "Tanh", {"s"}, {"h2"});
  AddNodeTo(body, "Identity", {"c"}, {"c2"});
  DeclareTensor(body->add_output(), "c2", kBool, {});
  DeclareTensor(body->add_output(), "h2", kFloat, {2, 5});
  DeclareTensor(g->add_output(), "h_last", kFloat, {2, 5});
  return m;
}

TEST(HoistLoop, ALinearOfRowIIsComputedOnceAndGatheredByRow) {
  const onnx::ModelProto before = LoopModel();
  onnx::ModelProto after = before;
  const std::vector<HoistedLoop> h = HoistLoopInvariantProducts(&after);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].op, "Loop");
  EXPECT_EQ(h[0].node_name, "time_loop");
  EXPECT_EQ(h[0].ops, (std::vector<std::string>{"Gemm"}));
  // Outside: Transpose(Wx), MatMul(X, Wx^T), Add(., bx), then the Loop.
  const auto& g = after.graph();
  ASSERT_EQ(g.node_size(), 4);
  EXPECT_EQ(g.node(0).op_type(), "Transpose");
  EXPECT_EQ(g.node(1).op_type(), "MatMul");
  EXPECT_EQ(g.node(1).input(0), "X");
  EXPECT_EQ(g.node(2).op_type(), "Add");
  const onnx::GraphProto& body = Body(g.node(3));
  // The body gathers row i of the product (its own Gather of X is gone).
  const onnx::NodeProto* gather = FindNode(body, "Gather");
  ASSERT_NE(gather, nullptr);
  EXPECT_EQ(gather->input(0), g.node(2).output(0));
  EXPECT_EQ(gather->input(1), "i");
  EXPECT_EQ(gather->output(0), "p");
  EXPECT_EQ(FindNode(body, "Gemm"), nullptr);
  EXPECT_EQ(body.node_size(), 5);  // Gather, MatMul, Add, Tanh, Identity
  ExpectSameOutputs(before, after, {{"X", Random({4, 2, 3}, 11)}});
}

TEST(HoistLoop, RowsAlongAxis1AreReadFromTheTensorTransposedOutside) {
  // torch.onnx's x[:, t] of a batch-first X [2, 4, 3]: Gather(X, i, axis 1).
  onnx::ModelProto m = LoopModel();
  DeclareTensor(m.mutable_graph()->mutable_input(0), "X", kFloat, {2, 4, 3});
  onnx::GraphProto* body = MutableBody(m.mutable_graph()->mutable_node(0));
  ASSERT_EQ(body->node(0).op_type(), "Gather");
  body->mutable_node(0)->mutable_attribute(0)->set_i(1);
  onnx::ModelProto after = m;
  ASSERT_EQ(HoistLoopInvariantProducts(&after).size(), 1u);
  const onnx::NodeProto* t = FindNode(after.graph(), "Transpose");
  ASSERT_NE(t, nullptr);
  // The Transposes outside: X's rows first, then the Gemm's weight.
  EXPECT_EQ(after.graph().node(0).input(0), "X");
  EXPECT_EQ(Ints(after.graph().node(0), "perm"), (std::vector<int64_t>{1, 0, 2}));
  ExpectSameOutputs(m, after, {{"X", Random({2, 4, 3}, 13)}});
}

// LoopModel with the row read by a carried int32 counter (TensorFlow's loop
// counter as tf2onnx writes a while loop) that starts at `start` and grows
// by 1 a step, not by the iteration number.
onnx::ModelProto CounterLoopModel(int32_t start) {
  onnx::ModelProto m = LoopModel();
  auto* g = m.mutable_graph();
  onnx::TensorProto* t0 = g->add_initializer();
  t0->set_name("t0");
  t0->set_data_type(onnx::TensorProto::INT32);
  t0->add_int32_data(start);
  onnx::NodeProto* loop = g->mutable_node(0);
  loop->add_input("t0");
  loop->add_output("t_last");
  onnx::GraphProto* body = MutableBody(loop);
  DeclareTensor(body->add_input(), "t", onnx::TensorProto::INT32, {});
  onnx::TensorProto* one = body->add_initializer();
  one->set_name("one");
  one->set_data_type(onnx::TensorProto::INT32);
  one->add_int32_data(1);
  AddNodeTo(body, "Add", {"one", "t"}, {"t_next"});
  DeclareTensor(body->add_output(), "t_next", onnx::TensorProto::INT32, {});
  *body->mutable_node(0)->mutable_input(1) = "t";
  DeclareTensor(g->add_output(), "t_last", onnx::TensorProto::INT32, {});
  return m;
}

TEST(HoistLoop, ACarriedCounterFromZeroByOneIsTheStepsIndex) {
  const onnx::ModelProto before = CounterLoopModel(0);
  onnx::ModelProto after = before;
  const std::vector<HoistedLoop> h = HoistLoopInvariantProducts(&after);
  ASSERT_EQ(h.size(), 1u);
  EXPECT_EQ(h[0].ops, (std::vector<std::string>{"Gemm"}));
  ExpectSameOutputs(before, after, {{"X", Random({4, 2, 3}, 14)}});
  // From 1 it is not (it reads row i + 1).
  after = CounterLoopModel(1);
  EXPECT_TRUE(HoistLoopInvariantProducts(&after).empty());
}

TEST(HoistLoop, AGatherOfAnotherIndexOrOfACarriedValueStays) {
  // Row 0 every step, not row i.
  onnx::ModelProto m = LoopModel();
  auto* body = MutableBody(m.mutable_graph()->mutable_node(0));
  onnx::TensorProto* zero = body->add_initializer();
  zero->set_name("zero");
  zero->set_data_type(kInt64);
  zero->add_int64_data(0);
  *body->mutable_node(0)->mutable_input(1) = "zero";
  onnx::ModelProto after = m;
  EXPECT_TRUE(HoistLoopInvariantProducts(&after).empty());
  // A Gemm with alpha != 1 is not moved (only plain products are).
  m = LoopModel();
  body = MutableBody(m.mutable_graph()->mutable_node(0));
  testing::FloatAttr(body->mutable_node(1), "alpha", 0.5f);
  after = m;
  EXPECT_TRUE(HoistLoopInvariantProducts(&after).empty());
}

}  // namespace
}  // namespace rlflow
