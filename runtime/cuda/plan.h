#pragma once
// How the CUDA backend runs each node, decided on the host from the node's
// shapes and attributes before anything touches a device: which library
// call (cuBLAS, cuDNN, or one of the backend's own kernels) and with which
// descriptor values. Pure C++ (no CUDA headers), so that every decision is
// tested on machines without a GPU (runtime/cuda/plan_test.cc).
//
// Layouts are the executor's: every tensor is dense, row-major (ONNX's),
// float32.
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"
#include "runtime/cuda/kinds.h"

namespace rlflow::cuda {

// A row-major product C = alpha * op(A) op(B) + beta * C, batched. cuBLAS is
// column-major: the row-major C[m,n] is computed as the column-major
// C^T = op(B)^T op(A)^T, i.e. cublasSgemmStridedBatched(op_b, op_a, n, m, k,
// B, ldb, A, lda, C, ldc) with the leading dimensions below (row-major
// widths).
struct GemmPlan {
  bool trans_a = false, trans_b = false;  // of the row-major operands
  int64_t m = 0, n = 0, k = 0;
  int64_t lda = 0, ldb = 0, ldc = 0;
  int64_t batch = 1;
  int64_t stride_a = 0, stride_b = 0, stride_c = 0;  // elements between batch entries; 0: shared
  float alpha = 1, beta = 0;
};

// MatMul (numpy semantics) of row-major a [..., m, k] and b [..., k, n]:
// 1-D operands promoted as numpy does; batch dimensions broadcast when one
// side's batch is all ones (stride 0) or both are equal. Other batch
// broadcasts throw rlflow::Unsupported.
GemmPlan PlanMatMul(const Shape& a, const Shape& b);
// ONNX Gemm: a [m,k] (or [k,m] with trans_a), b [k,n] (or [n,k]); a bias C
// is first broadcast into the output, then accumulated with beta.
GemmPlan PlanGemm(const Shape& a, const Shape& b, bool trans_a, bool trans_b, float alpha, float beta, bool has_c);

// A 2-D convolution (1-D ones as height 1), NCHW.
struct ConvPlan {
  enum class Method {
    kCudnn,  // cudnnConvolutionForward, algorithm found once per plan (cudnnFind, cached)
    kGemm,   // a 1x1 kernel, stride 1, no padding, one group: per image W[k,c] x X[c, h*w] (cuBLAS)
  };
  Method method = Method::kCudnn;
  int64_t n = 0, c = 0, h = 0, w = 0;  // input
  int64_t k = 0, r = 0, s = 0;         // filters: k outputs of an r x s window over c / groups channels
  int64_t groups = 1;
  int64_t pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1, dil_h = 1, dil_w = 1;
  int64_t out_h = 0, out_w = 0;
  bool has_bias = false;
  GemmPlan gemm;  // kGemm
  // Key of the cuDNN algorithm cache: shapes and window attributes.
  std::string Key() const;
};
// From node `id` (Conv) of `graph`: its effective window attributes
// (auto_pad resolved). Asymmetric padding (cuDNN's legacy API pads both
// sides alike) and more than two spatial dimensions throw
// rlflow::Unsupported.
ConvPlan PlanConv(const Graph& graph, NodeId id);

// MaxPool / AveragePool / GlobalAveragePool / GlobalMaxPool with cuDNN.
struct PoolPlan {
  bool max = true;
  bool count_include_pad = false;  // AveragePool
  int64_t n = 0, c = 0, h = 0, w = 0;
  int64_t win_h = 1, win_w = 1, pad_h = 0, pad_w = 0, stride_h = 1, stride_w = 1;
  int64_t out_h = 0, out_w = 0;
};
PoolPlan PlanPool(const Graph& graph, NodeId id);

// Elementwise ops over numpy broadcasting: the output's shape and, per
// input, its strides over the output's dimensions (0 where broadcast).
constexpr int kMaxRank = 8;
struct BroadcastPlan {
  Shape out;
  std::vector<std::vector<int64_t>> strides;  // per input, one per output dimension
  int64_t numel = 0;
  bool same_shapes = true;  // every input has the output's shape: a flat loop
};
BroadcastPlan PlanBroadcast(const std::vector<Shape>& inputs);

// Dense row-major strides of `shape`.
std::vector<int64_t> Strides(const Shape& shape);

// A strided copy: out[out_offset + sum_d i_d * out_strides[d]] =
// in[in_offset + sum_d i_d * in_strides[d]] over every index i of `shape`
// (Transpose, Concat, Slice, Split, Expand, Pad). A stride may be 0
// (broadcast) or negative (a backwards slice). `input` / `output`: which
// of the node's operands it reads and writes (Concat: input k; Split:
// output k).
struct CopyPlan {
  Shape shape;
  std::vector<int64_t> in_strides, out_strides;
  int64_t in_offset = 0, out_offset = 0;
  int input = 0, output = 0;
};
// Transpose of `in` by `perm` (empty: reversed).
CopyPlan PlanTranspose(const Shape& in, std::vector<int64_t> perm);
// One copy per input of a Concat along `axis` (negative: from the end).
std::vector<CopyPlan> PlanConcat(const std::vector<Shape>& inputs, int64_t axis);

// Softmax / LogSoftmax over one axis (opset 13) or over every dimension from
// `axis` on (opsets 1 to 12), as cuDNN's channel mode over an [outer, dim,
// inner, 1] view.
struct SoftmaxPlan {
  int64_t outer = 1, dim = 1, inner = 1;
  bool log = false;
};
SoftmaxPlan PlanSoftmax(const Graph& graph, NodeId id);

// BatchNormalization (inference: running statistics) with cuDNN's spatial
// mode over an N, C, H, W view (W = the rest of the spatial dimensions).
struct BatchNormPlan {
  int64_t n = 0, c = 0, h = 1, w = 1;
  double epsilon = 1e-5;
};
BatchNormPlan PlanBatchNorm(const Graph& graph, NodeId id);

// Gather along `axis`: out[o, i, j] = data[o, indices[i], j] over an
// [outer, axis_dim, inner] view of the data and the flattened indices.
struct GatherPlan {
  int64_t outer = 1, axis_dim = 0, indices = 0, inner = 1;
};
GatherPlan PlanGather(const Graph& graph, NodeId id);

// LayerNormalization over every dimension from `axis` on: `rows`
// independent rows of `cols` elements, scale (and bias) of `cols`.
struct LayerNormPlan {
  int64_t rows = 1, cols = 1;
  float epsilon = 1e-5f;
  bool has_bias = false;
};
LayerNormPlan PlanLayerNorm(const Graph& graph, NodeId id);

// Slice with constant starts, ends, axes and steps (ONNX's clamping, any
// step sign): one strided copy.
CopyPlan PlanSlice(const Graph& graph, NodeId id);
// Split: one copy per present output, along the `axis` attribute.
std::vector<CopyPlan> PlanSplit(const Graph& graph, NodeId id);
// Expand: the input broadcast (stride 0) into the output's shape.
CopyPlan PlanExpand(const Graph& graph, NodeId id);
// DepthToSpace (DCR and CRD) and SpaceToDepth: one copy over a 6-D view
// of the output ([N, C', H, b, W, b], resp. [N, b, b, C, H', W']) whose
// input strides pick each element's source.
CopyPlan PlanDepthToSpace(const Graph& graph, NodeId id);
// Tile with constant repeats (rank <= 4): one copy over the output viewed
// as [r0, n0, r1, n1, ...], the repeat dimensions reading with stride 0.
CopyPlan PlanTile(const Graph& graph, NodeId id);
// Pad, constant mode, constant pads (negative ones crop): the output is
// filled with `value`, then the kept part of the input copied into it.
struct PadPlan {
  CopyPlan interior;
  float value = 0;
};
PadPlan PlanPad(const Graph& graph, NodeId id);

// A reduction over any set of axes: output element o reduces the `count`
// input elements at Offset(o, kept) + Offset(r, reduced), where `kept`
// and `reduced` list the kept and reduced dimensions' sizes and input
// strides in input order (keepdims only changes the output's shape).
struct ReducePlan {
  ReduceOp op = ReduceOp::kSum;
  int64_t outputs = 1, count = 1;
  Shape kept, reduced;
  std::vector<int64_t> kept_strides, reduced_strides;
};
// ReduceSum (axes a constant input, noop_with_empty_axes) and the other
// reductions (axes an attribute), as the CPU kernels read them
// (core/ops/semantics.h).
ReducePlan PlanReduce(const Graph& graph, NodeId id);

// Where each node runs, and how. On the device: one of the plans above
// (which library call or kernel, with which values), the device operands
// in the order the step reads them, and the values it writes. On the host
// (`device` false, `reason` says why): the registry's CPU kernel, its
// operands copied from the device and its outputs back, as ONNX Runtime
// runs a node its CUDA provider has no kernel for on its CPU provider.
// Every node the CPU executor runs has a placement; opaque and unknown
// nodes throw rlflow::Unsupported (cut them first, as every timing backend
// does).
struct NodePlan {
  // Which step runs: the host's CPU kernel, or one device plan below.
  enum class Kind {
    kHost,
    kBytesCopy,  // the output is the input's bytes (Reshape, Identity, ...), any type
    kCopies,     // strided copies (Transpose, Concat, Slice, Split, Expand, Pad)
    kUnary,
    kBinary,
    kWhere,
    kReduce,
    kMatMul,
    kGemm,
    kConv,
    kPool,
    kSoftmax,
    kBatchNorm,
    kGather,
    kLayerNorm,
  };
  Kind kind = Kind::kHost;
  bool device() const { return kind != Kind::kHost; }
  std::string reason;
  std::string op;
  std::vector<ValueId> inputs;   // device operands read, in the step's order
  std::vector<ValueId> outputs;  // values written (kNoValue: an absent output)
  UnaryOp unary = UnaryOp::kRelu;
  BinaryOp binary = BinaryOp::kAdd;
  float p0 = 0, p1 = 0;  // the unary op's parameters
  GemmPlan gemm;
  ConvPlan conv;
  PoolPlan pool;
  SoftmaxPlan softmax;
  BatchNormPlan batch_norm;
  GatherPlan gather;
  LayerNormPlan layer_norm;
  BroadcastPlan broadcast;  // elementwise ops, Where; Gemm's C into the output
  ReducePlan reduce;
  std::vector<CopyPlan> copies;
  bool fill = false;  // Pad: fill the output with p0 before the copies
};
NodePlan PlanNode(const Graph& graph, NodeId id);

// The operators the backend has device kernels for (sorted), for messages
// and docs; a node of one may still run on the host (its plan says why).
std::vector<std::string> DeviceOps();

}  // namespace rlflow::cuda
