// Elementwise and data-movement kernels of the CUDA backend (no torch).
#include "runtime/cuda/kernels.h"

namespace rlflow::cuda {
namespace {

constexpr int kThreads = 256;

unsigned Blocks(int64_t n) {
  const int64_t b = (n + kThreads - 1) / kThreads;
  return static_cast<unsigned>(b < 65535 * 32 ? b : 65535 * 32);
}

__device__ float Unary(UnaryOp op, float x, float p0, float p1) {
  switch (op) {
    case UnaryOp::kRelu: return x > 0.0f ? x : 0.0f;
    case UnaryOp::kSigmoid: return 1.0f / (1.0f + expf(-x));
    case UnaryOp::kTanh: return tanhf(x);
    case UnaryOp::kExp: return expf(x);
    case UnaryOp::kLog: return logf(x);
    case UnaryOp::kSqrt: return sqrtf(x);
    case UnaryOp::kNeg: return -x;
    case UnaryOp::kAbs: return fabsf(x);
    case UnaryOp::kErf: return erff(x);
    case UnaryOp::kClip: return fminf(fmaxf(x, p0), p1);
    case UnaryOp::kLeakyRelu: return x >= 0.0f ? x : p0 * x;
    case UnaryOp::kHardSigmoid: return fminf(fmaxf(p0 * x + p1, 0.0f), 1.0f);
    case UnaryOp::kHardSwish: return x * fminf(fmaxf(x / 6.0f + 0.5f, 0.0f), 1.0f);
    case UnaryOp::kReciprocal: return 1.0f / x;
    case UnaryOp::kFloor: return floorf(x);
    case UnaryOp::kCeil: return ceilf(x);
    case UnaryOp::kElu: return x >= 0.0f ? x : p0 * expm1f(x);
    case UnaryOp::kSelu: return x > 0.0f ? p1 * x : p1 * p0 * expm1f(x);
    case UnaryOp::kCelu: return fmaxf(x, 0.0f) + fminf(0.0f, p0 * expm1f(x / p0));
    case UnaryOp::kSoftplus: return x > 20.0f ? x : log1pf(expf(x));  // ATen's threshold
    case UnaryOp::kSoftsign: return x / (1.0f + fabsf(x));
    case UnaryOp::kThresholdedRelu: return x > p0 ? x : 0.0f;
  }
  return x;
}

__device__ float Binary(BinaryOp op, float a, float b) {
  switch (op) {
    case BinaryOp::kAdd: return a + b;
    case BinaryOp::kSub: return a - b;
    case BinaryOp::kMul: return a * b;
    case BinaryOp::kDiv: return a / b;
    case BinaryOp::kPow: return powf(a, b);
    case BinaryOp::kMax: return fmaxf(a, b);
    case BinaryOp::kMin: return fminf(a, b);
    case BinaryOp::kPRelu: return a >= 0.0f ? a : a * b;
  }
  return a;
}

// Offset of flat output index i in an operand described by `map`.
__device__ int64_t Offset(int64_t i, const IndexMap& map) {
  int64_t off = 0;
  for (int d = map.rank - 1; d >= 0; --d) {
    const int64_t idx = i % map.shape[d];
    i /= map.shape[d];
    off += idx * map.strides[d];
  }
  return off;
}

__global__ void UnaryKernel(UnaryOp op, const float* x, float* y, int64_t n, float p0, float p1) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = Unary(op, x[i], p0, p1);
}

__global__ void BinaryFlatKernel(BinaryOp op, const float* a, const float* b, float* y, int64_t n) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = Binary(op, a[i], b[i]);
}

__global__ void BinaryKernel(BinaryOp op, const float* a, const float* b, float* y, int64_t n, IndexMap am,
                             IndexMap bm) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = Binary(op, a[Offset(i, am)], b[Offset(i, bm)]);
}

__global__ void CopyKernel(const float* in, float* out, int64_t n, IndexMap im, IndexMap om, int64_t in_offset,
                           int64_t out_offset) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    out[out_offset + Offset(i, om)] = in[in_offset + Offset(i, im)];
}

__global__ void ChannelBiasKernel(float* y, const float* bias, int64_t n, int64_t channels, int64_t inner) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] += bias[(i / inner) % channels];
}

__global__ void GatherKernel(const float* data, const int64_t* indices, float* out, int64_t outer, int64_t axis_dim,
                             int64_t n_indices, int64_t inner) {
  const int64_t n = outer * n_indices * inner;
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x) {
    const int64_t j = i % inner, k = (i / inner) % n_indices, o = i / (inner * n_indices);
    int64_t at = indices[k];
    if (at < 0) at += axis_dim;
    out[i] = at >= 0 && at < axis_dim ? data[(o * axis_dim + at) * inner + j] : 0.0f;
  }
}

__global__ void WhereKernel(const bool* c, const float* a, const float* b, float* y, int64_t n, IndexMap cm,
                            IndexMap am, IndexMap bm) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = c[Offset(i, cm)] ? a[Offset(i, am)] : b[Offset(i, bm)];
}

__global__ void FillKernel(float* y, int64_t n, float value) {
  for (int64_t i = blockIdx.x * static_cast<int64_t>(blockDim.x) + threadIdx.x; i < n;
       i += static_cast<int64_t>(gridDim.x) * blockDim.x)
    y[i] = value;
}

// One block per row; blockDim.x threads reduce through shared memory.
__device__ float BlockSum(float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] += shared[threadIdx.x + s];
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

__global__ void LayerNormKernel(const float* x, const float* scale, const float* bias, float* y, int64_t cols,
                                float epsilon) {
  __shared__ float shared[kThreads];
  const float* row = x + blockIdx.x * cols;
  float* out = y + blockIdx.x * cols;
  float sum = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sum += row[j];
  const float mean = BlockSum(sum, shared) / static_cast<float>(cols);
  float sq = 0.0f;
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x) sq += (row[j] - mean) * (row[j] - mean);
  const float inv = rsqrtf(BlockSum(sq, shared) / static_cast<float>(cols) + epsilon);
  for (int64_t j = threadIdx.x; j < cols; j += blockDim.x)
    out[j] = (row[j] - mean) * inv * scale[j] + (bias != nullptr ? bias[j] : 0.0f);
}

// The block's combination of every thread's `v` (sum, max, min or product).
enum class Combine { kSum, kMax, kMin, kProd };
__device__ float CombineTwo(Combine c, float a, float b) {
  switch (c) {
    case Combine::kSum: return a + b;
    case Combine::kMax: return fmaxf(a, b);
    case Combine::kMin: return fminf(a, b);
    case Combine::kProd: return a * b;
  }
  return a;
}
__device__ float BlockCombine(Combine c, float v, float* shared) {
  shared[threadIdx.x] = v;
  __syncthreads();
  for (unsigned s = blockDim.x / 2; s > 0; s >>= 1) {
    if (threadIdx.x < s) shared[threadIdx.x] = CombineTwo(c, shared[threadIdx.x], shared[threadIdx.x + s]);
    __syncthreads();
  }
  const float total = shared[0];
  __syncthreads();
  return total;
}

// One block per output element. ReduceLogSumExp takes the maximum first
// (a second pass), as ATen's logsumexp does, so that exp never overflows.
__global__ void ReduceKernel(ReduceOp op, const float* x, float* y, int64_t count, IndexMap kept, IndexMap reduced) {
  __shared__ float shared[kThreads];
  const float* base = x + Offset(blockIdx.x, kept);
  Combine combine = Combine::kSum;
  float init = 0.0f;
  if (op == ReduceOp::kMax || op == ReduceOp::kLogSumExp) {
    combine = Combine::kMax;
    init = -INFINITY;
  } else if (op == ReduceOp::kMin) {
    combine = Combine::kMin;
    init = INFINITY;
  } else if (op == ReduceOp::kProd) {
    combine = Combine::kProd;
    init = 1.0f;
  }
  float acc = init;
  for (int64_t r = threadIdx.x; r < count; r += blockDim.x) {
    float v = base[Offset(r, reduced)];
    if (op == ReduceOp::kSumSquare || op == ReduceOp::kL2) v = v * v;
    if (op == ReduceOp::kL1) v = fabsf(v);
    acc = CombineTwo(combine, acc, v);
  }
  float total = BlockCombine(combine, acc, shared);
  if (op == ReduceOp::kLogSumExp) {
    const float max = total;
    const float shift = isinf(max) ? 0.0f : max;  // all -inf (or an inf): exp(x - 0)
    float sum = 0.0f;
    for (int64_t r = threadIdx.x; r < count; r += blockDim.x) sum += expf(base[Offset(r, reduced)] - shift);
    total = logf(BlockCombine(Combine::kSum, sum, shared)) + shift;
  }
  if (threadIdx.x != 0) return;
  if (op == ReduceOp::kMean) total /= static_cast<float>(count);
  if (op == ReduceOp::kL2) total = sqrtf(total);
  if (op == ReduceOp::kLogSum) total = logf(total);
  y[blockIdx.x] = total;
}

}  // namespace

cudaError_t LaunchWhere(const bool* cond, const float* a, const float* b, float* y, int64_t n, const IndexMap& cond_map,
                        const IndexMap& a_map, const IndexMap& b_map, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  WhereKernel<<<Blocks(n), kThreads, 0, stream>>>(cond, a, b, y, n, cond_map, a_map, b_map);
  return cudaGetLastError();
}

cudaError_t LaunchFill(float* y, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  FillKernel<<<Blocks(n), kThreads, 0, stream>>>(y, n, value);
  return cudaGetLastError();
}

cudaError_t LaunchReduce(ReduceOp op, const float* x, float* y, int64_t outputs, int64_t count, const IndexMap& kept,
                         const IndexMap& reduced, cudaStream_t stream) {
  if (outputs == 0) return cudaSuccess;
  if (outputs > 2147483647) return cudaErrorInvalidValue;
  ReduceKernel<<<static_cast<unsigned>(outputs), kThreads, 0, stream>>>(op, x, y, count, kept, reduced);
  return cudaGetLastError();
}

cudaError_t LaunchGather(const float* data, const int64_t* indices, float* out, int64_t outer, int64_t axis_dim,
                         int64_t n_indices, int64_t inner, cudaStream_t stream) {
  const int64_t n = outer * n_indices * inner;
  if (n == 0) return cudaSuccess;
  GatherKernel<<<Blocks(n), kThreads, 0, stream>>>(data, indices, out, outer, axis_dim, n_indices, inner);
  return cudaGetLastError();
}

cudaError_t LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols,
                            float epsilon, cudaStream_t stream) {
  if (rows == 0 || cols == 0) return cudaSuccess;
  if (rows > 2147483647) return cudaErrorInvalidValue;
  LayerNormKernel<<<static_cast<unsigned>(rows), kThreads, 0, stream>>>(x, scale, bias, y, cols, epsilon);
  return cudaGetLastError();
}

cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, float p0, float p1, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  UnaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, x, y, n, p0, p1);
  return cudaGetLastError();
}

cudaError_t LaunchBinary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, const IndexMap& a_map,
                         const IndexMap& b_map, bool flat, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  if (flat) {
    BinaryFlatKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, b, y, n);
  } else {
    BinaryKernel<<<Blocks(n), kThreads, 0, stream>>>(op, a, b, y, n, a_map, b_map);
  }
  return cudaGetLastError();
}

cudaError_t LaunchStridedCopy(const float* in, float* out, int64_t n, const IndexMap& in_map, const IndexMap& out_map,
                              int64_t in_offset, int64_t out_offset, cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  CopyKernel<<<Blocks(n), kThreads, 0, stream>>>(in, out, n, in_map, out_map, in_offset, out_offset);
  return cudaGetLastError();
}

cudaError_t LaunchAddChannelBias(float* y, const float* bias, int64_t n, int64_t channels, int64_t inner,
                                 cudaStream_t stream) {
  if (n == 0) return cudaSuccess;
  ChannelBiasKernel<<<Blocks(n), kThreads, 0, stream>>>(y, bias, n, channels, inner);
  return cudaGetLastError();
}

}  // namespace rlflow::cuda
