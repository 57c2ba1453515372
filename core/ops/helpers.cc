#include "core/ops/helpers.h"

#include "core/error.h"

namespace rlflow::ops {

Window ComputeWindow(const AttrReader& a, const Shape& in, const std::vector<int64_t>& kernel, bool ceil_mode,
                     bool has_dilations) {
  const size_t n = in.size();
  if (kernel.size() != n)
    a.Fail("kernel has " + std::to_string(kernel.size()) + " dimensions, input has " + std::to_string(n) + " spatial");
  Window w;
  w.kernel = kernel;
  w.strides = a.Has("strides") ? a.Ints("strides") : std::vector<int64_t>(n, 1);
  w.dilations = has_dilations && a.Has("dilations") ? a.Ints("dilations") : std::vector<int64_t>(n, 1);
  if (w.strides.size() != n || w.dilations.size() != n) a.Fail("strides/dilations do not match the kernel rank");
  std::string auto_pad = a.String("auto_pad");
  std::vector<int64_t> pads = a.Has("pads") ? a.Ints("pads") : std::vector<int64_t>(2 * n, 0);
  if (pads.size() != 2 * n)
    a.Fail("pads has " + std::to_string(pads.size()) + " values, expected " + std::to_string(2 * n));
  w.pad_begin.assign(pads.begin(), pads.begin() + n);
  w.pad_end.assign(pads.begin() + n, pads.end());
  w.out_spatial.resize(n);
  for (size_t k = 0; k < n; ++k) {
    if (w.strides[k] <= 0 || w.dilations[k] <= 0 || kernel[k] <= 0)
      a.Fail("kernel, strides and dilations must be positive");
    int64_t eff = w.dilations[k] * (kernel[k] - 1) + 1;
    if (in[k] < 0) {
      w.out_spatial[k] = kUnknownDim;
      continue;
    }
    if (auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER") {
      int64_t out = (in[k] + w.strides[k] - 1) / w.strides[k];
      int64_t total = std::max<int64_t>(0, (out - 1) * w.strides[k] + eff - in[k]);
      int64_t small = total / 2, big = total - total / 2;
      w.pad_begin[k] = auto_pad == "SAME_UPPER" ? small : big;
      w.pad_end[k] = auto_pad == "SAME_UPPER" ? big : small;
      w.out_spatial[k] = out;
      continue;
    }
    if (auto_pad == "VALID")
      w.pad_begin[k] = w.pad_end[k] = 0;
    else if (auto_pad != "NOTSET" && !auto_pad.empty())
      a.Fail("unknown auto_pad '" + auto_pad + "'");
    int64_t span = in[k] + w.pad_begin[k] + w.pad_end[k] - eff;
    if (span < 0) a.Fail("kernel is larger than the padded input (" + std::to_string(in[k]) + ")");
    int64_t out = ceil_mode ? (span + w.strides[k] - 1) / w.strides[k] + 1 : span / w.strides[k] + 1;
    // As in ONNX Runtime / PyTorch: the last window must start inside the input or left padding.
    if (ceil_mode && (out - 1) * w.strides[k] >= in[k] + w.pad_begin[k]) --out;
    w.out_spatial[k] = out;
  }
  return w;
}

Shape ResolveReshape(const Shape& in, const std::vector<int64_t>& target, bool allowzero, const AttrReader& a) {
  Shape out(target.size());
  int64_t infer = -1;
  int64_t known = 1;
  for (size_t k = 0; k < target.size(); ++k) {
    int64_t d = target[k];
    if (d == 0 && !allowzero) {
      if (k >= in.size()) a.Fail("shape has 0 at position " + std::to_string(k) + " beyond the input rank");
      d = in[k];
      // A copied dimension that is unknown (kUnknownDim, also -1) is not
      // the one to infer: it stays unknown, and so does the inferred one.
      if (d == kUnknownDim) {
        out[k] = kUnknownDim;
        known = -1;
        continue;
      }
    }
    if (d == -1) {
      if (infer >= 0) a.Fail("shape has more than one -1");
      infer = static_cast<int64_t>(k);
      continue;
    }
    if (d < -1) a.Fail("shape has invalid dimension " + std::to_string(d));
    out[k] = d;
    if (d >= 0 && known >= 0 && __builtin_mul_overflow(known, d, &known))
      a.Fail("shape " + ShapeToString(Shape(target.begin(), target.end())) + " has more than 2^63 elements");
    if (d < 0) known = -1;
  }
  int64_t total = NumElements(in);
  if (infer >= 0) {
    if (total < 0 || known < 0) {
      out[infer] = kUnknownDim;
    } else {
      if (known == 0 || total % known != 0)
        a.Fail("cannot reshape " + ShapeToString(in) + " to " + ShapeToString(Shape(target.begin(), target.end())));
      out[infer] = total / known;
    }
  } else if (total >= 0 && known >= 0 && total != known) {
    a.Fail("cannot reshape " + ShapeToString(in) + " (" + std::to_string(total) + " elements) to " +
           ShapeToString(out) + " (" + std::to_string(known) + " elements)");
  }
  return out;
}

}  // namespace rlflow::ops
