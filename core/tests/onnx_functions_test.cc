// Model-local functions are inlined at import: names, attributes (given,
// referenced, omitted), nested calls, omitted inputs and outputs, and the
// functions that must stay calls. The values are checked against numbers
// worked out by hand and against ONNX Runtime on the original file.
#include "core/onnx_functions.h"

#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>
#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/file_util.h"
#include "core/onnx_io.h"
#include "runtime/executor.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

void Info(onnx::ValueInfoProto* vi, const std::string& name, int n) {
  vi->set_name(name);
  auto* t = vi->mutable_type()->mutable_tensor_type();
  t->set_elem_type(onnx::TensorProto::FLOAT);
  t->mutable_shape()->add_dim()->set_dim_value(n);
}

onnx::NodeProto* AddNode(google::protobuf::RepeatedPtrField<onnx::NodeProto>* nodes, const std::string& op,
                         std::vector<std::string> in, std::vector<std::string> out, const std::string& domain = "",
                         const std::string& name = "") {
  auto* n = nodes->Add();
  n->set_op_type(op);
  n->set_domain(domain);
  n->set_name(name);
  for (auto& s : in) n->add_input(s);
  for (auto& s : out) n->add_output(s);
  return n;
}

void FloatAttr(onnx::NodeProto* n, const std::string& name, float v) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_f(v);
}

void RefAttr(onnx::NodeProto* n, const std::string& name, const std::string& ref) {
  auto* a = n->add_attribute();
  a->set_name(name);
  a->set_type(onnx::AttributeProto::FLOAT);
  a->set_ref_attr_name(ref);
}

onnx::FunctionProto* Function(onnx::ModelProto& m, const std::string& name, std::vector<std::string> in,
                              std::vector<std::string> out, std::vector<std::string> attrs, int opset = 15) {
  auto* f = m.add_functions();
  f->set_domain("lib");
  f->set_name(name);
  for (auto& s : in) f->add_input(s);
  for (auto& s : out) f->add_output(s);
  for (auto& s : attrs) f->add_attribute(s);
  auto* imp = f->add_opset_import();
  imp->set_version(opset);
  return f;
}

// x -> Leaky(a=0.5) -> y1; x -> Leaky() (LeakyRelu's default 0.01) -> y2;
// x -> Outer(b=0.25) -> y3, Outer calling Leaky(a=b) and Neg twice.
// Leaky's body names an intermediate "t", as the graph does.
onnx::ModelProto Calls() {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  auto* lib = m.add_opset_import();
  lib->set_domain("lib");
  lib->set_version(1);
  auto* g = m.mutable_graph();
  g->set_name("calls");
  Info(g->add_input(), "x", 3);
  auto* nodes = g->mutable_node();
  AddNode(nodes, "Neg", {"x"}, {"t"}, "", "neg");
  FloatAttr(AddNode(nodes, "Leaky", {"x"}, {"y1"}, "lib", "leaky_half"), "a", 0.5f);
  AddNode(nodes, "Leaky", {"x"}, {"y2"}, "lib", "leaky_default");
  FloatAttr(AddNode(nodes, "Outer", {"t"}, {"y3"}, "lib", "outer"), "b", 0.25f);
  for (const char* y : {"y1", "y2", "y3"}) Info(g->add_output(), y, 3);

  auto* leaky = Function(m, "Leaky", {"X"}, {"Y"}, {"a"});
  AddNode(leaky->mutable_node(), "Neg", {"X"}, {"t"});
  AddNode(leaky->mutable_node(), "Neg", {"t"}, {"u"});
  RefAttr(AddNode(leaky->mutable_node(), "LeakyRelu", {"u"}, {"Y"}), "alpha", "a");
  auto* outer = Function(m, "Outer", {"X"}, {"Y"}, {"b"});
  auto* lib_imp = outer->add_opset_import();
  lib_imp->set_domain("lib");
  lib_imp->set_version(1);
  AddNode(outer->mutable_node(), "Neg", {"X"}, {"n"});
  RefAttr(AddNode(outer->mutable_node(), "Leaky", {"n"}, {"Y"}, "lib"), "a", "b");
  return m;
}

TEST(OnnxFunctions, CallsAreInlinedWithTheirAttributes) {
  onnx::ModelProto m = Calls();
  std::vector<std::string> notes;
  EXPECT_EQ(InlineLocalFunctions(&m, &notes), 4);  // 3 calls, then Outer's call of Leaky
  std::set<std::string> names, values;
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) {
    EXPECT_TRUE(n.domain().empty()) << n.op_type();
    EXPECT_TRUE(names.insert(n.name()).second) << "node name " << n.name() << " twice";
    for (const auto& o : n.output()) EXPECT_TRUE(values.insert(o).second) << "value " << o << " defined twice";
    ++ops[n.op_type()];
  }
  EXPECT_EQ(ops["Neg"], 1 + 2 * 3 + 1);
  EXPECT_EQ(ops["LeakyRelu"], 3);
  // The graph's "t" is the graph's; the bodies' are fresh, prefixed names.
  EXPECT_TRUE(values.count("t"));
  EXPECT_TRUE(values.count("leaky_half/t"));
  EXPECT_EQ(m.functions_size(), 2);  // definitions stay
  ASSERT_EQ(notes.size(), 2u);
  EXPECT_EQ(notes[0], "inlined 3 call(s) of local function lib.Leaky");  // two, then the one in Outer
  EXPECT_EQ(notes[1], "inlined 1 call(s) of local function lib.Outer");
}

TEST(OnnxFunctions, InlinedModelComputesWhatOnnxRuntimeComputes) {
  onnx::ModelProto m = Calls();
  const std::string path = testing::MakeTempDir("fn_") + "/calls.onnx";
  WriteFileAtomically(path, m.SerializeAsString());
  ImportReport report;
  Graph g = ImportOnnxFile(path, {}, &report);
  for (NodeId id = 0; id < g.num_nodes(); ++id) EXPECT_FALSE(g.node(id).opaque()) << g.node(id).Describe();
  at::Tensor x = at::tensor({-2.0f, 1.0f, -4.0f});
  std::vector<at::Tensor> ours = Executor(g).Run({x});
  ASSERT_EQ(ours.size(), 3u);
  // By hand: y1 = LeakyRelu_0.5(x); y2 = LeakyRelu_0.01(x);
  // y3 = LeakyRelu_0.25(-(-x)) = LeakyRelu_0.25(x).
  const std::vector<std::vector<float>> expected = {{-1.0f, 1.0f, -2.0f}, {-0.02f, 1.0f, -0.04f}, {-0.5f, 1.0f, -1.0f}};
  for (size_t k = 0; k < 3; ++k)
    for (int i = 0; i < 3; ++i) EXPECT_NEAR(ours[k][i].item<float>(), expected[k][static_cast<size_t>(i)], 1e-6) << k;
  std::vector<at::Tensor> ort = testing::RunOnnxRuntime(path, {{"x", x}});
  ASSERT_EQ(ort.size(), 3u);
  for (size_t k = 0; k < 3; ++k) EXPECT_TRUE(ort[k].allclose(ours[k], 1e-6, 1e-7)) << k;
}

TEST(OnnxFunctions, OmittedInputsAndOutputsAndAFunctionReturningItsInput) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  Info(m.mutable_graph()->add_input(), "x", 3);
  // Pair(X, Opt) -> (Y = Clip(X, Opt), Z = X); called without Opt and
  // with only its first output, then with both outputs.
  auto* f = Function(m, "Pair", {"X", "Opt"}, {"Y", "X"}, {});
  AddNode(f->mutable_node(), "Clip", {"X", "Opt"}, {"Y"});
  auto* nodes = m.mutable_graph()->mutable_node();
  AddNode(nodes, "Pair", {"x"}, {"y"}, "lib", "first");
  AddNode(nodes, "Pair", {"y", ""}, {"", "z"}, "lib", "second");
  std::vector<std::string> notes;
  EXPECT_EQ(InlineLocalFunctions(&m, &notes), 2);
  ASSERT_EQ(m.graph().node_size(), 3);
  const auto& clip = m.graph().node(0);
  EXPECT_EQ(clip.op_type(), "Clip");
  ASSERT_EQ(clip.input_size(), 2);
  EXPECT_EQ(clip.input(0), "x");
  EXPECT_EQ(clip.input(1), "");  // omitted: an absent optional input
  EXPECT_EQ(clip.output(0), "y");
  const auto& clip2 = m.graph().node(1);
  EXPECT_EQ(clip2.op_type(), "Clip");
  EXPECT_NE(clip2.output(0), "");  // the omitted output gets a fresh name
  EXPECT_NE(clip2.output(0), "y");
  const auto& id = m.graph().node(2);
  EXPECT_EQ(id.op_type(), "Identity");
  ASSERT_EQ(id.input_size(), 1);
  EXPECT_EQ(id.input(0), "y");
  EXPECT_EQ(id.output(0), "z");
}

TEST(OnnxFunctions, FunctionsThatCouldChangeMeaningStayCalls) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  Info(m.mutable_graph()->add_input(), "x", 3);
  auto* old = Function(m, "Old", {"X"}, {"Y"}, {}, /*opset=*/13);
  AddNode(old->mutable_node(), "Relu", {"X"}, {"Y"});
  auto* branchy = Function(m, "Branchy", {"X"}, {"Y"}, {});
  auto* if_node = AddNode(branchy->mutable_node(), "If", {"X"}, {"Y"});
  auto* then_branch = if_node->add_attribute();
  then_branch->set_name("then_branch");
  then_branch->set_type(onnx::AttributeProto::GRAPH);
  then_branch->mutable_g()->set_name("then");
  auto* self = Function(m, "Self", {"X"}, {"Y"}, {});
  AddNode(self->mutable_node(), "Self", {"X"}, {"Y"}, "lib");  // recursive
  // Two functions reading a domain the model does not import, at two
  // versions: the first is inlined (the model imports it at 1), the second
  // would be read at the wrong version.
  for (int version : {1, 2}) {
    auto* f = Function(m, "Custom" + std::to_string(version), {"X"}, {"Y"}, {});
    auto* imp = f->add_opset_import();
    imp->set_domain("com.x");
    imp->set_version(version);
    AddNode(f->mutable_node(), "Op", {"X"}, {"Y"}, "com.x");
  }
  auto* nodes = m.mutable_graph()->mutable_node();
  AddNode(nodes, "Custom1", {"x"}, {"d"}, "lib", "custom1");
  AddNode(nodes, "Custom2", {"x"}, {"e"}, "lib", "custom2");
  AddNode(nodes, "Old", {"x"}, {"a"}, "lib", "old");
  AddNode(nodes, "Branchy", {"x"}, {"b"}, "lib", "branchy");
  AddNode(nodes, "Self", {"x"}, {"c"}, "lib", "self");
  std::vector<std::string> notes;
  InlineLocalFunctions(&m, &notes);
  std::map<std::string, int> ops;
  for (const auto& n : m.graph().node()) ++ops[n.op_type()];
  EXPECT_EQ(ops["Old"], 1);
  EXPECT_EQ(ops["Branchy"], 1);
  EXPECT_EQ(ops["Self"], 1);
  EXPECT_EQ(ops["Op"], 1);
  EXPECT_EQ(ops["Custom2"], 1);
  EXPECT_EQ(m.graph().node_size(), 5);
  bool imports_x1 = false;
  for (const auto& imp : m.opset_import()) imports_x1 |= imp.domain() == "com.x" && imp.version() == 1;
  EXPECT_TRUE(imports_x1);
  std::string all;
  for (const auto& n : notes) all += n + "\n";
  EXPECT_NE(all.find("lib.Old kept opaque: its opset for domain 'ai.onnx' is 13, the model's 15"), std::string::npos)
      << all;
  EXPECT_NE(all.find("lib.Branchy kept opaque: its node '' (If) holds a subgraph"), std::string::npos) << all;
  EXPECT_NE(all.find("lib.Custom2 kept opaque: its opset for domain 'com.x' is 2, another function's 1"),
            std::string::npos)
      << all;
  EXPECT_NE(all.find("lib.Self kept opaque: it calls itself (directly or through other functions)"), std::string::npos)
      << all;
}

// F0 calls F1 twice, F1 calls F2 twice, ..., F<depth-1> is one Relu: one
// call of F0 is 2^(depth-1) Relus.
onnx::ModelProto Doubling(int depth) {
  onnx::ModelProto m;
  m.set_ir_version(8);
  m.add_opset_import()->set_version(15);
  Info(m.mutable_graph()->add_input(), "x", 3);
  for (int k = 0; k < depth; ++k) {
    auto* f = Function(m, "F" + std::to_string(k), {"X"}, {"Y"}, {});
    if (k + 1 == depth) {
      AddNode(f->mutable_node(), "Relu", {"X"}, {"Y"});
      continue;
    }
    AddNode(f->mutable_node(), "F" + std::to_string(k + 1), {"X"}, {"h"}, "lib");
    AddNode(f->mutable_node(), "F" + std::to_string(k + 1), {"h"}, {"Y"}, "lib");
  }
  AddNode(m.mutable_graph()->mutable_node(), "F0", {"x"}, {"y"}, "lib", "f0");
  AddNode(m.mutable_graph()->mutable_node(), "Relu", {"y"}, {"z"}, "", "last");
  return m;
}

TEST(OnnxFunctions, NestingThatMultipliesIsInlinedUpToTheNodeBound) {
  onnx::ModelProto m = Doubling(11);
  std::vector<std::string> notes;
  EXPECT_EQ(InlineLocalFunctions(&m, &notes), (1 << 11) - 1);  // 1 + 2 + ... + 1024 calls
  EXPECT_EQ(m.graph().node_size(), (1 << 10) + 1);
  for (const auto& n : m.graph().node()) EXPECT_EQ(n.op_type(), "Relu");
  EXPECT_EQ(m.graph().node(m.graph().node_size() - 1).input(0), "y");

  // 2^21 Relus: past the bound, the call stays one node and nothing is
  // expanded (checked in far less time than expanding it would take).
  onnx::ModelProto big = Doubling(22);
  notes.clear();
  EXPECT_EQ(InlineLocalFunctions(&big, &notes), 0);
  ASSERT_EQ(big.graph().node_size(), 2);
  EXPECT_EQ(big.graph().node(0).op_type(), "F0");
  ASSERT_EQ(notes.size(), 1u);
  EXPECT_EQ(notes[0],
            "1 call(s) of local function lib.F0 kept opaque: inlining would make the graph larger than "
            "1048576 nodes");
}

}  // namespace
}  // namespace rlflow
