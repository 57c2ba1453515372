// Every operator the CUDA backend runs, against the CPU executor (the
// numerical reference), on random inputs. Where there is no GPU each test
// reports itself skipped, by name, with the probe's reason.
#include <gtest/gtest.h>

#include <functional>

#include "core/graph_builder.h"
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
  // Runs `g` on both executors and compares every output.
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
      EXPECT_LT(RelativeError(got[k], want[k]), tolerance) << "output " << k;
    }
  }
  Graph One(const std::string& op, const std::vector<Shape>& inputs, AttributeMap attrs = {}) {
    GraphBuilder b(3);
    std::vector<ValueId> in;
    for (size_t k = 0; k < inputs.size(); ++k) in.push_back(b.Input("x" + std::to_string(k), inputs[k]));
    return b.Build({b.Op(op, in, std::move(attrs))});
  }
};

TEST_F(CudaConformance, Unary) {
  for (const char* op : {"Relu", "Sigmoid", "Tanh", "Exp", "Neg", "Abs", "Erf", "HardSwish"})
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

}  // namespace
}  // namespace rlflow::cuda
