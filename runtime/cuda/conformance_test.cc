// Every registry operator on the CUDA backend (on the device, or on the
// host where it has no device kernel), against the CPU executor (the
// numerical reference), on random inputs: the cases of
// core/op_cases_testing.h, then the device kernels' own edge cases. Where
// there is no GPU each test reports itself skipped, by name, with the
// probe's reason.
#include <ATen/ops/equal.h>
#include <gtest/gtest.h>

#include <functional>

#include "core/graph_builder.h"
#include "core/op_cases_testing.h"
#include "runtime/cuda/device.h"
#include "runtime/cuda/executor.h"
#include "runtime/executor.h"

namespace rlflow::cuda {
namespace {

class CudaConformance : public ::testing::Test {
 protected:
  void SetUp() override {
    DeviceInfo d = ProbeDevice();
    if (!d.available) GTEST_SKIP() << "skipped: " << d.error;
  }
  // Runs `g` on both executors and compares every output: floats within
  // `tolerance` (relative to the largest reference value), other types
  // exactly.
  void Check(const Graph& g, double tolerance = 1e-4) {
    std::vector<at::Tensor> inputs = RandomInputs(g, 7);
    std::vector<at::Tensor> want = Executor(g).Run(inputs);
    CudaExecutor e(g);
    e.SetInputs(inputs);
    e.Run();
    std::vector<at::Tensor> got = e.Outputs();
    ASSERT_EQ(got.size(), want.size());
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_EQ(got[k].sizes(), want[k].sizes());
      EXPECT_EQ(got[k].scalar_type(), want[k].scalar_type());
      if (want[k].is_floating_point())
        EXPECT_LT(RelativeError(got[k], want[k]), tolerance) << "output " << k;
      else
        EXPECT_TRUE(at::equal(got[k], want[k])) << "output " << k;
    }
  }
  Graph One(const std::string& op, const std::vector<Shape>& inputs, AttributeMap attrs = {}) {
    GraphBuilder b(3);
    std::vector<ValueId> in;
    for (size_t k = 0; k < inputs.size(); ++k) in.push_back(b.Input("x" + std::to_string(k), inputs[k]));
    return b.Build({b.Op(op, in, std::move(attrs))});
  }
};

TEST_F(CudaConformance, EveryOperatorCase) {
  int run = 0, not_static = 0;
  for (const testing::OpCase& c : testing::OpCases()) {
    GraphBuilder b(3, 17, c.name);
    Graph g = b.Build({c.build(b)});
    // The backend runs graphs whose every value has a static shape, as the
    // optimiser's are once imported (shapes bound, shape arithmetic folded);
    // a case that computes a shape at run time is left to the CPU.
    bool is_static = true;
    for (NodeId id : g.TopologicalOrder())
      for (ValueId v : g.node(id).outputs) is_static = is_static && (v == kNoValue || g.value(v).type.IsStatic());
    for (ValueId v : g.inputs()) is_static = is_static && g.value(v).type.IsStatic();
    if (!is_static) {
      ++not_static;
      continue;
    }
    SCOPED_TRACE(c.name);
    Check(g, 1e-3);
    ++run;
  }
  EXPECT_GE(run, 140) << not_static << " cases have values of unknown shape";
}

TEST_F(CudaConformance, Unary) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf", "HardSwish", "Floor", "Ceil", "Elu",
                         "Selu", "Celu", "Softplus", "Softsign", "ThresholdedRelu"})
    Check(One(op, {{2, 3, 5}}));
  Check(One("LeakyRelu", {{4, 5}}, {{"alpha", Attribute::Float(0.2f)}}));
  Check(One("HardSigmoid", {{4, 5}}, {{"alpha", Attribute::Float(0.2f)}, {"beta", Attribute::Float(0.5f)}}));
  GraphBuilder b(3);
  ValueId x = b.Input("x", {3, 4});
  Check(b.Build({b.Op("Clip", {x, b.ConstFloat(-0.5f), b.ConstFloat(0.5f)})}));
}

TEST_F(CudaConformance, BinaryWithBroadcasting) {
  for (const char* op : {"Add", "Sub", "Mul", "Div", "Max", "Min"}) {
    Check(One(op, {{2, 3, 4}, {2, 3, 4}}));
    Check(One(op, {{2, 3, 4}, {3, 1}}));
    Check(One(op, {{4}, {2, 3, 4}}));
  }
}

TEST_F(CudaConformance, MatMulAndGemm) {
  Check(One("MatMul", {{2, 3, 4, 5}, {5, 6}}));
  Check(One("MatMul", {{2, 4, 5}, {2, 5, 6}}));
  Check(One("MatMul", {{1, 4, 5}, {3, 5, 6}}));
  GraphBuilder b(3);
  ValueId a = b.Input("a", {7, 3});
  ValueId w = b.Weight("w", {5, 3}, 0.3f);
  ValueId c = b.Weight("c", {5}, 0.3f);
  Check(b.Build(
      {b.Op("Gemm", {a, w, c},
            {{"transB", Attribute::Int(1)}, {"alpha", Attribute::Float(2.0f)}, {"beta", Attribute::Float(0.5f)}})}));
}

TEST_F(CudaConformance, ConvolutionsBothWays) {
  auto conv = [&](const Shape& x, const Shape& w, AttributeMap attrs) {
    GraphBuilder b(3);
    ValueId in = b.Input("x", x);
    Check(b.Build({b.Op("Conv", {in, b.Weight("w", w, 0.2f), b.Weight("b", {w[0]}, 0.2f)}, std::move(attrs))}), 1e-3);
  };
  conv({2, 8, 14, 14}, {16, 8, 3, 3}, {{"pads", Attribute::Ints({1, 1, 1, 1})}, {"strides", Attribute::Ints({2, 2})}});
  conv({2, 8, 7, 7}, {16, 8, 1, 1}, {});  // the cuBLAS path
  conv({1, 8, 9, 9}, {8, 1, 3, 3}, {{"group", Attribute::Int(8)}, {"pads", Attribute::Ints({1, 1, 1, 1})}});
  conv({1, 4, 12, 12}, {4, 4, 3, 3}, {{"dilations", Attribute::Ints({2, 2})}});
  conv({1, 2, 10}, {4, 2, 3}, {{"pads", Attribute::Ints({1, 1})}});
}

TEST_F(CudaConformance, PoolingSoftmaxBatchNorm) {
  Check(One("MaxPool", {{1, 4, 9, 9}},
            {{"kernel_shape", Attribute::Ints({3, 3})},
             {"strides", Attribute::Ints({2, 2})},
             {"pads", Attribute::Ints({1, 1, 1, 1})}}));
  Check(One("AveragePool", {{1, 4, 8, 8}},
            {{"kernel_shape", Attribute::Ints({3, 3})}, {"pads", Attribute::Ints({1, 1, 1, 1})}}));
  Check(One("AveragePool", {{1, 4, 8, 8}},
            {{"kernel_shape", Attribute::Ints({3, 3})},
             {"pads", Attribute::Ints({1, 1, 1, 1})},
             {"count_include_pad", Attribute::Int(1)}}));
  Check(One("GlobalAveragePool", {{2, 4, 7, 5}}));
  Check(One("Softmax", {{2, 3, 4}}, {{"axis", Attribute::Int(1)}}));
  Check(One("Softmax", {{2, 3, 4}}));
  GraphBuilder b(3);
  std::vector<ValueId> in = {b.Input("x", {2, 3, 4, 5})};
  for (const char* name : {"scale", "bias", "mean"}) in.push_back(b.Weight(name, {3}, 0.5f));
  in.push_back(b.Uniform("var", {3}, 0.5f, 1.5f));
  Check(b.Build({b.Op("BatchNormalization", in)}));
}

TEST_F(CudaConformance, GatherAndLayerNorm) {
  GraphBuilder b(3);
  ValueId table = b.Weight("table", {50, 16}, 0.5f);
  ValueId ids = b.Input("ids", {2, 7}, DType::kInt64);
  Check(b.Build({b.Op("Gather", {table, ids})}));
  GraphBuilder b2(3);
  ValueId x = b2.Input("x", {2, 5, 768});
  Check(b2.Build({b2.Op("LayerNormalization", {x, b2.Weight("s", {768}, 0.5f), b2.Weight("b", {768}, 0.5f)})}), 1e-4);
}

TEST_F(CudaConformance, DataMovement) {
  Check(One("Transpose", {{2, 3, 4}}, {{"perm", Attribute::Ints({2, 0, 1})}}));
  Check(One("Concat", {{2, 3}, {2, 5}}, {{"axis", Attribute::Int(1)}}));
  Check(One("Flatten", {{2, 3, 4}}, {{"axis", Attribute::Int(1)}}));
  GraphBuilder b(3);
  ValueId x = b.Input("x", {2, 3, 4});
  Check(b.Build({b.Op("Reshape", {x, b.ConstInts({6, 4})})}));
}

TEST_F(CudaConformance, ReductionsOverAnyAxes) {
  for (const char* op : {"ReduceMean", "ReduceMax", "ReduceMin", "ReduceProd", "ReduceSumSquare", "ReduceL1",
                         "ReduceL2", "ReduceLogSumExp"}) {
    SCOPED_TRACE(op);
    Check(One(op, {{3, 4, 5}}, {{"axes", Attribute::Ints({-1})}}));
    Check(One(op, {{3, 4, 5}}, {{"axes", Attribute::Ints({0, 2})}, {"keepdims", Attribute::Int(0)}}));
    Check(One(op, {{2, 600}}));  // every axis: one block strides over more elements than it has threads
  }
  GraphBuilder b(3);
  ValueId x = b.Input("x", {2, 3, 4});
  Check(b.Build({b.Op("ReduceSum", {x, b.ConstInts({1})}), b.Op("ReduceSum", {x})}));
}

TEST_F(CudaConformance, SliceSplitExpandPadWhere) {
  GraphBuilder b(3);
  ValueId x = b.Input("x", {4, 5, 6});
  std::vector<ValueId> outs = {
      b.Op("Slice", {x, b.ConstInts({1, -1}), b.ConstInts({3, 0}), b.ConstInts({0, 2}), b.ConstInts({1, -2})}),
      b.Op("Expand", {b.Input("e", {5, 1}), b.ConstInts({2, 5, 3})}),
      b.Op("Pad", {x, b.ConstInts({0, 1, -1, 1, 0, 2}), b.ConstFloat(0.25f)}),
      b.Op("Where", {b.Input("c", {5, 1}, DType::kBool), b.Input("a", {4, 5, 6}), b.Input("w", {6})})};
  for (ValueId v : b.OpN("Split", {x, b.ConstInts({2, 4})}, 2, {{"axis", Attribute::Int(2)}})) outs.push_back(v);
  Check(b.Build(outs));
}

TEST_F(CudaConformance, HostFallbackBetweenDeviceNodes) {
  // TopK and an int64 Add run on the host between device nodes.
  GraphBuilder b(3);
  ValueId x = b.Input("x", {3, 8});
  std::vector<ValueId> top = b.OpN("TopK", {b.Op("Relu", {x}), b.ConstInts({3})}, 2);
  ValueId idx = b.Op("Add", {top[1], top[1]});
  Graph g = b.Build({b.Op("Sigmoid", {top[0]}), idx});
  Check(g);
  CudaExecutor e(g);
  EXPECT_EQ(e.HostNodes().size(), 2u);
}

}  // namespace
}  // namespace rlflow::cuda
