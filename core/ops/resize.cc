// Resize (opsets 11 to 17; Upsample and Resize-10 are upgraded to it at
// import, see core/onnx_upgrade.h): the shape rule for every mode and a
// kernel for every form ONNX defines, any rank, N and C scaled or not:
//   - the forms exporters write for 2-D images run on ATen's kernels:
//     nearest with asymmetric coordinates and floor rounding (torch's
//     `nearest`, Upsample): upsample_nearest2d; nearest with half_pixel /
//     pytorch_half_pixel coordinates and round_prefer_ceil (torch's
//     `nearest-exact`): _upsample_nearest_exact2d; linear with half_pixel /
//     pytorch_half_pixel (output sides over 1) or align_corners coordinates:
//     upsample_bilinear2d;
//   - every other form (nearest with the other roundings and coordinate
//     modes, as tf2onnx and paddle2onnx write them; cubic with its
//     coefficient and exclude_outside; tf_crop_and_resize with its roi and
//     extrapolation value; other ranks) runs separably, one axis at a time:
//     each output index reads one (nearest), two (linear) or four (cubic)
//     input indices with weights computed as ONNX's reference does (edge
//     indices repeated), gathered with index_select.
// Where scales give an output length that is not whole, the coordinate modes
// that divide by the output length (align_corners, tf_crop_and_resize)
// divide by the rounded length, as the ONNX specification and ONNX Runtime
// do (ONNX's reference implementation, which made the node tests' expected
// values, divides by the unrounded one). Kept opaque: linear or cubic of
// integer tensors, modes ONNX does not define.
#include <ATen/ops/_upsample_nearest_exact2d.h>
#include <ATen/ops/add.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/logical_or.h>
#include <ATen/ops/mul.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/upsample_bilinear2d.h>
#include <ATen/ops/upsample_nearest2d.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <array>
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

// Why the executor cannot run this form of a `dtype` input ("" if it can).
std::string Unrunnable(const ResizeForm& f, DType dtype) {
  static const char* kModes[] = {"nearest", "linear", "cubic"};
  if (std::find(std::begin(kModes), std::end(kModes), f.mode) == std::end(kModes))
    return "mode '" + f.mode + "' is not run";
  static const char* kCoordinates[] = {"half_pixel", "pytorch_half_pixel",   "align_corners",
                                       "asymmetric", "tf_half_pixel_for_nn", "tf_crop_and_resize"};
  if (std::find(std::begin(kCoordinates), std::end(kCoordinates), f.coordinates) == std::end(kCoordinates))
    return "coordinate_transformation_mode '" + f.coordinates + "' is not run";
  static const char* kNearest[] = {"round_prefer_floor", "round_prefer_ceil", "floor", "ceil"};
  if (f.mode == "nearest" && std::find(std::begin(kNearest), std::end(kNearest), f.nearest) == std::end(kNearest))
    return "nearest_mode '" + f.nearest + "' is not run";
  if (f.mode != "nearest" && !IsFloatingPoint(dtype)) return f.mode + " of " + DTypeName(dtype) + " is not run";
  return "";
}

// Whether ATen's 2-D kernels run this form exactly (floating types: they
// have no kernels for most integer types; the separable kernel runs those).
bool AtenForm(const ResizeForm& f, bool floating, const Shape& in, const Shape& out) {
  if (!floating || in.size() != 4 || out.size() != 4 || in[0] != out[0] || in[1] != out[1]) return false;
  if (f.mode == "nearest")
    return (f.coordinates == "asymmetric" && f.nearest == "floor") ||
           ((f.coordinates == "half_pixel" || f.coordinates == "pytorch_half_pixel") &&
            f.nearest == "round_prefer_ceil");
  if (f.mode == "linear")
    return f.coordinates == "align_corners" || f.coordinates == "half_pixel" ||
           (f.coordinates == "pytorch_half_pixel" && out[2] > 1 && out[3] > 1);
  return false;
}

// One axis of the separable resize: output index j reads input indices
// index[j * taps + t] with weights weight[j * taps + t]; outside[j] where
// tf_crop_and_resize extrapolates.
struct AxisTable {
  int taps = 1;
  std::vector<int64_t> index;
  std::vector<double> weight;
  std::vector<uint8_t> outside;
  bool any_outside = false;
  bool identity = true;
};

std::array<double, 4> CubicCoefficients(double r, double a) {
  const double s = 1 - r;
  return {((a * (r + 1) - 5 * a) * (r + 1) + 8 * a) * (r + 1) - 4 * a, ((a + 2) * r - (a + 3)) * r * r + 1,
          ((a + 2) * s - (a + 3)) * s * s + 1, ((a * (s + 1) - 5 * a) * (s + 1) + 8 * a) * (s + 1) - 4 * a};
}

AxisTable Table(const ResizeForm& f, int64_t in_len, int64_t out_len, double scale, double roi_start, double roi_end,
                double cubic_a, bool exclude_outside) {
  AxisTable t;
  t.taps = f.mode == "nearest" ? 1 : f.mode == "linear" ? 2 : 4;
  t.identity = in_len == out_len;
  t.outside.assign(static_cast<size_t>(out_len), 0);
  const double in_d = static_cast<double>(in_len);
  for (int64_t j = 0; j < out_len; ++j) {
    const double x = static_cast<double>(j);
    double xo = 0;
    if (f.coordinates == "half_pixel") {
      xo = (x + 0.5) / scale - 0.5;
    } else if (f.coordinates == "pytorch_half_pixel") {
      xo = out_len > 1 ? (x + 0.5) / scale - 0.5 : 0.0;
    } else if (f.coordinates == "align_corners") {
      xo = out_len > 1 ? x * (in_d - 1) / static_cast<double>(out_len - 1) : 0.0;
    } else if (f.coordinates == "asymmetric") {
      xo = x / scale;
    } else if (f.coordinates == "tf_half_pixel_for_nn") {
      xo = (x + 0.5) / scale;
    } else {  // tf_crop_and_resize
      xo = out_len > 1
               ? roi_start * (in_d - 1) + x * (roi_end - roi_start) * (in_d - 1) / static_cast<double>(out_len - 1)
               : 0.5 * (roi_start + roi_end) * (in_d - 1);
      if (xo < 0 || xo > in_d - 1) t.outside[j] = 1, t.any_outside = true;
    }
    auto clamp = [&](int64_t i) { return std::min(std::max<int64_t>(i, 0), in_len - 1); };
    if (f.mode == "nearest") {
      int64_t i = static_cast<int64_t>(std::floor(xo));
      const double r = xo - std::floor(xo);
      if (r != 0) {
        if (f.nearest == "round_prefer_floor")
          i += r > 0.5;
        else if (f.nearest == "round_prefer_ceil")
          i += r >= 0.5;
        else if (f.nearest == "ceil")
          i += 1;
      }
      t.index.push_back(clamp(i));
      t.weight.push_back(1.0);
      t.identity = t.identity && t.index.back() == j;
      continue;
    }
    // The neighbours of xo with the left one preferred: lower < xo <= lower + 1.
    const int64_t lower = static_cast<int64_t>(std::ceil(xo)) - 1;
    const double r = xo - static_cast<double>(lower);
    std::vector<int64_t> raw;
    std::vector<double> w;
    if (t.taps == 2) {
      raw = {lower, lower + 1};
      w = {1 - r, r};
    } else {
      raw = {lower - 1, lower, lower + 1, lower + 2};
      auto c = CubicCoefficients(r, cubic_a);
      w.assign(c.begin(), c.end());
    }
    if (exclude_outside) {
      double sum = 0;
      for (size_t k = 0; k < raw.size(); ++k) {
        if (raw[k] < 0 || raw[k] >= in_len) w[k] = 0;
        sum += w[k];
      }
      for (double& v : w) v /= sum;
    }
    for (size_t k = 0; k < raw.size(); ++k) {
      t.index.push_back(clamp(raw[k]));
      t.weight.push_back(w[k]);
      if (w[k] != 0 && !(t.index.back() == j && w[k] == 1)) t.identity = false;
    }
  }
  if (t.any_outside) t.identity = false;
  return t;
}

// The separable resize of `x` to `out` (see the top of this file).
at::Tensor ResizeSeparable(const at::Tensor& x_in, const ResizeForm& f, const std::vector<int64_t>& out,
                           const std::vector<double>& scales, const std::vector<double>& roi, double cubic_a,
                           bool exclude_outside, double extrapolation) {
  at::Tensor x = x_in;
  at::Tensor outside;
  const int64_t rank = x.dim();
  for (int64_t k = rank - 1; k >= 0; --k) {
    const int64_t in_len = x.size(k);
    if (in_len == 0 || out[k] == 0) {
      std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
      shape[k] = out[k];
      x = at::zeros(shape, x.options());
      continue;
    }
    const bool has_roi = static_cast<int64_t>(roi.size()) == 2 * rank;
    AxisTable t = Table(f, in_len, out[k], scales[k], has_roi ? roi[k] : 0.0, has_roi ? roi[rank + k] : 1.0, cubic_a,
                        exclude_outside);
    if (t.identity) continue;
    const int64_t n = out[k];
    at::Tensor index = at::from_blob(t.index.data(), {n, t.taps}, at::kLong).clone();
    std::vector<int64_t> view(static_cast<size_t>(rank), 1);
    view[k] = n;
    if (f.mode == "nearest") {
      x = at::index_select(x, k, index.select(1, 0).contiguous());
    } else {
      at::Tensor w = at::from_blob(t.weight.data(), {n, t.taps}, at::kDouble).to(x.scalar_type());
      at::Tensor sum;
      for (int tap = 0; tap < t.taps; ++tap) {
        at::Tensor term =
            at::mul(at::index_select(x, k, index.select(1, tap).contiguous()), w.select(1, tap).reshape(view));
        sum = sum.defined() ? at::add(sum, term) : term;
      }
      x = sum;
    }
    if (t.any_outside) {
      at::Tensor m = at::from_blob(t.outside.data(), {n}, at::kByte).to(at::kBool).reshape(view);
      outside = outside.defined() ? at::logical_or(outside, m) : m;
    }
  }
  if (outside.defined()) x = at::where(outside, at::scalar_tensor(extrapolation, x.options()), x);
  return x.contiguous();
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
    const bool has_sizes = c.has_input(3) && c.Length1D(3) != 0;
    auto scales = ConstantScales(c);
    if (!has_sizes && scales && scales->empty()) c.Fail("neither scales nor sizes is given");
    Shape out(rank, kUnknownDim);
    bool known = true;
    if (has_sizes) {
      auto sizes = c.MaybeConstantInts(3);
      if (sizes) {
        if (static_cast<int64_t>(sizes->size()) != rank)
          c.Fail("sizes has " + std::to_string(sizes->size()) + " values for a rank-" + std::to_string(rank) +
                 " input");
        out = *sizes;
      } else {
        known = false;
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
    } else {
      known = false;
    }
    if (!known) {
      // Scales or sizes computed at run time: N and C assumed kept, as
      // exporters write them (the executor checks each output's shape
      // against this type).
      if (rank >= 2) out[0] = x.shape[0], out[1] = x.shape[1];
    }
    if (FormOf(c).coordinates == "tf_crop_and_resize" && (!c.has_input(1) || c.Length1D(1) == 0))
      c.Fail("tf_crop_and_resize needs roi");
    std::string why = Unrunnable(FormOf(c), x.dtype);
    if (!why.empty()) c.Unsupported("Resize: " + why);
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const ResizeForm f = FormOf(c);
    std::vector<int64_t> out;
    std::vector<double> scales;
    const bool from_scales = !(c.has(3) && c.in(3).numel() > 0);
    if (!from_scales) {
      out = c.IntsInput(3);
      if (static_cast<int64_t>(out.size()) != x.dim()) c.Fail("Resize: sizes does not have one value per axis");
      for (int64_t k = 0; k < x.dim(); ++k)
        scales.push_back(static_cast<double>(out[k]) / static_cast<double>(x.size(k)));
    } else {
      at::Tensor s = c.in(2).to(at::kDouble).contiguous();
      scales.assign(s.data_ptr<double>(), s.data_ptr<double>() + s.numel());
      if (static_cast<int64_t>(scales.size()) != x.dim()) c.Fail("Resize: scales does not have one value per axis");
      for (int64_t k = 0; k < x.dim(); ++k) {
        if (!(scales[k] > 0)) c.Fail("Resize: scale " + std::to_string(scales[k]) + " is not positive");
        out.push_back(static_cast<int64_t>(std::floor(static_cast<double>(x.size(k)) * scales[k])));
      }
    }
    const Shape in_shape(x.sizes().begin(), x.sizes().end()), out_shape(out.begin(), out.end());
    std::string why = Unrunnable(f, FromAtenType(x.scalar_type()));
    if (!why.empty()) c.Fail("Resize: " + why);
    if (AtenForm(f, x.is_floating_point(), in_shape, out_shape)) {
      const std::vector<int64_t> hw = {out[2], out[3]};
      c10::optional<double> sh, sw;
      if (from_scales) sh = scales[2], sw = scales[3];
      if (f.mode == "nearest" && f.coordinates == "asymmetric")
        c.outputs = {at::upsample_nearest2d(x, hw, sh, sw)};
      else if (f.mode == "nearest")
        c.outputs = {at::_upsample_nearest_exact2d(x, hw, sh, sw)};
      else
        c.outputs = {at::upsample_bilinear2d(x, hw, f.coordinates == "align_corners",
                                             f.coordinates == "align_corners" ? c10::nullopt : sh,
                                             f.coordinates == "align_corners" ? c10::nullopt : sw)};
      return;
    }
    std::vector<double> roi;
    if (f.coordinates == "tf_crop_and_resize") {
      if (!c.has(1) || c.in(1).numel() != 2 * x.dim())
        c.Fail("Resize: tf_crop_and_resize needs roi with " + std::to_string(2 * x.dim()) + " values");
      at::Tensor r = c.in(1).to(at::kDouble).contiguous();
      roi.assign(r.data_ptr<double>(), r.data_ptr<double>() + r.numel());
    }
    c.outputs = {ResizeSeparable(x, f, out, scales, roi, c.Float("cubic_coeff_a"), c.Int("exclude_outside") != 0,
                                 c.Float("extrapolation_value"))};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    const std::string mode = c.String("mode");
    return (mode == "nearest" ? 1.0 : mode == "linear" ? 8.0 : 32.0) * Numel(out[0]);
  };
  return d;
}
RLFLOW_REGISTER_OP(ResizeDef());

}  // namespace
}  // namespace rlflow::ops
