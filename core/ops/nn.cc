// Neural-network operators: convolution, normalisation, pooling, padding,
// matrix products, softmax and reductions.
#include <ATen/TensorOperators.h>
#include <ATen/ops/addmm.h>
#include <ATen/ops/amax.h>
#include <ATen/ops/amin.h>
#include <ATen/ops/avg_pool1d.h>
#include <ATen/ops/avg_pool2d.h>
#include <ATen/ops/avg_pool3d.h>
#include <ATen/ops/batch_norm.h>
#include <ATen/ops/constant_pad_nd.h>
#include <ATen/ops/convolution.h>
#include <ATen/ops/from_blob.h>
#include <ATen/ops/layer_norm.h>
#include <ATen/ops/log_softmax.h>
#include <ATen/ops/logsumexp.h>
#include <ATen/ops/matmul.h>
#include <ATen/ops/max_pool1d.h>
#include <ATen/ops/max_pool2d.h>
#include <ATen/ops/max_pool3d.h>
#include <ATen/ops/mm.h>
#include <ATen/ops/native_layer_norm.h>
#include <ATen/ops/nll_loss_nd.h>
#include <ATen/ops/ones.h>
#include <ATen/ops/reflection_pad1d.h>
#include <ATen/ops/reflection_pad2d.h>
#include <ATen/ops/reflection_pad3d.h>
#include <ATen/ops/replication_pad1d.h>
#include <ATen/ops/replication_pad2d.h>
#include <ATen/ops/replication_pad3d.h>
#include <ATen/ops/softmax.h>
#include <ATen/ops/zeros_like.h>

#include <limits>
#include <numeric>

#include "core/error.h"
#include "core/ops/helpers.h"
#include "core/ops/semantics.h"
#include "core/symbolic.h"

namespace rlflow::ops {
namespace {

std::vector<AttrSpec> WindowAttrs(bool dilations) {
  std::vector<AttrSpec> a = {StringAttr("auto_pad", "NOTSET"), IntsAttr("kernel_shape"), IntsAttr("pads"),
                             IntsAttr("strides")};
  if (dilations) a.push_back(IntsAttr("dilations"));
  return a;
}

Shape Spatial(const TensorType& t) { return Shape(t.shape.begin() + 2, t.shape.end()); }

std::vector<int64_t> AsVec(at::IntArrayRef r) { return std::vector<int64_t>(r.begin(), r.end()); }

// Pads spatial dims (begin/end per dim) with `value` for the ATen call.
at::Tensor PadSpatial(const at::Tensor& x, const Window& w, double value) {
  std::vector<int64_t> p;
  for (size_t k = w.pad_begin.size(); k-- > 0;) {
    p.push_back(w.pad_begin[k]);
    p.push_back(w.pad_end[k]);
  }
  return at::constant_pad_nd(x, p, value);
}

// ---- Conv ----
Window ConvWindow(const AttrReader& a, const TensorType& x, const TensorType& w) {
  std::vector<int64_t> kernel =
      a.Has("kernel_shape") ? a.Ints("kernel_shape") : Shape(w.shape.begin() + 2, w.shape.end());
  return ComputeWindow(a, Spatial(x), kernel, false, true);
}

// Window attributes in their effective form: auto_pad resolved into
// explicit pads, default strides/dilations/pads dropped, and kernel_shape
// only where it is not implied by the weights.
void CanonicalWindowAttrs(const Window& w, bool keep_kernel, AttributeMap* a) {
  a->erase("auto_pad");
  a->erase("kernel_shape");
  a->erase("strides");
  a->erase("dilations");
  a->erase("pads");
  auto all = [](const std::vector<int64_t>& v, int64_t x) {
    return std::all_of(v.begin(), v.end(), [x](int64_t e) { return e == x; });
  };
  if (keep_kernel) (*a)["kernel_shape"] = Attribute::Ints(w.kernel);
  if (!all(w.strides, 1)) (*a)["strides"] = Attribute::Ints(w.strides);
  if (!all(w.dilations, 1)) (*a)["dilations"] = Attribute::Ints(w.dilations);
  std::vector<int64_t> pads = w.pad_begin;
  pads.insert(pads.end(), w.pad_end.begin(), w.pad_end.end());
  if (!all(pads, 0)) (*a)["pads"] = Attribute::Ints(pads);
}

// A 1x1 depthwise convolution (one input channel per group, a kernel of
// ones in every spatial axis) is a per-channel scale of the strided input:
// out[n, g*m + j, p] = x[n, g, p * stride - pad] * w[g*m + j] + b[g*m + j].
// ATen runs it through its general grouped path, 3x to 13x slower than a
// 3x3 depthwise convolution of the same size (MobileOne's scale branch,
// [1, 64, 16, 16]: 349 us against 59 us), so the executor computes it
// as that product.
bool IsDepthwisePointwise(const at::Tensor& x, const at::Tensor& w, int64_t group, const Window& win) {
  if (x.dim() < 3 || w.dim() != x.dim() || w.size(1) != 1 || group != x.size(1) || group <= 1) return false;
  if (w.size(0) % group != 0) return false;
  for (int64_t axis = 2; axis < w.dim(); ++axis)
    if (w.size(axis) != 1) return false;
  return std::all_of(win.kernel.begin(), win.kernel.end(), [](int64_t k) { return k == 1; });
}

at::Tensor DepthwisePointwiseConv(const at::Tensor& x, const at::Tensor& w, const at::Tensor& b, const Window& win) {
  at::Tensor input = x;
  if (std::any_of(win.pad_begin.begin(), win.pad_begin.end(), [](int64_t p) { return p != 0; }) ||
      std::any_of(win.pad_end.begin(), win.pad_end.end(), [](int64_t p) { return p != 0; }))
    input = PadSpatial(x, win, 0.0);
  for (size_t k = 0; k < win.strides.size(); ++k) {
    int64_t axis = static_cast<int64_t>(k) + 2;
    if (win.strides[k] != 1 || input.size(axis) != win.out_spatial[k])
      input = input.slice(axis, 0, win.out_spatial[k] * win.strides[k], win.strides[k]);
  }
  int64_t multiplier = w.size(0) / x.size(1);
  if (multiplier != 1) input = input.repeat_interleave(multiplier, 1);
  std::vector<int64_t> per_channel(static_cast<size_t>(x.dim()) - 1, 1);
  per_channel[0] = w.size(0);
  at::Tensor y = input * w.reshape(per_channel);
  if (b.defined()) y.add_(b.reshape(per_channel));
  return y.contiguous();
}

// Symbolic 2-D convolution: out[n,m,y,x] = b[m] + sum over the group's
// channels and the kernel window of in-bounds x * w.
void ConvSymbolic(SymbolicContext& c) {
  const SymTensor& x = c.in(0);
  const SymTensor& w = c.in(1);
  if (x.shape.size() != 4) c.Fail("symbolic semantics cover 2-D convolution only");
  TensorType xt = Type(DType::kFloat32, x.shape), wt = Type(DType::kFloat32, w.shape);
  Window win = ConvWindow(c, xt, wt);
  int64_t group = c.Int("group");
  int64_t N = x.shape[0], C = x.shape[1], H = x.shape[2], W = x.shape[3];
  int64_t M = w.shape[0], Cg = w.shape[1], KH = w.shape[2], KW = w.shape[3];
  int64_t OH = win.out_spatial[0], OW = win.out_spatial[1];
  int64_t Mg = M / group;
  (void)C;
  SymTensor out;
  out.shape = {N, M, OH, OW};
  for (int64_t n = 0; n < N; ++n)
    for (int64_t m = 0; m < M; ++m)
      for (int64_t oy = 0; oy < OH; ++oy)
        for (int64_t ox = 0; ox < OW; ++ox) {
          z3::expr_vector terms(c.z3);
          if (c.has(2)) terms.push_back(c.in(2).v[m]);
          int64_t g = m / Mg;
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t ky = 0; ky < KH; ++ky)
              for (int64_t kx = 0; kx < KW; ++kx) {
                int64_t iy = oy * win.strides[0] - win.pad_begin[0] + ky * win.dilations[0];
                int64_t ix = ox * win.strides[1] - win.pad_begin[1] + kx * win.dilations[1];
                if (iy < 0 || iy >= H || ix < 0 || ix >= W) continue;
                terms.push_back(x.at({n, g * Cg + ci, iy, ix}) * w.at({m, ci, ky, kx}));
              }
          out.v.push_back(terms.empty() ? c.Real(0) : z3::sum(terms));
        }
  c.outputs = {out};
}

OpDef ConvDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = ConvSymbolic;
  d.name = "Conv";
  d.since_opset = 11;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = WindowAttrs(true);
  d.attrs.push_back(IntAttr("group", 1));
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& w = c.input(1);
    if (RankOf(c, 0) < 3 || RankOf(c, 1) != x.rank())
      c.Fail("X " + x.ToString() + " and W " + w.ToString() + " ranks do not fit a convolution");
    int64_t group = c.Int("group");
    if (group <= 0) c.Fail("group must be positive");
    if (x.shape[1] >= 0 && w.shape[1] >= 0 && x.shape[1] != w.shape[1] * group)
      c.Fail("input has " + std::to_string(x.shape[1]) + " channels but W " + w.ToString() + " with group " +
             std::to_string(group) + " expects " + std::to_string(w.shape[1] * group));
    if (w.shape[0] >= 0 && w.shape[0] % group != 0) c.Fail("output channels are not divisible by group");
    if (c.has_input(2)) {
      const TensorType& b = c.input(2);
      if (b.rank() != 1 || (b.shape[0] >= 0 && w.shape[0] >= 0 && b.shape[0] != w.shape[0]))
        c.Fail("bias " + b.ToString() + " does not match W " + w.ToString());
    }
    Window win = ConvWindow(c, x, w);
    Shape out = {x.shape[0], w.shape[0]};
    out.insert(out.end(), win.out_spatial.begin(), win.out_spatial.end());
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& w = c.in(1);
    TensorType xt = Type(DType::kFloat32, AsVec(x.sizes())), wt = Type(DType::kFloat32, AsVec(w.sizes()));
    Window win = ConvWindow(c, xt, wt);
    if (IsDepthwisePointwise(x, w, c.Int("group"), win)) {
      c.outputs = {DepthwisePointwiseConv(x, w, c.has(2) ? c.in(2) : at::Tensor(), win)};
      return;
    }
    at::Tensor input = x;
    std::vector<int64_t> padding = win.pad_begin;
    if (!win.symmetric()) {
      input = PadSpatial(x, win, 0.0);
      std::fill(padding.begin(), padding.end(), 0);
    }
    at::Tensor bias = c.has(2) ? c.in(2) : at::Tensor();
    c.outputs = {at::convolution(input, w, bias, win.strides, padding, win.dilations, false,
                                 std::vector<int64_t>(padding.size(), 0), c.Int("group"))};
  };
  d.canonical_attrs = [](const ShapeContext& c, AttributeMap* a) {
    CanonicalWindowAttrs(ConvWindow(c, c.input(0), c.input(1)), false, a);
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    const TensorType& w = c.input(1);
    double per_output = 2.0 * static_cast<double>(NumElements(Shape(w.shape.begin() + 1, w.shape.end())));
    return Numel(out[0]) * (per_output + (c.has_input(2) ? 1.0 : 0.0));
  };
  return d;
}
RLFLOW_REGISTER_OP(ConvDef());

// ---- ConvTranspose ----
// The geometry of a transposed convolution: per spatial axis the output is
//   stride * (in - 1) + output_padding + (kernel - 1) * dilation + 1
//     - pad_begin - pad_end,
// with pads from `pads`, or derived from `output_shape` or SAME_* auto_pad
// (output = in * stride) as the spec and ONNX Runtime derive them: the odd
// unit of a total padding goes to the end for SAME_UPPER, else to the
// beginning.
struct TransposeWindow {
  std::vector<int64_t> kernel, strides, dilations, output_padding, pad_begin, pad_end;
  Shape out_spatial;
};

TransposeWindow ConvTransposeWindow(const AttrReader& a, const TensorType& x, const TensorType& w) {
  const size_t n = static_cast<size_t>(x.rank()) - 2;
  TransposeWindow t;
  t.kernel = a.Has("kernel_shape") ? a.Ints("kernel_shape") : Shape(w.shape.begin() + 2, w.shape.end());
  t.strides = a.Has("strides") ? a.Ints("strides") : std::vector<int64_t>(n, 1);
  t.dilations = a.Has("dilations") ? a.Ints("dilations") : std::vector<int64_t>(n, 1);
  t.output_padding = a.Has("output_padding") ? a.Ints("output_padding") : std::vector<int64_t>(n, 0);
  std::vector<int64_t> pads = a.Has("pads") ? a.Ints("pads") : std::vector<int64_t>(2 * n, 0);
  std::vector<int64_t> output_shape = a.Has("output_shape") ? a.Ints("output_shape") : std::vector<int64_t>();
  if (t.kernel.size() != n || t.strides.size() != n || t.dilations.size() != n || t.output_padding.size() != n ||
      pads.size() != 2 * n)
    a.Fail("kernel_shape, strides, dilations, output_padding or pads do not match " + std::to_string(n) +
           " spatial dimensions");
  // output_shape may list all dimensions or only the spatial ones.
  if (output_shape.size() == n + 2) output_shape.erase(output_shape.begin(), output_shape.begin() + 2);
  if (!output_shape.empty() && output_shape.size() != n)
    a.Fail("output_shape has " + std::to_string(output_shape.size()) + " values for " + std::to_string(n) +
           " spatial dimensions");
  const std::string auto_pad = a.String("auto_pad");
  if (auto_pad != "NOTSET" && auto_pad != "VALID" && auto_pad != "SAME_UPPER" && auto_pad != "SAME_LOWER" &&
      !auto_pad.empty())
    a.Fail("unknown auto_pad '" + auto_pad + "'");
  t.pad_begin.assign(pads.begin(), pads.begin() + n);
  t.pad_end.assign(pads.begin() + n, pads.end());
  t.out_spatial.resize(n);
  for (size_t k = 0; k < n; ++k) {
    if (t.strides[k] <= 0 || t.dilations[k] <= 0 || t.kernel[k] <= 0)
      a.Fail("kernel, strides and dilations must be positive");
    if (t.output_padding[k] < 0 || t.pad_begin[k] < 0 || t.pad_end[k] < 0)
      a.Fail("pads and output_padding must not be negative");
    const int64_t in = x.shape[k + 2];
    if (in < 0) {
      t.out_spatial[k] = kUnknownDim;
      continue;
    }
    const int64_t full = t.strides[k] * (in - 1) + t.output_padding[k] + (t.kernel[k] - 1) * t.dilations[k] + 1;
    const bool same = auto_pad == "SAME_UPPER" || auto_pad == "SAME_LOWER";
    if (!output_shape.empty() || same) {
      const int64_t out = !output_shape.empty() ? output_shape[k] : in * t.strides[k];
      const int64_t total = full - out;
      const bool more_at_begin = auto_pad != "SAME_UPPER";
      if (total >= 0) {
        t.pad_begin[k] = more_at_begin ? total - total / 2 : total / 2;
        t.pad_end[k] = total - t.pad_begin[k];
      } else {
        // An output larger than the full one: zeros (and the bias) at the
        // end, as output_padding adds them.
        t.output_padding[k] -= total;
        t.pad_begin[k] = t.pad_end[k] = 0;
      }
    } else if (auto_pad == "VALID") {
      t.pad_begin[k] = t.pad_end[k] = 0;
    }
    t.out_spatial[k] = t.strides[k] * (in - 1) + t.output_padding[k] + (t.kernel[k] - 1) * t.dilations[k] + 1 -
                       t.pad_begin[k] - t.pad_end[k];
    if (t.out_spatial[k] <= 0) a.Fail("the output would be empty (pads larger than the output)");
  }
  return t;
}

OpDef ConvTransposeDef() {
  OpDef d;
  d.name = "ConvTranspose";
  d.since_opset = 11;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = WindowAttrs(true);
  d.attrs.push_back(IntAttr("group", 1));
  d.attrs.push_back(IntsAttr("output_padding"));
  d.attrs.push_back(IntsAttr("output_shape"));
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& w = c.input(1);
    if (RankOf(c, 0) < 3 || RankOf(c, 1) != x.rank())
      c.Fail("X " + x.ToString() + " and W " + w.ToString() + " ranks do not fit a transposed convolution");
    if (x.rank() > 5) c.Unsupported("only 1-D to 3-D transposed convolution is supported");
    const int64_t group = c.Int("group");
    if (group <= 0) c.Fail("group must be positive");
    if (x.shape[1] >= 0 && w.shape[0] >= 0 && x.shape[1] != w.shape[0])
      c.Fail("input has " + std::to_string(x.shape[1]) + " channels but W " + w.ToString() + " expects " +
             std::to_string(w.shape[0]));
    if (w.shape[0] >= 0 && w.shape[0] % group != 0) c.Fail("input channels are not divisible by group");
    const int64_t m = w.shape[1] >= 0 ? w.shape[1] * group : kUnknownDim;
    if (c.has_input(2)) {
      const TensorType& b = c.input(2);
      if (b.rank() != 1 || (b.shape[0] >= 0 && m >= 0 && b.shape[0] != m))
        c.Fail("bias " + b.ToString() + " does not match the " + std::to_string(m) + " output channels");
    }
    TransposeWindow t = ConvTransposeWindow(c, x, w);
    Shape out = {x.shape[0], m};
    out.insert(out.end(), t.out_spatial.begin(), t.out_spatial.end());
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& w = c.in(1);
    TensorType xt = Type(DType::kFloat32, AsVec(x.sizes())), wt = Type(DType::kFloat32, AsVec(w.sizes()));
    TransposeWindow t = ConvTransposeWindow(c, xt, wt);
    const size_t n = t.kernel.size();
    bool native = t.pad_begin == t.pad_end;
    for (size_t k = 0; k < n; ++k) native = native && t.output_padding[k] < std::max(t.strides[k], t.dilations[k]);
    at::Tensor bias = c.has(2) ? c.in(2) : at::Tensor();
    if (native) {
      c.outputs = {
          at::convolution(x, w, bias, t.strides, t.pad_begin, t.dilations, true, t.output_padding, c.Int("group"))};
      return;
    }
    // Asymmetric pads or a large output_padding: the full output (no pads),
    // zeros appended for output_padding, then the pads cropped; bias last.
    std::vector<int64_t> zeros(n, 0);
    at::Tensor y = at::convolution(x, w, at::Tensor(), t.strides, zeros, t.dilations, true, zeros, c.Int("group"));
    std::vector<int64_t> pad;
    for (size_t k = n; k-- > 0;) {
      pad.push_back(0);
      pad.push_back(t.output_padding[k]);
    }
    y = at::constant_pad_nd(y, pad, 0.0);
    for (size_t k = 0; k < n; ++k) y = y.narrow(static_cast<int64_t>(k) + 2, t.pad_begin[k], t.out_spatial[k]);
    if (bias.defined()) {
      std::vector<int64_t> view(static_cast<size_t>(y.dim()), 1);
      view[1] = bias.size(0);
      y = y + bias.reshape(view);
    }
    c.outputs = {y.contiguous()};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    // Each input element is scattered to (M / group) * prod(kernel) outputs.
    const TensorType& x = c.input(0);
    const TensorType& w = c.input(1);
    double per_input = 2.0 * static_cast<double>(NumElements(Shape(w.shape.begin() + 1, w.shape.end())));
    return Numel(x) * per_input + (c.has_input(2) ? Numel(out[0]) : 0.0);
  };
  return d;
}
RLFLOW_REGISTER_OP(ConvTransposeDef());

// ---- BatchNormalization (inference form) ----
OpDef BatchNormDef() {
  OpDef d;
  d.name = "BatchNormalization";
  d.since_opset = 9;
  d.min_inputs = d.max_inputs = 5;
  d.attrs = {FloatAttr("epsilon", 1e-5f), FloatAttr("momentum", 0.9f), IntAttr("training_mode", 0),
             IntAttr("spatial", 1)};
  d.shape = [](const ShapeContext& c) {
    if (c.Int("training_mode") != 0) c.Unsupported("training_mode=1 is not supported");
    const TensorType& x = c.input(0);
    if (RankOf(c, 0) < 2) c.Fail("input must have rank >= 2");
    for (int k = 1; k < 5; ++k) {
      const TensorType& p = c.input(k);
      if (p.rank() != 1 || (p.shape[0] >= 0 && x.shape[1] >= 0 && p.shape[0] != x.shape[1]))
        c.Fail("parameter " + std::to_string(k) + " " + p.ToString() + " does not match " + x.ToString());
    }
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    c.outputs = {at::batch_norm(c.in(0), c.in(1), c.in(2), c.in(3), c.in(4), false, 0.0, c.Float("epsilon"), false)};
  };
  d.flops = PerOutputElement(2.0);
  return d;
}
RLFLOW_REGISTER_OP(BatchNormDef());

// ---- pooling ----
Window PoolWindow(const AttrReader& a, const Shape& in_spatial, bool dilations) {
  std::vector<int64_t> k = a.Ints("kernel_shape");
  if (k.empty()) a.Fail("kernel_shape is required");
  return ComputeWindow(a, in_spatial, k, a.Int("ceil_mode") != 0, dilations);
}

std::vector<TensorType> PoolShape(const ShapeContext& c, bool dilations) {
  const TensorType& x = c.input(0);
  if (RankOf(c, 0) < 3) c.Fail("input must have rank >= 3");
  if (RankOf(c, 0) > 5) c.Unsupported("only 1-D to 3-D pooling is supported");
  Window w = PoolWindow(c, Spatial(x), dilations);
  Shape out = {x.shape[0], x.shape[1]};
  out.insert(out.end(), w.out_spatial.begin(), w.out_spatial.end());
  return {Type(x.dtype, out)};
}

double PoolFlops(const ShapeContext& c, const std::vector<TensorType>& out) {
  double k = 1;
  for (int64_t v : c.Ints("kernel_shape")) k *= static_cast<double>(v);
  return Numel(out[0]) * k;
}

// Symbolic pooling over in-bounds window elements: max, or sum / count.
template <bool kMax>
void PoolSymbolic(SymbolicContext& c) {
  const SymTensor& x = c.in(0);
  if (x.shape.size() != 4) c.Fail("symbolic semantics cover 2-D pooling only");
  Window w = PoolWindow(c, Shape(x.shape.begin() + 2, x.shape.end()), kMax);
  bool include_pad = !kMax && c.Int("count_include_pad") != 0;
  SymTensor out;
  out.shape = {x.shape[0], x.shape[1], w.out_spatial[0], w.out_spatial[1]};
  for (int64_t n = 0; n < x.shape[0]; ++n)
    for (int64_t ch = 0; ch < x.shape[1]; ++ch)
      for (int64_t oy = 0; oy < w.out_spatial[0]; ++oy)
        for (int64_t ox = 0; ox < w.out_spatial[1]; ++ox) {
          std::vector<z3::expr> window;
          int64_t count = 0;
          for (int64_t ky = 0; ky < w.kernel[0]; ++ky)
            for (int64_t kx = 0; kx < w.kernel[1]; ++kx) {
              int64_t iy = oy * w.strides[0] - w.pad_begin[0] + ky * w.dilations[0];
              int64_t ix = ox * w.strides[1] - w.pad_begin[1] + kx * w.dilations[1];
              bool inside_padded = iy >= -w.pad_begin[0] && iy < x.shape[2] + w.pad_end[0] && ix >= -w.pad_begin[1] &&
                                   ix < x.shape[3] + w.pad_end[1];
              if (inside_padded) ++count;
              if (iy < 0 || iy >= x.shape[2] || ix < 0 || ix >= x.shape[3]) continue;
              window.push_back(x.at({n, ch, iy, ix}));
            }
          if (window.empty()) c.Fail("empty pooling window");
          if (kMax) {
            z3::expr m = window[0];
            for (size_t k = 1; k < window.size(); ++k) m = z3::ite(window[k] > m, window[k], m);
            out.v.push_back(m);
          } else {
            z3::expr_vector terms(c.z3);
            for (const auto& e : window) terms.push_back(e);
            int64_t divisor = include_pad ? count : static_cast<int64_t>(window.size());
            out.v.push_back(z3::sum(terms) / c.Real(static_cast<double>(divisor)));
          }
        }
  c.outputs = {out};
}

OpDef MaxPoolDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = PoolSymbolic<true>;
  d.name = "MaxPool";
  d.since_opset = 11;
  d.attrs = WindowAttrs(true);
  d.attrs.push_back(IntAttr("ceil_mode", 0));
  d.attrs.push_back(IntAttr("storage_order", 0));
  d.shape = [](const ShapeContext& c) {
    // MaxPool-12 allows int8 and uint8: ATen has no integer kernels, so the
    // kernel pools them in float32 (exact for 8-bit values).
    const DType t = c.input(0).dtype;
    if (!IsFloatingPoint(t) && t != DType::kInt8 && t != DType::kUInt8)
      c.Unsupported("MaxPool of " + c.input(0).ToString() + " is not run");
    return PoolShape(c, true);
  };
  d.canonical_attrs = [](const ShapeContext& c, AttributeMap* a) {
    CanonicalWindowAttrs(PoolWindow(c, Spatial(c.input(0)), true), true, a);
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& given = c.in(0);
    const at::Tensor x = given.is_floating_point() ? given : given.to(at::kFloat);
    Shape in(x.sizes().begin() + 2, x.sizes().end());
    Window w = PoolWindow(c, in, true);
    at::Tensor input = x;
    std::vector<int64_t> padding = w.pad_begin;
    bool ceil_mode = c.Int("ceil_mode") != 0;
    bool aten_ok = w.symmetric();
    for (size_t k = 0; k < padding.size(); ++k) aten_ok = aten_ok && 2 * padding[k] <= w.kernel[k];
    if (!aten_ok) {
      input = PadSpatial(x, w, -std::numeric_limits<double>::infinity());
      std::fill(padding.begin(), padding.end(), 0);
    }
    switch (in.size()) {
      case 1: c.outputs = {at::max_pool1d(input, w.kernel, w.strides, padding, w.dilations, ceil_mode)}; break;
      case 2: c.outputs = {at::max_pool2d(input, w.kernel, w.strides, padding, w.dilations, ceil_mode)}; break;
      case 3: c.outputs = {at::max_pool3d(input, w.kernel, w.strides, padding, w.dilations, ceil_mode)}; break;
      default: c.Fail("only 1-D to 3-D pooling is supported");
    }
    if (!given.is_floating_point()) c.outputs[0] = c.outputs[0].to(given.scalar_type());
  };
  d.flops = PoolFlops;
  return d;
}
RLFLOW_REGISTER_OP(MaxPoolDef());

at::Tensor AvgPoolAten(const at::Tensor& x, const Window& w, const std::vector<int64_t>& padding, bool ceil_mode,
                       bool count_include_pad, const AttrReader& a) {
  switch (w.kernel.size()) {
    case 1: return at::avg_pool1d(x, w.kernel, w.strides, padding, ceil_mode, count_include_pad);
    case 2: return at::avg_pool2d(x, w.kernel, w.strides, padding, ceil_mode, count_include_pad);
    case 3: return at::avg_pool3d(x, w.kernel, w.strides, padding, ceil_mode, count_include_pad);
    default: a.Fail("only 1-D to 3-D pooling is supported");
  }
}

OpDef AveragePoolDef() {
  OpDef d;
  d.symbolic = PoolSymbolic<false>;
  // Fingerprint stand-in: the window sum (the average times a positive
  // constant), exact on integers; linear like the average itself.
  d.fingerprint = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    Shape in(x.sizes().begin() + 2, x.sizes().end());
    Window w = PoolWindow(c, in, false);
    if (in.size() != 2 || !w.symmetric()) c.Fail("fingerprint semantics cover symmetric 2-D pooling only");
    c.outputs = {at::avg_pool2d(x, w.kernel, w.strides, w.pad_begin, c.Int("ceil_mode") != 0,
                                c.Int("count_include_pad") != 0, /*divisor_override=*/1)};
  };
  d.name = "AveragePool";
  d.since_opset = 11;
  d.attrs = WindowAttrs(false);
  d.attrs.push_back(IntAttr("ceil_mode", 0));
  d.attrs.push_back(IntAttr("count_include_pad", 0));
  d.shape = [](const ShapeContext& c) { return PoolShape(c, false); };
  d.canonical_attrs = [](const ShapeContext& c, AttributeMap* a) {
    CanonicalWindowAttrs(PoolWindow(c, Spatial(c.input(0)), false), true, a);
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    Shape in(x.sizes().begin() + 2, x.sizes().end());
    Window w = PoolWindow(c, in, false);
    bool ceil_mode = c.Int("ceil_mode") != 0;
    bool include_pad = c.Int("count_include_pad") != 0;
    bool aten_ok = w.symmetric();
    for (size_t k = 0; k < w.kernel.size(); ++k) aten_ok = aten_ok && 2 * w.pad_begin[k] <= w.kernel[k];
    if (aten_ok) {
      c.outputs = {AvgPoolAten(x, w, w.pad_begin, ceil_mode, include_pad, c)};
      return;
    }
    // Asymmetric padding: sum over the zero-padded input, divided by the
    // window size or by the number of real elements in each window.
    std::vector<int64_t> zero(w.kernel.size(), 0);
    at::Tensor sum = AvgPoolAten(PadSpatial(x, w, 0.0), w, zero, ceil_mode, true, c);
    if (!include_pad) {
      at::Tensor ones = at::ones({1, 1}, x.options());
      std::vector<int64_t> shape = {1, 1};
      shape.insert(shape.end(), in.begin(), in.end());
      at::Tensor count = AvgPoolAten(PadSpatial(at::ones(shape, x.options()), w, 0.0), w, zero, ceil_mode, true, c);
      sum = sum / count;
    }
    c.outputs = {sum};
  };
  d.flops = PoolFlops;
  return d;
}
RLFLOW_REGISTER_OP(AveragePoolDef());

// GlobalAveragePool / GlobalMaxPool: the mean or the largest element of
// each channel's spatial dimensions.
OpDef GlobalPoolDef(bool max) {
  OpDef d;
  d.name = max ? "GlobalMaxPool" : "GlobalAveragePool";
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (RankOf(c, 0) < 3) c.Fail("input must have rank >= 3");
    Shape out = x.shape;
    for (size_t k = 2; k < out.size(); ++k) out[k] = 1;
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    std::vector<int64_t> dims;
    for (int64_t k = 2; k < c.in(0).dim(); ++k) dims.push_back(k);
    c.outputs = {c.node().op == "GlobalMaxPool" ? at::amax(c.in(0), dims, /*keepdim=*/true)
                                                : c.in(0).mean(dims, /*keepdim=*/true)};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(GlobalPoolDef(false));
RLFLOW_REGISTER_OP(GlobalPoolDef(true));

// LRN: each element divided by (bias + alpha / size * the sum of squares of
// the `size` channels around it)^beta (Caffe-era models: AlexNet,
// GoogLeNet, CaffeNet, and the ONNX model zoo's conversions of them).
OpDef LrnDef() {
  OpDef d;
  d.name = "LRN";
  d.attrs = {FloatAttr("alpha", 1e-4f), FloatAttr("beta", 0.75f), FloatAttr("bias", 1.0f), RequiredInt("size")};
  d.shape = [](const ShapeContext& c) {
    if (RankOf(c, 0) < 3) c.Fail("input must have rank >= 3 (N, C, D1, ...)");
    if (c.Int("size") < 1) c.Fail("size must be >= 1");
    if (!IsFloatingPoint(c.input(0).dtype)) c.Fail("input must be floating-point, got " + c.input(0).ToString());
    return std::vector<TensorType>{c.input(0)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t size = c.Int("size"), rank = x.dim(), channels = x.size(1);
    // Channels c - floor((size-1)/2) .. c + ceil((size-1)/2), zero outside.
    const int64_t before = (size - 1) / 2, after = size - 1 - before;
    std::vector<int64_t> pad(static_cast<size_t>(2 * (rank - 1)), 0);
    pad[static_cast<size_t>(2 * (rank - 2))] = before;
    pad[static_cast<size_t>(2 * (rank - 2) + 1)] = after;
    at::Tensor squares = at::constant_pad_nd(x * x, pad);
    at::Tensor sum = squares.narrow(1, 0, channels).clone();
    for (int64_t k = 1; k < size; ++k) sum += squares.narrow(1, k, channels);
    const double alpha = c.Float("alpha"), beta = c.Float("beta"), bias = c.Float("bias");
    c.outputs = {x / (sum * (alpha / static_cast<double>(size)) + bias).pow(beta)};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    return (2.0 * static_cast<double>(c.Int("size")) + 6.0) * Numel(out[0]);
  };
  return d;
}
RLFLOW_REGISTER_OP(LrnDef());

// MeanVarianceNormalization (opset 13 form; axes default N, H, W): as its
// ONNX function body computes it, (x - E[x]) / (sqrt(E[x^2] - E[x]^2) + 1e-9).
OpDef MeanVarianceNormalizationDef() {
  OpDef d;
  d.name = "MeanVarianceNormalization";
  d.attrs = {OptionalAttr("axes", AttrType::kInts)};
  d.shape = [](const ShapeContext& c) {
    const int64_t rank = RankOf(c, 0);
    if (!c.Has("axes") && rank != 4) c.Fail("the default axes [0, 2, 3] need a rank-4 input");
    if (c.Has("axes"))
      for (int64_t a : c.Ints("axes")) NormalizeAxis(a, rank, c);
    if (!IsFloatingPoint(c.input(0).dtype)) c.Fail("input must be floating-point, got " + c.input(0).ToString());
    return std::vector<TensorType>{c.input(0)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    std::vector<int64_t> axes = c.Has("axes") ? c.Ints("axes") : std::vector<int64_t>{0, 2, 3};
    for (int64_t& a : axes) a = NormalizeAxis(a, x.dim(), c);
    at::Tensor mean = x.mean(axes, /*keepdim=*/true);
    at::Tensor variance = (x * x).mean(axes, /*keepdim=*/true) - mean * mean;
    c.outputs = {(x - mean) / (variance.sqrt() + 1e-9)};
  };
  d.flops = PerOutputElement(8.0);
  return d;
}
RLFLOW_REGISTER_OP(MeanVarianceNormalizationDef());

// ---- Pad ----
void PadSymbolic(SymbolicContext& c) {
  const SymTensor& x = c.in(0);
  if (c.String("mode") != "constant") c.Fail("symbolic semantics cover constant padding only");
  std::vector<int64_t> pads = c.ConstInts(1);
  int64_t r = static_cast<int64_t>(x.shape.size());
  z3::expr fill = c.Real(0);
  if (c.has(2)) fill = c.in(2).v.at(0);
  SymTensor out;
  for (int64_t k = 0; k < r; ++k) out.shape.push_back(x.shape[k] + pads[k] + pads[k + r]);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = Unravel(i, out.shape);
    bool inside = true;
    for (int64_t k = 0; k < r; ++k) {
      idx[k] -= pads[k];
      inside = inside && idx[k] >= 0 && idx[k] < x.shape[k];
    }
    out.v.push_back(inside ? x.at(idx) : fill);
  }
  c.outputs = {out};
}

OpDef PadDef() {
  OpDef d;
  d.symbolic = PadSymbolic;
  d.name = "Pad";
  d.since_opset = 11;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = {StringAttr("mode", "constant")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    int64_t r = RankOf(c, 0);
    auto maybe_pads = c.MaybeConstantInts(1);
    if (!maybe_pads) return std::vector<TensorType>{UnknownDims(x.dtype, r)};
    std::vector<int64_t> pads = *maybe_pads;
    if (static_cast<int64_t>(pads.size()) != 2 * r)
      c.Fail("pads has " + std::to_string(pads.size()) + " values for rank " + std::to_string(r));
    std::string mode = c.String("mode");
    if (mode != "constant" && mode != "reflect" && mode != "edge") c.Fail("unknown pad mode '" + mode + "'");
    // Reflect reads pads elements beyond the edge inside the axis, edge
    // one at it: as ONNX Runtime checks them (an axis of 1 cannot be
    // reflected; "Pad reflect requires axis length >= 2"), after the
    // negative pads have cropped it.
    if (mode != "constant")
      for (int64_t k = 0; k < r; ++k) {
        const int64_t before = pads[k], after = pads[k + r];
        if (x.shape[k] < 0 || (before <= 0 && after <= 0)) continue;
        const int64_t n = x.shape[k] + std::min<int64_t>(before, 0) + std::min<int64_t>(after, 0);
        if (mode == "edge" && n <= 0)
          c.Fail("edge pads of axis " + std::to_string(k) + ", which is empty (" + std::to_string(x.shape[k]) + ")");
        if (mode == "reflect" && std::max(before, after) > n - 1)
          c.Fail("reflect pads of " + std::to_string(std::max(before, after)) + " for axis " + std::to_string(k) +
                 " of length " + std::to_string(n) + " (at most " + std::to_string(std::max<int64_t>(n - 1, 0)) + ")");
      }
    Shape out = x.shape;
    for (int64_t k = 0; k < r; ++k)
      if (out[k] >= 0) {
        out[k] += pads[k] + pads[k + r];
        if (out[k] < 0) c.Fail("negative output dimension after padding");
      }
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  // Exact on integers for constant padding with an integer (or no) value;
  // the generator only pads with zeros.
  d.exact_on_integers = true;
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    int64_t r = x.dim();
    std::vector<int64_t> pads = c.IntsInput(1);
    std::string mode = c.String("mode");
    if (mode == "constant") {
      std::vector<int64_t> p;
      for (int64_t k = r; k-- > 0;) {
        p.push_back(pads[k]);
        p.push_back(pads[k + r]);
      }
      double value = c.has(2) ? c.in(2).item().toDouble() : 0.0;
      c.outputs = {at::constant_pad_nd(x, p, value)};
      return;
    }
    // reflect / edge of integers, or of more than the trailing 3 dims: each
    // padded axis gathered with the indices it reads (exact for any type).
    int64_t lowest = r;
    for (int64_t k = 0; k < r; ++k)
      if (pads[k] != 0 || pads[k + r] != 0) lowest = std::min(lowest, k);
    if (!x.is_floating_point() || r - lowest > 3) {
      at::Tensor y = x;
      for (int64_t k = 0; k < r; ++k) {
        if (pads[k] == 0 && pads[k + r] == 0) continue;
        const int64_t n = x.size(k);
        if (n == 0) c.Fail("mode '" + mode + "' cannot pad an empty axis");
        if (mode == "reflect" && (pads[k] >= n || pads[k + r] >= n))
          c.Fail("reflect pads of " + std::to_string(std::max(pads[k], pads[k + r])) + " for an axis of " +
                 std::to_string(n));
        std::vector<int64_t> idx;
        for (int64_t j = -pads[k]; j < n + pads[k + r]; ++j) {
          int64_t i = j;
          if (mode == "edge") {
            i = std::min(std::max<int64_t>(j, 0), n - 1);
          } else if (n > 1) {
            if (i < 0) i = -i;
            if (i >= n) i = 2 * (n - 1) - i;
          } else {
            i = 0;
          }
          idx.push_back(i);
        }
        y = y.index_select(k, at::from_blob(idx.data(), {static_cast<int64_t>(idx.size())}, at::kLong).clone());
      }
      c.outputs = {y};
      return;
    }
    // reflect / edge: ATen pads the trailing 1-3 dims of a batched tensor.
    int64_t first = r;
    for (int64_t k = 0; k < r; ++k)
      if (pads[k] != 0 || pads[k + r] != 0) {
        first = k;
        break;
      }
    int64_t nd = r - first;
    if (nd == 0) {
      c.outputs = {x};
      return;
    }
    std::vector<int64_t> p;
    for (int64_t k = r; k-- > first;) {
      p.push_back(pads[k]);
      p.push_back(pads[k + r]);
    }
    std::vector<int64_t> batched = {1};
    for (int64_t k = 0; k < first; ++k) batched[0] *= x.size(k);
    for (int64_t k = first; k < r; ++k) batched.push_back(x.size(k));
    at::Tensor xb = x.reshape(batched);
    if (nd < 3 || mode == "edge") xb = xb.unsqueeze(0);  // ATen wants (N, C, spatial...)
    at::Tensor y;
    if (mode == "reflect") {
      y = nd == 1 ? at::reflection_pad1d(xb, p) : nd == 2 ? at::reflection_pad2d(xb, p) : at::reflection_pad3d(xb, p);
    } else {
      y = nd == 1   ? at::replication_pad1d(xb, p)
          : nd == 2 ? at::replication_pad2d(xb, p)
                    : at::replication_pad3d(xb, p);
    }
    std::vector<int64_t> out_shape(x.sizes().begin(), x.sizes().end());
    for (int64_t k = 0; k < r; ++k) out_shape[k] += pads[k] + pads[k + r];
    c.outputs = {y.reshape(out_shape)};
  };
  return d;
}
RLFLOW_REGISTER_OP(PadDef());

// ---- MatMul / Gemm ----
// numpy matmul: rank-1 operands are promoted (and the added axis dropped),
// batch dimensions broadcast.
void MatMulSymbolic(SymbolicContext& c) {
  SymTensor a = c.in(0), b = c.in(1);
  if (a.shape.empty() || b.shape.empty()) c.Fail("MatMul operands must have rank >= 1");
  bool va = a.shape.size() == 1, vb = b.shape.size() == 1;
  if (va) a.shape.insert(a.shape.begin(), 1);
  if (vb) b.shape.push_back(1);
  int64_t M = a.shape[a.shape.size() - 2], K = a.shape.back(), N = b.shape.back();
  if (b.shape[b.shape.size() - 2] != K) c.Fail("inner dimensions differ");
  Shape ba(a.shape.begin(), a.shape.end() - 2), bb(b.shape.begin(), b.shape.end() - 2);
  size_t rank = std::max(ba.size(), bb.size());
  ba.insert(ba.begin(), rank - ba.size(), 1);
  bb.insert(bb.begin(), rank - bb.size(), 1);
  Shape batch(rank);
  for (size_t k = 0; k < rank; ++k) {
    if (ba[k] != bb[k] && ba[k] != 1 && bb[k] != 1) c.Fail("batch dimensions do not broadcast");
    batch[k] = std::max(ba[k], bb[k]);
  }
  SymTensor out;
  out.shape = batch;
  out.shape.push_back(M);
  out.shape.push_back(N);
  int64_t batches = NumElements(batch);
  for (int64_t t = 0; t < batches; ++t) {
    std::vector<int64_t> bi = batch.empty() ? std::vector<int64_t>{} : Unravel(t, batch);
    // Offsets of this batch's matrices (each operand keeps its own rank;
    // broadcast dimensions of size 1 stay at index 0).
    int64_t offa = 0, offb = 0;
    for (size_t k = rank - (a.shape.size() - 2); k < rank; ++k) offa = offa * ba[k] + (ba[k] == 1 ? 0 : bi[k]);
    for (size_t k = rank - (b.shape.size() - 2); k < rank; ++k) offb = offb * bb[k] + (bb[k] == 1 ? 0 : bi[k]);
    offa *= M * K;
    offb *= K * N;
    for (int64_t i = 0; i < M; ++i)
      for (int64_t j = 0; j < N; ++j) {
        z3::expr_vector terms(c.z3);
        for (int64_t k = 0; k < K; ++k) terms.push_back(a.v[offa + i * K + k] * b.v[offb + k * N + j]);
        out.v.push_back(z3::sum(terms));
      }
  }
  if (vb) out.shape.pop_back();
  if (va) out.shape.erase(out.shape.end() - (vb ? 1 : 2));
  c.outputs = {out};
}

OpDef MatMulDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = MatMulSymbolic;
  d.name = "MatMul";
  d.min_inputs = d.max_inputs = 2;
  d.shape = [](const ShapeContext& c) {
    const TensorType& a = c.input(0);
    const TensorType& b = c.input(1);
    if (a.dtype != b.dtype) c.Fail("input types differ: " + a.ToString() + " and " + b.ToString());
    if (RankOf(c, 0) < 1 || RankOf(c, 1) < 1) c.Fail("inputs must have rank >= 1");
    Shape sa = a.shape, sb = b.shape;
    bool va = sa.size() == 1, vb = sb.size() == 1;
    if (va) sa.insert(sa.begin(), 1);
    if (vb) sb.push_back(1);
    int64_t ka = sa[sa.size() - 1], kb = sb[sb.size() - 2];
    if (ka >= 0 && kb >= 0 && ka != kb) c.Fail("inner dimensions differ: " + a.ToString() + " x " + b.ToString());
    Shape batch = BroadcastShapes(Shape(sa.begin(), sa.end() - 2), Shape(sb.begin(), sb.end() - 2), c);
    Shape out = batch;
    if (!va) out.push_back(sa[sa.size() - 2]);
    if (!vb) out.push_back(sb[sb.size() - 1]);
    return std::vector<TensorType>{Type(a.dtype, out)};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {at::matmul(c.in(0), c.in(1))}; };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    const Shape& a = c.input(0).shape;
    return 2.0 * Numel(out[0]) * static_cast<double>(a.back());
  };
  return d;
}
RLFLOW_REGISTER_OP(MatMulDef());

// alpha * A' B' + beta * C, C broadcast to [M, N] (unidirectionally).
void GemmSymbolic(SymbolicContext& c) {
  const SymTensor &a = c.in(0), &b = c.in(1);
  if (a.shape.size() != 2 || b.shape.size() != 2) c.Fail("A and B must be matrices");
  bool ta = c.Int("transA") != 0, tb = c.Int("transB") != 0;
  int64_t M = ta ? a.shape[1] : a.shape[0], K = ta ? a.shape[0] : a.shape[1], N = tb ? b.shape[0] : b.shape[1];
  if ((tb ? b.shape[1] : b.shape[0]) != K) c.Fail("inner dimensions differ");
  float alpha = c.Float("alpha"), beta = c.Float("beta");
  const SymTensor* bias = c.has(2) && beta != 0.0f ? &c.in(2) : nullptr;
  Shape cs;
  if (bias != nullptr) {
    if (bias->shape.size() > 2) c.Fail("C must have rank <= 2");
    cs = bias->shape;
    cs.insert(cs.begin(), 2 - cs.size(), 1);
    if ((cs[0] != 1 && cs[0] != M) || (cs[1] != 1 && cs[1] != N)) c.Fail("C does not broadcast to [M, N]");
  }
  SymTensor out;
  out.shape = {M, N};
  for (int64_t i = 0; i < M; ++i)
    for (int64_t j = 0; j < N; ++j) {
      z3::expr_vector terms(c.z3);
      for (int64_t k = 0; k < K; ++k)
        terms.push_back(a.v[ta ? k * M + i : i * K + k] * b.v[tb ? j * K + k : k * N + j]);
      z3::expr e = z3::sum(terms);
      if (alpha != 1.0f) e = c.Real(alpha) * e;
      if (bias != nullptr) {
        const z3::expr& y = bias->v[(cs[0] == 1 ? 0 : i) * cs[1] + (cs[1] == 1 ? 0 : j)];
        e = e + (beta == 1.0f ? y : c.Real(beta) * y);
      }
      out.v.push_back(e);
    }
  c.outputs = {out};
}

OpDef GemmDef() {
  OpDef d;
  d.exact_on_integers = true;  // with the default alpha = beta = 1 (the generator's templates)
  d.symbolic = GemmSymbolic;
  d.name = "Gemm";
  d.since_opset = 11;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.attrs = {FloatAttr("alpha", 1.0f), FloatAttr("beta", 1.0f), IntAttr("transA", 0), IntAttr("transB", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& a = c.input(0);
    const TensorType& b = c.input(1);
    if (RankOf(c, 0) != 2 || RankOf(c, 1) != 2)
      c.Fail("A and B must be matrices, got " + a.ToString() + " and " + b.ToString());
    int64_t m = c.Int("transA") ? a.shape[1] : a.shape[0];
    int64_t ka = c.Int("transA") ? a.shape[0] : a.shape[1];
    int64_t kb = c.Int("transB") ? b.shape[1] : b.shape[0];
    int64_t n = c.Int("transB") ? b.shape[0] : b.shape[1];
    if (ka >= 0 && kb >= 0 && ka != kb) c.Fail("inner dimensions differ: " + a.ToString() + " x " + b.ToString());
    if (c.has_input(2)) BroadcastShapes({m, n}, c.input(2).shape, c);
    return std::vector<TensorType>{Type(a.dtype, {m, n})};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor a = c.Int("transA") ? c.in(0).t() : c.in(0);
    at::Tensor b = c.Int("transB") ? c.in(1).t() : c.in(1);
    float alpha = c.Float("alpha"), beta = c.Float("beta");
    if (c.has(2) && beta != 0.0f) {
      at::Tensor bias = c.in(2);
      if (bias.dim() == 2 && bias.size(0) == a.size(0) && bias.size(1) == b.size(1)) {
        c.outputs = {at::addmm(bias, a, b, beta, alpha)};
      } else {
        c.outputs = {at::addmm(bias.expand({a.size(0), b.size(1)}), a, b, beta, alpha)};
      }
      return;
    }
    at::Tensor y = at::mm(a, b);
    if (alpha != 1.0f) y = y * alpha;
    c.outputs = {y};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    const Shape& a = c.input(0).shape;
    double k = static_cast<double>(c.Int("transA") ? a[0] : a[1]);
    return Numel(out[0]) * (2.0 * k + (c.has_input(2) ? 1.0 : 0.0));
  };
  return d;
}
RLFLOW_REGISTER_OP(GemmDef());

// ---- Softmax, LogSoftmax, Hardmax (opset 13 semantics: along one axis;
// older models' 2-D coerced forms are rewritten to these at import) ----
OpDef SoftmaxFamilyDef(const std::string& name, KernelFn kernel, double flops_per_element) {
  OpDef d;
  d.name = name;
  d.since_opset = 13;
  d.attrs = {IntAttr("axis", -1)};
  d.shape = [](const ShapeContext& c) {
    NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
    return std::vector<TensorType>{c.input(0)};
  };
  d.kernel = kernel;
  d.flops = PerOutputElement(flops_per_element);
  return d;
}
RLFLOW_REGISTER_OP(SoftmaxFamilyDef(
    "Softmax",
    [](KernelContext& c) { c.outputs = {at::softmax(c.in(0), NormalizeAxis(c.Int("axis"), c.in(0).dim(), c))}; }, 5.0));
RLFLOW_REGISTER_OP(SoftmaxFamilyDef(
    "LogSoftmax",
    [](KernelContext& c) { c.outputs = {at::log_softmax(c.in(0), NormalizeAxis(c.Int("axis"), c.in(0).dim(), c))}; },
    6.0));
// Hardmax: 1 at the first largest element along the axis, 0 elsewhere.
RLFLOW_REGISTER_OP(SoftmaxFamilyDef(
    "Hardmax",
    [](KernelContext& c) {
      const at::Tensor& x = c.in(0);
      const int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
      at::Tensor y = at::zeros_like(x);
      if (x.numel() > 0) y.scatter_(axis, x.argmax(axis, /*keepdim=*/true), 1);
      c.outputs = {y};
    },
    2.0));

// The mean of symbolic elements (ReduceMean, LayerNormalization).
z3::expr SymMean(const std::vector<z3::expr>& xs) {
  z3::expr sum = xs.front();
  for (size_t k = 1; k < xs.size(); ++k) sum = sum + xs[k];
  return sum / xs.front().ctx().real_val(static_cast<int64_t>(xs.size()));
}

// (x - mean) / Sqrt(mean((x - mean)^2) + epsilon) * scale + bias over the
// trailing axes from `axis`, Sqrt uninterpreted (as the Sqrt operator's);
// scale and bias (nullptr: none) have the normalised shape or one element.
// `mean` / `inv_std` (optional): per row, shape x's up to `axis` then 1s.
SymTensor SymLayerNorm(const SymbolicContext& c, const SymTensor& x, int64_t axis, const SymTensor& scale,
                       const SymTensor* bias, float epsilon, SymTensor* mean_out = nullptr,
                       SymTensor* inv_std_out = nullptr) {
  const Shape norm(x.shape.begin() + axis, x.shape.end());
  const int64_t n = NumElements(norm);
  if (n <= 0) c.Fail("an empty normalisation is not modelled");
  auto per_norm = [&](const SymTensor& t, int64_t j) -> z3::expr {
    // Scale and bias broadcast against the normalised shape.
    if (t.numel() == 1) return t.v[0];
    if (t.numel() != n) c.Fail("scale and bias must have the normalised shape");
    return t.v[static_cast<size_t>(j)];
  };
  SymTensor out;
  out.shape = x.shape;
  out.v.reserve(x.v.size());
  Shape row_shape(x.shape.begin(), x.shape.begin() + axis);
  row_shape.resize(x.shape.size(), 1);
  if (mean_out != nullptr) *mean_out = SymTensor{row_shape, {}};
  if (inv_std_out != nullptr) *inv_std_out = SymTensor{row_shape, {}};
  z3::context& z3 = c.z3;
  const z3::expr eps = c.Real(epsilon);
  for (int64_t row = 0; row < x.numel() / n; ++row) {
    std::vector<z3::expr> xs(x.v.begin() + row * n, x.v.begin() + (row + 1) * n);
    z3::expr mean = SymMean(xs);
    std::vector<z3::expr> sq;
    for (const z3::expr& v : xs) sq.push_back((v - mean) * (v - mean));
    z3::expr denom = SymApply(z3, "Sqrt", {SymMean(sq) + eps});
    if (mean_out != nullptr) mean_out->v.push_back(mean);
    if (inv_std_out != nullptr) inv_std_out->v.push_back(z3.real_val(1) / denom);
    for (int64_t j = 0; j < n; ++j) {
      z3::expr y = (xs[static_cast<size_t>(j)] - mean) / denom * per_norm(scale, j);
      if (bias != nullptr) y = y + per_norm(*bias, j);
      out.v.push_back(y);
    }
  }
  return out;
}

OpDef LayerNormDef() {
  OpDef d;
  d.name = "LayerNormalization";
  d.since_opset = 17;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.max_outputs = 3;
  d.attrs = {IntAttr("axis", -1), FloatAttr("epsilon", 1e-5f), IntAttr("stash_type", 1)};
  // Optional outputs Mean and InvStdDev: the statistics of each normalised
  // group, x's shape with the normalised dimensions 1, in stash_type
  // (float32 by default; others stay opaque).
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    int64_t axis = NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
    Shape norm(x.shape.begin() + axis, x.shape.end());
    if (c.input(1).shape != norm && c.input(1).IsStatic() && x.IsStatic())
      c.Fail("scale " + c.input(1).ToString() + " does not match normalized shape " + ShapeToString(norm));
    // Another stash_type changes only the precision Y is computed in, but
    // the statistics' type too.
    if (c.Int("stash_type") != 1 && c.node().outputs.size() > 1)
      c.Unsupported("statistics outputs in stash_type " + std::to_string(c.Int("stash_type")) + " are not run");
    Shape stats = x.shape;
    std::fill(stats.begin() + axis, stats.end(), 1);
    return std::vector<TensorType>{x, Type(DType::kFloat32, stats), Type(DType::kFloat32, stats)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    std::vector<int64_t> norm(x.sizes().begin() + axis, x.sizes().end());
    at::Tensor bias = c.has(2) ? c.in(2) : at::Tensor();
    if (c.num_outputs() == 1) {
      c.outputs = {at::layer_norm(x, norm, c.in(1), bias, c.Float("epsilon"), false)};
      return;
    }
    auto [y, mean, rstd] = at::native_layer_norm(x, norm, c.in(1), bias, c.Float("epsilon"));
    std::vector<int64_t> stats(x.sizes().begin(), x.sizes().end());
    std::fill(stats.begin() + axis, stats.end(), 1);
    c.outputs = {y, mean.reshape(stats).to(at::kFloat), rstd.reshape(stats).to(at::kFloat)};
  };
  d.flops = PerOutputElement(8.0);
  d.symbolic = [](SymbolicContext& c) {
    const SymTensor& x = c.in(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), static_cast<int64_t>(x.shape.size()), c);
    SymTensor mean, inv_std;
    c.outputs = {SymLayerNorm(c, x, axis, c.in(1), c.has(2) ? &c.in(2) : nullptr, c.Float("epsilon"), &mean, &inv_std)};
    c.outputs.push_back(std::move(mean));
    c.outputs.push_back(std::move(inv_std));
  };
  return d;
}
RLFLOW_REGISTER_OP(LayerNormDef());

// ---- ONNX Runtime's contrib SkipLayerNormalization (com.microsoft, v1) ----
// sum = input + skip (+ bias); output = LayerNormalization(sum, gamma,
// beta) over the last axis; optional outputs: the rows' mean and inverse
// standard deviation (float, the input's shape with a last dimension of 1)
// and the sum itself. Only ONNX Runtime runs it (targets {"ort"}).
OpDef SkipLayerNormDef() {
  OpDef d;
  d.name = "SkipLayerNormalization";
  d.domain = "com.microsoft";
  d.targets = {"ort"};
  d.min_inputs = 3;
  d.max_inputs = 5;
  d.max_outputs = 4;
  d.attrs = {FloatAttr("epsilon", 1e-12f)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const int64_t rank = RankOf(c, 0);
    if (rank != 2 && rank != 3) c.Fail("input must be 2-D or 3-D, got " + x.ToString());
    if (c.input(1).rank() != rank || (x.IsStatic() && c.input(1).IsStatic() && c.input(1).shape != x.shape))
      c.Unsupported("a skip of another shape than the input (" + c.input(1).ToString() + " vs " + x.ToString() +
                    ") is not modelled");
    const int64_t hidden = x.shape.back();
    for (int i : {2, 3, 4})
      if (c.has_input(i) &&
          (c.input(i).rank() != 1 || (hidden >= 0 && c.input(i).shape[0] >= 0 && c.input(i).shape[0] != hidden)))
        c.Fail("gamma, beta and bias must be 1-D of the hidden size " + std::to_string(hidden) + ", got " +
               c.input(i).ToString());
    Shape row = x.shape;
    row.back() = 1;
    return std::vector<TensorType>{x, Type(DType::kFloat32, row), Type(DType::kFloat32, row), x};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor sum = c.in(0) + c.in(1);
    if (c.has(4)) sum = sum + c.in(4);
    const int64_t hidden = sum.size(-1);
    auto [y, mean, rstd] =
        at::native_layer_norm(sum, {hidden}, c.in(2), c.has(3) ? c.in(3) : at::Tensor(), c.Float("epsilon"));
    std::vector<int64_t> row(sum.sizes().begin(), sum.sizes().end());
    row.back() = 1;
    std::vector<at::Tensor> all = {y, mean.reshape(row), rstd.reshape(row), sum};
    c.outputs.assign(all.begin(), all.begin() + c.num_outputs());
  };
  d.flops = PerOutputElement(10.0);
  d.symbolic = [](SymbolicContext& c) {
    auto add = +[](const z3::expr& a, const z3::expr& b) { return a + b; };
    SymTensor sum = SymBroadcast(c, c.in(0), c.in(1), add);
    if (c.has(4)) sum = SymBroadcast(c, sum, c.in(4), add);
    const int64_t axis = static_cast<int64_t>(sum.shape.size()) - 1;
    SymTensor mean, inv_std;
    SymTensor y =
        SymLayerNorm(c, sum, axis, c.in(2), c.has(3) ? &c.in(3) : nullptr, c.Float("epsilon"), &mean, &inv_std);
    std::vector<SymTensor> all = {y, mean, inv_std, sum};
    c.outputs.assign(all.begin(), all.begin() + c.num_outputs());
  };
  return d;
}
RLFLOW_REGISTER_OP(SkipLayerNormDef());

// ---- reductions (opset 13 forms) ----
// `x` reduced over `axes` (kept as 1s with keepdims).
TensorType Reduced(const TensorType& x, const std::vector<int64_t>& axes, bool keep) {
  Shape out;
  for (int64_t k = 0; k < x.rank(); ++k) {
    bool reduced = std::find(axes.begin(), axes.end(), k) != axes.end();
    if (!reduced)
      out.push_back(x.shape[k]);
    else if (keep)
      out.push_back(1);
  }
  return Type(x.dtype, out);
}

std::vector<TensorType> ReduceShape(const ShapeContext& c) {
  return {Reduced(c.input(0), ReduceAxes(c, RankOf(c, 0)), c.Int("keepdims") != 0)};
}

OpDef ReduceDef(const std::string& name, KernelFn kernel) {
  OpDef d;
  d.name = name;
  d.attrs = {IntsAttr("axes"), IntAttr("keepdims", 1)};
  d.shape = ReduceShape;
  d.kernel = kernel;
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return Numel(c.input(0)); };
  return d;
}
OpDef ReduceMeanDef() {
  OpDef d = ReduceDef("ReduceMean", [](KernelContext& c) {
    c.outputs = {c.in(0).mean(ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0)};
  });
  d.symbolic = [](SymbolicContext& c) {
    const SymTensor& x = c.in(0);
    if (x.numel() == 0) c.Fail("an empty reduction is not modelled");
    c.outputs = {SymReduce(x, ReduceAxes(c, static_cast<int64_t>(x.shape.size())), c.Int("keepdims") != 0, SymMean)};
  };
  return d;
}
RLFLOW_REGISTER_OP(ReduceMeanDef());
RLFLOW_REGISTER_OP(ReduceDef("ReduceMax", [](KernelContext& c) {
  c.outputs = {at::amax(c.in(0), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0)};
}));

// Reductions whose axes are an attribute (opset <= 17).
at::Tensor ReduceSumOver(const at::Tensor& x, const std::vector<int64_t>& axes, bool keep) { return x.sum(axes, keep); }
RLFLOW_REGISTER_OP(ReduceDef("ReduceMin", [](KernelContext& c) {
  c.outputs = {at::amin(c.in(0), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0)};
}));
RLFLOW_REGISTER_OP(ReduceDef("ReduceProd", [](KernelContext& c) {
  std::vector<int64_t> axes = ReduceAxes(c, c.in(0).dim());
  std::sort(axes.rbegin(), axes.rend());
  at::Tensor y = c.in(0);
  for (int64_t ax : axes) y = y.prod(ax, c.Int("keepdims") != 0);
  c.outputs = {y};
}));
RLFLOW_REGISTER_OP(ReduceDef("ReduceL1", [](KernelContext& c) {
  c.outputs = {ReduceSumOver(c.in(0).abs(), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0)};
}));
RLFLOW_REGISTER_OP(ReduceDef("ReduceL2", [](KernelContext& c) {
  c.outputs = {ReduceSumOver(c.in(0) * c.in(0), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0).sqrt()};
}));
RLFLOW_REGISTER_OP(ReduceDef("ReduceSumSquare", [](KernelContext& c) {
  c.outputs = {ReduceSumOver(c.in(0) * c.in(0), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0)};
}));
RLFLOW_REGISTER_OP(ReduceDef("ReduceLogSum", [](KernelContext& c) {
  c.outputs = {ReduceSumOver(c.in(0), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0).log()};
}));
RLFLOW_REGISTER_OP(ReduceDef("ReduceLogSumExp", [](KernelContext& c) {
  c.outputs = {at::logsumexp(c.in(0), ReduceAxes(c, c.in(0).dim()), c.Int("keepdims") != 0)};
}));

OpDef ReduceSumDef() {
  OpDef d;
  d.name = "ReduceSum";
  d.since_opset = 13;
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.attrs = {IntAttr("keepdims", 1), IntAttr("noop_with_empty_axes", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    std::vector<int64_t> given;
    if (c.has_input(1)) {
      auto v = c.MaybeConstantInts(1);
      const int64_t count = c.Length1D(1), rank = RankOf(c, 0);
      if (!v && count > 0) {
        // Axes computed at run time: the rank is known, the lengths are not.
        if (count > rank) c.Fail(std::to_string(count) + " axes for a rank-" + std::to_string(rank) + " input");
        return std::vector<TensorType>{
            Type(x.dtype, Shape(static_cast<size_t>(c.Int("keepdims") != 0 ? rank : rank - count), kUnknownDim))};
      }
      if (!v && count < 0) c.Unsupported("axes computed at run time, their number unknown");
      if (v) given = *v;
    }
    return std::vector<TensorType>{Reduced(x, ReduceSumAxes(c, given, RankOf(c, 0)), c.Int("keepdims") != 0)};
  };
  d.kernel = [](KernelContext& c) {
    std::vector<int64_t> given = c.has(1) ? c.IntsInput(1) : std::vector<int64_t>();
    std::vector<int64_t> axes = ReduceSumAxes(c, given, c.in(0).dim());
    if (axes.empty()) {
      c.outputs = {c.in(0)};
      return;
    }
    c.outputs = {c.in(0).sum(axes, c.Int("keepdims") != 0)};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) { return Numel(c.input(0)); };
  return d;
}
RLFLOW_REGISTER_OP(ReduceSumDef());

// ---- NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss (opsets 12,
// 13), as training exports (ONNX Runtime training, torch.onnx with
// TrainingMode) hold them: loss[n, d...] = -input[n, target[n, d...], d...]
// times the target class's weight, 0 where the target is ignore_index;
// reduced by none, sum, or mean (divided by the weights of the targets not
// ignored). SoftmaxCrossEntropyLoss is LogSoftmax over axis 1 then that
// loss, with the log-probabilities as an optional second output. ATen's
// nll_loss_nd computes the same.
at::Tensor NllLoss(const KernelContext& c, const at::Tensor& log_prob, const at::Tensor& target,
                   const at::Tensor& weight) {
  const std::string reduction = c.String("reduction");
  const int64_t r = reduction == "none" ? 0 : reduction == "mean" ? 1 : 2;
  const int64_t ignore = c.Has("ignore_index") ? c.Int("ignore_index") : std::numeric_limits<int64_t>::min();
  at::Tensor t = target.to(at::kLong);
  const int64_t classes = log_prob.size(1);
  at::Tensor bad = (t < 0).logical_or(t >= classes).logical_and(t != ignore);
  if (bad.any().item<bool>()) c.Fail("a target is outside [0, " + std::to_string(classes) + ") and not ignore_index");
  return at::nll_loss_nd(log_prob, t, weight.defined() ? c10::optional<at::Tensor>(weight) : c10::nullopt, r, ignore);
}

std::vector<TensorType> LossShape(const ShapeContext& c, bool with_log_prob) {
  const TensorType& x = c.input(0);
  const TensorType& target = c.input(1);
  const int64_t rank = RankOf(c, 0);
  if (rank < 2) c.Fail("input " + x.ToString() + " is not [N, C, ...]");
  if (!IsFloatingPoint(x.dtype)) c.Fail("input is " + x.ToString() + ", expected a floating type");
  if (target.dtype != DType::kInt32 && target.dtype != DType::kInt64)
    c.Fail("target is " + target.ToString() + ", expected int32 or int64");
  Shape per = x.shape;
  per.erase(per.begin() + 1);
  if (RankOf(c, 1) != rank - 1) c.Fail("target " + target.ToString() + " does not fit input " + x.ToString());
  for (size_t k = 0; k < per.size(); ++k)
    if (per[k] >= 0 && target.shape[k] >= 0 && per[k] != target.shape[k])
      c.Fail("target " + target.ToString() + " does not fit input " + x.ToString());
  if (c.has_input(2) && c.input(2).rank_known &&
      (c.input(2).rank() != 1 || (c.input(2).shape[0] >= 0 && x.shape[1] >= 0 && c.input(2).shape[0] != x.shape[1])))
    c.Fail("weight " + c.input(2).ToString() + " does not have one value per class");
  const std::string reduction = c.String("reduction");
  if (reduction != "none" && reduction != "sum" && reduction != "mean")
    c.Fail("reduction '" + reduction + "' is not none, sum or mean");
  std::vector<TensorType> out = {Type(x.dtype, reduction == "none" ? per : Shape{})};
  if (with_log_prob) out.push_back(x);
  return out;
}

template <bool kSoftmax>
OpDef LossDef() {
  OpDef d;
  d.name = kSoftmax ? "SoftmaxCrossEntropyLoss" : "NegativeLogLikelihoodLoss";
  d.since_opset = 12;
  d.min_inputs = 2;
  d.max_inputs = 3;
  d.max_outputs = kSoftmax ? 2 : 1;
  d.attrs = {OptionalAttr("ignore_index", AttrType::kInt), StringAttr("reduction", "mean")};
  d.shape = [](const ShapeContext& c) { return LossShape(c, kSoftmax); };
  d.kernel = [](KernelContext& c) {
    at::Tensor weight = c.has(2) ? c.in(2) : at::Tensor();
    if (!kSoftmax) {
      c.outputs = {NllLoss(c, c.in(0), c.in(1), weight)};
      return;
    }
    at::Tensor log_prob = at::log_softmax(c.in(0), 1);
    c.outputs = {NllLoss(c, log_prob, c.in(1), weight), log_prob};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) {
    return (kSoftmax ? 6.0 : 1.0) * Numel(c.input(0));
  };
  return d;
}
RLFLOW_REGISTER_OP(LossDef<false>());
RLFLOW_REGISTER_OP(LossDef<true>());

}  // namespace
}  // namespace rlflow::ops
