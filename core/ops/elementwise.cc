// Element-wise operators: unary maths, binary arithmetic with broadcasting,
// comparisons, Where, Clip, Cast, Identity and inference-mode Dropout.
#include <ATen/TensorOperators.h>
#include <ATen/ops/abs.h>
#include <ATen/ops/acos.h>
#include <ATen/ops/acosh.h>
#include <ATen/ops/add.h>
#include <ATen/ops/asin.h>
#include <ATen/ops/asinh.h>
#include <ATen/ops/atan.h>
#include <ATen/ops/atanh.h>
#include <ATen/ops/ceil.h>
#include <ATen/ops/clamp.h>
#include <ATen/ops/cos.h>
#include <ATen/ops/cosh.h>
#include <ATen/ops/div.h>
#include <ATen/ops/eq.h>
#include <ATen/ops/erf.h>
#include <ATen/ops/exp.h>
#include <ATen/ops/floor.h>
#include <ATen/ops/fmod.h>
#include <ATen/ops/frexp.h>
#include <ATen/ops/ge.h>
#include <ATen/ops/gt.h>
#include <ATen/ops/isinf.h>
#include <ATen/ops/isnan.h>
#include <ATen/ops/le.h>
#include <ATen/ops/log.h>
#include <ATen/ops/logical_and.h>
#include <ATen/ops/logical_not.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/logical_xor.h>
#include <ATen/ops/lt.h>
#include <ATen/ops/maximum.h>
#include <ATen/ops/minimum.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/neg.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/pow.h>
#include <ATen/ops/reciprocal.h>
#include <ATen/ops/relu.h>
#include <ATen/ops/remainder.h>
#include <ATen/ops/round.h>
#include <ATen/ops/sigmoid.h>
#include <ATen/ops/sign.h>
#include <ATen/ops/sin.h>
#include <ATen/ops/sinh.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/sub.h>
#include <ATen/ops/tan.h>
#include <ATen/ops/tanh.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros_like.h>

#include <cmath>
#include <optional>

#include "core/error.h"
#include "core/ops/helpers.h"
#include "core/symbolic.h"

namespace rlflow::ops {
namespace {

std::vector<TensorType> SameAsInput0(const ShapeContext& c) { return {c.input(0)}; }

OpDef Unary(const std::string& name, KernelFn kernel, double flops_per_element, bool exact_on_integers,
            SymbolicFn symbolic) {
  OpDef d;
  d.name = name;
  d.shape = SameAsInput0;
  d.kernel = kernel;
  d.flops = PerOutputElement(flops_per_element);
  d.exact_on_integers = exact_on_integers;
  d.symbolic = symbolic;
  d.half_kernel = name == "Identity";
  d.output_layout = name == "Identity" ? OpDef::OutputLayout::kSameView : OpDef::OutputLayout::kSameLayout;
  return d;
}

// Element-wise symbolic semantics from a per-element expression of `x`.
#define RLFLOW_SYM_UNARY(EXPR)                                 \
  [](SymbolicContext& c) {                                     \
    SymTensor out;                                             \
    out.shape = c.in(0).shape;                                 \
    for (const z3::expr& x : c.in(0).v) out.v.push_back(EXPR); \
    c.outputs = {out};                                         \
  }

#define RLFLOW_UNARY(NAME, EXPR, FLOPS, EXACT, SYMBOLIC) \
  RLFLOW_REGISTER_OP(Unary(                              \
      #NAME,                                             \
      [](KernelContext& c) {                             \
        const at::Tensor& x = c.in(0);                   \
        c.outputs = {EXPR};                              \
      },                                                 \
      FLOPS, EXACT, SYMBOLIC))

RLFLOW_UNARY(Relu, at::relu(x), 1, true, RLFLOW_SYM_UNARY(z3::ite(x > 0, x, x.ctx().real_val(0))));
RLFLOW_UNARY(Sigmoid, at::sigmoid(x), 4, false, nullptr);
// Tanh, Exp and Log as uninterpreted functions of the verifier (a proof
// holds for any function; Softplus is defined through Exp and Log).
RLFLOW_UNARY(Tanh, at::tanh(x), 4, false, RLFLOW_SYM_UNARY(SymApply(x.ctx(), "Tanh", {x})));
RLFLOW_UNARY(Erf, at::erf(x), 8, false, nullptr);
RLFLOW_UNARY(Sqrt, at::sqrt(x), 4, false, RLFLOW_SYM_UNARY(SymApply(x.ctx(), "Sqrt", {x})));
RLFLOW_UNARY(Exp, at::exp(x), 4, false, RLFLOW_SYM_UNARY(SymApply(x.ctx(), "Exp", {x})));
RLFLOW_UNARY(Log, at::log(x), 4, false, RLFLOW_SYM_UNARY(SymApply(x.ctx(), "Log", {x})));
RLFLOW_UNARY(Neg, at::neg(x), 1, true, RLFLOW_SYM_UNARY(-x));
RLFLOW_UNARY(Abs, at::abs(x), 1, true, RLFLOW_SYM_UNARY(z3::ite(x >= 0, x, -x)));
// Reciprocal: a real quotient, as Div (a rule that takes the reciprocal of
// a rule input is proved where it has no zero and applied only where it is
// a constant without zeros: DivisorInputs).
RLFLOW_UNARY(Reciprocal, at::reciprocal(x), 1, false, RLFLOW_SYM_UNARY(x.ctx().real_val(1) / x));
RLFLOW_UNARY(Floor, at::floor(x), 1, false, nullptr);
RLFLOW_UNARY(Ceil, at::ceil(x), 1, false, nullptr);
RLFLOW_UNARY(Identity, x, 0, true, RLFLOW_SYM_UNARY(x));
// Trigonometric and hyperbolic functions (rotary position embeddings,
// signal front ends), rounding (half to even, as ONNX) and the sign.
RLFLOW_UNARY(Sin, at::sin(x), 8, false, nullptr);
RLFLOW_UNARY(Cos, at::cos(x), 8, false, nullptr);
RLFLOW_UNARY(Tan, at::tan(x), 8, false, nullptr);
RLFLOW_UNARY(Asin, at::asin(x), 8, false, nullptr);
RLFLOW_UNARY(Acos, at::acos(x), 8, false, nullptr);
RLFLOW_UNARY(Atan, at::atan(x), 8, false, nullptr);
RLFLOW_UNARY(Sinh, at::sinh(x), 8, false, nullptr);
RLFLOW_UNARY(Cosh, at::cosh(x), 8, false, nullptr);
RLFLOW_UNARY(Asinh, at::asinh(x), 8, false, nullptr);
RLFLOW_UNARY(Acosh, at::acosh(x), 8, false, nullptr);
RLFLOW_UNARY(Atanh, at::atanh(x), 8, false, nullptr);
RLFLOW_UNARY(Round, at::round(x), 1, false, nullptr);
RLFLOW_UNARY(Sign, at::sign(x), 1, true,
             RLFLOW_SYM_UNARY(z3::ite(x > 0, x.ctx().real_val(1),
                                      z3::ite(x < 0, x.ctx().real_val(-1), x.ctx().real_val(0)))));
#undef RLFLOW_UNARY
#undef RLFLOW_SYM_UNARY

// Binary operators with multidirectional (numpy) broadcasting.
z3::expr SymAdd(const z3::expr& a, const z3::expr& b) { return a + b; }
z3::expr SymSub(const z3::expr& a, const z3::expr& b) { return a - b; }
z3::expr SymMul(const z3::expr& a, const z3::expr& b) { return a * b; }
z3::expr SymMax(const z3::expr& a, const z3::expr& b) { return z3::ite(a >= b, a, b); }
z3::expr SymMin(const z3::expr& a, const z3::expr& b) { return z3::ite(a <= b, a, b); }

// The type of a variadic element-wise op (Sum, Mean, Max, Min): one
// element type, the inputs' shapes broadcast together.
std::vector<TensorType> VariadicBroadcast(const ShapeContext& c) {
  TensorType out = c.input(0);
  for (int i = 1; i < c.num_inputs(); ++i) {
    const TensorType& t = c.input(i);
    if (t.dtype != out.dtype) c.Fail("input types differ: " + out.ToString() + " and " + t.ToString());
    if (!out.rank_known || !t.rank_known) {
      out.rank_known = false;
      out.shape.clear();
    } else {
      out.shape = BroadcastShapes(out.shape, t.shape, c);
    }
  }
  return {out};
}

OpDef Binary(const std::string& name, KernelFn kernel, bool bool_result = false,
             z3::expr (*sym)(const z3::expr&, const z3::expr&) = nullptr, SymbolicFn symbolic = nullptr) {
  OpDef d;
  d.name = name;
  d.commutative = name == "Add" || name == "Mul" || name == "Max" || name == "Min" || name == "Equal";
  d.min_inputs = d.max_inputs = 2;
  d.shape = [bool_result, name](const ShapeContext& c) {
    const TensorType& a = c.input(0);
    const TensorType& b = c.input(1);
    if (a.dtype != b.dtype && name != "Pow") c.Fail("input types differ: " + a.ToString() + " and " + b.ToString());
    TensorType out;
    out.dtype = bool_result ? DType::kBool : a.dtype;
    if (!a.rank_known || !b.rank_known) {
      out.rank_known = false;
      return std::vector<TensorType>{out};
    }
    out.shape = BroadcastShapes(a.shape, b.shape, c);
    return std::vector<TensorType>{out};
  };
  d.kernel = kernel;
  d.flops = PerOutputElement(1.0);
  d.exact_on_integers = sym != nullptr;
  d.symbolic = symbolic;
  return d;
}

#define RLFLOW_SYM_BINARY(F) [](SymbolicContext& c) { c.outputs = {SymBroadcast(c, c.in(0), c.in(1), F)}; }

bool IsIntegral(const at::Tensor& t) { return at::isIntegralType(t.scalar_type(), /*includeBool=*/true); }

RLFLOW_REGISTER_OP(Binary(
    "Add", [](KernelContext& c) { c.outputs = {at::add(c.in(0), c.in(1))}; }, false, SymAdd,
    RLFLOW_SYM_BINARY(SymAdd)));
RLFLOW_REGISTER_OP(Binary(
    "Sub", [](KernelContext& c) { c.outputs = {at::sub(c.in(0), c.in(1))}; }, false, SymSub,
    RLFLOW_SYM_BINARY(SymSub)));
RLFLOW_REGISTER_OP(Binary(
    "Mul", [](KernelContext& c) { c.outputs = {at::mul(c.in(0), c.in(1))}; }, false, SymMul,
    RLFLOW_SYM_BINARY(SymMul)));
// Division. Symbolically a real quotient: the verifier proves rules that
// divide by a rule input under the premise that the divisor has no zero
// element, and the matcher applies them only where that input is a constant
// with no zero (verifier/verify.cc, core/rewrite/matcher.cc). Fingerprints:
// a float64 quotient by a power of two is exact on integer-valued inputs (the
// generator's scalars are 8); other divisors are refused.
z3::expr SymDiv(const z3::expr& a, const z3::expr& b) { return a / b; }
OpDef DivDef() {
  OpDef d = Binary(
      "Div",
      [](KernelContext& c) {
        // ONNX integer division truncates toward zero, like C.
        c.outputs = {IsIntegral(c.in(0)) ? at::div(c.in(0), c.in(1), "trunc") : at::div(c.in(0), c.in(1))};
      },
      false, nullptr, RLFLOW_SYM_BINARY(SymDiv));
  d.fingerprint = [](KernelContext& c) {
    at::Tensor b = c.in(1).to(at::kDouble);
    at::Tensor m = std::get<0>(at::frexp(b.abs().clamp_min(1e-300)));  // mantissa: 0.5 exactly for powers of two
    if (b.eq(0).any().item<bool>() || m.ne(0.5).any().item<bool>())
      c.Fail("fingerprint semantics cover division by powers of two only");
    c.outputs = {at::div(c.in(0), c.in(1))};
  };
  return d;
}
RLFLOW_REGISTER_OP(DivDef());
// Mod: fmod=0 (integers only) takes the divisor's sign, as Python's %;
// fmod=1 the dividend's, as C's fmod. Shape arithmetic of exports uses it
// (Swin's window padding: (w - W % w) % w).
OpDef ModDef() {
  OpDef d = Binary("Mod", [](KernelContext& c) {
    c.outputs = {c.Int("fmod") ? at::fmod(c.in(0), c.in(1)) : at::remainder(c.in(0), c.in(1))};
  });
  d.attrs = {IntAttr("fmod", 0)};
  auto broadcast = d.shape;
  d.shape = [broadcast](const ShapeContext& c) {
    if (c.Int("fmod") == 0 && IsFloatingPoint(c.input(0).dtype)) c.Fail("fmod=0 is for integer tensors");
    return broadcast(c);
  };
  return d;
}
RLFLOW_REGISTER_OP(ModDef());
// Pow: a constant small integer exponent is a product; otherwise an
// uninterpreted function of base and exponent.
OpDef PowDef() {
  OpDef d = Binary("Pow", [](KernelContext& c) { c.outputs = {at::pow(c.in(0), c.in(1)).to(c.in(0).scalar_type())}; });
  d.symbolic = [](SymbolicContext& c) {
    const TensorData* e = c.constants.size() > 1 ? c.constants[1] : nullptr;
    if (e != nullptr && e->NumElements() == 1) {
      const double p = e->ToDouble()[0];
      if (p == std::floor(p) && p >= 1 && p <= 4) {
        SymTensor out = c.in(0);
        for (z3::expr& x : out.v) {
          z3::expr y = x;
          for (int k = 1; k < static_cast<int>(p); ++k) y = y * x;
          x = y;
        }
        out.shape = BroadcastShapes(c.in(0).shape, c.in(1).shape, c);
        if (out.shape != c.in(0).shape) c.Fail("a broadcast by the exponent is not modelled");
        c.outputs = {out};
        return;
      }
    }
    c.outputs = {SymBroadcast(c, c.in(0), c.in(1), [](const z3::expr& a, const z3::expr& b) {
      return SymApply(a.ctx(), "Pow", {a, b});
    })};
  };
  return d;
}
RLFLOW_REGISTER_OP(PowDef());
#undef RLFLOW_SYM_BINARY
// Max and Min: variadic in ONNX (one or more inputs); rules match their
// two-input form.
template <bool kMax>
OpDef ExtremumDef() {
  OpDef d = Binary(
      kMax ? "Max" : "Min",
      [](KernelContext& c) {
        at::Tensor y = c.in(0);
        for (int i = 1; i < c.num_inputs(); ++i) y = kMax ? at::maximum(y, c.in(i)) : at::minimum(y, c.in(i));
        c.outputs = {c.num_inputs() == 1 ? y.clone() : y};
      },
      false, kMax ? SymMax : SymMin,
      [](SymbolicContext& c) {
        SymTensor y = c.in(0);
        for (int i = 1; c.has(i); ++i) y = SymBroadcast(c, y, c.in(i), kMax ? SymMax : SymMin);
        c.outputs = {y};
      });
  d.min_inputs = 1;
  d.max_inputs = 1 << 20;
  d.shape = VariadicBroadcast;
  return d;
}
RLFLOW_REGISTER_OP(ExtremumDef<true>());
RLFLOW_REGISTER_OP(ExtremumDef<false>());
RLFLOW_REGISTER_OP(Binary(
    "Equal", [](KernelContext& c) { c.outputs = {at::eq(c.in(0), c.in(1))}; }, true));
RLFLOW_REGISTER_OP(Binary(
    "Less", [](KernelContext& c) { c.outputs = {at::lt(c.in(0), c.in(1))}; }, true));
RLFLOW_REGISTER_OP(Binary(
    "Greater", [](KernelContext& c) { c.outputs = {at::gt(c.in(0), c.in(1))}; }, true));
RLFLOW_REGISTER_OP(Binary(
    "LessOrEqual", [](KernelContext& c) { c.outputs = {at::le(c.in(0), c.in(1))}; }, true));
RLFLOW_REGISTER_OP(Binary(
    "GreaterOrEqual", [](KernelContext& c) { c.outputs = {at::ge(c.in(0), c.in(1))}; }, true));

// Logical operators on bool tensors (masks that exports compute, e.g. the
// attention masks of shifted windows).
OpDef Logical(const std::string& name, KernelFn kernel) {
  OpDef d = Binary(name, std::move(kernel), true);
  auto broadcast = d.shape;
  d.shape = [broadcast](const ShapeContext& c) {
    if (c.input(0).dtype != DType::kBool) c.Fail("inputs must be bool, got " + c.input(0).ToString());
    return broadcast(c);
  };
  return d;
}
RLFLOW_REGISTER_OP(Logical("And", [](KernelContext& c) { c.outputs = {at::logical_and(c.in(0), c.in(1))}; }));
RLFLOW_REGISTER_OP(Logical("Or", [](KernelContext& c) { c.outputs = {at::logical_or(c.in(0), c.in(1))}; }));
RLFLOW_REGISTER_OP(Logical("Xor", [](KernelContext& c) { c.outputs = {at::logical_xor(c.in(0), c.in(1))}; }));
OpDef NotDef() {
  OpDef d;
  d.name = "Not";
  d.min_inputs = d.max_inputs = 1;
  d.shape = [](const ShapeContext& c) {
    if (c.input(0).dtype != DType::kBool) c.Fail("input must be bool, got " + c.input(0).ToString());
    return std::vector<TensorType>{c.input(0)};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {at::logical_not(c.in(0))}; };
  d.flops = PerOutputElement(1.0);
  return d;
}
RLFLOW_REGISTER_OP(NotDef());

// IsNaN, IsInf (opset 10; detect_negative / detect_positive): a bool mask of
// a floating-point tensor.
OpDef FloatTest(const std::string& name, KernelFn kernel) {
  OpDef d;
  d.name = name;
  d.since_opset = 10;
  if (name == "IsInf") d.attrs = {IntAttr("detect_negative", 1), IntAttr("detect_positive", 1)};
  d.shape = [](const ShapeContext& c) {
    if (!IsFloatingPoint(c.input(0).dtype)) c.Fail("input must be floating-point, got " + c.input(0).ToString());
    TensorType out = c.input(0);
    out.dtype = DType::kBool;
    return std::vector<TensorType>{out};
  };
  d.kernel = kernel;
  d.flops = PerOutputElement(1.0);
  return d;
}
RLFLOW_REGISTER_OP(FloatTest("IsNaN", [](KernelContext& c) { c.outputs = {at::isnan(c.in(0))}; }));
RLFLOW_REGISTER_OP(FloatTest("IsInf", [](KernelContext& c) {
  const at::Tensor& x = c.in(0);
  at::Tensor inf = at::isinf(x);
  if (!c.Int("detect_negative")) inf = at::logical_and(inf, x > 0);
  if (!c.Int("detect_positive")) inf = at::logical_and(inf, x < 0);
  c.outputs = {inf};
}));

// Sum and Mean (variadic, with multidirectional broadcasting): the
// element-wise sum or mean of one or more tensors of one type.
OpDef VariadicDef(const std::string& name) {
  OpDef d;
  d.name = name;
  d.min_inputs = 1;
  d.max_inputs = 1 << 20;
  d.commutative = true;  // any order of its inputs (the matcher swaps two)
  d.shape = VariadicBroadcast;
  d.kernel = [](KernelContext& c) {
    at::Tensor y = c.in(0);
    for (int i = 1; i < c.num_inputs(); ++i) y = at::add(y, c.in(i));
    if (c.node().op == "Mean" && c.num_inputs() > 1) y = at::div(y, static_cast<double>(c.num_inputs()));
    // One input: a copy, not the input itself (no aliasing of a graph value).
    c.outputs = {c.num_inputs() == 1 ? y.clone() : y};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    return static_cast<double>(c.num_inputs()) * Numel(out[0]);
  };
  return d;
}
RLFLOW_REGISTER_OP(VariadicDef("Sum"));
RLFLOW_REGISTER_OP(VariadicDef("Mean"));

// Shrink: x + bias below -lambd, x - bias above lambd, 0 between.
OpDef ShrinkDef() {
  OpDef d;
  d.name = "Shrink";
  d.since_opset = 9;
  d.attrs = {FloatAttr("bias", 0.0f), FloatAttr("lambd", 0.5f)};
  d.shape = [](const ShapeContext& c) {
    if (!IsFloatingPoint(c.input(0).dtype)) c.Unsupported("Shrink of integers is not run");
    return std::vector<TensorType>{c.input(0)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const double bias = c.Float("bias"), lambd = c.Float("lambd");
    at::Tensor zero = at::zeros_like(x);
    c.outputs = {at::where(x < -lambd, x + bias, at::where(x > lambd, x - bias, zero))};
  };
  d.flops = PerOutputElement(3.0);
  return d;
}
RLFLOW_REGISTER_OP(ShrinkDef());

OpDef WhereDef() {
  OpDef d;
  d.name = "Where";
  d.min_inputs = d.max_inputs = 3;
  d.shape = [](const ShapeContext& c) {
    if (c.input(0).dtype != DType::kBool) c.Fail("condition must be bool");
    if (c.input(1).dtype != c.input(2).dtype) c.Fail("X and Y types differ");
    TensorType out = c.input(1);
    out.shape = BroadcastShapes(BroadcastShapes(c.input(0).shape, c.input(1).shape, c), c.input(2).shape, c);
    return std::vector<TensorType>{out};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {at::where(c.in(0), c.in(1), c.in(2))}; };
  d.flops = PerOutputElement(1.0);
  return d;
}
RLFLOW_REGISTER_OP(WhereDef());

OpDef ClipDef() {
  OpDef d;
  d.name = "Clip";
  d.since_opset = 11;
  d.min_inputs = 1;
  d.max_inputs = 3;
  d.shape = SameAsInput0;
  d.kernel = [](KernelContext& c) {
    c10::optional<at::Scalar> lo, hi;
    if (c.has(1)) lo = c.in(1).item();
    if (c.has(2)) hi = c.in(2).item();
    // Neither bound: the identity (at::clamp refuses to be called so).
    c.outputs = {lo || hi ? at::clamp(c.in(0), lo, hi) : c.in(0)};
  };
  d.flops = PerOutputElement(2.0);
  // Scalar bounds (constants in patterns): the clamp as if-then-else.
  d.symbolic = [](SymbolicContext& c) {
    auto bound = [&](int i) -> std::optional<z3::expr> {
      if (!c.has(i)) return std::nullopt;
      if (c.in(i).numel() != 1) c.Fail("Clip bounds must be scalars");
      return c.in(i).v[0];
    };
    std::optional<z3::expr> lo = bound(1), hi = bound(2);
    SymTensor out = c.in(0);
    for (z3::expr& x : out.v) {
      if (lo) x = z3::ite(x < *lo, *lo, x);
      if (hi) x = z3::ite(x > *hi, *hi, x);
    }
    c.outputs = {out};
  };
  return d;
}
RLFLOW_REGISTER_OP(ClipDef());

OpDef CastDef() {
  OpDef d;
  d.name = "Cast";
  d.half_kernel = true;
  d.attrs = {RequiredInt("to"), IntAttr("saturate", 1)};
  d.shape = [](const ShapeContext& c) {
    DType to = DTypeFromCode(static_cast<int32_t>(c.Int("to")));
    if (to == DType::kUndefined) c.Fail("unsupported target type " + std::to_string(c.Int("to")));
    if (to == DType::kString) c.Unsupported("Cast to string is not run");
    TensorType out = c.input(0);
    out.dtype = to;
    return std::vector<TensorType>{out};
  };
  d.kernel = [](KernelContext& c) {
    c.outputs = {c.in(0).to(ToAtenType(DTypeFromCode(static_cast<int32_t>(c.Int("to")))))};
  };
  return d;
}
RLFLOW_REGISTER_OP(CastDef());

// CastLike (opset 15): Cast to the element type of input 1 (torch.onnx and
// converters write it to give a constant the type of a tensor).
OpDef CastLikeDef() {
  OpDef d;
  d.name = "CastLike";
  d.since_opset = 15;
  d.half_kernel = true;
  d.min_inputs = 2;
  d.max_inputs = 2;
  d.attrs = {IntAttr("saturate", 1)};
  d.shape = [](const ShapeContext& c) {
    const DType to = c.input(1).dtype;
    if (to == DType::kString) c.Unsupported("CastLike to string is not run");
    TensorType out = c.input(0);
    out.dtype = to;
    return std::vector<TensorType>{out};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {c.in(0).to(c.in(1).scalar_type())}; };
  return d;
}
RLFLOW_REGISTER_OP(CastLikeDef());

// Dropout in inference: the identity (and an all-true mask if asked for).
OpDef DropoutDef() {
  OpDef d;
  d.name = "Dropout";
  d.half_kernel = true;
  d.min_inputs = 1;
  d.max_inputs = 3;
  d.max_outputs = 2;
  d.attrs = {IntAttr("seed", 0)};
  d.shape = [](const ShapeContext& c) {
    // The identity in inference, and in training mode with ratio 0 (as torch
    // exports some attention blocks). Training mode with another ratio is
    // random: the node is kept opaque.
    bool training = false;
    if (c.has_input(2)) {
      const TensorData* t = c.constant(2);
      if (t == nullptr) c.Unsupported("training_mode is computed at run time");
      std::vector<int64_t> v = t->ToInt64();
      training = !v.empty() && v[0] != 0;
    }
    if (training) {
      const TensorData* r = c.has_input(1) ? c.constant(1) : nullptr;
      if (r == nullptr) c.Unsupported("training_mode=true with a random ratio (0.5 by default, or computed)");
      for (double x : r->ToDouble())
        if (x != 0) c.Unsupported("training_mode=true with ratio " + std::to_string(x) + " is random");
    }
    TensorType mask = c.input(0);
    mask.dtype = DType::kBool;
    return std::vector<TensorType>{c.input(0), mask};
  };
  d.kernel = [](KernelContext& c) {
    c.outputs = {c.in(0)};
    if (c.num_outputs() > 1) c.outputs.push_back(at::ones_like(c.in(0), at::kBool));
  };
  d.output_layout = OpDef::OutputLayout::kSameView;
  return d;
}
RLFLOW_REGISTER_OP(DropoutDef());

}  // namespace
}  // namespace rlflow::ops
