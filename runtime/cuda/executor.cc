#include "runtime/cuda/executor.h"

#include <cublas_v2.h>
#include <cuda_runtime_api.h>
#include <cudnn.h>

#include <algorithm>
#include <cstring>
#include <map>
#include <mutex>
#include <set>
#include <variant>

#include "core/error.h"
#include "core/op_registry.h"
#include "runtime/cuda/kernels.h"
#include "runtime/cuda/libs.h"
#include "runtime/cuda/plan.h"

// cuDNN 9 marks its legacy (descriptor) API deprecated in favour of the
// graph API; it is still shipped, documented and what this backend calls.
#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace rlflow::cuda {
namespace {

void CheckCuda(cudaError_t e, const std::string& what) {
  if (e != cudaSuccess) Fail("CUDA: ", what, ": ", CudaErrorText(e));
}
void CheckCudnn(cudnnStatus_t s, const std::string& what) {
  if (s != CUDNN_STATUS_SUCCESS) Fail("cuDNN: ", what, ": ", Libs().cudnnGetErrorString(s));
}
void CheckCublas(cublasStatus_t s, const std::string& what) {
  if (s != CUBLAS_STATUS_SUCCESS) Fail("cuBLAS: ", what, ": ", Libs().cublasGetStatusString(s));
}

const std::map<std::string, UnaryOp>& UnaryOps() {
  static const std::map<std::string, UnaryOp> ops = {{"Relu", UnaryOp::kRelu},
                                                     {"Sigmoid", UnaryOp::kSigmoid},
                                                     {"Tanh", UnaryOp::kTanh},
                                                     {"Exp", UnaryOp::kExp},
                                                     {"Log", UnaryOp::kLog},
                                                     {"Sqrt", UnaryOp::kSqrt},
                                                     {"Neg", UnaryOp::kNeg},
                                                     {"Abs", UnaryOp::kAbs},
                                                     {"Erf", UnaryOp::kErf},
                                                     {"Clip", UnaryOp::kClip},
                                                     {"LeakyRelu", UnaryOp::kLeakyRelu},
                                                     {"HardSigmoid", UnaryOp::kHardSigmoid},
                                                     {"HardSwish", UnaryOp::kHardSwish},
                                                     {"Reciprocal", UnaryOp::kReciprocal}};
  return ops;
}
const std::map<std::string, BinaryOp>& BinaryOps() {
  static const std::map<std::string, BinaryOp> ops = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
      {"Pow", BinaryOp::kPow}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin}};
  return ops;
}
const std::set<std::string>& CopyOps() {  // the output is the input's bytes
  static const std::set<std::string> ops = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  return ops;
}
const std::set<std::string>& LibraryOps() {
  static const std::set<std::string> ops = {"Conv",          "MatMul",
                                            "Gemm",          "MaxPool",
                                            "AveragePool",   "GlobalAveragePool",
                                            "GlobalMaxPool", "Softmax",
                                            "LogSoftmax",    "BatchNormalization",
                                            "Transpose",     "Concat",
                                            "Gather",        "LayerNormalization"};
  return ops;
}

size_t ElementBytes(DType t) { return t == DType::kInt64 ? 8 : 4; }

IndexMap Map(const Shape& shape, const std::vector<int64_t>& strides) {
  IndexMap m;
  m.rank = static_cast<int>(shape.size());
  for (size_t d = 0; d < shape.size(); ++d) {
    m.shape[d] = shape[d];
    m.strides[d] = strides[d];
  }
  if (m.rank == 0) {  // a scalar: one element
    m.rank = 1;
    m.shape[0] = 1;
    m.strides[0] = 0;
  }
  return m;
}

// The cuDNN convolution algorithm found for a plan's key, process-wide.
std::mutex algo_mutex;
std::map<std::string, cudnnConvolutionFwdAlgo_t>& AlgoCache() {
  static std::map<std::string, cudnnConvolutionFwdAlgo_t> cache;
  return cache;
}

struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr, c = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  cudnnPoolingDescriptor_t pool = nullptr;
};

struct Step {
  NodeId id = kNoValue;
  std::string op;
  std::vector<ValueId> in;
  ValueId out = kNoValue;
  int64_t out_numel = 0;
  // What runs.
  GemmPlan gemm;
  ConvPlan conv;
  SoftmaxPlan softmax;
  BatchNormPlan bn;
  GatherPlan gather;
  LayerNormPlan layer_norm;
  BroadcastPlan broadcast;
  std::vector<CopyPlan> copies;
  UnaryOp unary = UnaryOp::kRelu;
  BinaryOp binary = BinaryOp::kAdd;
  float p0 = 0, p1 = 0;
  cudnnConvolutionFwdAlgo_t algo = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
  Descriptors d;
};

}  // namespace

struct CudaExecutor::Impl {
  const Graph& graph;
  DeviceInfo device;
  cudaStream_t stream = nullptr;
  cublasHandle_t cublas = nullptr;
  cudnnHandle_t cudnn = nullptr;
  std::vector<void*> buffers;  // per value id (nullptr: not on the device)
  std::vector<Step> steps;
  void* workspace = nullptr;
  size_t workspace_bytes = 0;
  cudaEvent_t start = nullptr, stop = nullptr;
  std::vector<cudaEvent_t> node_events;  // two per step

  explicit Impl(const Graph& g) : graph(g) {}
  ~Impl() {
    for (Step& s : steps) {
      if (s.d.x) Libs().cudnnDestroyTensorDescriptor(s.d.x);
      if (s.d.y) Libs().cudnnDestroyTensorDescriptor(s.d.y);
      if (s.d.c) Libs().cudnnDestroyTensorDescriptor(s.d.c);
      if (s.d.w) Libs().cudnnDestroyFilterDescriptor(s.d.w);
      if (s.d.conv) Libs().cudnnDestroyConvolutionDescriptor(s.d.conv);
      if (s.d.pool) Libs().cudnnDestroyPoolingDescriptor(s.d.pool);
    }
    for (void* b : buffers)
      if (b) cudaFree(b);
    if (workspace) cudaFree(workspace);
    for (cudaEvent_t e : node_events) cudaEventDestroy(e);
    if (start) cudaEventDestroy(start);
    if (stop) cudaEventDestroy(stop);
    if (cudnn) Libs().cudnnDestroy(cudnn);
    if (cublas) Libs().cublasDestroy(cublas);
    if (stream) cudaStreamDestroy(stream);
  }

  const Shape& ShapeOf(ValueId v) const { return graph.value(v).type.shape; }

  // A device buffer for value v: float32, or int64 where a kernel reads it
  // as indices (Gather).
  void* Allocate(ValueId v, bool indices = false) {
    const Value& val = graph.value(v);
    if (val.type.dtype != DType::kFloat32 && !(indices && val.type.dtype == DType::kInt64))
      throw Unsupported("value '" + val.name + "' is " + DTypeName(val.type.dtype) +
                        ": the CUDA backend runs float32 tensors (int64 only as Gather's indices)");
    if (!val.type.IsStatic()) throw Unsupported("value '" + val.name + "' has no static shape");
    if (buffers[v] != nullptr) return buffers[v];
    const size_t bytes = std::max<int64_t>(1, val.type.NumElements()) * ElementBytes(val.type.dtype);
    const cudaError_t e = cudaMalloc(&buffers[v], bytes);
    if (e == cudaErrorMemoryAllocation)
      Fail("CUDA: out of device memory allocating ", bytes >> 20, " MiB for '", val.name, "'");
    CheckCuda(e, "cudaMalloc");
    return buffers[v];
  }

  // A constant operand read on the host (Clip's min and max).
  float HostScalar(ValueId v, float fallback) const {
    if (v == kNoValue) return fallback;
    const Value& val = graph.value(v);
    if (val.initializer == nullptr || val.initializer->dtype() != DType::kFloat32 ||
        val.initializer->NumElements() != 1)
      throw Unsupported("Clip with bounds computed at run time");
    float f = 0;
    std::memcpy(&f, val.initializer->data(), sizeof f);
    return f;
  }

  void Plan(NodeId id) {
    const Node& node = graph.node(id);
    if (node.opaque() || !node.domain.empty() || node.outputs.empty())
      throw Unsupported("node " + node.Describe() + ": the CUDA backend has no kernel for it");
    Step s;
    s.id = id;
    s.op = node.op;
    s.out = node.outputs[0];
    for (size_t k = 1; k < node.outputs.size(); ++k)
      if (node.outputs[k] != kNoValue && node.op != "Dropout")
        throw Unsupported("node " + node.Describe() + ": more than one output");
    const OpDef* def = OpRegistry::Global().Find(node.domain, node.op);
    if (def == nullptr) throw Unsupported("node " + node.Describe() + ": not in the registry");
    AttrReader attrs(node, *def);
    auto data_input = [&](size_t k, bool indices = false) {
      if (k >= node.inputs.size() || node.inputs[k] == kNoValue)
        throw Error("node " + node.Describe() + ": input " + std::to_string(k) + " is missing");
      Allocate(node.inputs[k], indices);
      s.in.push_back(node.inputs[k]);
    };
    if (auto u = UnaryOps().find(node.op); u != UnaryOps().end()) {
      data_input(0);
      s.unary = u->second;
      if (node.op == "Clip") {
        s.p0 = HostScalar(node.inputs.size() > 1 ? node.inputs[1] : kNoValue, -3.4028235e38f);
        s.p1 = HostScalar(node.inputs.size() > 2 ? node.inputs[2] : kNoValue, 3.4028235e38f);
      } else if (node.op == "LeakyRelu") {
        s.p0 = attrs.Float("alpha");
      } else if (node.op == "HardSigmoid") {
        s.p0 = attrs.Float("alpha");
        s.p1 = attrs.Float("beta");
      }
    } else if (auto b = BinaryOps().find(node.op); b != BinaryOps().end()) {
      if (node.inputs.size() != 2) throw Unsupported("node " + node.Describe() + ": only two operands");
      data_input(0);
      data_input(1);
      s.binary = b->second;
      s.broadcast = PlanBroadcast({ShapeOf(node.inputs[0]), ShapeOf(node.inputs[1])});
    } else if (CopyOps().count(node.op)) {
      data_input(0);
    } else if (node.op == "MatMul") {
      data_input(0);
      data_input(1);
      s.gemm = PlanMatMul(ShapeOf(node.inputs[0]), ShapeOf(node.inputs[1]));
    } else if (node.op == "Gemm") {
      data_input(0);
      data_input(1);
      const bool has_c = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
      if (has_c) {
        data_input(2);
        s.broadcast = PlanBroadcast({ShapeOf(node.inputs[2]), ShapeOf(s.out)});
      }
      s.gemm = PlanGemm(ShapeOf(node.inputs[0]), ShapeOf(node.inputs[1]), attrs.Int("transA") != 0,
                        attrs.Int("transB") != 0, attrs.Float("alpha"), attrs.Float("beta"), has_c);
    } else if (node.op == "Conv") {
      s.conv = PlanConv(graph, id);
      data_input(0);
      data_input(1);
      if (s.conv.has_bias) data_input(2);
      if (s.conv.method == ConvPlan::Method::kCudnn) PlanCudnnConv(s);
    } else if (node.op == "MaxPool" || node.op == "AveragePool" || node.op == "GlobalAveragePool" ||
               node.op == "GlobalMaxPool") {
      if (node.op == "MaxPool" && node.outputs.size() > 1 && node.outputs[1] != kNoValue)
        throw Unsupported("node " + node.Describe() + ": MaxPool's indices output");
      data_input(0);
      const PoolPlan p = PlanPool(graph, id);
      CheckCudnn(Libs().cudnnCreatePoolingDescriptor(&s.d.pool), "pooling descriptor");
      const cudnnPoolingMode_t mode = p.max                 ? CUDNN_POOLING_MAX
                                      : p.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                            : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      CheckCudnn(Libs().cudnnSetPooling2dDescriptor(s.d.pool, mode, CUDNN_PROPAGATE_NAN, p.win_h, p.win_w, p.pad_h,
                                                    p.pad_w, p.stride_h, p.stride_w),
                 "pooling descriptor");
      s.d.x = Tensor4d(p.n, p.c, p.h, p.w);
      s.d.y = Tensor4d(p.n, p.c, p.out_h, p.out_w);
    } else if (node.op == "Softmax" || node.op == "LogSoftmax") {
      data_input(0);
      s.softmax = PlanSoftmax(graph, id);
      s.d.x = Tensor4d(s.softmax.outer, s.softmax.dim, s.softmax.inner, 1);
    } else if (node.op == "BatchNormalization") {
      for (size_t k = 0; k < 5; ++k) data_input(k);
      s.bn = PlanBatchNorm(graph, id);
      s.d.x = Tensor4d(s.bn.n, s.bn.c, s.bn.h, s.bn.w);
      s.d.c = Tensor4d(1, s.bn.c, 1, 1);
    } else if (node.op == "Gather") {
      data_input(0);
      data_input(1, /*indices=*/true);
      s.gather = PlanGather(graph, id);
    } else if (node.op == "LayerNormalization") {
      s.layer_norm = PlanLayerNorm(graph, id);
      data_input(0);
      data_input(1);
      if (s.layer_norm.has_bias) data_input(2);
    } else if (node.op == "Transpose") {
      data_input(0);
      s.copies = {
          PlanTranspose(ShapeOf(node.inputs[0]), attrs.Has("perm") ? attrs.Ints("perm") : std::vector<int64_t>{})};
    } else if (node.op == "Concat") {
      std::vector<Shape> shapes;
      for (size_t k = 0; k < node.inputs.size(); ++k) {
        data_input(k);
        shapes.push_back(ShapeOf(node.inputs[k]));
      }
      s.copies = PlanConcat(shapes, attrs.Int("axis"));
    } else {
      throw Unsupported("node " + node.Describe() + ": the CUDA backend has no kernel for " + node.op);
    }
    Allocate(s.out);
    s.out_numel = graph.value(s.out).type.NumElements();
    steps.push_back(std::move(s));
  }

  cudnnTensorDescriptor_t Tensor4d(int64_t n, int64_t c, int64_t h, int64_t w) {
    cudnnTensorDescriptor_t d = nullptr;
    CheckCudnn(Libs().cudnnCreateTensorDescriptor(&d), "tensor descriptor");
    CheckCudnn(Libs().cudnnSetTensor4dDescriptor(d, CUDNN_TENSOR_NCHW, CUDNN_DATA_FLOAT, static_cast<int>(n),
                                                 static_cast<int>(c), static_cast<int>(h), static_cast<int>(w)),
               "tensor descriptor");
    return d;
  }

  void PlanCudnnConv(Step& s) {
    const ConvPlan& p = s.conv;
    s.d.x = Tensor4d(p.n, p.c, p.h, p.w);
    s.d.y = Tensor4d(p.n, p.k, p.out_h, p.out_w);
    CheckCudnn(Libs().cudnnCreateFilterDescriptor(&s.d.w), "filter descriptor");
    CheckCudnn(Libs().cudnnSetFilter4dDescriptor(s.d.w, CUDNN_DATA_FLOAT, CUDNN_TENSOR_NCHW, static_cast<int>(p.k),
                                                 static_cast<int>(p.c / p.groups), static_cast<int>(p.r),
                                                 static_cast<int>(p.s)),
               "filter descriptor");
    CheckCudnn(Libs().cudnnCreateConvolutionDescriptor(&s.d.conv), "convolution descriptor");
    CheckCudnn(Libs().cudnnSetConvolution2dDescriptor(s.d.conv, static_cast<int>(p.pad_h), static_cast<int>(p.pad_w),
                                                      static_cast<int>(p.stride_h), static_cast<int>(p.stride_w),
                                                      static_cast<int>(p.dil_h), static_cast<int>(p.dil_w),
                                                      CUDNN_CROSS_CORRELATION, CUDNN_DATA_FLOAT),
               "convolution descriptor");
    CheckCudnn(Libs().cudnnSetConvolutionGroupCount(s.d.conv, static_cast<int>(p.groups)), "group count");
    // FMA math: no TF32, so results match the CPU executor's float32.
    CheckCudnn(Libs().cudnnSetConvolutionMathType(s.d.conv, CUDNN_FMA_MATH), "math type");
  }

  // Finds (once per shape, process-wide) the fastest cuDNN algorithm.
  void ChooseAlgorithms() {
    for (Step& s : steps) {
      if (s.op != "Conv" || s.conv.method != ConvPlan::Method::kCudnn) continue;
      const std::string key = s.conv.Key();
      std::lock_guard<std::mutex> lock(algo_mutex);
      auto it = AlgoCache().find(key);
      if (it == AlgoCache().end()) {
        cudnnConvolutionFwdAlgoPerf_t perf[CUDNN_CONVOLUTION_FWD_ALGO_COUNT];
        int found = 0;
        CheckCudnn(Libs().cudnnFindConvolutionForwardAlgorithm(cudnn, s.d.x, s.d.w, s.d.conv, s.d.y,
                                                               CUDNN_CONVOLUTION_FWD_ALGO_COUNT, &found, perf),
                   "finding a convolution algorithm");
        cudnnConvolutionFwdAlgo_t best = CUDNN_CONVOLUTION_FWD_ALGO_IMPLICIT_GEMM;
        for (int k = 0; k < found; ++k)
          if (perf[k].status == CUDNN_STATUS_SUCCESS && perf[k].mathType == CUDNN_FMA_MATH) {
            best = perf[k].algo;
            break;
          }
        it = AlgoCache().emplace(key, best).first;
      }
      s.algo = it->second;
      size_t bytes = 0;
      CheckCudnn(Libs().cudnnGetConvolutionForwardWorkspaceSize(cudnn, s.d.x, s.d.w, s.d.conv, s.d.y, s.algo, &bytes),
                 "workspace size");
      workspace_bytes = std::max(workspace_bytes, bytes);
    }
    if (workspace_bytes > 0) {
      const cudaError_t e = cudaMalloc(&workspace, workspace_bytes);
      if (e == cudaErrorMemoryAllocation)
        Fail("CUDA: out of device memory allocating the ", workspace_bytes >> 20, " MiB convolution workspace");
      CheckCuda(e, "cudaMalloc");
    }
  }

  void Gemm(const GemmPlan& p, const float* a, const float* b, float* c) {
    const float alpha = p.alpha, beta = p.beta;
    CheckCublas(Libs().cublasSgemmStridedBatched(
                    cublas, p.trans_b ? CUBLAS_OP_T : CUBLAS_OP_N, p.trans_a ? CUBLAS_OP_T : CUBLAS_OP_N,
                    static_cast<int>(p.n), static_cast<int>(p.m), static_cast<int>(p.k), &alpha, b,
                    static_cast<int>(p.ldb), p.stride_b, a, static_cast<int>(p.lda), p.stride_a, &beta, c,
                    static_cast<int>(p.ldc), p.stride_c, static_cast<int>(p.batch)),
                "sgemm");
  }

  void Execute(Step& s) {
    float* y = static_cast<float*>(buffers[s.out]);
    auto in = [&](size_t k) { return static_cast<float*>(buffers[s.in[k]]); };
    const float one = 1.0f, zero = 0.0f;
    if (UnaryOps().count(s.op)) {
      CheckCuda(LaunchUnary(s.unary, in(0), y, s.out_numel, s.p0, s.p1, stream), s.op);
    } else if (BinaryOps().count(s.op)) {
      const BroadcastPlan& b = s.broadcast;
      CheckCuda(LaunchBinary(s.binary, in(0), in(1), y, b.numel, Map(b.out, b.strides[0]), Map(b.out, b.strides[1]),
                             b.same_shapes, stream),
                s.op);
    } else if (CopyOps().count(s.op)) {
      CheckCuda(cudaMemcpyAsync(y, in(0), s.out_numel * sizeof(float), cudaMemcpyDeviceToDevice, stream), s.op);
    } else if (s.op == "MatMul") {
      Gemm(s.gemm, in(0), in(1), y);
    } else if (s.op == "Gemm") {
      if (s.gemm.beta != 0.0f) {  // C broadcast into the output, then accumulated
        const BroadcastPlan& b = s.broadcast;
        CheckCuda(
            LaunchStridedCopy(in(2), y, b.numel, Map(b.out, b.strides[0]), Map(b.out, Strides(b.out)), 0, 0, stream),
            "Gemm bias");
      }
      Gemm(s.gemm, in(0), in(1), y);
    } else if (s.op == "Conv") {
      const ConvPlan& p = s.conv;
      if (p.method == ConvPlan::Method::kGemm) {
        Gemm(p.gemm, in(1), in(0), y);  // W [k,c] x X_i [c,hw]
      } else {
        CheckCudnn(Libs().cudnnConvolutionForward(cudnn, &one, s.d.x, in(0), s.d.w, in(1), s.d.conv, s.algo, workspace,
                                                  workspace_bytes, &zero, s.d.y, y),
                   "convolution");
      }
      if (p.has_bias)
        CheckCuda(LaunchAddChannelBias(y, in(2), s.out_numel, p.k, p.out_h * p.out_w, stream), "Conv bias");
    } else if (s.d.pool != nullptr) {
      CheckCudnn(Libs().cudnnPoolingForward(cudnn, s.d.pool, &one, s.d.x, in(0), &zero, s.d.y, y), "pooling");
    } else if (s.op == "Softmax" || s.op == "LogSoftmax") {
      CheckCudnn(Libs().cudnnSoftmaxForward(cudnn, s.softmax.log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                            CUDNN_SOFTMAX_MODE_CHANNEL, &one, s.d.x, in(0), &zero, s.d.x, y),
                 "softmax");
    } else if (s.op == "BatchNormalization") {
      CheckCudnn(
          Libs().cudnnBatchNormalizationForwardInference(cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, s.d.x, in(0),
                                                         s.d.x, y, s.d.c, in(1), in(2), in(3), in(4), s.bn.epsilon),
          "batch normalisation");
    } else if (s.op == "Gather") {
      const GatherPlan& g = s.gather;
      CheckCuda(LaunchGather(in(0), static_cast<const int64_t*>(buffers[s.in[1]]), y, g.outer, g.axis_dim, g.indices,
                             g.inner, stream),
                "Gather");
    } else if (s.op == "LayerNormalization") {
      const LayerNormPlan& p = s.layer_norm;
      CheckCuda(LaunchLayerNorm(in(0), in(1), p.has_bias ? in(2) : nullptr, y, p.rows, p.cols, p.epsilon, stream),
                "LayerNormalization");
    } else if (s.op == "Transpose" || s.op == "Concat") {
      for (size_t k = 0; k < s.copies.size(); ++k) {
        const CopyPlan& c = s.copies[k];
        int64_t n = 1;
        for (int64_t d : c.shape) n *= d;
        CheckCuda(LaunchStridedCopy(in(s.op == "Concat" ? k : 0), y, n, Map(c.shape, c.in_strides),
                                    Map(c.shape, c.out_strides), c.in_offset, c.out_offset, stream),
                  s.op);
      }
    } else {
      Fail("CUDA executor: no step for ", s.op);
    }
  }
};

CudaExecutor::CudaExecutor(const Graph& graph) : impl_(std::make_unique<Impl>(graph)) {
  Impl& m = *impl_;
  m.device = ProbeDevice();
  if (!m.device.available) Fail(m.device.error);
  CheckCuda(cudaSetDevice(0), "cudaSetDevice");
  CheckCuda(cudaStreamCreate(&m.stream), "cudaStreamCreate");
  CheckCublas(Libs().cublasCreate(&m.cublas), "cublasCreate");
  CheckCublas(Libs().cublasSetStream(m.cublas, m.stream), "cublasSetStream");
  // Plain float32 products (no TF32), as the CPU executor computes them.
  CheckCublas(Libs().cublasSetMathMode(m.cublas, CUBLAS_PEDANTIC_MATH), "cublasSetMathMode");
  CheckCudnn(Libs().cudnnCreate(&m.cudnn), "cudnnCreate");
  CheckCudnn(Libs().cudnnSetStream(m.cudnn, m.stream), "cudnnSetStream");
  CheckCuda(cudaEventCreate(&m.start), "cudaEventCreate");
  CheckCuda(cudaEventCreate(&m.stop), "cudaEventCreate");
  m.buffers.assign(graph.num_values(), nullptr);
  for (ValueId v : graph.inputs()) {
    // int64 inputs are indices (Gather's); what else reads one says so when planned.
    if (graph.value(v).type.dtype != DType::kInt64) m.Allocate(v);
  }
  for (NodeId id : graph.TopologicalOrder()) m.Plan(id);
  for (ValueId v : graph.outputs())
    if (m.buffers[v] == nullptr) m.Allocate(v);
  // Weights, once.
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const Value& val = graph.value(v);
    if (val.initializer == nullptr || m.buffers[v] == nullptr) continue;
    CheckCuda(
        cudaMemcpy(m.buffers[v], val.initializer->data(),
                   val.initializer->NumElements() * ElementBytes(val.initializer->dtype()), cudaMemcpyHostToDevice),
        "copying weight '" + val.name + "'");
  }
  m.ChooseAlgorithms();
  m.node_events.resize(2 * m.steps.size(), nullptr);
  for (cudaEvent_t& e : m.node_events) CheckCuda(cudaEventCreate(&e), "cudaEventCreate");
}

CudaExecutor::~CudaExecutor() = default;

const DeviceInfo& CudaExecutor::device() const { return impl_->device; }

void CudaExecutor::SetInputs(const std::vector<at::Tensor>& inputs) {
  Impl& m = *impl_;
  const std::vector<ValueId>& ins = m.graph.inputs();
  if (inputs.size() != ins.size()) Fail("CUDA executor: ", inputs.size(), " inputs for ", ins.size());
  for (size_t k = 0; k < ins.size(); ++k) {
    const Value& v = m.graph.value(ins[k]);
    if (m.buffers[ins[k]] == nullptr) continue;  // no node reads it on the device
    at::Tensor t = inputs[k].to(v.type.dtype == DType::kInt64 ? at::kLong : at::kFloat).contiguous();
    if (t.numel() != v.type.NumElements()) Fail("CUDA executor: input '", v.name, "' has the wrong size");
    CheckCuda(cudaMemcpy(m.buffers[ins[k]], t.data_ptr(), t.numel() * t.element_size(), cudaMemcpyHostToDevice),
              "copying input '" + v.name + "'");
  }
}

double CudaExecutor::Run(std::vector<double>* node_ms) {
  Impl& m = *impl_;
  if (node_ms != nullptr) node_ms->assign(m.graph.num_nodes(), 0.0);
  CheckCuda(cudaEventRecord(m.start, m.stream), "cudaEventRecord");
  for (size_t k = 0; k < m.steps.size(); ++k) {
    if (node_ms != nullptr) CheckCuda(cudaEventRecord(m.node_events[2 * k], m.stream), "cudaEventRecord");
    m.Execute(m.steps[k]);
    if (node_ms != nullptr) CheckCuda(cudaEventRecord(m.node_events[2 * k + 1], m.stream), "cudaEventRecord");
  }
  CheckCuda(cudaEventRecord(m.stop, m.stream), "cudaEventRecord");
  CheckCuda(cudaEventSynchronize(m.stop), "running the graph");
  float ms = 0;
  CheckCuda(cudaEventElapsedTime(&ms, m.start, m.stop), "cudaEventElapsedTime");
  if (node_ms != nullptr) {
    for (size_t k = 0; k < m.steps.size(); ++k) {
      float t = 0;
      CheckCuda(cudaEventElapsedTime(&t, m.node_events[2 * k], m.node_events[2 * k + 1]), "cudaEventElapsedTime");
      (*node_ms)[m.steps[k].id] = t;
    }
  }
  return ms;
}

std::vector<at::Tensor> CudaExecutor::Outputs() const {
  const Impl& m = *impl_;
  std::vector<at::Tensor> out;
  for (ValueId v : m.graph.outputs()) {
    const Value& val = m.graph.value(v);
    at::Tensor t = at::empty(std::vector<int64_t>(val.type.shape.begin(), val.type.shape.end()), at::kFloat);
    if (val.type.dtype != DType::kFloat32) Fail("CUDA executor: output '", val.name, "' is not float32");
    CheckCuda(cudaMemcpy(t.data_ptr<float>(), m.buffers[v], t.numel() * sizeof(float), cudaMemcpyDeviceToHost),
              "copying output '" + val.name + "'");
    out.push_back(t);
  }
  return out;
}

std::vector<std::string> SupportedOps() {
  std::set<std::string> ops = LibraryOps();
  for (const auto& [name, op] : UnaryOps()) ops.insert(name);
  for (const auto& [name, op] : BinaryOps()) ops.insert(name);
  for (const std::string& name : CopyOps()) ops.insert(name);
  return {ops.begin(), ops.end()};
}

}  // namespace rlflow::cuda
