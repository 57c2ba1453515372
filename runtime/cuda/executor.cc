#include "runtime/cuda/executor.h"

#include <ATen/ops/empty.h>
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
#include "core/ops/kernel.h"
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
  NodePlan plan;
  int64_t out_numel = 0;  // of the first output
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
  std::vector<std::string> host_nodes;   // "<node>: <why>" per node run on the host

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

  // A device buffer for value v (any type: the plan checked what each
  // device step reads).
  void* Allocate(ValueId v) {
    const Value& val = graph.value(v);
    if (!val.type.IsStatic()) throw Unsupported("value '" + val.name + "' has no static shape");
    if (buffers[v] != nullptr) return buffers[v];
    const size_t bytes = std::max<int64_t>(1, val.type.NumElements()) * DTypeSize(val.type.dtype);
    const cudaError_t e = cudaMalloc(&buffers[v], bytes);
    if (e == cudaErrorMemoryAllocation)
      Fail("CUDA: out of device memory allocating ", bytes >> 20, " MiB for '", val.name, "'");
    CheckCuda(e, "cudaMalloc");
    return buffers[v];
  }

  void Plan(NodeId id) {
    const Node& node = graph.node(id);
    Step s;
    s.id = id;
    s.plan = PlanNode(graph, id);
    const NodePlan& p = s.plan;
    if (p.kind == NodePlan::Kind::kHost) {
      // On the host: computed operands come from the device; constant ones
      // are read where they are.
      for (ValueId v : p.inputs)
        if (graph.value(v).initializer == nullptr) Allocate(v);
      host_nodes.push_back(node.Describe() + ": " + p.reason);
    } else {
      for (ValueId v : p.inputs) Allocate(v);
    }
    for (ValueId v : p.outputs)
      if (v != kNoValue) Allocate(v);
    if (!p.outputs.empty() && p.outputs[0] != kNoValue) s.out_numel = graph.value(p.outputs[0]).type.NumElements();
    if (p.kind == NodePlan::Kind::kConv && p.conv.method == ConvPlan::Method::kCudnn) PlanCudnnConv(s);
    if (p.kind == NodePlan::Kind::kPool) {
      const PoolPlan& pp = p.pool;
      CheckCudnn(Libs().cudnnCreatePoolingDescriptor(&s.d.pool), "pooling descriptor");
      const cudnnPoolingMode_t mode = pp.max                 ? CUDNN_POOLING_MAX
                                      : pp.count_include_pad ? CUDNN_POOLING_AVERAGE_COUNT_INCLUDE_PADDING
                                                             : CUDNN_POOLING_AVERAGE_COUNT_EXCLUDE_PADDING;
      CheckCudnn(Libs().cudnnSetPooling2dDescriptor(s.d.pool, mode, CUDNN_PROPAGATE_NAN, pp.win_h, pp.win_w, pp.pad_h,
                                                    pp.pad_w, pp.stride_h, pp.stride_w),
                 "pooling descriptor");
      s.d.x = Tensor4d(pp.n, pp.c, pp.h, pp.w);
      s.d.y = Tensor4d(pp.n, pp.c, pp.out_h, pp.out_w);
    } else if (p.kind == NodePlan::Kind::kSoftmax) {
      s.d.x = Tensor4d(p.softmax.outer, p.softmax.dim, p.softmax.inner, 1);
    } else if (p.kind == NodePlan::Kind::kBatchNorm) {
      const BatchNormPlan& bn = p.batch_norm;
      s.d.x = Tensor4d(bn.n, bn.c, bn.h, bn.w);
      s.d.c = Tensor4d(1, bn.c, 1, 1);
    }
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
    const ConvPlan& p = s.plan.conv;
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
      if (s.plan.kind != NodePlan::Kind::kConv || s.plan.conv.method != ConvPlan::Method::kCudnn) continue;
      const std::string key = s.plan.conv.Key();
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

  // A host step: its operands copied from the device (constants read in
  // place), the registry's CPU kernel, its outputs copied back. The stream
  // is drained first, so that the operands are complete; the events around
  // the step then include the host's time, as the device waits for it.
  void ExecuteOnHost(const Step& s) {
    const Node& node = graph.node(s.id);
    CheckCuda(cudaStreamSynchronize(stream), "running the graph");
    std::vector<at::Tensor> args;
    for (ValueId v : node.inputs) {
      if (v == kNoValue) {
        args.emplace_back();
        continue;
      }
      const Value& val = graph.value(v);
      if (val.initializer != nullptr) {
        args.push_back(ToAten(val.initializer));
        continue;
      }
      at::Tensor t = at::empty(std::vector<int64_t>(val.type.shape.begin(), val.type.shape.end()),
                               at::TensorOptions().dtype(ToAtenType(val.type.dtype)));
      CheckCuda(cudaMemcpy(t.data_ptr(), buffers[v], t.numel() * t.element_size(), cudaMemcpyDeviceToHost),
                "copying '" + val.name + "' to the host");
      args.push_back(std::move(t));
    }
    std::vector<at::Tensor> outs = RunKernel(node, KernelDefFor(node), std::move(args), OutputTypes(graph, node));
    for (size_t k = 0; k < node.outputs.size() && k < outs.size(); ++k) {
      const ValueId v = node.outputs[k];
      if (v == kNoValue) continue;
      const Value& val = graph.value(v);
      at::Tensor t = outs[k].contiguous();
      if (t.numel() != val.type.NumElements() || t.scalar_type() != ToAtenType(val.type.dtype))
        Fail("node ", node.Describe(), ": its CPU kernel's output ", k, " is not ", val.type.ToString());
      CheckCuda(cudaMemcpyAsync(buffers[v], t.data_ptr(), t.numel() * t.element_size(), cudaMemcpyHostToDevice, stream),
                "copying '" + val.name + "' to the device");
      outs[k] = std::move(t);  // kept alive until the copies are done
    }
    CheckCuda(cudaStreamSynchronize(stream), "copying " + node.Describe() + "'s outputs to the device");
  }

  void Execute(Step& s) {
    using Kind = NodePlan::Kind;
    const NodePlan& p = s.plan;
    if (p.kind == Kind::kHost) return ExecuteOnHost(s);
    const std::string& op = p.op;
    float* y = static_cast<float*>(buffers[p.outputs[0]]);
    auto in = [&](size_t k) { return static_cast<float*>(buffers[p.inputs[k]]); };
    const float one = 1.0f, zero = 0.0f;
    switch (p.kind) {
      case Kind::kHost: break;
      case Kind::kBytesCopy: {
        const Value& out = graph.value(p.outputs[0]);
        CheckCuda(cudaMemcpyAsync(buffers[p.outputs[0]], buffers[p.inputs[0]],
                                  out.type.NumElements() * DTypeSize(out.type.dtype), cudaMemcpyDeviceToDevice, stream),
                  op);
        break;
      }
      case Kind::kCopies:
        if (p.fill) CheckCuda(LaunchFill(y, s.out_numel, p.p0, stream), op);
        for (const CopyPlan& c : p.copies) {
          int64_t n = 1;
          for (int64_t d : c.shape) n *= d;
          CheckCuda(LaunchStridedCopy(in(c.input), static_cast<float*>(buffers[p.outputs[c.output]]), n,
                                      Map(c.shape, c.in_strides), Map(c.shape, c.out_strides), c.in_offset,
                                      c.out_offset, stream),
                    op);
        }
        break;
      case Kind::kUnary: CheckCuda(LaunchUnary(p.unary, in(0), y, s.out_numel, p.p0, p.p1, stream), op); break;
      case Kind::kBinary: {
        const BroadcastPlan& b = p.broadcast;
        CheckCuda(LaunchBinary(p.binary, in(0), in(1), y, b.numel, Map(b.out, b.strides[0]), Map(b.out, b.strides[1]),
                               b.same_shapes, stream),
                  op);
        break;
      }
      case Kind::kWhere: {
        const BroadcastPlan& b = p.broadcast;
        CheckCuda(LaunchWhere(static_cast<const bool*>(buffers[p.inputs[0]]), in(1), in(2), y, b.numel,
                              Map(b.out, b.strides[0]), Map(b.out, b.strides[1]), Map(b.out, b.strides[2]), stream),
                  op);
        break;
      }
      case Kind::kReduce: {
        const ReducePlan& r = p.reduce;
        CheckCuda(LaunchReduce(r.op, in(0), y, r.outputs, r.count, Map(r.kept, r.kept_strides),
                               Map(r.reduced, r.reduced_strides), stream),
                  op);
        break;
      }
      case Kind::kMatMul: Gemm(p.gemm, in(0), in(1), y); break;
      case Kind::kGemm:
        if (p.gemm.beta != 0.0f) {  // C broadcast into the output, then accumulated
          const BroadcastPlan& b = p.broadcast;
          CheckCuda(
              LaunchStridedCopy(in(2), y, b.numel, Map(b.out, b.strides[0]), Map(b.out, Strides(b.out)), 0, 0, stream),
              "Gemm bias");
        }
        Gemm(p.gemm, in(0), in(1), y);
        break;
      case Kind::kConv: {
        const ConvPlan& c = p.conv;
        if (c.method == ConvPlan::Method::kGemm) {
          Gemm(c.gemm, in(1), in(0), y);  // W [k,c] x X_i [c,hw]
        } else {
          CheckCudnn(Libs().cudnnConvolutionForward(cudnn, &one, s.d.x, in(0), s.d.w, in(1), s.d.conv, s.algo,
                                                    workspace, workspace_bytes, &zero, s.d.y, y),
                     "convolution");
        }
        if (c.has_bias)
          CheckCuda(LaunchAddChannelBias(y, in(2), s.out_numel, c.k, c.out_h * c.out_w, stream), "Conv bias");
        break;
      }
      case Kind::kPool:
        CheckCudnn(Libs().cudnnPoolingForward(cudnn, s.d.pool, &one, s.d.x, in(0), &zero, s.d.y, y), "pooling");
        break;
      case Kind::kSoftmax:
        CheckCudnn(Libs().cudnnSoftmaxForward(cudnn, p.softmax.log ? CUDNN_SOFTMAX_LOG : CUDNN_SOFTMAX_ACCURATE,
                                              CUDNN_SOFTMAX_MODE_CHANNEL, &one, s.d.x, in(0), &zero, s.d.x, y),
                   "softmax");
        break;
      case Kind::kBatchNorm:
        CheckCudnn(Libs().cudnnBatchNormalizationForwardInference(cudnn, CUDNN_BATCHNORM_SPATIAL, &one, &zero, s.d.x,
                                                                  in(0), s.d.x, y, s.d.c, in(1), in(2), in(3), in(4),
                                                                  p.batch_norm.epsilon),
                   "batch normalisation");
        break;
      case Kind::kGather: {
        const GatherPlan& g = p.gather;
        CheckCuda(LaunchGather(in(0), static_cast<const int64_t*>(buffers[p.inputs[1]]), y, g.outer, g.axis_dim,
                               g.indices, g.inner, stream),
                  "Gather");
        break;
      }
      case Kind::kLayerNorm: {
        const LayerNormPlan& l = p.layer_norm;
        CheckCuda(LaunchLayerNorm(in(0), in(1), l.has_bias ? in(2) : nullptr, y, l.rows, l.cols, l.epsilon, stream),
                  "LayerNormalization");
        break;
      }
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
  for (ValueId v : graph.inputs()) m.Allocate(v);
  for (NodeId id : graph.TopologicalOrder()) m.Plan(id);
  for (ValueId v : graph.outputs())
    if (m.buffers[v] == nullptr) m.Allocate(v);
  // Weights, once.
  for (ValueId v = 0; v < graph.num_values(); ++v) {
    const Value& val = graph.value(v);
    if (val.initializer == nullptr || m.buffers[v] == nullptr) continue;
    CheckCuda(cudaMemcpy(m.buffers[v], val.initializer->data(),
                         val.initializer->NumElements() * DTypeSize(val.initializer->dtype()), cudaMemcpyHostToDevice),
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
    at::Tensor t = inputs[k].to(ToAtenType(v.type.dtype)).contiguous();
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
    at::Tensor t = at::empty(std::vector<int64_t>(val.type.shape.begin(), val.type.shape.end()),
                             at::TensorOptions().dtype(ToAtenType(val.type.dtype)));
    CheckCuda(cudaMemcpy(t.data_ptr(), m.buffers[v], t.numel() * t.element_size(), cudaMemcpyDeviceToHost),
              "copying output '" + val.name + "'");
    out.push_back(t);
  }
  return out;
}

const std::vector<std::string>& CudaExecutor::HostNodes() const { return impl_->host_nodes; }

}  // namespace rlflow::cuda
