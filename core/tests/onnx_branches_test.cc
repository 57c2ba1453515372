// If branches as models of their own and back (core/onnx_branches.h): what a
// branch model holds, that it computes what the branch computes (in ONNX
// Runtime, against the whole model), and that a branch put back reads the
// outer weights, never redefines an outer name, and keeps the model valid
// and computing the same.
#include "core/onnx_branches.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>
#include <onnx/checker.h>
#include <onnx/onnx_pb.h>

#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
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

// x [2,3], c (bool) -> h = Relu(x) (typed by value_info when `typed`, else
// a custom operator that nothing can type);
// If(c): then (x + w) * k, else h - w; w an initializer, k a Constant node,
// u an initializer nothing reads.
onnx::ModelProto Model(bool typed = true) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(14);
  auto* g = m.mutable_graph();
  g->set_name("main");
  Info(g->add_input(), "x", onnx::TensorProto::FLOAT, {2, 3});
  Info(g->add_input(), "c", onnx::TensorProto::BOOL, {});
  Floats(g->add_initializer(), "w", {1, 2, 3});
  Floats(g->add_initializer(), "u", {7});
  auto* k = AddNode(g, "Constant", {}, {"k"});
  auto* a = k->add_attribute();
  a->set_name("value");
  a->set_type(onnx::AttributeProto::TENSOR);
  Floats(a->mutable_t(), "k", {2, 2, 2});
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
  auto* then_attr = node->add_attribute();
  then_attr->set_name("then_branch");
  then_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* tg = then_attr->mutable_g();
  tg->set_name("then");
  AddNode(tg, "Add", {"x", "w"}, {"t1"});
  AddNode(tg, "Mul", {"t1", "k"}, {"then_out"});
  Info(tg->add_output(), "then_out", onnx::TensorProto::FLOAT, {2, 3});
  auto* else_attr = node->add_attribute();
  else_attr->set_name("else_branch");
  else_attr->set_type(onnx::AttributeProto::GRAPH);
  auto* eg = else_attr->mutable_g();
  eg->set_name("else");
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
  const std::vector<IfBranch> branches = ExtractIfBranches(m);
  ASSERT_EQ(branches.size(), 2u);
  const IfBranch& then_b = branches[0];
  const IfBranch& else_b = branches[1];
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
  std::vector<IfBranch> branches = ExtractIfBranches(m);
  ASSERT_EQ(branches.size(), 2u);
  ASSERT_EQ(branches[1].why_not, "");
  EXPECT_EQ(Parse(branches[1].model).graph().input(0).type().SerializeAsString(),
            Model().graph().value_info(0).type().SerializeAsString());
  EXPECT_EQ(m.graph().value_info_size(), 0);  // the model itself is left as it was
  // h from an operator nothing knows: the else branch is no model.
  branches = ExtractIfBranches(Model(/*typed=*/false));
  ASSERT_EQ(branches.size(), 2u);
  EXPECT_EQ(branches[0].why_not, "");
  EXPECT_EQ(branches[1].model, "");
  EXPECT_NE(branches[1].why_not.find("'h'"), std::string::npos) << branches[1].why_not;
}

// The then branch as an optimiser might write it: k folded into an
// initializer named "h" (a name the outer graph defines), w written back
// unchanged, the product by 2 as x*2 + w*2.
onnx::ModelProto OptimisedThen(const IfBranch& b) {
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
  const std::vector<IfBranch> branches = ExtractIfBranches(m);
  ReplaceIfBranch(&m, branches[0], OptimisedThen(branches[0]));
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
  const std::vector<IfBranch> branches = ExtractIfBranches(m);
  onnx::ModelProto o = OptimisedThen(branches[0]);
  ToDataFile(o.mutable_graph()->mutable_initializer(0), "then.data", 4096);
  ToDataFile(o.mutable_graph()->mutable_initializer(1), "then.data", 8192);
  // Without the directory they are not known to be alike: the branch keeps
  // its w.
  onnx::ModelProto blind = m;
  ReplaceIfBranch(&blind, branches[0], o);
  EXPECT_EQ(blind.graph().node(2).attribute(0).g().initializer_size(), 2);
  const std::string dir = DirName(Save(onnx::ModelProto(), "probe.onnx"));
  ReplaceIfBranch(&m, branches[0], o, &dir);
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
  const std::vector<IfBranch> branches = ExtractIfBranches(m);
  onnx::ModelProto extra = OptimisedThen(branches[0]);
  Info(extra.mutable_graph()->add_input(), "z", onnx::TensorProto::FLOAT, {1});
  EXPECT_THROW(ReplaceIfBranch(&m, branches[0], extra), Error);
  onnx::ModelProto renamed = OptimisedThen(branches[0]);
  renamed.mutable_graph()->mutable_output(0)->set_name("t1");
  EXPECT_THROW(ReplaceIfBranch(&m, branches[0], renamed), Error);
  onnx::ModelProto newer = OptimisedThen(branches[0]);
  newer.mutable_opset_import(0)->set_version(17);
  try {
    ReplaceIfBranch(&m, branches[0], newer);
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
  const std::vector<IfBranch> branches = ExtractIfBranches(m);
  onnx::ModelProto e = Parse(branches[1].model);
  e.mutable_graph()->clear_initializer();
  e.mutable_graph()->clear_node();
  AddNode(e.mutable_graph(), "Neg", {"h"}, {"else_out"});
  ReplaceIfBranch(&m, branches[1], e);
  EXPECT_EQ(DropUnreadInitializers(&m), 0);
  EXPECT_TRUE(RunModel(m, false, "dropped2.onnx").equal(-kX.relu()));
}

}  // namespace
}  // namespace rlflow
