// CPU executor: deterministic inputs, index bounds, type checks, errors.
#include "runtime/executor.h"

#include <ATen/Context.h>
#include <ATen/TensorOperators.h>
#include <ATen/ops/allclose.h>
#include <ATen/ops/conv2d.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/equal.h>
#include <ATen/ops/isfinite.h>
#include <ATen/ops/randn.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <gtest/gtest.h>

#include <chrono>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/ops/kernel.h"

namespace rlflow {
namespace {

Graph Embedding() {
  GraphBuilder b(1);
  ValueId ids = b.Input("ids", {2, 50}, DType::kInt64);
  ValueId x = b.Input("x", {2, 50, 3});
  ValueId table = b.Weight("table", {7, 3}, 1.0f);
  ValueId e = b.Op("Gather", {table, ids});
  return b.Build({b.Op("Add", {e, x})});
}

TEST(Executor, RandomInputsAreDeterministicAndSeeded) {
  Graph g = Embedding();
  auto a = RandomInputs(g, 5), b = RandomInputs(g, 5), c = RandomInputs(g, 6);
  ASSERT_EQ(a.size(), 2u);
  EXPECT_TRUE(at::equal(a[0], b[0]));
  EXPECT_TRUE(at::equal(a[1], b[1]));
  EXPECT_FALSE(at::equal(a[1], c[1]));
  // Standard normal floats.
  EXPECT_NEAR(a[1].mean().item<double>(), 0.0, 0.3);
  EXPECT_NEAR(a[1].std().item<double>(), 1.0, 0.3);
  // Gather indices stay inside the table (7 rows) and use all of it.
  EXPECT_GE(a[0].min().item<int64_t>(), 0);
  EXPECT_EQ(a[0].max().item<int64_t>(), 6);
}

// An attention mask as Hugging Face's exports use it: (1 - mask) times the
// float's lowest value, added to the scores before Softmax. Filled like any
// integer input (0 to 9), 1 - mask is negative, the bias overflows to
// +infinity and every output is NaN; a mask is filled with 0 and 1.
TEST(Executor, AttentionMasksAreFilledWithZerosAndOnes) {
  GraphBuilder b(1, 14, "g");
  ValueId scores = b.Input("scores", {2, 4, 8, 8});
  ValueId mask = b.Input("attention_mask", {2, 8}, DType::kInt64);
  ValueId m = b.Op("Unsqueeze", {mask, b.ConstInts({1, 2})});
  m = b.Op("Cast", {m}, {{"to", Attribute::Int(1)}});
  m = b.Op("Sub", {b.ConstFloat(1.0f), m}, {}, "one_minus_mask");
  m = b.Op("Mul", {m, b.ConstFloat(std::numeric_limits<float>::lowest())}, {}, "bias");
  Graph g = b.Build({b.Op("Softmax", {b.Op("Add", {scores, m})}, {{"axis", Attribute::Int(-1)}})});
  std::vector<std::string> how;
  auto in = RandomInputs(g, 1, &how);
  ASSERT_EQ(how.size(), 2u);
  EXPECT_EQ(how[1], "random 0 or 1 (a mask: 1 - x in Sub 'one_minus_mask', a masking bias in Mul 'bias')");
  EXPECT_EQ(in[1].min().item<int64_t>(), 0);
  EXPECT_EQ(in[1].max().item<int64_t>(), 1);
  EXPECT_TRUE(at::isfinite(Executor(g).Run(in)[0]).all().item<bool>());
  // A float input taken from 1 is a mask only with the bias after it (an
  // image inverted is not).
  GraphBuilder f(1, 14, "f");
  ValueId image = f.Input("image", {1, 3, 4, 4});
  Graph inverted = f.Build({f.Op("Relu", {f.Op("Sub", {f.ConstFloat(1.0f), image})})});
  RandomInputs(inverted, 1, &how);
  EXPECT_EQ(how[0], "random, N(0, 1)");
  GraphBuilder h(1, 14, "h");
  ValueId fmask = h.Input("float_mask", {2, 8});
  Graph masked = h.Build({h.Op("Mul", {h.Op("Sub", {h.ConstFloat(1.0f), fmask}), h.ConstFloat(-10000.0f)})});
  auto fin = RandomInputs(masked, 1, &how);
  EXPECT_EQ(how[0], "random 0 or 1 (a mask: 1 - x in Sub '" + masked.node(0).name + "', a masking bias in Mul '" +
                        masked.node(1).name + "')");
  EXPECT_TRUE(at::equal(fin[0], fin[0].round()));
}

// An input marked arrives_permuted (a node cut out of a graph where it reads
// a transposed tensor) is fed as a permuted view of the same values.
TEST(Executor, PermutedInputsAreFedAsViews) {
  GraphBuilder b(1, 17, "g");
  ValueId x = b.Input("x", {2, 3, 4});
  Graph g = b.Build({b.Op("Relu", {x})});
  Graph marked = g;
  marked.mutable_value(marked.inputs()[0]).arrives_permuted = true;
  auto plain = RandomInputs(g, 3), permuted = RandomInputs(marked, 3);
  EXPECT_TRUE(plain[0].is_contiguous());
  EXPECT_FALSE(permuted[0].is_contiguous());
  EXPECT_EQ(permuted[0].sizes(), plain[0].sizes());
  EXPECT_TRUE(at::equal(permuted[0], plain[0]));
  EXPECT_EQ(permuted[0].stride(0), 1);  // dimensions in reverse order in memory
  Executor e(marked);
  EXPECT_TRUE(at::equal(e.Run(permuted)[0], at::relu(plain[0])));
}

TEST(Executor, RunsAndMatchesHandComputation) {
  Graph g = Embedding();
  auto in = RandomInputs(g, 1);
  auto out = Executor(g).Run(in);
  ASSERT_EQ(out.size(), 1u);
  at::Tensor table = at::empty({7, 3}, at::kFloat);
  std::memcpy(table.data_ptr(), g.value(g.FindValue("table")).initializer->data(), 7 * 3 * 4);
  at::Tensor expected = table.index_select(0, in[0].reshape({-1})).reshape({2, 50, 3}) + in[1];
  EXPECT_TRUE(at::allclose(out[0], expected));
}

// Per-node times cover the run: each node's inputs, kernel, output checks
// and the release of its outputs are inside its time, so the nodes add up
// to nearly all of a run (and never more).
TEST(Executor, NodeTimesCoverTheRun) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {1, 16, 256, 256});
  for (int k = 0; k < 12; ++k) x = b.Op(k % 2 ? "Relu" : "Sigmoid", {x});
  Graph g = b.Build({x});
  Executor exec(g);
  auto in = RandomInputs(g, 1);
  std::vector<double> node_ms;
  exec.Run(in, &node_ms);
  auto t0 = std::chrono::steady_clock::now();
  exec.Run(in, &node_ms);
  double run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(node_ms.size(), static_cast<size_t>(g.num_nodes()));
  double sum = 0;
  for (double ms : node_ms) {
    EXPECT_GT(ms, 0.0);
    sum += ms;
  }
  EXPECT_LE(sum, run_ms);
  EXPECT_GE(sum, 0.8 * run_ms);
}

// A graph output that is a view (Transpose returns one) is copied into its
// own layout when the run hands it out: its producer's time, not a cost
// outside every node (which the cost model spreads over all nodes).
TEST(Executor, AnOutputViewsCopyIsItsProducersTime) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {1024, 1024});
  Graph g = b.Build({b.Op("Transpose", {x}, {{"perm", Attribute::Ints({1, 0})}})});
  Executor exec(g);
  auto in = RandomInputs(g, 1);
  std::vector<double> node_ms;
  exec.Run(in, &node_ms);
  auto t0 = std::chrono::steady_clock::now();
  auto out = exec.Run(in, &node_ms);
  double run_ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(out.size(), 1u);
  EXPECT_TRUE(out[0].is_contiguous());
  EXPECT_TRUE(at::equal(out[0], in[0].t()));
  ASSERT_EQ(node_ms.size(), 1u);
  EXPECT_LE(node_ms[0], run_ms);
  EXPECT_GE(node_ms[0], 0.8 * run_ms);
}

TEST(Executor, RejectsWrongInputShapes) {
  Graph g = Embedding();
  auto in = RandomInputs(g, 1);
  in[1] = at::zeros({2, 50, 4});
  try {
    Executor(g).Run(in);
    FAIL() << "no error";
  } catch (const Error& e) {
    EXPECT_NE(std::string(e.what()).find("graph input 'x' has shape [2,50,4]"), std::string::npos) << e.what();
  }
}

TEST(Executor, KernelErrorsNameTheNode) {
  GraphBuilder b(1);
  ValueId ids = b.Input("ids", {3}, DType::kInt64);
  ValueId table = b.Weight("table", {4, 2}, 1.0f);
  Graph g = b.Build({b.Op("Gather", {table, ids}, {}, "lookup")});
  std::vector<at::Tensor> in = {at::tensor({0, 9, 1}, at::kLong)};
  try {
    Executor(g).Run(in);
    FAIL() << "no error";
  } catch (const Error& e) {
    std::string msg = e.what();
    EXPECT_NE(msg.find("'lookup' (Gather)"), std::string::npos) << msg;
    EXPECT_NE(msg.find("out of range"), std::string::npos) << msg;
  }
}

// float16 and bfloat16 tensors: ATen runs few CPU operators in them, so a
// node computes in float32 and rounds its half outputs back (as ONNX
// Runtime's CPU provider runs a float16 model), not kept opaque.
TEST(Executor, HalfNodesComputeInFloat32AndRoundTheirOutputs) {
  for (at::ScalarType half : {at::kHalf, at::kBFloat16}) {
    const DType dtype = FromAtenType(half);
    at::manual_seed(3);
    at::Tensor w = at::randn({4, 3, 3, 3}).to(half), bias = at::randn({4}).to(half);
    GraphBuilder b(1, 13, "g");
    ValueId x = b.Input("x", {1, 3, 8, 8}, dtype);
    ValueId y = b.Op("Conv", {x, b.Const(FromAten(w), "w")}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
    y = b.Op("Relu", {b.Op("Add", {y, b.Const(FromAten(bias.reshape({1, 4, 1, 1})), "bias")})});
    Graph g = b.Build({y});
    ASSERT_EQ(g.value(g.outputs()[0]).type.dtype, dtype);
    at::Tensor in = at::randn({1, 3, 8, 8}).to(half);
    std::vector<at::Tensor> out = Executor(g).Run({in});
    ASSERT_EQ(out.size(), 1u);
    EXPECT_EQ(out[0].scalar_type(), half);
    // Each node rounded to the half type: the convolution, then the sum.
    at::Tensor conv = at::conv2d(in.to(at::kFloat), w.to(at::kFloat), {}, 1, 1).to(half);
    at::Tensor want =
        at::relu((conv.to(at::kFloat) + bias.to(at::kFloat).reshape({1, 4, 1, 1})).to(half).to(at::kFloat));
    EXPECT_TRUE(at::allclose(out[0].to(at::kFloat), want.to(at::kFloat), half == at::kHalf ? 1e-3 : 1e-2, 1e-3))
        << (out[0].to(at::kFloat) - want.to(at::kFloat)).abs().max().item<float>();
  }
}

TEST(Executor, RelativeErrorIsNormwise) {
  at::Tensor ref = at::tensor({1.0, -4.0, 0.0});
  EXPECT_DOUBLE_EQ(RelativeError(ref, ref), 0.0);
  EXPECT_DOUBLE_EQ(RelativeError(at::tensor({1.0, -4.0, 0.4}), ref), 0.1);
  EXPECT_TRUE(std::isinf(RelativeError(at::tensor({1.0, NAN, 0.0}), ref)));
  EXPECT_TRUE(std::isinf(RelativeError(at::tensor({1.0, 2.0}), ref)));
}

}  // namespace
}  // namespace rlflow

namespace rlflow {
namespace {

// NaN and infinities in the reference must be matched position by position;
// the error is measured over the finite elements.
TEST(RelativeError, NonFiniteReferenceValues) {
  const double nan = std::numeric_limits<double>::quiet_NaN(), inf = std::numeric_limits<double>::infinity();
  at::Tensor ref = at::tensor({1.0, nan, inf, -2.0});
  EXPECT_EQ(RelativeError(ref.clone(), ref), 0.0);
  EXPECT_NEAR(RelativeError(at::tensor({1.0, nan, inf, -2.2}), ref), 0.1, 1e-9);
  EXPECT_TRUE(std::isinf(RelativeError(at::tensor({1.0, 0.0, inf, -2.0}), ref)));   // NaN lost
  EXPECT_TRUE(std::isinf(RelativeError(at::tensor({1.0, nan, -inf, -2.0}), ref)));  // wrong infinity
  EXPECT_TRUE(std::isinf(RelativeError(at::tensor({1.0, nan, inf, nan}), ref)));    // new NaN
}

}  // namespace
}  // namespace rlflow
