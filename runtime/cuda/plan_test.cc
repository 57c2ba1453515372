// The CUDA backend's plans, on machines without a GPU: which library call
// and which descriptor values each node gets, from its shapes and
// attributes. Expected values are worked out by hand from the definitions
// (row-major products, cuDNN's output-size formula, numpy broadcasting).
#include "runtime/cuda/plan.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"
#include "core/graph_builder.h"
#include "core/op_cases_testing.h"
#include "runtime/executor.h"

namespace rlflow::cuda {
namespace {

TEST(GemmPlan, MatMulBatchesAndBroadcastsAsNumpy) {
  // [2,3,4,5] x [5,6]: 6 products of [4,5] x [5,6], b shared.
  GemmPlan p = PlanMatMul({2, 3, 4, 5}, {5, 6});
  EXPECT_EQ(p.m, 4);
  EXPECT_EQ(p.k, 5);
  EXPECT_EQ(p.n, 6);
  EXPECT_EQ(p.batch, 6);
  EXPECT_EQ(p.stride_a, 20);
  EXPECT_EQ(p.stride_b, 0);
  EXPECT_EQ(p.stride_c, 24);
  EXPECT_EQ(p.lda, 5);
  EXPECT_EQ(p.ldb, 6);
  EXPECT_EQ(p.ldc, 6);
  // A vector on the left is a row: [5] x [5,6] = [6].
  p = PlanMatMul({5}, {5, 6});
  EXPECT_EQ(p.m, 1);
  EXPECT_EQ(p.n, 6);
  EXPECT_EQ(p.batch, 1);
  // a's batch of one against b's three.
  p = PlanMatMul({1, 4, 5}, {3, 5, 6});
  EXPECT_EQ(p.batch, 3);
  EXPECT_EQ(p.stride_a, 0);
  EXPECT_EQ(p.stride_b, 30);
  // Equal batches.
  p = PlanMatMul({2, 4, 5}, {2, 5, 6});
  EXPECT_EQ(p.batch, 2);
  EXPECT_EQ(p.stride_a, 20);
  EXPECT_EQ(p.stride_b, 30);
  // Batches that broadcast dimension by dimension ([3,1] against [1,2])
  // are not one strided batch.
  EXPECT_THROW(PlanMatMul({3, 1, 4, 5}, {1, 2, 5, 6}), Unsupported);
  EXPECT_THROW(PlanMatMul({4, 5}, {4, 6}), Error);  // inner dimensions differ
}

TEST(GemmPlan, GemmTransposesAndBias) {
  // A [7,3], B stored [5,3] with transB: C [7,5]; leading dimensions are
  // the stored widths.
  GemmPlan p = PlanGemm({7, 3}, {5, 3}, false, true, 2.0f, 0.5f, true);
  EXPECT_EQ(p.m, 7);
  EXPECT_EQ(p.k, 3);
  EXPECT_EQ(p.n, 5);
  EXPECT_TRUE(p.trans_b);
  EXPECT_EQ(p.lda, 3);
  EXPECT_EQ(p.ldb, 3);
  EXPECT_EQ(p.ldc, 5);
  EXPECT_FLOAT_EQ(p.alpha, 2.0f);
  EXPECT_FLOAT_EQ(p.beta, 0.5f);
  // Without C, beta does not apply.
  EXPECT_FLOAT_EQ(PlanGemm({3, 7}, {3, 5}, true, false, 1.0f, 0.5f, false).beta, 0.0f);
  EXPECT_EQ(PlanGemm({3, 7}, {3, 5}, true, false, 1.0f, 1.0f, false).m, 7);
}

Graph ConvGraph(const Shape& x, const Shape& w, AttributeMap attrs, bool bias = true) {
  GraphBuilder b(1);
  std::vector<ValueId> in = {b.Input("x", x), b.Weight("w", w, 0.1f)};
  if (bias) in.push_back(b.Weight("b", {w[0]}, 0.1f));
  return b.Build({b.Op("Conv", in, std::move(attrs))});
}

NodeId OnlyNode(const Graph& g) { return g.TopologicalOrder().at(0); }

TEST(ConvPlan, CudnnDescriptorsFromShapesAndAttributes) {
  Graph g = ConvGraph({2, 8, 14, 14}, {16, 8, 3, 3},
                      {{"pads", Attribute::Ints({1, 1, 1, 1})}, {"strides", Attribute::Ints({2, 2})}});
  ConvPlan p = PlanConv(g, OnlyNode(g));
  EXPECT_EQ(p.method, ConvPlan::Method::kCudnn);
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.c, 8);
  EXPECT_EQ(p.k, 16);
  EXPECT_EQ(p.r, 3);
  EXPECT_EQ(p.pad_h, 1);
  EXPECT_EQ(p.stride_w, 2);
  // (14 + 2 - 3) / 2 + 1 = 7.
  EXPECT_EQ(p.out_h, 7);
  EXPECT_EQ(p.out_w, 7);
  EXPECT_TRUE(p.has_bias);
  // The algorithm cache key tells apart what cuDNN does differently.
  Graph g2 = ConvGraph({2, 8, 14, 14}, {16, 8, 3, 3}, {{"pads", Attribute::Ints({1, 1, 1, 1})}});
  EXPECT_NE(PlanConv(g2, OnlyNode(g2)).Key(), p.Key());
}

TEST(ConvPlan, OneByOneConvolutionIsOneBatchedProduct) {
  Graph g = ConvGraph({2, 8, 7, 7}, {16, 8, 1, 1}, {}, /*bias=*/false);
  ConvPlan p = PlanConv(g, OnlyNode(g));
  EXPECT_EQ(p.method, ConvPlan::Method::kGemm);
  EXPECT_FALSE(p.has_bias);
  // Y_i [16, 49] = W [16, 8] X_i [8, 49], W shared by both images.
  EXPECT_EQ(p.gemm.m, 16);
  EXPECT_EQ(p.gemm.k, 8);
  EXPECT_EQ(p.gemm.n, 49);
  EXPECT_EQ(p.gemm.batch, 2);
  EXPECT_EQ(p.gemm.stride_a, 0);
  EXPECT_EQ(p.gemm.stride_b, 8 * 49);
  EXPECT_EQ(p.gemm.stride_c, 16 * 49);
  // Strided or grouped 1x1 convolutions go to cuDNN.
  Graph s = ConvGraph({2, 8, 7, 7}, {16, 8, 1, 1}, {{"strides", Attribute::Ints({2, 2})}});
  EXPECT_EQ(PlanConv(s, OnlyNode(s)).method, ConvPlan::Method::kCudnn);
  Graph d = ConvGraph({1, 8, 7, 7}, {8, 1, 3, 3}, {{"group", Attribute::Int(8)}});
  ConvPlan dp = PlanConv(d, OnlyNode(d));
  EXPECT_EQ(dp.method, ConvPlan::Method::kCudnn);
  EXPECT_EQ(dp.groups, 8);
}

TEST(ConvPlan, AsymmetricPaddingAndThreeDimensionsAreUnsupported) {
  // SAME_UPPER with an even kernel pads one side more.
  Graph g = ConvGraph({1, 2, 4, 4}, {2, 2, 2, 2}, {{"auto_pad", Attribute::String("SAME_UPPER")}});
  EXPECT_THROW(PlanConv(g, OnlyNode(g)), Unsupported);
  Graph g3 = ConvGraph({1, 2, 4, 4, 4}, {2, 2, 1, 1, 1}, {});
  EXPECT_THROW(PlanConv(g3, OnlyNode(g3)), Unsupported);
  // 1-D convolutions run as height-1 2-D ones.
  Graph g1 = ConvGraph({1, 2, 10}, {4, 2, 3}, {{"pads", Attribute::Ints({1, 1})}});
  ConvPlan p1 = PlanConv(g1, OnlyNode(g1));
  EXPECT_EQ(p1.h, 1);
  EXPECT_EQ(p1.r, 1);
  EXPECT_EQ(p1.s, 3);
  EXPECT_EQ(p1.pad_h, 0);
  EXPECT_EQ(p1.pad_w, 1);
  EXPECT_EQ(p1.out_w, 10);
}

Graph PoolGraph(const std::string& op, const Shape& x, AttributeMap attrs) {
  GraphBuilder b(1);
  return b.Build({b.Op(op, {b.Input("x", x)}, std::move(attrs))});
}

TEST(PoolPlan, WindowsModesAndOutputSizes) {
  Graph g = PoolGraph("MaxPool", {1, 4, 9, 9},
                      {{"kernel_shape", Attribute::Ints({3, 3})},
                       {"strides", Attribute::Ints({2, 2})},
                       {"pads", Attribute::Ints({1, 1, 1, 1})}});
  PoolPlan p = PlanPool(g, OnlyNode(g));
  EXPECT_TRUE(p.max);
  EXPECT_EQ(p.win_h, 3);
  EXPECT_EQ(p.pad_w, 1);
  EXPECT_EQ(p.out_h, 5);  // (9 + 2 - 3) / 2 + 1
  Graph a = PoolGraph("AveragePool", {1, 4, 8, 8},
                      {{"kernel_shape", Attribute::Ints({2, 2})},
                       {"strides", Attribute::Ints({2, 2})},
                       {"count_include_pad", Attribute::Int(1)}});
  PoolPlan ap = PlanPool(a, OnlyNode(a));
  EXPECT_FALSE(ap.max);
  EXPECT_TRUE(ap.count_include_pad);
  EXPECT_EQ(ap.out_w, 4);
  Graph gap = PoolGraph("GlobalAveragePool", {2, 4, 7, 5}, {});
  PoolPlan gp = PlanPool(gap, OnlyNode(gap));
  EXPECT_FALSE(gp.max);
  EXPECT_EQ(gp.win_h, 7);
  EXPECT_EQ(gp.win_w, 5);
  EXPECT_EQ(gp.out_h, 1);
  // ceil_mode: 8 with a window of 3 and stride 2 gives 4 outputs rounded
  // up, 3 rounded down (cuDNN's).
  Graph c = PoolGraph("MaxPool", {1, 1, 8, 8},
                      {{"kernel_shape", Attribute::Ints({3, 3})},
                       {"strides", Attribute::Ints({2, 2})},
                       {"ceil_mode", Attribute::Int(1)}});
  EXPECT_THROW(PlanPool(c, OnlyNode(c)), Unsupported);
}

TEST(BroadcastPlan, StridesAreZeroWhereAnInputBroadcasts) {
  BroadcastPlan p = PlanBroadcast({{2, 3, 4}, {3, 1}});
  EXPECT_EQ(p.out, (Shape{2, 3, 4}));
  EXPECT_EQ(p.numel, 24);
  EXPECT_FALSE(p.same_shapes);
  EXPECT_EQ(p.strides[0], (std::vector<int64_t>{12, 4, 1}));
  EXPECT_EQ(p.strides[1], (std::vector<int64_t>{0, 1, 0}));
  BroadcastPlan same = PlanBroadcast({{5, 6}, {5, 6}});
  EXPECT_TRUE(same.same_shapes);
  // A scalar operand: stride 0 everywhere.
  BroadcastPlan scalar = PlanBroadcast({{5, 6}, {}});
  EXPECT_EQ(scalar.strides[1], (std::vector<int64_t>{0, 0}));
  EXPECT_THROW(PlanBroadcast({{2, 3}, {4, 3}}), Error);
}

TEST(CopyPlan, TransposeAndConcat) {
  // [2,3,4] by perm [2,0,1] -> [4,2,3]; output index (i,j,k) reads input (j,k,i).
  CopyPlan t = PlanTranspose({2, 3, 4}, {2, 0, 1});
  EXPECT_EQ(t.shape, (Shape{4, 2, 3}));
  EXPECT_EQ(t.in_strides, (std::vector<int64_t>{1, 12, 4}));
  EXPECT_EQ(t.out_strides, (std::vector<int64_t>{6, 3, 1}));
  EXPECT_EQ(PlanTranspose({2, 3}, {}).in_strides, (std::vector<int64_t>{1, 3}));  // reversed by default
  std::vector<CopyPlan> c = PlanConcat({{2, 3}, {2, 5}}, -1);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(c[0].out_offset, 0);
  EXPECT_EQ(c[1].out_offset, 3);
  EXPECT_EQ(c[1].out_strides, (std::vector<int64_t>{8, 1}));
  EXPECT_EQ(c[1].in_strides, (std::vector<int64_t>{5, 1}));
}

TEST(SoftmaxAndBatchNormPlans, ViewsForCudnn) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 3, 4});
  Graph g = b.Build({b.Op("Softmax", {x}, {{"axis", Attribute::Int(1)}})});
  SoftmaxPlan s = PlanSoftmax(g, OnlyNode(g));
  EXPECT_EQ(s.outer, 2);
  EXPECT_EQ(s.dim, 3);
  EXPECT_EQ(s.inner, 4);
  EXPECT_FALSE(s.log);
  GraphBuilder b2(1);
  ValueId y = b2.Input("x", {2, 3, 4, 5, 6});
  std::vector<ValueId> in = {y};
  for (const char* name : {"scale", "bias", "mean", "var"}) in.push_back(b2.Uniform(name, {3}, 0.5f, 1.5f));
  Graph bn = b2.Build({b2.Op("BatchNormalization", in, {{"epsilon", Attribute::Float(1e-3f)}})});
  BatchNormPlan p = PlanBatchNorm(bn, OnlyNode(bn));
  EXPECT_EQ(p.n, 2);
  EXPECT_EQ(p.c, 3);
  EXPECT_EQ(p.h, 4);
  EXPECT_EQ(p.w, 30);
  EXPECT_NEAR(p.epsilon, 1e-3, 1e-9);
}

TEST(GatherAndLayerNormPlans, Views) {
  GraphBuilder b(1);
  ValueId table = b.Weight("table", {10, 4, 6}, 0.1f);
  ValueId ids = b.Input("ids", {2, 3}, DType::kInt64);
  Graph g = b.Build({b.Op("Gather", {table, ids}, {{"axis", Attribute::Int(1)}})});
  GatherPlan p = PlanGather(g, OnlyNode(g));
  EXPECT_EQ(p.outer, 10);
  EXPECT_EQ(p.axis_dim, 4);
  EXPECT_EQ(p.indices, 6);
  EXPECT_EQ(p.inner, 6);
  GraphBuilder b2(1);
  ValueId x = b2.Input("x", {2, 5, 8});
  Graph ln = b2.Build({b2.Op("LayerNormalization", {x, b2.Weight("s", {8}, 0.1f)}, {{"axis", Attribute::Int(-1)}})});
  LayerNormPlan l = PlanLayerNorm(ln, OnlyNode(ln));
  EXPECT_EQ(l.rows, 10);
  EXPECT_EQ(l.cols, 8);
  EXPECT_FALSE(l.has_bias);
  EXPECT_FLOAT_EQ(l.epsilon, 1e-5f);
}

// The node that computes the graph's first output.
NodeId Producer(const Graph& g) { return g.value(g.outputs()[0]).producer; }

TEST(CopyPlan, SliceWithNegativeStepsAndClamping) {
  // x [4,5,6]; axis 0 from 1 to 3; axis 2 from the last element backwards
  // in steps of 2 down to (not including) 0: elements 5, 3, 1.
  GraphBuilder b(1);
  ValueId x = b.Input("x", {4, 5, 6});
  Graph g = b.Build(
      {b.Op("Slice", {x, b.ConstInts({1, -1}), b.ConstInts({3, 0}), b.ConstInts({0, 2}), b.ConstInts({1, -2})})});
  CopyPlan p = PlanSlice(g, Producer(g));
  EXPECT_EQ(p.shape, (Shape{2, 5, 3}));
  EXPECT_EQ(p.in_offset, 1 * 30 + 5);
  EXPECT_EQ(p.in_strides, (std::vector<int64_t>{30, 6, -2}));
  EXPECT_EQ(p.out_strides, (std::vector<int64_t>{15, 3, 1}));
  EXPECT_EQ(p.out_offset, 0);
  // An end beyond the dimension is clamped: [2, 100) of 5 is 3 elements.
  GraphBuilder b2(1);
  ValueId x2 = b2.Input("x", {5});
  Graph g2 = b2.Build({b2.Op("Slice", {x2, b2.ConstInts({2}), b2.ConstInts({100})})});
  CopyPlan p2 = PlanSlice(g2, Producer(g2));
  EXPECT_EQ(p2.shape, (Shape{3}));
  EXPECT_EQ(p2.in_offset, 2);
}

TEST(CopyPlan, SplitExpandAndPad) {
  GraphBuilder b(1);
  ValueId x = b.Input("x", {2, 6});
  std::vector<ValueId> parts = b.OpN("Split", {x, b.ConstInts({2, 4})}, 2, {{"axis", Attribute::Int(1)}});
  Graph g = b.Build(parts);
  std::vector<CopyPlan> split = PlanSplit(g, Producer(g));
  ASSERT_EQ(split.size(), 2u);
  EXPECT_EQ(split[0].shape, (Shape{2, 2}));
  EXPECT_EQ(split[0].in_offset, 0);
  EXPECT_EQ(split[1].shape, (Shape{2, 4}));
  EXPECT_EQ(split[1].in_offset, 2);
  EXPECT_EQ(split[1].in_strides, (std::vector<int64_t>{6, 1}));
  EXPECT_EQ(split[1].out_strides, (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(split[1].output, 1);

  GraphBuilder e(1);
  Graph ge = e.Build({e.Op("Expand", {e.Input("x", {3, 1}), e.ConstInts({2, 1, 4})})});
  CopyPlan expand = PlanExpand(ge, Producer(ge));
  EXPECT_EQ(expand.shape, (Shape{2, 3, 4}));
  EXPECT_EQ(expand.in_strides, (std::vector<int64_t>{0, 1, 0}));

  // x [2,3] padded by (0, 1) before and (1, -1) after: y [3,3]; the first
  // two columns of x land at row 0, column 1; the rest of y is the value.
  GraphBuilder p(1);
  ValueId px = p.Input("x", {2, 3});
  Graph gp = p.Build({p.Op("Pad", {px, p.ConstInts({0, 1, 1, -1}), p.ConstFloat(2.5f)})});
  PadPlan pad = PlanPad(gp, Producer(gp));
  EXPECT_FLOAT_EQ(pad.value, 2.5f);
  EXPECT_EQ(pad.interior.shape, (Shape{2, 2}));
  EXPECT_EQ(pad.interior.in_offset, 0);
  EXPECT_EQ(pad.interior.out_offset, 1);
  EXPECT_EQ(pad.interior.in_strides, (std::vector<int64_t>{3, 1}));
  EXPECT_EQ(pad.interior.out_strides, (std::vector<int64_t>{3, 1}));
  // A crop at the front reads from further in: pads (0, -1) before.
  GraphBuilder c(1);
  Graph gc = c.Build({c.Op("Pad", {c.Input("x", {2, 3}), c.ConstInts({0, -1, 0, 0})})});
  PadPlan crop = PlanPad(gc, Producer(gc));
  EXPECT_EQ(crop.interior.shape, (Shape{2, 2}));
  EXPECT_EQ(crop.interior.in_offset, 1);
  EXPECT_EQ(crop.interior.out_offset, 0);
  EXPECT_EQ(crop.interior.out_strides, (std::vector<int64_t>{2, 1}));
  // Reflect padding has no device kernel.
  GraphBuilder r(1);
  Graph gr = r.Build(
      {r.Op("Pad", {r.Input("x", {2, 3}), r.ConstInts({0, 1, 0, 1})}, {{"mode", Attribute::String("reflect")}})});
  EXPECT_THROW(PlanPad(gr, Producer(gr)), Unsupported);
}

TEST(ReducePlan, KeptAndReducedDimensions) {
  // x [2,3,4] reduced over axes -1 and 0: 3 outputs of 8 elements each.
  GraphBuilder b(1);
  Graph g = b.Build({b.Op("ReduceMean", {b.Input("x", {2, 3, 4})}, {{"axes", Attribute::Ints({-1, 0})}})});
  ReducePlan p = PlanReduce(g, Producer(g));
  EXPECT_EQ(p.op, ReduceOp::kMean);
  EXPECT_EQ(p.outputs, 3);
  EXPECT_EQ(p.count, 8);
  EXPECT_EQ(p.kept, (Shape{3}));
  EXPECT_EQ(p.kept_strides, (std::vector<int64_t>{4}));
  EXPECT_EQ(p.reduced, (Shape{2, 4}));
  EXPECT_EQ(p.reduced_strides, (std::vector<int64_t>{12, 1}));
  // ReduceSum's axes are an input.
  GraphBuilder s(1);
  Graph gs = s.Build({s.Op("ReduceSum", {s.Input("x", {2, 3, 4}), s.ConstInts({1})})});
  ReducePlan ps = PlanReduce(gs, Producer(gs));
  EXPECT_EQ(ps.kept, (Shape{2, 4}));
  EXPECT_EQ(ps.kept_strides, (std::vector<int64_t>{12, 1}));
  EXPECT_EQ(ps.reduced_strides, (std::vector<int64_t>{4}));
  EXPECT_EQ(ps.count, 3);
  // No axes: everything, unless noop_with_empty_axes.
  GraphBuilder a(1);
  Graph ga = a.Build({a.Op("ReduceSum", {a.Input("x", {2, 3})})});
  EXPECT_EQ(PlanReduce(ga, Producer(ga)).count, 6);
  GraphBuilder n(1);
  Graph gn = n.Build({n.Op("ReduceSum", {n.Input("x", {2, 3})}, {{"noop_with_empty_axes", Attribute::Int(1)}})});
  ReducePlan pn = PlanReduce(gn, Producer(gn));
  EXPECT_EQ(pn.count, 1);
  EXPECT_EQ(pn.outputs, 6);
}

TEST(NodePlan, EveryOperatorCaseIsPlacedOnTheDeviceOrTheHost) {
  // Every node of every conformance case (core/op_cases_testing.h: every
  // registry operator) gets a plan; the ops the backend has kernels for
  // run on the device in at least one case, with float32 operands.
  std::map<std::string, int> on_device, on_host;
  std::map<std::string, std::string> reasons;
  for (const testing::OpCase& c : testing::OpCases()) {
    GraphBuilder b(3, 17, c.name);
    Graph g = b.Build({c.build(b)});
    for (NodeId id : g.TopologicalOrder()) {
      NodePlan p;
      ASSERT_NO_THROW(p = PlanNode(g, id)) << c.name << ": " << g.node(id).Describe();
      EXPECT_EQ(p.device(), p.kind != NodePlan::Kind::kHost) << c.name;
      if (p.device()) {
        ++on_device[p.op];
        EXPECT_TRUE(p.reason.empty());
        for (ValueId v : p.outputs) EXPECT_TRUE(v == kNoValue || g.value(v).type.IsStatic());
      } else {
        ++on_host[p.op];
        EXPECT_FALSE(p.reason.empty()) << c.name;
        reasons[p.op] = p.reason;
      }
    }
  }
  for (const std::string& op : DeviceOps()) EXPECT_GT(on_device[op], 0) << op << " never ran on the device";
  // Operators without a device kernel say so.
  for (const char* op : {"TopK", "Resize", "Einsum", "ConvTranspose", "ScatterND"}) {
    EXPECT_GT(on_host[op], 0) << op;
    EXPECT_NE(reasons[op].find("no CUDA kernel for " + std::string(op)), std::string::npos) << reasons[op];
  }
  EXPECT_GE(DeviceOps().size(), 60u);
}

TEST(NodePlan, HostForTypesAndRunTimeParameters) {
  // An int64 Add has no device kernel (float32 only); a bytes copy of one does.
  GraphBuilder b(1);
  ValueId i = b.Input("i", {2, 3}, DType::kInt64);
  ValueId sum = b.Op("Add", {i, i});
  ValueId flat = b.Op("Flatten", {i});
  Graph g = b.Build({sum, flat});
  NodePlan add = PlanNode(g, g.value(sum).producer);
  EXPECT_FALSE(add.device());
  EXPECT_NE(add.reason.find("int64"), std::string::npos) << add.reason;
  EXPECT_EQ(add.inputs, (std::vector<ValueId>{i, i}));
  NodePlan copy = PlanNode(g, g.value(flat).producer);
  EXPECT_EQ(copy.kind, NodePlan::Kind::kBytesCopy);
  // Clip's bounds computed at run time: on the host; constant: parameters.
  GraphBuilder c(1);
  ValueId x = c.Input("x", {4}), lo = c.Input("lo", {});
  ValueId run_time = c.Op("Clip", {x, lo});
  ValueId constant = c.Op("Clip", {x, c.ConstFloat(-1.0f), c.ConstFloat(2.0f)});
  Graph gc = c.Build({run_time, constant});
  EXPECT_FALSE(PlanNode(gc, gc.value(run_time).producer).device());
  NodePlan clip = PlanNode(gc, gc.value(constant).producer);
  EXPECT_EQ(clip.kind, NodePlan::Kind::kUnary);
  EXPECT_EQ(clip.unary, UnaryOp::kClip);
  EXPECT_FLOAT_EQ(clip.p0, -1.0f);
  EXPECT_FLOAT_EQ(clip.p1, 2.0f);
  EXPECT_EQ(clip.inputs, (std::vector<ValueId>{x}));  // the bounds are read on the host
  // Where reads a bool condition on the device.
  GraphBuilder w(1);
  ValueId cond = w.Input("c", {2, 1}, DType::kBool);
  Graph gw = w.Build({w.Op("Where", {cond, w.Input("a", {2, 3}), w.Input("b", {3})})});
  NodePlan where = PlanNode(gw, Producer(gw));
  EXPECT_EQ(where.kind, NodePlan::Kind::kWhere);
  EXPECT_EQ(where.broadcast.strides[0], (std::vector<int64_t>{1, 0}));
  EXPECT_EQ(where.broadcast.strides[2], (std::vector<int64_t>{0, 1}));
}

// The copy plans' arithmetic, checked without a GPU: each plan's strided
// copies (the kernel's loop, kernels.cu's CopyKernel, run here on the
// host) against the CPU executor, exactly, on every single-node operator
// case that gets one (Transpose, Concat, Slice, Split, Expand, Pad, Tile,
// DepthToSpace, SpaceToDepth) and on a few more shapes.
int64_t Offset(int64_t i, const Shape& shape, const std::vector<int64_t>& strides) {
  int64_t off = 0;
  for (size_t d = shape.size(); d-- > 0;) {
    off += (i % shape[d]) * strides[d];
    i /= shape[d];
  }
  return off;
}

// Runs the copies of `p` on `inputs` (the node's device operands).
std::vector<std::vector<float>> RunCopies(const Graph& g, const NodePlan& p, const std::vector<at::Tensor>& inputs) {
  std::vector<std::vector<float>> out;
  for (ValueId v : p.outputs)
    out.emplace_back(static_cast<size_t>(g.value(v).type.NumElements()), p.fill ? p.p0 : -12345.0f);
  for (const CopyPlan& c : p.copies) {
    const at::Tensor in = inputs.at(c.input).contiguous();
    const float* x = in.data_ptr<float>();
    int64_t n = 1;
    for (int64_t d : c.shape) n *= d;
    for (int64_t i = 0; i < n; ++i)
      out[c.output][c.out_offset + Offset(i, c.shape, c.out_strides)] =
          x[c.in_offset + Offset(i, c.shape, c.in_strides)];
  }
  return out;
}

int CheckCopyPlans(const Graph& g, const std::string& name) {
  int checked = 0;
  for (NodeId id : g.TopologicalOrder()) {
    const Node& node = g.node(id);
    NodePlan p = PlanNode(g, id);
    if (p.kind != NodePlan::Kind::kCopies) continue;
    bool from_inputs = true;  // a node of graph inputs (and constants) only
    for (ValueId v : p.inputs) from_inputs = from_inputs && std::count(g.inputs().begin(), g.inputs().end(), v) > 0;
    if (!from_inputs || g.outputs() != node.outputs) continue;
    std::vector<at::Tensor> values = RandomInputs(g, 5);
    std::vector<at::Tensor> want = Executor(g).Run(values);
    std::vector<at::Tensor> operands;
    for (ValueId v : p.inputs)
      operands.push_back(values[std::find(g.inputs().begin(), g.inputs().end(), v) - g.inputs().begin()]);
    std::vector<std::vector<float>> got = RunCopies(g, p, operands);
    for (size_t k = 0; k < want.size(); ++k) {
      at::Tensor w = want[k].contiguous();
      EXPECT_EQ(static_cast<int64_t>(got[k].size()), w.numel()) << name;
      if (static_cast<int64_t>(got[k].size()) != w.numel()) continue;
      EXPECT_TRUE(std::equal(got[k].begin(), got[k].end(), w.data_ptr<float>())) << name << " output " << k;
    }
    ++checked;
  }
  return checked;
}

TEST(NodePlan, CopyPlansReproduceTheCpuExecutor) {
  int checked = 0;
  std::set<std::string> ops;
  for (const testing::OpCase& c : testing::OpCases()) {
    GraphBuilder b(3, 17, c.name);
    Graph g = b.Build({c.build(b)});
    const int n = CheckCopyPlans(g, c.name);
    if (n > 0) ops.insert(g.node(g.value(g.outputs()[0]).producer).op);
    checked += n;
  }
  auto more = [&](const std::string& op, const std::vector<Shape>& shapes, AttributeMap attrs,
                  const std::vector<std::vector<int64_t>>& ints) {
    GraphBuilder b(3);
    std::vector<ValueId> in;
    for (size_t k = 0; k < shapes.size(); ++k) in.push_back(b.Input("x" + std::to_string(k), shapes[k]));
    for (const std::vector<int64_t>& v : ints) in.push_back(b.ConstInts(v));
    Graph g = b.Build({b.Op(op, in, std::move(attrs))});
    checked += CheckCopyPlans(g, op);
    ops.insert(op);
  };
  for (const char* mode : {"DCR", "CRD"})
    more("DepthToSpace", {{2, 12, 3, 2}}, {{"blocksize", Attribute::Int(2)}, {"mode", Attribute::String(mode)}}, {});
  more("SpaceToDepth", {{2, 3, 6, 4}}, {{"blocksize", Attribute::Int(2)}}, {});
  more("Tile", {{2, 1, 3}}, {}, {{2, 3, 1}});
  more("Slice", {{4, 5, 6}}, {}, {{1, -1}, {3, 0}, {0, 2}, {1, -2}});
  more("Pad", {{2, 3, 4}}, {}, {{0, -1, 2, 1, 0, -1}});
  more("Expand", {{3, 1}}, {}, {{2, 3, 4}});
  for (const char* op : {"Transpose", "Concat", "Slice", "Expand", "Pad", "Tile", "DepthToSpace", "SpaceToDepth"})
    EXPECT_TRUE(ops.count(op)) << op;
  EXPECT_GE(checked, 15);
}

TEST(NodePlan, OpaqueNodesAreRefused) {
  // A node of no registry operator has no kernel anywhere: cut it first.
  Graph g;
  ValueId x = g.AddInput("x", TensorType{DType::kFloat32, {2}});
  NodeId id = g.AddNode("SomethingUnknown", {x}, 1);
  EXPECT_THROW(PlanNode(g, id), Unsupported);
}

}  // namespace
}  // namespace rlflow::cuda
