// Resize (opsets 11 to 17; Upsample and Resize-10 are upgraded to it at
// import, see core/onnx_upgrade.h): the shape rule for every mode, and ATen
// kernels for the forms exporters write for 2-D images (N and C not scaled):
//   - nearest, asymmetric coordinates, floor rounding (torch's `nearest`,
//     Upsample): ATen's upsample_nearest2d;
//   - nearest, half_pixel / pytorch_half_pixel coordinates, round_prefer_ceil
//     (torch's `nearest-exact`): ATen's _upsample_nearest_exact2d;
//   - linear, half_pixel / pytorch_half_pixel (output sides over 1) or
//     align_corners coordinates: ATen's upsample_bilinear2d.
// Other forms (cubic, tf_crop_and_resize, linear with asymmetric
// coordinates, scaling N or C, other ranks) are valid ONNX the executor does
// not run: the node is kept opaque.
#include <ATen/ops/_upsample_nearest_exact2d.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_nearest2d.h>

#include <cmath>

#include "core/error.h"
#include "core/ops/helpers.h"

namespace rlflow::ops {
namespace {

struct ResizeForm {
  std::string mode, coordinates, nearest;
};

ResizeForm FormOf(const AttrReader& c) {
  return {c.String("mode"), c.String("coordinate_transformation_mode"), c.String("nearest_mode")};
}

// Why the executor cannot run this form ("" if it can), given the output size.
std::string Unrunnable(const ResizeForm& f, int64_t rank, const std::vector<double>& scales, const Shape& in,
                       const Shape& out) {
  if (rank != 4) return "only 4-D (NCHW) inputs are run";
  if (!scales.empty() && (scales[0] != 1.0 || scales[1] != 1.0)) return "scaling N or C is not run";
  if (f.coordinates == "tf_crop_and_resize") return "tf_crop_and_resize is not run";
  if (f.mode == "nearest") {
    if (f.coordinates == "asymmetric" && f.nearest == "floor") return "";
    if ((f.coordinates == "half_pixel" || f.coordinates == "pytorch_half_pixel") && f.nearest == "round_prefer_ceil")
      return "";
    return "nearest with " + f.coordinates + " coordinates and " + f.nearest + " rounding is not run";
  }
  if (f.mode == "linear") {
    // ONNX computes align_corners from the unrounded in * scale: the same as
    // ATen only where that is the output size.
    if (f.coordinates == "align_corners") {
      for (size_t k = 0; k < out.size() && k < in.size(); ++k)
        if (in[k] >= 0 && out[k] >= 0 && static_cast<double>(in[k]) * scales[k] != static_cast<double>(out[k]))
          return "linear align_corners with scales that do not give whole sizes is not run";
      return "";
    }
    if (f.coordinates == "half_pixel") return "";
    // pytorch_half_pixel is half_pixel except for an output side of 1.
    if (f.coordinates == "pytorch_half_pixel" && out.size() == 4 && out[2] > 1 && out[3] > 1) return "";
    return "linear with " + f.coordinates + " coordinates is not run";
  }
  return "mode '" + f.mode + "' is not run";
}

// Scales from input 2, or empty when sizes (input 3) are given; nullopt if
// the one that is given is computed at run time.
std::optional<std::vector<double>> ConstantScales(const ShapeContext& c) {
  if (!c.has_input(2)) return std::vector<double>{};
  const TensorData* t = c.constant(2);
  if (t == nullptr) return std::nullopt;
  return t->ToDouble();
}

OpDef ResizeDef() {
  OpDef d;
  d.name = "Resize";
  d.since_opset = 11;
  d.min_inputs = 1;
  d.max_inputs = 4;
  d.attrs = {StringAttr("coordinate_transformation_mode", "half_pixel"),
             FloatAttr("cubic_coeff_a", -0.75f),
             IntAttr("exclude_outside", 0),
             FloatAttr("extrapolation_value", 0.0f),
             StringAttr("mode", "nearest"),
             StringAttr("nearest_mode", "round_prefer_floor")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const int64_t rank = RankOf(c, 0);
    if (!IsFloatingPoint(x.dtype)) c.Unsupported("Resize of " + x.ToString() + " is not run");
    const bool has_sizes = c.has_input(3) && c.Length1D(3) != 0;
    auto scales = ConstantScales(c);
    if (!has_sizes && scales && scales->empty()) c.Fail("neither scales nor sizes is given");
    Shape out(rank, kUnknownDim);
    std::vector<double> used_scales;
    if (has_sizes) {
      auto sizes = c.MaybeConstantInts(3);
      if (sizes) {
        if (static_cast<int64_t>(sizes->size()) != rank)
          c.Fail("sizes has " + std::to_string(sizes->size()) + " values for a rank-" + std::to_string(rank) +
                 " input");
        out = *sizes;
        for (int64_t k = 0; k < rank; ++k)
          used_scales.push_back(x.shape[k] > 0 ? static_cast<double>(out[k]) / static_cast<double>(x.shape[k]) : 1.0);
      }
    } else if (scales) {
      if (static_cast<int64_t>(scales->size()) != rank)
        c.Fail("scales has " + std::to_string(scales->size()) + " values for a rank-" + std::to_string(rank) +
               " input");
      for (int64_t k = 0; k < rank; ++k) {
        if (!((*scales)[k] > 0))
          c.Fail("scale " + std::to_string((*scales)[k]) + " at axis " + std::to_string(k) + " is not positive");
        if (x.shape[k] >= 0) out[k] = static_cast<int64_t>(std::floor(static_cast<double>(x.shape[k]) * (*scales)[k]));
      }
      used_scales = *scales;
    }
    if (used_scales.empty() && FormOf(c).mode == "linear" && FormOf(c).coordinates == "align_corners" && !has_sizes)
      c.Unsupported("Resize: linear align_corners with scales computed at run time is not run");
    if (used_scales.empty()) {
      // Scales or sizes computed at run time: N and C assumed kept (the
      // runnable forms; the kernel checks).
      if (rank >= 2) out[0] = x.shape[0], out[1] = x.shape[1];
      used_scales.assign(static_cast<size_t>(rank), 1.0);
    }
    std::string why = Unrunnable(FormOf(c), rank, used_scales, x.shape, out);
    if (!why.empty()) c.Unsupported("Resize: " + why);
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const ResizeForm f = FormOf(c);
    std::vector<int64_t> out;
    std::vector<double> scales_used;
    c10::optional<double> sh, sw;
    if (c.has(3) && c.in(3).numel() > 0) {
      out = c.IntsInput(3);
    } else {
      at::Tensor s = c.in(2).to(at::kDouble).contiguous();
      std::vector<double> scales(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
      for (int64_t k = 0; k < x.dim(); ++k)
        out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x.size(k)) * scales[k])));
      sh = scales[2];
      sw = scales[3];
      scales_used = scales;
    }
    std::vector<double> ratio;
    for (int64_t k = 0; k < x.dim(); ++k) ratio.push_back(static_cast<double>(out[k]) / static_cast<double>(x.size(k)));
    std::string why = Unrunnable(f, x.dim(), sh ? scales_used : ratio, Shape(x.sizes().begin(), x.sizes().end()),
                                 Shape(out.begin(), out.end()));
    if (!why.empty()) c.Fail("Resize: " + why);
    const std::vector<int64_t> hw = {out[2], out[3]};
    if (f.mode == "nearest" && f.coordinates == "asymmetric")
      c.outputs = {at::upsample_nearest2d(x, hw, sh, sw)};
    else if (f.mode == "nearest")
      c.outputs = {at::_upsample_nearest_exact2d(x, hw, sh, sw)};
    else
      c.outputs = {at::upsample_bilinear2d(x, hw, f.coordinates == "align_corners",
                                           f.coordinates == "align_corners" ? c10::nullopt : sh,
                                           f.coordinates == "align_corners" ? c10::nullopt : sw)};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    return (c.String("mode") == "nearest" ? 1.0 : 8.0) * Numel(out[0]);
  };
  return d;
}
RLFLOW_REGISTER_OP(ResizeDef());

}  // namespace
}  // namespace rlflow::ops
