// ONNX import/export: opaque nodes, opset conversion, shape-subgraph folding,
// symbolic dimensions, legacy initializers-as-inputs, typed tensor fields.
#include "core/onnx_io.h"

#include <dirent.h>

#include <set>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include "core/error.h"
#include "core/file_util.h"
#include "core/op_registry.h"
#include "runtime/executor.h"
#include "tools/ort/ort.h"

namespace rlflow {
namespace {

onnx::ModelProto Model(int opset) {
  onnx::ModelProto m;
  m.set_ir_version(opset >= 13 ? 8 : 6);
  auto* imp = m.add_opset_import();
  imp->set_version(opset);
  m.mutable_graph()->set_name("t");
  return m;
}

void Info(onnx::ValueInfoProto* vi, const std::string& name, std::vector<int64_t> shape,
          int type = onnx::TensorProto::FLOAT, const std::string& param = "") {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(type);
  t->mutable_shape();
  for (int64_t d : shape) {
    auto* dim = t->mutable_shape()->add_dim();
    if (d >= 0) dim->set_dim_value(d); else dim->set_dim_param(param);
  }
}

onnx::NodeProto* Node(onnx::ModelProto& m, const std::string& op, std::vector<std::string> in,
                      std::vector<std::string> out) {
  auto* n = m.mutable_graph()->add_node();
  n->set_op_type(op);
  n->set_name(op + "_" + std::to_string(m.graph().node_size()));
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void IntsAttr(onnx::NodeProto* n, const std::string& name, std::vector<int64_t> v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INTS);
  for (int64_t x : v) a->add_ints(x);
}
void IntAttr(onnx::NodeProto* n, const std::string& name, int64_t v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::INT);
  a->set_i(v);
}

void Int64Init(onnx::ModelProto& m, const std::string& name, std::vector<int64_t> v) {
  auto* t = m.mutable_graph()->add_initializer();
  t->set_name(name);
  t->set_data_type(onnx::TensorProto::INT64);
  t->add_dims(static_cast<int64_t>(v.size()));
  for (int64_t x : v) t->add_int64_data(x);
}

std::string Save(const onnx::ModelProto& m, const std::string& name) {
  std::string dir = testing::MakeTempDir("io_");
  std::string path = dir + "/" + name;
  WriteFileAtomically(path, m.SerializeAsString());
  return path;
}

TEST(OnnxIo, OpaqueNodesAreExportedUnchanged) {
  onnx::ModelProto m = Model(17);
  auto* imp = m.add_opset_import();
  imp->set_domain("com.example");
  imp->set_version(2);
  Info(m.mutable_graph()->add_input(), "x", {2, 3});
  Node(m, "Relu", {"x"}, {"r"});
  auto* fancy = Node(m, "Fancy", {"r", ""}, {"f", "aux"});
  fancy->set_domain("com.example");
  IntsAttr(fancy, "widths", {3, 1, 4});
  auto* s = fancy->add_attribute();
  s->set_name("mode");
  s->set_type(onnx::AttributeProto::STRING);
  s->set_s("wild");
  auto* body = fancy->add_attribute();  // a subgraph attribute
  body->set_name("body");
  body->set_type(onnx::AttributeProto::GRAPH);
  body->mutable_g()->set_name("inner");
  fancy->set_doc_string("keep me");
  Info(m.mutable_graph()->add_value_info(), "f", {2, 3});
  Node(m, "Neg", {"f"}, {"y"});
  Info(m.mutable_graph()->add_output(), "y", {2, 3});
  Info(m.mutable_graph()->add_output(), "aux", {});

  Graph g = ImportOnnxFile(Save(m, "opaque.onnx"));
  int opaque = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id) opaque += g.node(id).opaque();
  EXPECT_EQ(opaque, 1);
  EXPECT_EQ(g.value(g.FindValue("f")).type.shape, (Shape{2, 3})) << "declared types flow to opaque outputs";

  onnx::ModelProto out;
  ExportOnnxModel(g, &out);
  const onnx::NodeProto* exported = nullptr;
  for (const auto& n : out.graph().node())
    if (n.op_type() == "Fancy") exported = &n;
  ASSERT_NE(exported, nullptr);
  EXPECT_EQ(exported->SerializeAsString(), fancy->SerializeAsString()) << "opaque node changed on export";
  bool has_domain = false;
  for (const auto& i : out.opset_import()) has_domain |= i.domain() == "com.example" && i.version() == 2;
  EXPECT_TRUE(has_domain);
}

TEST(OnnxIo, Opset11ModelIsConvertedAndComputesTheSame) {
  onnx::ModelProto m = Model(11);
  Info(m.mutable_graph()->add_input(), "x", {2, 1, 3, 4});
  auto* sq = Node(m, "Squeeze", {"x"}, {"s"});
  IntsAttr(sq, "axes", {1});
  auto* sm = Node(m, "Softmax", {"s"}, {"p"});  // opset 11: softmax over the flattened trailing dims
  IntAttr(sm, "axis", 1);
  auto* sp = Node(m, "Split", {"p"}, {"a", "b"});
  IntAttr(sp, "axis", 2);
  IntsAttr(sp, "split", {1, 3});
  auto* un = Node(m, "Unsqueeze", {"a"}, {"u"});
  IntsAttr(un, "axes", {0});
  auto* rm = Node(m, "ReduceMean", {"b"}, {"r"});
  IntsAttr(rm, "axes", {2});
  Info(m.mutable_graph()->add_output(), "u", {1, 2, 3, 1});
  Info(m.mutable_graph()->add_output(), "r", {2, 3, 1});
  std::string path = Save(m, "opset11.onnx");

  ImportReport report;
  Graph g = ImportOnnxFile(path, {}, &report);
  EXPECT_EQ(report.opset_before_conversion, 11);
  EXPECT_EQ(g.opset(), 13);
  for (NodeId id = 0; id < g.num_nodes(); ++id) EXPECT_FALSE(g.node(id).opaque()) << g.node(id).Describe();
  std::vector<at::Tensor> inputs = RandomInputs(g, 3);
  std::vector<at::Tensor> ours = Executor(g).Run(inputs);
  std::vector<at::Tensor> ort = testing::RunOnnxRuntime(path, {{"x", inputs[0]}});
  ASSERT_EQ(ours.size(), 2u);
  for (size_t k = 0; k < 2; ++k) EXPECT_LE(RelativeError(ours[k], ort[k]), 1e-6) << k;
}

TEST(OnnxIo, ShapeSubgraphsFoldToConstants) {
  // x.reshape(x.shape[0], -1) as torch exports it.
  onnx::ModelProto m = Model(13);
  Info(m.mutable_graph()->add_input(), "x", {2, 3, 4});
  Node(m, "Shape", {"x"}, {"shape"});
  auto* idx = Node(m, "Constant", {}, {"zero"});
  auto* v = idx->add_attribute();
  v->set_name("value");
  v->set_type(onnx::AttributeProto::TENSOR);
  v->mutable_t()->set_data_type(onnx::TensorProto::INT64);
  v->mutable_t()->add_int64_data(0);
  Node(m, "Gather", {"shape", "zero"}, {"n"});
  Int64Init(m, "axes0", {0});
  Node(m, "Unsqueeze", {"n", "axes0"}, {"n1"});
  Int64Init(m, "minus_one", {-1});
  auto* cat = Node(m, "Concat", {"n1", "minus_one"}, {"target"});
  IntAttr(cat, "axis", 0);
  Node(m, "Reshape", {"x", "target"}, {"y"});
  Info(m.mutable_graph()->add_output(), "y", {-1, -1}, onnx::TensorProto::FLOAT, "dynamic");

  ImportReport report;
  Graph g = ImportOnnxFile(Save(m, "shape.onnx"), {}, &report);
  EXPECT_EQ(report.folded_nodes, 5);
  ASSERT_EQ(g.num_nodes(), 1);
  EXPECT_EQ(g.node(0).op, "Reshape");
  ASSERT_TRUE(g.IsConstant(g.node(0).inputs[1]));
  EXPECT_EQ(g.value(g.node(0).inputs[1]).initializer->ToInt64(), (std::vector<int64_t>{2, -1}));
  EXPECT_EQ(g.value(g.outputs()[0]).type.shape, (Shape{2, 12}));
}

TEST(OnnxIo, SymbolicInputDimsAreBound) {
  onnx::ModelProto m = Model(13);
  Info(m.mutable_graph()->add_input(), "x", {-1, 4}, onnx::TensorProto::FLOAT, "batch");
  Node(m, "Relu", {"x"}, {"y"});
  Info(m.mutable_graph()->add_output(), "y", {-1, 4}, onnx::TensorProto::FLOAT, "batch");
  std::string path = Save(m, "sym.onnx");
  ImportReport report;
  Graph g = ImportOnnxFile(path, {}, &report);
  EXPECT_EQ(g.value(g.inputs()[0]).type.shape, (Shape{1, 4}));
  ASSERT_FALSE(report.warnings.empty());
  EXPECT_NE(report.warnings[0].find("bound to 1"), std::string::npos);
  ImportOptions opts;
  opts.free_dim_value = 3;
  EXPECT_EQ(ImportOnnxFile(path, opts).value(0).type.shape, (Shape{3, 4}));
}

TEST(OnnxIo, LegacyInitializerInputsAndTypedFields) {
  onnx::ModelProto m = Model(13);
  m.set_ir_version(3);
  Info(m.mutable_graph()->add_input(), "x", {3});
  Info(m.mutable_graph()->add_input(), "w", {3});  // IR 3: initializers are listed as inputs
  auto* w = m.mutable_graph()->add_initializer();
  w->set_name("w");
  w->set_data_type(onnx::TensorProto::FLOAT);
  w->add_dims(3);
  for (float f : {1.5f, -2.0f, 0.25f}) w->add_float_data(f);
  Node(m, "Mul", {"x", "w"}, {"y"});
  Info(m.mutable_graph()->add_output(), "y", {3});
  Graph g = ImportOnnxFile(Save(m, "ir3.onnx"));
  ASSERT_EQ(g.inputs().size(), 1u);
  EXPECT_EQ(g.value(g.inputs()[0]).name, "x");
  ValueId wid = g.FindValue("w");
  ASSERT_TRUE(g.IsConstant(wid));
  EXPECT_EQ(g.value(wid).initializer->ToDouble(), (std::vector<double>{1.5, -2.0, 0.25}));
  onnx::ModelProto out;
  ExportOnnxModel(g, &out);  // passes the checker with a modern IR version
  EXPECT_GE(out.ir_version(), 7);
}

TEST(OnnxIo, DeclaredShapeContradictingInferenceIsAnError) {
  onnx::ModelProto m = Model(13);
  Info(m.mutable_graph()->add_input(), "x", {2, 3});
  Node(m, "Transpose", {"x"}, {"y"});
  Info(m.mutable_graph()->add_output(), "y", {2, 3});
  try {
    ImportOnnxFile(Save(m, "contradiction.onnx"));
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("shape mismatch"), std::string::npos) << e.what();
  }
}

TEST(OnnxIo, AtomicWriteLeavesNoTemporaryFiles) {
  onnx::ModelProto m = Model(13);
  Info(m.mutable_graph()->add_input(), "x", {2});
  Node(m, "Relu", {"x"}, {"y"});
  Info(m.mutable_graph()->add_output(), "y", {2});
  std::string path = Save(m, "in.onnx");
  Graph g = ImportOnnxFile(path);
  std::string dir = testing::MakeTempDir("atomic_");
  WriteOnnxFile(g, dir + "/out.onnx");
  WriteOnnxFile(g, dir + "/out.onnx");  // overwrite
  int files = 0;
  DIR* d = ::opendir(dir.c_str());
  while (dirent* e = ::readdir(d)) files += e->d_name[0] != '.';
  ::closedir(d);
  EXPECT_EQ(files, 1);
  EXPECT_THROW(WriteOnnxFile(g, dir + "/missing/out.onnx"), Error);
}

}  // namespace
}  // namespace rlflow

namespace rlflow {
namespace {

// Rewrites can leave two nodes with one name; ONNX Runtime rejects that, so
// the exporter renames repeats, and ORT loads and runs the result.
TEST(OnnxIo, RepeatedNodeNamesAreMadeUnique) {
  Graph g;
  ValueId x = g.AddInput("x", TensorType{DType::kFloat32, {2, 3}, true});
  ValueId a = g.node(g.AddNode("Relu", {x}, 1, {}, "same")).outputs[0];
  ValueId b = g.node(g.AddNode("Neg", {a}, 1, {}, "same")).outputs[0];
  ValueId c = g.node(g.AddNode("Relu", {b}, 1, {}, "same_1")).outputs[0];
  g.SetOutputs({c});
  InferShapes(g);
  onnx::ModelProto out;
  ExportOnnxModel(g, &out);
  std::set<std::string> names;
  for (const auto& n : out.graph().node()) EXPECT_TRUE(names.insert(n.name()).second) << "repeated " << n.name();
  EXPECT_EQ(names.size(), 3u);
  std::string path = testing::MakeTempDir("names_") + "/names.onnx";
  WriteOnnxFile(g, path);
  at::Tensor in = at::randn({2, 3});
  std::vector<at::Tensor> ort = testing::RunOnnxRuntime(path, {{"x", in}});
  ASSERT_EQ(ort.size(), 1u);
  EXPECT_LT(RelativeError(ort[0], at::relu(-at::relu(in))), 1e-6);
}

}  // namespace
}  // namespace rlflow
