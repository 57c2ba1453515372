// Activation functions of other exporters (paddle2onnx, tf2onnx, torch's
// mobile networks): HardSigmoid, HardSwish, LeakyRelu, PRelu, Elu, Selu,
// Celu, Softplus, Softsign, ThresholdedRelu. Each is element-wise, keeps the
// input's type and shape, and follows the ONNX spec's formula (defaults
// included). The piecewise-linear ones also have symbolic semantics, so that
// the verifier can prove rules that rewrite into or out of them.
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/celu.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/elu.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/hardsigmoid.h>
#include <ATen/ops/hardswish.h>
#include <ATen/ops/leaky_relu.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/softplus.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>

#include "core/error.h"
#include "core/ops/helpers.h"
#include "core/symbolic.h"

namespace rlflow::ops {
namespace {

std::vector<TensorType> SameAsInput0(const ShapeContext& c) { return {c.input(0)}; }

OpDef Activation(const std::string& name, std::vector<AttrSpec> attrs, KernelFn kernel, double flops_per_element,
                 SymbolicFn symbolic = nullptr, int since_opset = 1) {
  OpDef d;
  d.name = name;
  d.since_opset = since_opset;
  d.attrs = std::move(attrs);
  d.shape = [name](const ShapeContext& c) {
    if (!IsFloatingPoint(c.input(0).dtype))
      c.Fail(name + " needs a floating-point input, got " + c.input(0).ToString());
    return SameAsInput0(c);
  };
  d.kernel = kernel;
  d.flops = PerOutputElement(flops_per_element);
  d.symbolic = symbolic;
  return d;
}

// Element-wise symbolic semantics from an expression of `x` and the context.
#define RLFLOW_SYM_ACT(EXPR)                                   \
  [](SymbolicContext& c) {                                     \
    SymTensor out;                                             \
    out.shape = c.in(0).shape;                                 \
    for (const z3::expr& x : c.in(0).v) out.v.push_back(EXPR); \
    c.outputs = {out};                                         \
  }

z3::expr Clamp01(const SymbolicContext& c, const z3::expr& y) {
  z3::expr zero = c.Real(0), one = c.Real(1);
  return z3::ite(y <= zero, zero, z3::ite(y >= one, one, y));
}

// y = max(0, min(1, alpha * x + beta)). ATen's hardsigmoid (one pass, as
// ONNX Runtime's kernel) where alpha and beta are its 1/6 and 1/2
// (hard-swish's gate, as paddle2onnx and tf2onnx write MobileNetV3's), else
// one output written in place. Composed of three ATen operators with a
// temporary each (2.6x the time of ATen's hardsigmoid on [1, 64, 48, 48]),
// it had cost the executor more than Add, Clip and Div, so the search took
// rewrites into that form, which ONNX Runtime runs slower (PP-LCNet at
// 96 x 96: 1.09x on the executor, 0.68x in ONNX Runtime).
RLFLOW_REGISTER_OP(Activation(
    "HardSigmoid", {FloatAttr("alpha", 0.2f), FloatAttr("beta", 0.5f)},
    [](KernelContext& c) {
      const float alpha = c.Float("alpha"), beta = c.Float("beta");
      if (alpha == 1.0f / 6.0f && beta == 0.5f) {
        c.outputs = {at::hardsigmoid(c.in(0))};
        return;
      }
      at::Tensor y = at::mul(c.in(0), static_cast<double>(alpha));
      y.add_(static_cast<double>(beta)).clamp_(0.0, 1.0);
      c.outputs = {y};
    },
    3, RLFLOW_SYM_ACT(Clamp01(c, c.Real(c.Float("alpha")) * x + c.Real(c.Float("beta"))))));

// y = x * max(0, min(1, x / 6 + 1 / 2)) (opset 14).
RLFLOW_REGISTER_OP(Activation(
    "HardSwish", {}, [](KernelContext& c) { c.outputs = {at::hardswish(c.in(0))}; }, 4,
    RLFLOW_SYM_ACT(x* Clamp01(c, x / c.Real(6) + c.Real(0.5))), 14));

RLFLOW_REGISTER_OP(Activation(
    "LeakyRelu", {FloatAttr("alpha", 0.01f)},
    [](KernelContext& c) { c.outputs = {at::leaky_relu(c.in(0), static_cast<double>(c.Float("alpha")))}; }, 2,
    RLFLOW_SYM_ACT(z3::ite(x >= c.Real(0), x, c.Real(c.Float("alpha")) * x))));

// y = alpha * (exp(x) - 1) for x < 0, x otherwise.
RLFLOW_REGISTER_OP(Activation(
    "Elu", {FloatAttr("alpha", 1.0f)},
    [](KernelContext& c) { c.outputs = {at::elu(c.in(0), static_cast<double>(c.Float("alpha")))}; }, 4));

// y = gamma * (alpha * (exp(x) - 1)) for x <= 0, gamma * x otherwise: ATen's
// elu with gamma as its output scale, in one pass (was where() over three
// temporaries).
RLFLOW_REGISTER_OP(Activation(
    "Selu", {FloatAttr("alpha", 1.67326319217681884765625f), FloatAttr("gamma", 1.05070102214813232421875f)},
    [](KernelContext& c) {
      const double alpha = c.Float("alpha"), gamma = c.Float("gamma");
      c.outputs = {at::elu(c.in(0), alpha, gamma, 1.0)};
    },
    5));

// y = max(0, x) + min(0, alpha * (exp(x / alpha) - 1)).
RLFLOW_REGISTER_OP(Activation(
    "Celu", {FloatAttr("alpha", 1.0f)},
    [](KernelContext& c) { c.outputs = {at::celu(c.in(0), static_cast<double>(c.Float("alpha")))}; }, 5, nullptr, 12));

// y = ln(exp(x) + 1), computed without overflow. Symbolically that formula
// over the verifier's uninterpreted Exp and Log (as elementwise.cc declares
// them), as the ONNX spec defines it: a rule may write Softplus out, and
// whether that form overflows in float32 where it is used is the rule's
// own argument (rules/written.rules, Mish).
RLFLOW_REGISTER_OP(Activation(
    "Softplus", {}, [](KernelContext& c) { c.outputs = {at::softplus(c.in(0), 1.0, 20.0)}; }, 4,
    RLFLOW_SYM_ACT(SymApply(x.ctx(), "Log", {SymApply(x.ctx(), "Exp", {x}) + c.Real(1)}))));

// y = x / (1 + |x|).
RLFLOW_REGISTER_OP(Activation(
    "Softsign", {}, [](KernelContext& c) { c.outputs = {c.in(0) / (at::abs(c.in(0)) + 1.0)}; }, 3));

// y = x for x > alpha, 0 otherwise.
RLFLOW_REGISTER_OP(Activation(
    "ThresholdedRelu", {FloatAttr("alpha", 1.0f)},
    [](KernelContext& c) {
      c.outputs = {at::threshold(c.in(0), static_cast<double>(c.Float("alpha")), 0.0)};  // one pass
    },
    1, RLFLOW_SYM_ACT(z3::ite(x > c.Real(c.Float("alpha")), x, c.Real(0)))));
#undef RLFLOW_SYM_ACT

// y = x for x >= 0, slope * x otherwise; slope broadcasts to x
// (unidirectionally: the output has x's shape).
OpDef PReluDef() {
  OpDef d;
  d.name = "PRelu";
  d.min_inputs = d.max_inputs = 2;
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& slope = c.input(1);
    if (!IsFloatingPoint(x.dtype)) c.Fail("PRelu needs a floating-point input, got " + x.ToString());
    if (slope.dtype != x.dtype) c.Fail("slope type " + slope.ToString() + " differs from the input's " + x.ToString());
    if (x.rank_known && slope.rank_known && BroadcastShapes(x.shape, slope.shape, c) != x.shape)
      c.Fail("slope " + slope.ToString() + " does not broadcast to the input " + x.ToString());
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& slope = c.in(1);
    // One slope, or one per channel (axis 1: torch's nn.PReLU exports
    // [C, 1, 1]): ATen's prelu, one pass. Other broadcasts: composed.
    const int64_t rank = x.dim(), k = slope.dim();
    bool per_channel = rank >= 2 && k <= rank && slope.numel() == x.size(1);
    for (int64_t a = 0; per_channel && a < k; ++a) per_channel = rank - k + a == 1 || slope.size(a) == 1;
    if (slope.numel() == 1 || per_channel) {
      c.outputs = {at::prelu(x, slope.reshape({slope.numel()}))};
      return;
    }
    c.outputs = {at::where(x >= 0, x, x * slope)};
  };
  d.flops = PerOutputElement(2.0);
  d.symbolic = [](SymbolicContext& c) {
    c.outputs = {SymBroadcast(c, c.in(0), c.in(1),
                              [](const z3::expr& x, const z3::expr& s) { return z3::ite(x >= 0, x, s * x); })};
  };
  return d;
}
RLFLOW_REGISTER_OP(PReluDef());

}  // namespace
}  // namespace rlflow::ops
