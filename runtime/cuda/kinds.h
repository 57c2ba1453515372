#pragma once
// The operations of the CUDA backend's own kernels, named once for the
// plans (plain C++, plan.h) and the kernels (kernels.h): no headers.

namespace rlflow::cuda {

enum class UnaryOp : int {
  kRelu,
  kSigmoid,
  kTanh,
  kExp,
  kLog,
  kSqrt,
  kNeg,
  kAbs,
  kErf,
  kFloor,
  kCeil,
  kClip,         // p0, p1: min and max
  kLeakyRelu,    // p0: alpha
  kHardSigmoid,  // p0, p1: alpha and beta
  kHardSwish,
  kReciprocal,
  kElu,   // p0: alpha
  kSelu,  // p0, p1: alpha and gamma
  kCelu,  // p0: alpha
  kSoftplus,
  kSoftsign,
  kThresholdedRelu,  // p0: alpha
};

enum class BinaryOp : int { kAdd, kSub, kMul, kDiv, kPow, kMax, kMin, kPRelu };

// How a reduction maps its elements (x, |x|, x^2, exp(x - max)), combines
// them (sum, max, min, product) and finishes (mean, sqrt, log, + max).
enum class ReduceOp : int { kSum, kMean, kMax, kMin, kProd, kSumSquare, kL1, kL2, kLogSum, kLogSumExp };

}  // namespace rlflow::cuda
