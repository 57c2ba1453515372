#pragma once
// The CUDA backend's own kernels (elementwise, strided copies) for what
// cuBLAS and cuDNN do not cover. Plain pointers and plain structs: no torch,
// no rlflow headers, so that kernels.cu compiles with nvcc alone.
#include <cuda_runtime_api.h>

#include <cstdint>

#include "runtime/cuda/kinds.h"

namespace rlflow::cuda {

constexpr int kKernelMaxRank = 8;

// Strides over an output of `rank` dimensions.
struct IndexMap {
  int rank = 0;
  int64_t shape[kKernelMaxRank] = {};
  int64_t strides[kKernelMaxRank] = {};  // of the operand (0: broadcast)
};

// y[i] = op(x[i]) for i < n (p0, p1: the op's parameters, kinds.h).
cudaError_t LaunchUnary(UnaryOp op, const float* x, float* y, int64_t n, float p0, float p1, cudaStream_t stream);
// y = op(a, b) over the output described by `a_map` / `b_map` (the same
// shape, each with its operand's strides); `flat`: both are dense and of the
// output's shape.
cudaError_t LaunchBinary(BinaryOp op, const float* a, const float* b, float* y, int64_t n, const IndexMap& a_map,
                         const IndexMap& b_map, bool flat, cudaStream_t stream);
// out[out_offset + sum i_d * out_map.strides[d]] = in[in_offset + sum i_d *
// in_map.strides[d]] over every index of the maps' shape (n elements).
cudaError_t LaunchStridedCopy(const float* in, float* out, int64_t n, const IndexMap& in_map, const IndexMap& out_map,
                              int64_t in_offset, int64_t out_offset, cudaStream_t stream);
// y[i] = bias[(i / inner) % channels] added in place (a convolution's bias
// after the cuBLAS path; a Gemm's C row broadcast).
cudaError_t LaunchAddChannelBias(float* y, const float* bias, int64_t n, int64_t channels, int64_t inner,
                                 cudaStream_t stream);

// out[o, i, j] = data[o, indices[i], j] (o < outer, i < n_indices, j <
// inner); a negative index counts from the end, one out of range gives 0.
cudaError_t LaunchGather(const float* data, const int64_t* indices, float* out, int64_t outer, int64_t axis_dim,
                         int64_t n_indices, int64_t inner, cudaStream_t stream);
// Each of `rows` rows of `cols`: (x - mean) / sqrt(var + epsilon) * scale
// (+ bias; nullptr: none), population variance, two passes.
cudaError_t LaunchLayerNorm(const float* x, const float* scale, const float* bias, float* y, int64_t rows, int64_t cols,
                            float epsilon, cudaStream_t stream);

// y = cond ? a : b over the output described by the three maps (numpy
// broadcasting, as LaunchBinary).
cudaError_t LaunchWhere(const bool* cond, const float* a, const float* b, float* y, int64_t n, const IndexMap& cond_map,
                        const IndexMap& a_map, const IndexMap& b_map, cudaStream_t stream);
// y[i] = value for i < n.
cudaError_t LaunchFill(float* y, int64_t n, float value, cudaStream_t stream);
// y[o] = op over r < count of x[Offset(o, kept) + Offset(r, reduced)] for
// o < outputs: one block per output element.
cudaError_t LaunchReduce(ReduceOp op, const float* x, float* y, int64_t outputs, int64_t count, const IndexMap& kept,
                         const IndexMap& reduced, cudaStream_t stream);

}  // namespace rlflow::cuda
