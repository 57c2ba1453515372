// Operators common in other exporters' models (detectors, segmenters, style
// transfer, text models): Tile, DepthToSpace, SpaceToDepth, ArgMax, ArgMin,
// TopK, InstanceNormalization. Shape rules, ATen kernels, FLOPs; each has a
// conformance case against ONNX Runtime.
#include "core/error.h"
#include "core/ops/helpers.h"

namespace rlflow::ops {
namespace {

OpDef TileDef() {
  OpDef d;
  d.name = "Tile";
  d.half_kernel = true;
  d.min_inputs = d.max_inputs = 2;
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const int64_t rank = RankOf(c, 0);
    if (!IsInteger(c.input(1).dtype)) c.Fail("repeats must be int64, got " + c.input(1).ToString());
    auto repeats = c.MaybeConstantInts(1);
    if (!repeats) return std::vector<TensorType>{UnknownDims(x.dtype, rank)};
    if (static_cast<int64_t>(repeats->size()) != rank)
      c.Fail("repeats has " + std::to_string(repeats->size()) + " values for a rank-" + std::to_string(rank) +
             " input");
    Shape out = x.shape;
    for (int64_t k = 0; k < rank; ++k) {
      if ((*repeats)[k] < 0) c.Fail("repeats must be >= 0");
      if (out[k] >= 0 && __builtin_mul_overflow(out[k], (*repeats)[k], &out[k]))
        c.Fail("the output has more than 2^63 elements");
    }
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {c.in(0).repeat(c.IntsInput(1))}; };
  return d;
}
RLFLOW_REGISTER_OP(TileDef());

// DepthToSpace (DCR or CRD) and SpaceToDepth: data movement on NCHW.
OpDef DepthToSpaceDef(bool to_space) {
  OpDef d;
  d.name = to_space ? "DepthToSpace" : "SpaceToDepth";
  d.half_kernel = true;
  d.attrs = {RequiredInt("blocksize")};
  if (to_space) d.attrs.push_back(StringAttr("mode", "DCR"));
  d.shape = [to_space](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (RankOf(c, 0) != 4) c.Fail("input must be 4-D (NCHW), got " + x.ToString());
    const int64_t b = c.Int("blocksize");
    if (b <= 0) c.Fail("blocksize must be positive");
    if (to_space && c.String("mode") != "DCR" && c.String("mode") != "CRD")
      c.Fail("mode must be DCR or CRD, got '" + c.String("mode") + "'");
    Shape out = x.shape;
    auto scale = [&](int k, bool up) {
      if (out[k] < 0) return;
      if (!up && out[k] % b != 0) c.Fail("dimension " + std::to_string(k) + " is not divisible by the blocksize");
      out[k] = up ? out[k] * b : out[k] / b;
    };
    scale(1, !to_space);
    if (to_space && out[1] >= 0 && x.shape[1] % (b * b) != 0) c.Fail("channels are not divisible by blocksize^2");
    if (to_space && out[1] >= 0) out[1] = x.shape[1] / (b * b);
    if (!to_space && out[1] >= 0) out[1] = x.shape[1] * b * b;
    scale(2, to_space);
    scale(3, to_space);
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t b = c.Int("blocksize");
    const int64_t n = x.size(0), ch = x.size(1), h = x.size(2), w = x.size(3);
    if (c.node().op == "DepthToSpace") {
      if (c.String("mode") == "DCR")
        c.outputs = {x.reshape({n, b, b, ch / (b * b), h, w})
                         .permute({0, 3, 4, 1, 5, 2})
                         .reshape({n, ch / (b * b), h * b, w * b})};
      else
        c.outputs = {x.reshape({n, ch / (b * b), b, b, h, w})
                         .permute({0, 1, 4, 2, 5, 3})
                         .reshape({n, ch / (b * b), h * b, w * b})};
    } else {
      c.outputs = {
          x.reshape({n, ch, h / b, b, w / b, b}).permute({0, 3, 5, 1, 2, 4}).reshape({n, ch * b * b, h / b, w / b})};
    }
  };
  return d;
}
RLFLOW_REGISTER_OP(DepthToSpaceDef(true));
RLFLOW_REGISTER_OP(DepthToSpaceDef(false));

OpDef ArgDef(bool max) {
  OpDef d;
  d.name = max ? "ArgMax" : "ArgMin";
  d.attrs = {IntAttr("axis", 0), IntAttr("keepdims", 1), IntAttr("select_last_index", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
    Shape out = x.shape;
    if (c.Int("keepdims"))
      out[axis] = 1;
    else
      out.erase(out.begin() + axis);
    return std::vector<TensorType>{Type(DType::kInt64, out)};
  };
  d.kernel = [](KernelContext& c) {
    const bool max = c.node().op == "ArgMax";
    at::Tensor x = c.in(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    const bool keep = c.Int("keepdims") != 0;
    // ATen returns the first index of ties; select_last_index searches the
    // flipped axis.
    if (c.Int("select_last_index")) {
      at::Tensor flipped = x.flip({axis});
      at::Tensor i = max ? flipped.argmax(axis, keep) : flipped.argmin(axis, keep);
      c.outputs = {(x.size(axis) - 1) - i};
    } else {
      c.outputs = {max ? x.argmax(axis, keep) : x.argmin(axis, keep)};
    }
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(ArgDef(true));
RLFLOW_REGISTER_OP(ArgDef(false));

OpDef TopKDef() {
  OpDef d;
  d.name = "TopK";
  d.since_opset = 10;
  d.min_inputs = d.max_inputs = 2;
  d.min_outputs = d.max_outputs = 2;
  d.attrs = {IntAttr("axis", -1), IntAttr("largest", 1), IntAttr("sorted", 1)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
    if (c.input(1).dtype != DType::kInt64) c.Fail("K must be int64, got " + c.input(1).ToString());
    Shape out = x.shape;
    auto k = c.MaybeConstantInts(1);
    out[axis] = kUnknownDim;
    if (k) {
      if (k->size() != 1 || (*k)[0] < 0) c.Fail("K must be one non-negative value");
      if (x.shape[axis] >= 0 && (*k)[0] > x.shape[axis])
        c.Fail("K = " + std::to_string((*k)[0]) + " is larger than the axis (" + std::to_string(x.shape[axis]) + ")");
      out[axis] = (*k)[0];
    }
    return std::vector<TensorType>{Type(x.dtype, out), Type(DType::kInt64, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    const int64_t k = c.IntsInput(1).at(0);
    if (k > x.size(axis)) c.Fail("K = " + std::to_string(k) + " is larger than the axis");
    auto [values, indices] = at::topk(x, k, axis, c.Int("largest") != 0, /*sorted=*/true);
    c.outputs = {values, indices};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return 4.0 * Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(TopKDef());

// y = scale * (x - mean) / sqrt(var + epsilon) + B, statistics per instance
// and channel over the spatial axes.
OpDef InstanceNormalizationDef() {
  OpDef d;
  d.name = "InstanceNormalization";
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {FloatAttr("epsilon", 1e-5f)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (!IsFloatingPoint(x.dtype)) c.Fail("input must be floating point, got " + x.ToString());
    if (RankOf(c, 0) < 3) c.Fail("input must have spatial axes, got " + x.ToString());
    for (int i : {1, 2}) {
      const TensorType& p = c.input(i);
      if (p.rank_known && (p.rank() != 1 || (x.shape[1] >= 0 && p.shape[0] >= 0 && p.shape[0] != x.shape[1])))
        c.Fail("scale and B must be [C], got " + p.ToString() + " for " + x.ToString());
    }
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    c.outputs = {at::instance_norm(c.in(0), c.in(1), c.in(2), /*running_mean=*/{}, /*running_var=*/{},
                                   /*use_input_stats=*/true, /*momentum=*/0.0, static_cast<double>(c.Float("epsilon")),
                                   /*cudnn_enabled=*/false)};
  };
  d.flops = PerOutputElement(8.0);
  return d;
}
RLFLOW_REGISTER_OP(InstanceNormalizationDef());

}  // namespace
}  // namespace rlflow::ops
