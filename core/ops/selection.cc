// Operators whose output length depends on the input values (the dimension
// is unknown to the shape rule and set by the kernel), as detection and
// segmentation exports hold them: NonZero (torch's boolean indexing and
// nonzero()), Compress, Unique, NonMaxSuppression (the post-processing of
// SSD/YOLO/R-CNN exports), and RoiAlign (two-stage detectors, opset 16's
// coordinate modes).
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/argsort.h>
#include <ATen/ops/empty.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/nonzero.h>
#include <ATen/ops/unique_dim.h>
#include <ATen/ops/zeros.h>

#include <algorithm>
#include <cmath>
#include <numeric>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/ops/helpers.h"

namespace rlflow::ops {
namespace {

// ---- NonZero (opsets 9, 13): the indices of the non-zero elements, one row
// per axis, in row-major order: int64 [rank, count].
OpDef NonZeroDef() {
  OpDef d;
  d.name = "NonZero";
  d.since_opset = 9;
  d.shape = [](const ShapeContext& c) {
    return std::vector<TensorType>{Type(DType::kInt64, {RankOf(c, 0), kUnknownDim})};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {at::nonzero(c.in(0)).t().contiguous()}; };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(NonZeroDef());

// ---- Compress (opsets 9, 11): the slices along `axis` (or the elements of
// the flattened input) whose condition is true; a condition shorter than
// that axis leaves the rest out.
OpDef CompressDef() {
  OpDef d;
  d.name = "Compress";
  d.since_opset = 9;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {OptionalAttr("axis", AttrType::kInt)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (c.input(1).dtype != DType::kBool) c.Fail("condition is " + c.input(1).ToString() + ", expected bool");
    if (RankOf(c, 1) != 1) c.Fail("condition has rank " + std::to_string(c.input(1).rank()) + ", expected 1");
    if (!c.Has("axis")) return std::vector<TensorType>{Type(x.dtype, {kUnknownDim})};
    Shape out = x.shape;
    out[NormalizeAxis(c.Int("axis"), RankOf(c, 0), c)] = kUnknownDim;
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor x = c.Has("axis") ? c.in(0) : c.in(0).reshape({-1});
    const int64_t axis = c.Has("axis") ? NormalizeAxis(c.Int("axis"), x.dim(), c) : 0;
    at::Tensor keep = at::nonzero(c.in(1)).reshape({-1});
    if (c.in(1).numel() > x.size(axis))
      c.Fail("condition has " + std::to_string(c.in(1).numel()) + " values for an axis of " +
             std::to_string(x.size(axis)));
    c.outputs = {at::index_select(x, axis, keep)};
  };
  return d;
}
RLFLOW_REGISTER_OP(CompressDef());

// ---- Unique (opset 11): the distinct elements (or slices along `axis`),
// sorted or in the order of their first occurrence, with the index of each
// one's first occurrence, each input element's index into them, and their
// counts.
OpDef UniqueDef() {
  OpDef d;
  d.name = "Unique";
  d.since_opset = 11;
  d.max_outputs = 4;
  d.attrs = {OptionalAttr("axis", AttrType::kInt), IntAttr("sorted", 1)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    Shape y = {kUnknownDim};
    int64_t along = x.IsStatic() ? x.NumElements() : kUnknownDim;
    if (c.Has("axis")) {
      const int64_t axis = NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
      y = x.shape;
      y[axis] = kUnknownDim;
      along = x.shape[axis];
    }
    return std::vector<TensorType>{Type(x.dtype, y), Type(DType::kInt64, {kUnknownDim}), Type(DType::kInt64, {along}),
                                   Type(DType::kInt64, {kUnknownDim})};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const bool has_axis = c.Has("axis");
    const int64_t axis = has_axis ? NormalizeAxis(c.Int("axis"), x.dim(), c) : 0;
    // Rows to compare: the slices along the axis, or the elements.
    at::Tensor rows = has_axis ? x.movedim(axis, 0) : x.reshape({-1, 1});
    rows = rows.reshape({rows.size(0), -1});
    auto [values, inverse, counts] = at::unique_dim(rows, 0, /*sorted=*/true, /*return_inverse=*/true,
                                                    /*return_counts=*/true);
    const int64_t n = values.size(0), total = inverse.size(0);
    std::vector<int64_t> first(static_cast<size_t>(n), total);
    at::Tensor inv = inverse.to(at::kLong).contiguous();
    const int64_t* iv = inv.data_ptr<int64_t>();
    for (int64_t i = total - 1; i >= 0; --i) first[static_cast<size_t>(iv[i])] = i;
    at::Tensor firsts = at::empty({n}, at::kLong);
    std::copy(first.begin(), first.end(), firsts.data_ptr<int64_t>());
    if (c.Int("sorted") == 0) {
      // Order of first occurrence.
      at::Tensor order = at::argsort(firsts);
      at::Tensor position = at::empty({n}, at::kLong);
      position.index_put_({order}, at::arange(n, at::kLong));
      values = values.index_select(0, order);
      counts = counts.index_select(0, order);
      firsts = firsts.index_select(0, order);
      inv = position.index_select(0, inv);
    }
    at::Tensor y;
    if (has_axis) {
      std::vector<int64_t> moved(x.sizes().begin(), x.sizes().end());
      moved.erase(moved.begin() + axis);
      moved.insert(moved.begin(), n);
      y = values.reshape(moved).movedim(0, axis).contiguous();
    } else {
      y = values.reshape({n});
    }
    c.outputs = {y, firsts, inv, counts.to(at::kLong)};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return 8.0 * Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(UniqueDef());

// ---- NonMaxSuppression (opsets 10, 11): per batch and class, the boxes
// whose score is above score_threshold, greedily by descending score (ties:
// the lower box index first), each kept unless its IoU with a box kept
// before is above iou_threshold, at most max_output_boxes_per_class:
// int64 [selected, 3] rows (batch, class, box), batch by batch, class by
// class, in the order selected, as ONNX Runtime writes them.
struct Box {
  float y1, x1, y2, x2;
};

Box BoxAt(const float* b, bool center) {
  if (center) {
    const float xc = b[0], yc = b[1], w = b[2], h = b[3];
    return {yc - h / 2, xc - w / 2, yc + h / 2, xc + w / 2};
  }
  return {std::min(b[0], b[2]), std::min(b[1], b[3]), std::max(b[0], b[2]), std::max(b[1], b[3])};
}

bool Overlaps(const Box& a, const Box& b, float threshold) {
  const float area_a = (a.y2 - a.y1) * (a.x2 - a.x1), area_b = (b.y2 - b.y1) * (b.x2 - b.x1);
  if (area_a <= 0 || area_b <= 0) return false;
  const float ih = std::max(0.0f, std::min(a.y2, b.y2) - std::max(a.y1, b.y1));
  const float iw = std::max(0.0f, std::min(a.x2, b.x2) - std::max(a.x1, b.x1));
  const float inter = ih * iw;
  if (inter <= 0) return false;
  const float uni = area_a + area_b - inter;
  return uni > 0 && inter / uni > threshold;
}

OpDef NonMaxSuppressionDef() {
  OpDef d;
  d.name = "NonMaxSuppression";
  d.since_opset = 10;
  d.min_inputs = 2;
  d.max_inputs = 5;
  d.attrs = {IntAttr("center_point_box", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& boxes = c.input(0);
    const TensorType& scores = c.input(1);
    if (RankOf(c, 0) != 3 || (boxes.shape[2] >= 0 && boxes.shape[2] != 4))
      c.Fail("boxes " + boxes.ToString() + " is not [batches, boxes, 4]");
    if (RankOf(c, 1) != 3) c.Fail("scores " + scores.ToString() + " is not [batches, classes, boxes]");
    if (boxes.shape[0] >= 0 && scores.shape[0] >= 0 && boxes.shape[0] != scores.shape[0])
      c.Fail("boxes and scores have different batch sizes");
    if (boxes.shape[1] >= 0 && scores.shape[2] >= 0 && boxes.shape[1] != scores.shape[2])
      c.Fail("boxes and scores have different numbers of boxes");
    if (boxes.dtype != DType::kFloat32 || scores.dtype != DType::kFloat32)
      c.Unsupported("boxes and scores other than float32 are not run");
    const int64_t center = c.Int("center_point_box");
    if (center != 0 && center != 1) c.Fail("center_point_box " + std::to_string(center) + " is not 0 or 1");
    return std::vector<TensorType>{Type(DType::kInt64, {kUnknownDim, 3})};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor boxes = c.in(0).contiguous(), scores = c.in(1).contiguous();
    const int64_t batches = scores.size(0), classes = scores.size(1), n = scores.size(2);
    if (boxes.size(0) != batches || boxes.size(1) != n || boxes.size(2) != 4)
      c.Fail("boxes do not fit scores [" + std::to_string(batches) + ", " + std::to_string(classes) + ", " +
             std::to_string(n) + "]");
    auto scalar = [&](int i, double fallback) {
      return c.has(i) && c.in(i).numel() > 0 ? c.in(i).reshape({-1})[0].item<double>() : fallback;
    };
    const int64_t max_per_class = static_cast<int64_t>(scalar(2, 0));
    const float iou = static_cast<float>(scalar(3, 0));
    const bool has_score_threshold = c.has(4) && c.in(4).numel() > 0;
    const float score_threshold = static_cast<float>(scalar(4, 0));
    const bool center = c.Int("center_point_box") != 0;
    const float* bp = boxes.data_ptr<float>();
    const float* sp = scores.data_ptr<float>();
    std::vector<int64_t> rows;
    for (int64_t b = 0; b < batches && max_per_class > 0; ++b)
      for (int64_t k = 0; k < classes; ++k) {
        const float* s = sp + (b * classes + k) * n;
        std::vector<int64_t> order;
        for (int64_t i = 0; i < n; ++i)
          if (!has_score_threshold || s[i] > score_threshold) order.push_back(i);
        std::stable_sort(order.begin(), order.end(), [&](int64_t i, int64_t j) { return s[i] > s[j]; });
        std::vector<Box> kept;
        for (int64_t i : order) {
          if (static_cast<int64_t>(kept.size()) >= max_per_class) break;
          Box box = BoxAt(bp + (b * n + i) * 4, center);
          bool suppressed = false;
          for (const Box& other : kept)
            if (Overlaps(box, other, iou)) {
              suppressed = true;
              break;
            }
          if (suppressed) continue;
          kept.push_back(box);
          rows.insert(rows.end(), {b, k, i});
        }
      }
    at::Tensor out = at::empty({static_cast<int64_t>(rows.size() / 3), 3}, at::kLong);
    std::copy(rows.begin(), rows.end(), out.data_ptr<int64_t>());
    c.outputs = {out};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return 16.0 * Numel(c.input(1)); };
  return d;
}
RLFLOW_REGISTER_OP(NonMaxSuppressionDef());

// ---- RoiAlign (opset 16; opset 10's, which behaves as output_half_pixel
// without saying so, stays opaque): each region of interest (x1, y1, x2,
// y2, scaled by spatial_scale) of its batch's feature map cut into
// output_height x output_width bins, each the average (or the maximum) of
// sampling_ratio^2 bilinear samples (adaptive: ceil(bin size) per side where
// 0), as ONNX Runtime computes it (samples beyond a pixel outside the map
// are 0; max mode takes each sample's largest weighted corner).
OpDef RoiAlignDef() {
  OpDef d;
  d.name = "RoiAlign";
  d.since_opset = 16;
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {StringAttr("coordinate_transformation_mode", "half_pixel"),
             StringAttr("mode", "avg"),
             IntAttr("output_height", 1),
             IntAttr("output_width", 1),
             IntAttr("sampling_ratio", 0),
             FloatAttr("spatial_scale", 1.0f)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (RankOf(c, 0) != 4) c.Fail("X " + x.ToString() + " is not [N, C, H, W]");
    if (RankOf(c, 1) != 2 || (c.input(1).shape[1] >= 0 && c.input(1).shape[1] != 4))
      c.Fail("rois " + c.input(1).ToString() + " is not [rois, 4]");
    if (RankOf(c, 2) != 1) c.Fail("batch_indices " + c.input(2).ToString() + " is not 1-D");
    const std::string mode = c.String("mode"), coordinates = c.String("coordinate_transformation_mode");
    if (mode != "avg" && mode != "max") c.Fail("mode '" + mode + "' is not avg or max");
    if (coordinates != "half_pixel" && coordinates != "output_half_pixel")
      c.Fail("coordinate_transformation_mode '" + coordinates + "' is not half_pixel or output_half_pixel");
    if (!IsFloatingPoint(x.dtype)) c.Fail("X is " + x.ToString() + ", expected a floating type");
    if (c.Int("output_height") <= 0 || c.Int("output_width") <= 0) c.Fail("output sizes must be positive");
    return std::vector<TensorType>{
        Type(x.dtype, {c.input(1).shape[0], x.shape[1], c.Int("output_height"), c.Int("output_width")})};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor x = c.in(0).to(at::kFloat).contiguous(), rois = c.in(1).to(at::kFloat).contiguous();
    at::Tensor batch_index = c.in(2).to(at::kLong).contiguous();
    const int64_t channels = x.size(1), height = x.size(2), width = x.size(3), count = rois.size(0);
    const int64_t oh = c.Int("output_height"), ow = c.Int("output_width"), ratio = c.Int("sampling_ratio");
    const float scale = c.Float("spatial_scale");
    const bool half_pixel = c.String("coordinate_transformation_mode") == "half_pixel";
    const bool max_mode = c.String("mode") == "max";
    if (batch_index.size(0) != count) c.Fail("batch_indices does not have one index per roi");
    at::Tensor out = at::zeros({count, channels, oh, ow}, at::kFloat);
    const float* xp = x.data_ptr<float>();
    const float* rp = rois.data_ptr<float>();
    const int64_t* bp = batch_index.data_ptr<int64_t>();
    float* op = out.data_ptr<float>();
    for (int64_t r = 0; r < count; ++r) {
      const int64_t b = bp[r];
      if (b < 0 || b >= x.size(0)) c.Fail("batch index " + std::to_string(b) + " is out of range");
      const float offset = half_pixel ? 0.5f : 0.0f;
      const float x1 = rp[r * 4] * scale - offset, y1 = rp[r * 4 + 1] * scale - offset;
      const float x2 = rp[r * 4 + 2] * scale - offset, y2 = rp[r * 4 + 3] * scale - offset;
      float roi_w = x2 - x1, roi_h = y2 - y1;
      if (!half_pixel) roi_w = std::max(roi_w, 1.0f), roi_h = std::max(roi_h, 1.0f);
      const float bin_h = roi_h / static_cast<float>(oh), bin_w = roi_w / static_cast<float>(ow);
      const int64_t grid_h = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(roi_h / static_cast<float>(oh)));
      const int64_t grid_w = ratio > 0 ? ratio : static_cast<int64_t>(std::ceil(roi_w / static_cast<float>(ow)));
      const float samples = static_cast<float>(std::max<int64_t>(grid_h * grid_w, 1));
      for (int64_t ch = 0; ch < channels; ++ch) {
        const float* plane = xp + (b * channels + ch) * height * width;
        for (int64_t ph = 0; ph < oh; ++ph)
          for (int64_t pw = 0; pw < ow; ++pw) {
            float acc = 0;
            bool first = true;
            for (int64_t iy = 0; iy < grid_h; ++iy) {
              float yy = y1 + static_cast<float>(ph) * bin_h +
                         (static_cast<float>(iy) + 0.5f) * bin_h / static_cast<float>(grid_h);
              for (int64_t ix = 0; ix < grid_w; ++ix) {
                float xx = x1 + static_cast<float>(pw) * bin_w +
                           (static_cast<float>(ix) + 0.5f) * bin_w / static_cast<float>(grid_w);
                float value = 0;
                if (!(yy < -1.0f || yy > static_cast<float>(height) || xx < -1.0f || xx > static_cast<float>(width))) {
                  float y = std::max(yy, 0.0f), xv = std::max(xx, 0.0f);
                  int64_t y_low = static_cast<int64_t>(y), x_low = static_cast<int64_t>(xv), y_high, x_high;
                  if (y_low >= height - 1)
                    y_high = y_low = height - 1, y = static_cast<float>(y_low);
                  else
                    y_high = y_low + 1;
                  if (x_low >= width - 1)
                    x_high = x_low = width - 1, xv = static_cast<float>(x_low);
                  else
                    x_high = x_low + 1;
                  const float ly = y - static_cast<float>(y_low), lx = xv - static_cast<float>(x_low);
                  const float hy = 1 - ly, hx = 1 - lx;
                  const float v1 = hy * hx * plane[y_low * width + x_low], v2 = hy * lx * plane[y_low * width + x_high];
                  const float v3 = ly * hx * plane[y_high * width + x_low],
                              v4 = ly * lx * plane[y_high * width + x_high];
                  value = max_mode ? std::max(std::max(v1, v2), std::max(v3, v4)) : v1 + v2 + v3 + v4;
                }
                if (max_mode)
                  acc = first ? value : std::max(acc, value);
                else
                  acc += value;
                first = false;
              }
            }
            op[((r * channels + ch) * oh + ph) * ow + pw] = max_mode ? acc : acc / samples;
          }
      }
    }
    c.outputs = {out.to(c.in(0).scalar_type())};
  };
  d.flops = [](const ShapeContext&, const std::vector<TensorType>& out) { return 40.0 * Numel(out[0]); };
  return d;
}
RLFLOW_REGISTER_OP(RoiAlignDef());

}  // namespace
}  // namespace rlflow::ops
