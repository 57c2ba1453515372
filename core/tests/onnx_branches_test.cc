// If branches and Loop bodies as models of their own and back
// (core/onnx_branches.h): what a branch model holds, that it computes what the branch computes (in ONNX
// Runtime, against the whole model), and that a branch put back reads the
// outer weights, never redefines an outer name, and keeps the model valid
// and computing the same.
#include "core/onnx_branches.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <algorithm>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_proto_testing.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

void Info(onnx::ValueInfoProto* vi, const std::string& name, int32_t type, std::vector<int64_t> dims) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  t->mutable_shape();
  for (int64_t d : dims) t->mutable_shape()->add_dim()->set_dim_value(d);
}

void Floats(onnx::TensorProto* t, const std::string& name, std::vector<float> v) {
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::FLOAT);
  t->add_dims(static_cast<int64_t>(v.size()));
  t->set_raw_data(std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float)));
}

onnx::NodeProto* AddNode(onnx::GraphProto* g, const std::string& op, std::vector<std::string> in,
                         std::vector<std::string> out) {
  auto* n = g->add_node();
  n->set_op_type(op);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

// A model at opset 14 (IR 8) whose graph "main" has the input x [2,3].
onnx::ModelProto MainWithX() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  m.mutable_graph()->set_name("main");
  Info(m.mutable_graph()->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  return m;
}

// A Constant node of `g` whose output `name` holds `values`.
void AddConstant(onnx::GraphProto* g, const std::string& name, std::vector<float> values) {
  auto* a = AddNode(g, "Constant", {}, {name})->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  Floats(a->mutable_t(), name, std::move(values));
}

// x [2,3], c (bool) -> h = Relu(x) (typed by value_info when `typed`, else
// a custom operator that nothing can type);
// If(c): then (x + w) * k, else h - w; w an initializer, k a Constant node,
// u an initializer nothing reads.
onnx::ModelProto Model(bool typed = true) {
  onnx::ModelProto m = MainWithX();
  auto* g = m.mutable_graph();
  Info(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  Floats(g->add_initializer(), "w", {1, 2, 3});
  Floats(g->add_initializer(), "u", {7});
  AddConstant(g, "k", {2, 2, 2});
  // h = Relu(x); untyped, an operator ONNX does not know (no inference).
  if (typed) {
    AddNode(g, "Relu", {"x"}, {"h"});
    Info(g->add_value_info(), "h", onnx::TensorProto::FLOAT, {2, 3});
  } else {
    AddNode(g, "Custom", {"x"}, {"h"})->set_domain("com.example");
    auto* custom = m.add_opset_import();
    custom->set_domain("com.example");
    custom->set_version(1);
  }
  auto* node = AddNode(g, "If", {"c"}, {"y"});
  node->set_name("switch");
  auto* tg = testing::GraphAttr(node, "then_branch", "then");
  AddNode(tg, "Add", {"x", "w"}, {"t1"});
  AddNode(tg, "Mul", {"t1", "k"}, {"then_out"});
  Info(tg->add_output(), "then_out", onnx::TensorProto::FLOAT, {2, 3});
  auto* eg = testing::GraphAttr(node, "else_branch", "else");
  AddNode(eg, "Sub", {"h", "w"}, {"else_out"});
  Info(eg->add_output(), "else_out", onnx::TensorProto::FLOAT, {2, 3});
  Info(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  return m;
}

std::string Save(const onnx::ModelProto& m, const std::string& name) {
  static const std::string dir = testing::MakeTempDir("onnx_branches_");
  const std::string path = dir + "/" + name;
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

const at::Tensor kX = at::tensor({-1.f, 2.f, -3.f, 4.f, -5.f, 6.f}).reshape({2, 3});

// The whole model in ONNX Runtime with c = `which`.
at::Tensor RunModel(const onnx::ModelProto& m, bool which, const std::string& name) {
  return testing::RunOnnxRuntime(Save(m, name),
                                 {{"x", kX}, {"c", which ? at::ones({}, at::kBool) : at::zeros({}, at::kBool)}})[0];
}

onnx::ModelProto Parse(const std::string& bytes) {
  onnx::ModelProto m;
  EXPECT_TRUE(m.ParseFromString(bytes));
  return m;
}

TEST(IfBranches, EachBranchIsAModelOfTheOuterValuesItReads) {
  const onnx::ModelProto m = Model();
  const std::vector<Subgraph> branches = ExtractSubgraphs(m);
  ASSERT_EQ(branches.size(), 2u);
  const Subgraph& then_b = branches[0];
  const Subgraph& else_b = branches[1];
  EXPECT_EQ(then_b.node, 2);
  EXPECT_EQ(then_b.node_name, "switch");
  EXPECT_EQ(then_b.attribute, "then_branch");
  EXPECT_EQ(else_b.attribute, "else_branch");
  EXPECT_EQ(then_b.nodes, 2);
  ASSERT_EQ(then_b.why_not, "");
  ASSERT_EQ(else_b.why_not, "");
  // then reads the input x, the weight w and the constant k; else the
  // computed h (its declared type) and w.
  EXPECT_EQ(then_b.inputs, std::vector<std::string>({"x"}));
  EXPECT_EQ(else_b.inputs, std::vector<std::string>({"h"}));
  const onnx::ModelProto tm = Parse(then_b.model), em = Parse(else_b.model);
  ASSERT_EQ(tm.graph().initializer_size(), 1);
  EXPECT_EQ(tm.graph().initializer(0).name(), "w");
  ASSERT_EQ(tm.graph().node_size(), 3);
  EXPECT_EQ(tm.graph().node(0).op_type(), "Constant");
  EXPECT_EQ(tm.graph().output(0).name(), "then_out");
  EXPECT_EQ(em.graph().input(0).type().SerializeAsString(), m.graph().value_info(0).type().SerializeAsString());
  onnx::checker::check_model(tm);
  onnx::checker::check_model(em);
  // Each computes what the model computes through it.
  const at::Tensor t = testing::RunOnnxRuntime(Save(tm, "then.onnx"), {{"x", kX}})[0];
  EXPECT_TRUE(t.equal(RunModel(m, true, "model.onnx")));
  EXPECT_TRUE(t.equal((kX + at::tensor({1.f, 2.f, 3.f})) * 2));
  const at::Tensor e = testing::RunOnnxRuntime(Save(em, "else.onnx"), {{"h", kX.relu()}})[0];
  EXPECT_TRUE(e.equal(RunModel(m, false, "model.onnx")));
}

TEST(IfBranches, AnOuterValueIsTypedByShapeInferenceOrTheBranchIsNoModel) {
  // h = Relu(x) with no value_info: ONNX's shape inference types it.
  onnx::ModelProto m = Model();
  m.mutable_graph()->clear_value_info();
  std::vector<Subgraph> branches = ExtractSubgraphs(m);
  ASSERT_EQ(branches.size(), 2u);
  ASSERT_EQ(branches[1].why_not, "");
  EXPECT_EQ(Parse(branches[1].model).graph().input(0).type().SerializeAsString(),
            Model().graph().value_info(0).type().SerializeAsString());
  EXPECT_EQ(m.graph().value_info_size(), 0);  // the model itself is left as it was
  // h from an operator nothing knows: the else branch is no model.
  branches = ExtractSubgraphs(Model(/*typed=*/false));
  ASSERT_EQ(branches.size(), 2u);
  EXPECT_EQ(branches[0].why_not, "");
  EXPECT_EQ(branches[1].model, "");
  EXPECT_NE(branches[1].why_not.find("'h'"), std::string::npos) << branches[1].why_not;
}

// The then branch as an optimiser might write it: k folded into an
// initializer named "h" (a name the outer graph defines), w written back
// unchanged, the product by 2 as x*2 + w*2.
onnx::ModelProto OptimisedThen(const Subgraph& b) {
  onnx::ModelProto o = Parse(b.model);
  auto* g = o.mutable_graph();
  g->clear_node();
  g->clear_initializer();
  Floats(g->add_initializer(), "w", {1, 2, 3});
  Floats(g->add_initializer(), "h", {2, 2, 2});
  AddNode(g, "Add", {"x", "w"}, {"t1"});
  AddNode(g, "Mul", {"t1", "h"}, {"then_out"});
  return o;
}

TEST(IfBranches, ABranchPutBackReadsOuterWeightsAndRenamesWhatClashes) {
  onnx::ModelProto m = Model();
  // The outer w in float_data, the optimised branch's in raw data: alike.
  onnx::TensorProto* w = m.mutable_graph()->mutable_initializer(0);
  ASSERT_EQ(w->name(), "w");
  w->clear_raw_data();
  for (float v : {1.f, 2.f, 3.f}) w->add_float_data(v);
  const std::vector<Subgraph> branches = ExtractSubgraphs(m);
  ReplaceSubgraph(&m, branches[0], OptimisedThen(branches[0]));
  onnx::checker::check_model(m);
  const onnx::GraphProto& tg = m.graph().node(2).attribute(0).g();
  EXPECT_EQ(tg.name(), "then");
  EXPECT_EQ(tg.input_size(), 0);
  // w is the outer one; the folded constant is renamed, consistently.
  ASSERT_EQ(tg.initializer_size(), 1);
  const std::string folded = tg.initializer(0).name();
  EXPECT_NE(folded, "h");
  EXPECT_NE(folded, "w");
  EXPECT_EQ(tg.node(1).input(1), folded);
  EXPECT_EQ(tg.node(0).input(1), "w");
  EXPECT_TRUE(RunModel(m, true, "replaced.onnx").equal((kX + at::tensor({1.f, 2.f, 3.f})) * 2));
  EXPECT_TRUE(RunModel(m, false, "replaced.onnx").equal(kX.relu() - at::tensor({1.f, 2.f, 3.f})));
}

// `t`'s raw data moved to bytes [offset, offset + size) of `file` (in the
// directory of the models Save writes), as ONNX's external data.
void ToDataFile(onnx::TensorProto* t, const std::string& file, int64_t offset) {
  const std::string path = DirName(Save(onnx::ModelProto(), "probe.onnx")) + "/" + file;
  std::string bytes = FileExists(path) ? ReadFile(path) : "";
  bytes.resize(static_cast<size_t>(offset), '\0');
  bytes += t->raw_data();
  WriteFileAtomically(path, bytes);
  const std::string length = std::to_string(t->raw_data().size());
  t->clear_raw_data();
  t->set_data_location(onnx::TensorProto::EXTERNAL);
  for (const auto& [k, v] : std::vector<std::pair<std::string, std::string>>{
           {"location", file}, {"offset", std::to_string(offset)}, {"length", length}}) {
    auto* e = t->add_external_data();
    e->set_key(k);
    e->set_value(v);
  }
}

TEST(IfBranches, WeightsInExternalDataFilesAreComparedByTheirBytes) {
  // The outer w in the model's data file; the optimised branch's w (the
  // same values) and its folded h in the file its run wrote.
  onnx::ModelProto m = Model();
  ToDataFile(m.mutable_graph()->mutable_initializer(0), "model.weights", 0);
  const std::vector<Subgraph> branches = ExtractSubgraphs(m);
  onnx::ModelProto o = OptimisedThen(branches[0]);
  ToDataFile(o.mutable_graph()->mutable_initializer(0), "then.data", 4096);
  ToDataFile(o.mutable_graph()->mutable_initializer(1), "then.data", 8192);
  // Without the directory they are not known to be alike: the branch keeps
  // its w.
  onnx::ModelProto blind = m;
  ReplaceSubgraph(&blind, branches[0], o);
  EXPECT_EQ(blind.graph().node(2).attribute(0).g().initializer_size(), 2);
  const std::string dir = DirName(Save(onnx::ModelProto(), "probe.onnx"));
  ReplaceSubgraph(&m, branches[0], o, &dir);
  const onnx::GraphProto& tg = m.graph().node(2).attribute(0).g();
  ASSERT_EQ(tg.initializer_size(), 1);
  EXPECT_EQ(tg.node(0).input(1), "w");
  EXPECT_EQ(tg.node(1).input(1), tg.initializer(0).name());
  // ONNX Runtime reads the branch's weight from the data file (a subgraph
  // initializer stored externally).
  EXPECT_TRUE(RunModel(m, true, "external.onnx").equal((kX + at::tensor({1.f, 2.f, 3.f})) * 2));
  EXPECT_TRUE(RunModel(m, false, "external.onnx").equal(kX.relu() - at::tensor({1.f, 2.f, 3.f})));
}

TEST(IfBranches, ABranchWithAnotherInterfaceOrOpsetIsNotPutBack) {
  onnx::ModelProto m = Model();
  const std::vector<Subgraph> branches = ExtractSubgraphs(m);
  onnx::ModelProto extra = OptimisedThen(branches[0]);
  Info(extra.mutable_graph()->add_input(), "z", onnx::TensorProto::FLOAT, {1});
  EXPECT_THROW(ReplaceSubgraph(&m, branches[0], extra), Error);
  onnx::ModelProto renamed = OptimisedThen(branches[0]);
  renamed.mutable_graph()->mutable_output(0)->set_name("t1");
  EXPECT_THROW(ReplaceSubgraph(&m, branches[0], renamed), Error);
  onnx::ModelProto newer = OptimisedThen(branches[0]);
  newer.mutable_opset_import(0)->set_version(17);
  try {
    ReplaceSubgraph(&m, branches[0], newer);
    ADD_FAILURE() << "an optimised branch at opset 17 was put into an opset 14 model";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("opset 17"), std::string::npos) << e.what();
  }
  // Nothing was changed by the refused ones.
  EXPECT_EQ(m.SerializeAsString(), Model().SerializeAsString());
}

TEST(IfBranches, WeightsNoNodeReadsAreDropped) {
  onnx::ModelProto m = Model();
  // u is read by no node; w by both branches; k is a Constant node.
  EXPECT_EQ(DropUnreadInitializers(&m), 1);
  std::set<std::string> outer;
  for (const auto& t : m.graph().initializer()) outer.insert(t.name());
  EXPECT_EQ(outer, std::set<std::string>({"w"}));
  onnx::checker::check_model(m);
  EXPECT_TRUE(RunModel(m, false, "dropped.onnx").equal(kX.relu() - at::tensor({1.f, 2.f, 3.f})));
  // Once the else branch no longer reads w (put back without it), w goes
  // too only when the then branch does not read it either.
  const std::vector<Subgraph> branches = ExtractSubgraphs(m);
  onnx::ModelProto e = Parse(branches[1].model);
  e.mutable_graph()->clear_initializer();
  e.mutable_graph()->clear_node();
  AddNode(e.mutable_graph(), "Neg", {"h"}, {"else_out"});
  ReplaceSubgraph(&m, branches[1], e);
  EXPECT_EQ(DropUnreadInitializers(&m), 0);
  EXPECT_TRUE(RunModel(m, false, "dropped2.onnx").equal(-kX.relu()));
}

// x [2,3]; Loop "steps" (3 times, cond true) carrying s from x: a = s + w,
// s' = a * k (k a Constant of the outer graph), and each step's -a as its
// scan output; w an outer initializer. When `sequence`, the body carries a
// list too (untyped, as torch.onnx writes a list appended to in a loop) to
// which it appends a, stacked after the loop as the output "stack".
onnx::ModelProto LoopModel(bool sequence = false) {
  onnx::ModelProto m = MainWithX();
  auto* g = m.mutable_graph();
  Floats(g->add_initializer(), "w", {1, 2, 3});
  auto* n = g->add_initializer();
  n->set_name("n");
  n->set_data_type(onnx::TensorProto::INT64);
  n->add_int64_data(3);
  auto* go = g->add_initializer();
  go->set_name("go");
  go->set_data_type(onnx::TensorProto::BOOL);
  go->add_int32_data(1);
  AddConstant(g, "k", {0.5f, 0.5f, 0.5f});
  std::vector<std::string> in = {"n", "go", "x"}, out = {"y", "ys"};
  if (sequence) {
    AddNode(g, "SequenceEmpty", {}, {"empty"});
    in.push_back("empty");
    out.insert(out.begin() + 1, "list");
  }
  auto* loop = AddNode(g, "Loop", in, out);
  loop->set_name("steps");
  auto* b = testing::GraphAttr(loop, "body", "step");
  Info(b->add_input(), "i", onnx::TensorProto::INT64, {});
  Info(b->add_input(), "c", onnx::TensorProto::BOOL, {});
  Info(b->add_input(), "s", onnx::TensorProto::FLOAT, {2, 3});
  if (sequence) b->add_input()->set_name("l");  // no declared type
  AddNode(b, "Add", {"s", "w"}, {"a"});
  AddNode(b, "Mul", {"a", "k"}, {"s_out"});
  AddNode(b, "Identity", {"c"}, {"c_out"});
  AddNode(b, "Neg", {"a"}, {"scan"});
  Info(b->add_output(), "c_out", onnx::TensorProto::BOOL, {});
  Info(b->add_output(), "s_out", onnx::TensorProto::FLOAT, {2, 3});
  if (sequence) {
    AddNode(b, "SequenceInsert", {"l", "a"}, {"l_out"});
    b->add_output()->set_name("l_out");
  }
  Info(b->add_output(), "scan", onnx::TensorProto::FLOAT, {2, 3});
  Info(g->add_output(), "y", onnx::TensorProto::FLOAT, {2, 3});
  Info(g->add_output(), "ys", onnx::TensorProto::FLOAT, {3, 2, 3});
  if (sequence) {
    auto* stack = AddNode(g, "ConcatFromSequence", {"list"}, {"stack"});
    testing::IntAttr(stack, "axis", 0);
    testing::IntAttr(stack, "new_axis", 1);
    Info(g->add_output(), "stack", onnx::TensorProto::FLOAT, {3, 2, 3});
  }
  return m;
}

// y and ys computed by hand: three steps of s = (s + w) / 2 from kX.
std::pair<at::Tensor, at::Tensor> LoopByHand() {
  const at::Tensor w = at::tensor({1.f, 2.f, 3.f});
  at::Tensor s = kX;
  std::vector<at::Tensor> scans;
  for (int k = 0; k < 3; ++k) {
    scans.push_back(-(s + w).unsqueeze(0));
    s = (s + w) * 0.5;
  }
  return {s, at::cat(scans, 0)};
}

TEST(LoopBodies, ABodyIsAModelOfItsOwnInputsAndTheOuterValuesItReads) {
  const onnx::ModelProto m = LoopModel();
  const std::vector<Subgraph> subs = ExtractSubgraphs(m);
  ASSERT_EQ(subs.size(), 1u);
  const Subgraph& b = subs[0];
  ASSERT_EQ(b.why_not, "");
  EXPECT_EQ(b.op, "Loop");
  EXPECT_EQ(b.node_name, "steps");
  EXPECT_EQ(b.attribute, "body");
  EXPECT_EQ(b.nodes, 4);
  EXPECT_EQ(b.formal_inputs, std::vector<std::string>({"i", "c", "s"}));
  EXPECT_EQ(b.inputs, std::vector<std::string>({"i", "c", "s"}));  // w and k are copied in
  EXPECT_EQ(b.outputs, std::vector<std::string>({"c_out", "s_out", "scan"}));
  const onnx::ModelProto bm = Parse(b.model);
  onnx::checker::check_model(bm);
  // One step, in ONNX Runtime.
  const std::vector<at::Tensor> step = testing::RunOnnxRuntime(
      Save(bm, "body.onnx"), {{"i", at::zeros({}, at::kLong)}, {"c", at::ones({}, at::kBool)}, {"s", kX}});
  ASSERT_EQ(step.size(), 3u);
  const at::Tensor w = at::tensor({1.f, 2.f, 3.f});
  EXPECT_TRUE(step[1].equal((kX + w) * 0.5));
  EXPECT_TRUE(step[2].equal(-(kX + w)));
  // A body whose carried value declares no shape is no model (it may
  // change from step to step); the iteration number and the condition need
  // none.
  onnx::ModelProto no_shape = LoopModel();
  auto* body = no_shape.mutable_graph()->mutable_node(1)->mutable_attribute(0)->mutable_g();
  body->mutable_input(0)->mutable_type()->mutable_tensor_type()->clear_shape();
  body->mutable_input(1)->mutable_type()->mutable_tensor_type()->clear_shape();
  EXPECT_EQ(ExtractSubgraphs(no_shape)[0].why_not, "");
  body->mutable_input(2)->mutable_type()->mutable_tensor_type()->clear_shape();
  EXPECT_EQ(ExtractSubgraphs(no_shape)[0].why_not, "its loop-carried input 's' declares no shape");
}

// A Scan over x's rows: the body's state s [3] (a running sum, from the
// weight w) and element x_t [3]; it reads the outer weight k.
// s_out = s + x_t * k, y_t = s_out. At `opset`.
onnx::ModelProto ScanModel(int64_t opset = 14) {
  onnx::ModelProto m = MainWithX();
  m.mutable_opset_import(0)->set_version(opset);
  onnx::GraphProto* g = m.mutable_graph();
  Floats(g->add_initializer(), "w", {1.f, 2.f, 3.f});
  Floats(g->add_initializer(), "k", {0.5f, 0.5f, 0.5f});
  auto* scan = AddNode(g, "Scan", {"w", "x"}, {"last", "ys"});
  scan->set_name("rows");
  testing::IntAttr(scan, "num_scan_inputs", 1);
  onnx::GraphProto* body = testing::GraphAttr(scan, "body", "row");
  Info(body->add_input(), "s", onnx::TensorProto::FLOAT, {3});
  Info(body->add_input(), "x_t", onnx::TensorProto::FLOAT, {3});
  AddNode(body, "Mul", {"x_t", "k"}, {"xk"});
  AddNode(body, "Add", {"s", "xk"}, {"s_out"});
  AddNode(body, "Identity", {"s_out"}, {"y_t"});
  Info(body->add_output(), "s_out", onnx::TensorProto::FLOAT, {3});
  Info(body->add_output(), "y_t", onnx::TensorProto::FLOAT, {3});
  Info(g->add_output(), "ys", onnx::TensorProto::FLOAT, {2, 3});
  return m;
}

TEST(ScanBodies, ABodyIsAModelOfItsStateElementsAndTheOuterValuesItReads) {
  const std::vector<Subgraph> subs = ExtractSubgraphs(ScanModel());
  ASSERT_EQ(subs.size(), 1u);
  const Subgraph& b = subs[0];
  ASSERT_EQ(b.why_not, "");
  EXPECT_EQ(b.op, "Scan");
  EXPECT_EQ(b.node_name, "rows");
  EXPECT_EQ(b.attribute, "body");
  EXPECT_EQ(b.nodes, 3);
  EXPECT_EQ(b.formal_inputs, std::vector<std::string>({"s", "x_t"}));
  EXPECT_EQ(b.inputs, std::vector<std::string>({"s", "x_t"}));  // k is copied in
  EXPECT_EQ(b.outputs, std::vector<std::string>({"s_out", "y_t"}));
  const onnx::ModelProto bm = Parse(b.model);
  onnx::checker::check_model(bm);
  const std::vector<at::Tensor> step = testing::RunOnnxRuntime(
      Save(bm, "scan_body.onnx"), {{"s", at::tensor({1.f, 2.f, 3.f})}, {"x_t", at::tensor({2.f, 4.f, 6.f})}});
  ASSERT_EQ(step.size(), 2u);
  EXPECT_TRUE(step[0].equal(at::tensor({2.f, 4.f, 6.f})));
  // An element declared without a shape is no model; nor is a Scan-8's
  // body (Scan-8 has a batch axis and sequence lengths).
  onnx::ModelProto no_shape = ScanModel();
  no_shape.mutable_graph()
      ->mutable_node(0)
      ->mutable_attribute(1)
      ->mutable_g()
      ->mutable_input(1)
      ->mutable_type()
      ->mutable_tensor_type()
      ->clear_shape();
  EXPECT_EQ(ExtractSubgraphs(no_shape)[0].why_not, "its input 'x_t' declares no shape");
  EXPECT_TRUE(ExtractSubgraphs(ScanModel(8)).empty());
}

TEST(LoopBodies, ABodyPutBackKeepsItsOwnInputsInTheirOrder) {
  onnx::ModelProto m = LoopModel();
  const auto [y, ys] = LoopByHand();
  const std::vector<at::Tensor> before = testing::RunOnnxRuntime(Save(m, "loop.onnx"), {{"x", kX}});
  ASSERT_EQ(before.size(), 2u);
  EXPECT_TRUE(before[0].allclose(y));
  EXPECT_TRUE(before[1].allclose(ys));
  const std::vector<Subgraph> subs = ExtractSubgraphs(m);
  // As an optimiser might write it: k folded into an initializer named
  // "x" (an outer name), (s + w) * k as s * k + w * k, its inputs listed in
  // another order.
  onnx::ModelProto o = Parse(subs[0].model);
  auto* g = o.mutable_graph();
  g->clear_node();
  g->clear_initializer();
  std::reverse(g->mutable_input()->begin(), g->mutable_input()->end());
  Floats(g->add_initializer(), "x", {0.5f, 0.5f, 0.5f});
  Floats(g->add_initializer(), "wk", {0.5f, 1.f, 1.5f});
  Floats(g->add_initializer(), "w", {1, 2, 3});
  AddNode(g, "Mul", {"s", "x"}, {"sk"});
  AddNode(g, "Add", {"sk", "wk"}, {"s_out"});
  AddNode(g, "Identity", {"c"}, {"c_out"});
  AddNode(g, "Add", {"s", "w"}, {"a"});
  AddNode(g, "Neg", {"a"}, {"scan"});
  ReplaceSubgraph(&m, subs[0], o);
  onnx::checker::check_model(m);
  const onnx::GraphProto& body = m.graph().node(1).attribute(0).g();
  ASSERT_EQ(body.input_size(), 3);
  EXPECT_EQ(body.input(0).name(), "i");
  EXPECT_EQ(body.input(1).name(), "c");
  EXPECT_EQ(body.input(2).name(), "s");
  EXPECT_EQ(body.input(2).type().SerializeAsString(),
            LoopModel().graph().node(1).attribute(0).g().input(2).type().SerializeAsString());
  ASSERT_EQ(body.initializer_size(), 2);  // w read from the outer graph again, "x" renamed
  EXPECT_NE(body.initializer(0).name(), "x");
  const std::vector<at::Tensor> after = testing::RunOnnxRuntime(Save(m, "loop_replaced.onnx"), {{"x", kX}});
  ASSERT_EQ(after.size(), 2u);
  EXPECT_TRUE(after[0].allclose(y));
  EXPECT_TRUE(after[1].allclose(ys));
}

// A body that carries a list: its model is the body without the list and
// the SequenceInsert, with the value appended (a, computed in the body) an
// output of it, typed by ONNX's shape inference; put back, the list and its
// node are there again and the whole Loop computes what it did.
TEST(LoopBodies, ABodyCarryingAListIsAModelWithoutItsSequenceNodes) {
  onnx::ModelProto m = LoopModel(/*sequence=*/true);
  const auto [y, ys] = LoopByHand();
  const std::vector<at::Tensor> before = testing::RunOnnxRuntime(Save(m, "list.onnx"), {{"x", kX}});
  ASSERT_EQ(before.size(), 3u);
  EXPECT_TRUE(before[2].allclose(-ys));  // the list: each step's a
  const std::vector<Subgraph> subs = ExtractSubgraphs(m);
  ASSERT_EQ(subs.size(), 1u);
  const Subgraph& b = subs[0];
  ASSERT_EQ(b.why_not, "");
  EXPECT_EQ(b.formal_inputs, std::vector<std::string>({"i", "c", "s", "l"}));
  EXPECT_EQ(b.inputs, std::vector<std::string>({"i", "c", "s"}));
  EXPECT_EQ(b.outputs, std::vector<std::string>({"c_out", "s_out", "scan", "a"}));
  ASSERT_EQ(b.outside_nodes.size(), 1u);
  const onnx::ModelProto bm = Parse(b.model);
  onnx::checker::check_model(bm);
  EXPECT_EQ(bm.graph().output(3).type().tensor_type().elem_type(), onnx::TensorProto::FLOAT);
  EXPECT_EQ(bm.graph().node_size(), 5);  // the Constant k and the body's four
  // Optimised as a model (the inputs reordered), put back.
  onnx::ModelProto o = bm;
  std::reverse(o.mutable_graph()->mutable_input()->begin(), o.mutable_graph()->mutable_input()->end());
  ReplaceSubgraph(&m, b, o);
  onnx::checker::check_model(m);
  const onnx::GraphProto& body = m.graph().node(2).attribute(0).g();
  ASSERT_EQ(body.input_size(), 4);
  EXPECT_EQ(body.input(3).name(), "l");
  EXPECT_FALSE(body.input(3).has_type());  // as declared
  ASSERT_EQ(body.output_size(), 4);
  EXPECT_EQ(body.output(2).name(), "l_out");
  EXPECT_EQ(body.node(body.node_size() - 1).op_type(), "SequenceInsert");
  const std::vector<at::Tensor> after = testing::RunOnnxRuntime(Save(m, "list_replaced.onnx"), {{"x", kX}});
  ASSERT_EQ(after.size(), 3u);
  EXPECT_TRUE(after[0].allclose(y));
  EXPECT_TRUE(after[1].allclose(ys));
  EXPECT_TRUE(after[2].allclose(-ys));
}

}  // namespace
}  // namespace rlflow
