// Op conformance: every registry entry's shape rule, ONNX mapping and CPU
// kernel checked against ONNX Runtime on the cases of core/op_cases_testing.h
// (with the edge cases of the ONNX spec). All cases are built into one model with one
// output per case, exported, and run by both runtimes on the same inputs.
#include <ATen/ops/equal.h>
#include <ATen/ops/tensor.h>
#include <gtest/gtest.h>

#include <functional>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/onnx_io.h"
#include "core/op_cases_testing.h"
#include "core/op_registry.h"
#include "core/symbolic.h"
#include "runtime/executor.h"
#include "runtime/ort_testing.h"

namespace rlflow {
namespace {

using B = GraphBuilder;
using testing::OpCase;
std::vector<OpCase> Cases() { return testing::OpCases(); }

TEST(OpConformance, EveryRegisteredOpHasACase) {
  std::set<std::string> covered;
  GraphBuilder b(1);
  for (const OpCase& c : Cases()) c.build(b);
  for (NodeId id = 0; id < b.graph().num_nodes(); ++id) covered.insert(b.graph().node(id).op);
  for (const OpDef* def : OpRegistry::Global().All())
    EXPECT_TRUE(covered.count(def->name)) << def->name << " has no conformance case";
}

TEST(OpConformance, MatchesOnnxRuntime) {
  std::vector<OpCase> cases = Cases();
  GraphBuilder b(5, 17, "conformance");
  std::vector<ValueId> outputs;
  for (const OpCase& c : cases) outputs.push_back(c.build(b));
  Graph g = b.Build(outputs);
  std::string dir = testing::MakeTempDir("conformance_");
  std::string path = dir + "/ops.onnx";
  WriteOnnxFile(g, path);
  // Our executor runs the imported model, exactly what ORT runs.
  Graph imported = ImportOnnxFile(path);
  std::vector<at::Tensor> inputs = RandomInputs(imported, 11);
  std::vector<std::pair<std::string, at::Tensor>> named;
  for (size_t k = 0; k < inputs.size(); ++k) named.push_back({imported.value(imported.inputs()[k]).name, inputs[k]});
  std::vector<at::Tensor> ours = Executor(imported).Run(inputs);
  std::vector<at::Tensor> ort = testing::RunOnnxRuntime(path, named);
  ASSERT_EQ(ours.size(), cases.size());
  ASSERT_EQ(ort.size(), cases.size());
  for (size_t k = 0; k < cases.size(); ++k) {
    SCOPED_TRACE(cases[k].name);
    ASSERT_EQ(ours[k].sizes(), ort[k].sizes()) << cases[k].name;
    ASSERT_EQ(ours[k].scalar_type(), ort[k].scalar_type()) << cases[k].name;
    // Declared (inferred) shape equals what both runtimes produced, but for
    // the lengths only the values set (NonZero, Compress, Unique, ...).
    const TensorType& t = imported.value(imported.outputs()[k]).type;
    Shape produced(ort[k].sizes().begin(), ort[k].sizes().end());
    ASSERT_EQ(t.rank(), static_cast<int64_t>(produced.size())) << cases[k].name;
    for (size_t d = 0; d < produced.size(); ++d)
      if (t.shape[d] != kUnknownDim || !cases[k].value_dependent_shape) {
        EXPECT_EQ(t.shape[d], produced[d]) << cases[k].name << " dimension " << d;
      }
    EXPECT_LE(RelativeError(ours[k], ort[k]), 1e-5) << cases[k].name << "\nours:\n" << ours[k] << "\nort:\n" << ort[k];
  }
}

// Symbolic semantics (what the verifier proves rules with) agree with the
// kernels: every case whose operators all have symbolic semantics, on
// integer-valued inputs, evaluated by Z3 and by the executor.
TEST(OpConformance, SymbolicSemanticsMatchTheKernels) {
  int checked = 0;
  std::set<std::string> ops_checked, cases_checked;
  for (const OpCase& oc : Cases()) {
    GraphBuilder b(3, 17, oc.name);
    Graph g = b.Build({oc.build(b)});
    bool symbolic = true;
    for (NodeId id = 0; id < g.num_nodes(); ++id) {
      const OpDef* def = OpRegistry::Global().Find(g.node(id).domain, g.node(id).op);
      symbolic = symbolic && def != nullptr && def->symbolic != nullptr;
    }
    bool floats = true;
    for (ValueId v : g.inputs()) floats = floats && g.value(v).type.dtype == DType::kFloat32;
    if (!symbolic || !floats || g.info().symbolic_dims) continue;
    SCOPED_TRACE(oc.name);
    std::vector<at::Tensor> inputs;
    z3::context z3;
    std::vector<SymTensor> vals(g.num_values());
    uint64_t seed = 7;
    for (ValueId v : g.inputs()) {
      std::vector<float> data(static_cast<size_t>(NumElements(g.value(v).type.shape)));
      for (float& x : data)
        x = static_cast<float>(static_cast<int64_t>((seed = seed * 6364136223846793005ULL + 1) >> 61) - 3);
      inputs.push_back(at::tensor(data).reshape(g.value(v).type.shape));
      vals[v] = SymConstant(z3, TensorData::FromFloat(data, g.value(v).type.shape));
    }
    for (ValueId v : g.initializers()) vals[v] = SymConstant(z3, *g.value(v).initializer);
    bool covered = true;  // symbolic semantics may cover a subset of attributes (e.g. 2-D convolution)
    for (NodeId id : g.TopologicalOrder()) {
      const Node& n = g.node(id);
      std::vector<SymTensor> args;
      std::vector<const TensorData*> constants;
      for (ValueId in : n.inputs) {
        args.push_back(in == kNoValue ? SymTensor() : vals[in]);
        constants.push_back(in == kNoValue ? nullptr : g.value(in).initializer.get());
      }
      std::vector<SymTensor> outs;
      try {
        outs = RunSymbolic(n, *OpRegistry::Global().Find(n.domain, n.op), z3, args, constants);
      } catch (const Error& e) {
        covered = false;
        break;
      }
      for (size_t k = 0; k < n.outputs.size(); ++k) vals[n.outputs[k]] = outs[k];
    }
    if (!covered) continue;
    at::Tensor expected = Executor(g).Run(inputs)[0].to(at::kDouble).contiguous();
    const SymTensor& got = vals[g.outputs()[0]];
    ASSERT_EQ(got.shape, Shape(expected.sizes().begin(), expected.sizes().end()));
    // Semantics with uninterpreted functions (Sqrt) have no numbers to compare.
    bool numeric = true;
    for (const z3::expr& e : got.v) numeric = numeric && e.simplify().is_numeral();
    if (!numeric) continue;
    for (int64_t i = 0; i < expected.numel(); ++i) {
      std::string text = got.v[i].simplify().get_decimal_string(9);
      if (!text.empty() && text.back() == '?') text.pop_back();
      ASSERT_NEAR(std::stod(text), expected.data_ptr<double>()[i], 1e-4) << "element " << i;
    }
    for (NodeId id = 0; id < g.num_nodes(); ++id) ops_checked.insert(g.node(id).op);
    ++checked;
    cases_checked.insert(oc.name);
  }
  EXPECT_GE(checked, 20);
  // Batched (broadcast) and vector MatMul included.
  for (const char* name : {"MatMul_batched_broadcast", "MatMul_vector_matrix", "MatMul_matrix_vector"})
    EXPECT_TRUE(cases_checked.count(name)) << name << " was not checked";
  for (const char* name : {"Gemm_trans_alpha_beta", "Gemm_no_bias", "Div_broadcast"})
    EXPECT_TRUE(cases_checked.count(name)) << name << " was not checked";
  for (const char* op : {"MatMul", "Gemm", "Div", "Transpose", "Conv", "Split", "Concat", "Reshape", "Clip", "Pow",
                         "ReduceMean", "HardSwish", "HardSigmoid"})
    EXPECT_TRUE(ops_checked.count(op)) << op << " has symbolic semantics but no case checked them";
}

}  // namespace
}  // namespace rlflow

namespace rlflow {
namespace {

// The commutativity trait (what the matcher and the generator use) agrees
// with the kernels: every two-input op that runs on two [3, 4] float tensors
// computes the same with its inputs swapped exactly when it is marked
// commutative.
TEST(OpTraits, CommutativeExactlyWhenTheKernelIs) {
  int checked = 0, commutative = 0;
  for (const OpDef* def : OpRegistry::Global().All()) {
    if (def->min_inputs > 2 || def->max_inputs < 2 || !def->domain.empty()) continue;
    GraphBuilder b(3);
    ValueId x = b.Input("x", {3, 4}), y = b.Input("y", {3, 4});
    Graph ab, ba;
    try {
      ab = b.Build({b.Op(def->name, {x, y})});
      GraphBuilder c(3);
      ValueId x2 = c.Input("x", {3, 4}), y2 = c.Input("y", {3, 4});
      ba = c.Build({c.Op(def->name, {y2, x2})});
    } catch (const Error&) {
      continue;  // not an op of two [3, 4] tensors
    }
    std::vector<at::Tensor> in = RandomInputs(ab, 7);
    at::Tensor p, q;
    try {
      p = Executor(ab).Run(in)[0];
      q = Executor(ba).Run(in)[0];
    } catch (const std::exception&) {
      continue;  // e.g. Clip's bounds must be scalars
    }
    bool same = p.sizes() == q.sizes() && at::equal(p, q);
    EXPECT_EQ(def->commutative, same) << def->name;
    ++checked;
    commutative += def->commutative;
  }
  EXPECT_GE(checked, 10);
  EXPECT_GE(commutative, 6);  // Add, Mul, Max, Min, Equal, Sum, Mean
}

}  // namespace
}  // namespace rlflow
