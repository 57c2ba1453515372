// Operators common in other exporters' models (detectors, segmenters, style
// transfer, text models): Tile, Trilu, DepthToSpace, SpaceToDepth, ArgMax,
// ArgMin, TopK, InstanceNormalization, Einsum. Shape rules, ATen kernels, FLOPs; each has a
// conformance case against ONNX Runtime.
#include <ATen/TensorOperators.h>
#include <ATen/ops/einsum.h>
#include <ATen/ops/grid_sampler.h>
#include <ATen/ops/instance_norm.h>
#include <ATen/ops/topk.h>
#include <ATen/ops/tril.h>
#include <ATen/ops/triu.h>

#include <cctype>
#include <map>

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

// Trilu (opset 14): the upper (upper = 1) or lower triangle of the last two
// dimensions from diagonal k (input 1, one int64, default 0), the rest
// zero (false): decoders' causal masks. Without it the mask was opaque and
// rewrites could not cross it.
OpDef TriluDef() {
  OpDef d;
  d.name = "Trilu";
  d.since_opset = 14;
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.attrs = {IntAttr("upper", 1)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (x.rank_known && x.shape.size() < 2) c.Fail("input must have rank >= 2, got " + x.ToString());
    if (c.has_input(1)) {
      const TensorType& k = c.input(1);
      if (k.dtype != DType::kInt64) c.Fail("k must be int64, got " + k.ToString());
      if (k.IsStatic() && k.NumElements() != 1) c.Fail("k must hold one value, got " + k.ToString());
    }
    const int64_t upper = c.Int("upper");
    if (upper != 0 && upper != 1) c.Fail("upper must be 0 or 1, got " + std::to_string(upper));
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    const int64_t k = c.has(1) ? c.IntsInput(1).at(0) : 0;
    c.outputs = {c.Int("upper") != 0 ? at::triu(c.in(0), k) : at::tril(c.in(0), k)};
  };
  return d;
}
RLFLOW_REGISTER_OP(TriluDef());

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

// GridSample (opset 16, 4-D): X [N, C, H, W] sampled at grid [N, Ho, Wo, 2]
// (x, y in [-1, 1]); bilinear, nearest or bicubic; zeros, border or
// reflection padding (spatial transformers, optical flow, deformable and
// bird's-eye-view models).
OpDef GridSampleDef() {
  OpDef d;
  d.name = "GridSample";
  d.since_opset = 16;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("align_corners", 0), StringAttr("mode", "bilinear"), StringAttr("padding_mode", "zeros")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& grid = c.input(1);
    if (RankOf(c, 0) != 4) c.Unsupported("GridSample of a rank-" + std::to_string(x.rank()) + " input");
    if (RankOf(c, 1) != 4 || (grid.shape[3] >= 0 && grid.shape[3] != 2))
      c.Fail("grid must be [N, H_out, W_out, 2], got " + grid.ToString());
    // ONNX allows X of any numeric type and a grid of another floating type;
    // ATen samples one floating type.
    if (grid.dtype != x.dtype || !IsFloatingPoint(x.dtype))
      c.Unsupported("GridSample of " + x.ToString() + " at a grid of " + grid.ToString() + " is not run");
    const std::string mode = c.String("mode"), padding = c.String("padding_mode");
    if (mode != "bilinear" && mode != "nearest" && mode != "bicubic") c.Fail("unknown mode '" + mode + "'");
    if (padding != "zeros" && padding != "border" && padding != "reflection")
      c.Fail("unknown padding_mode '" + padding + "'");
    return std::vector<TensorType>{Type(x.dtype, {x.shape[0], x.shape[1], grid.shape[1], grid.shape[2]})};
  };
  d.kernel = [](KernelContext& c) {
    const std::string mode = c.String("mode"), padding = c.String("padding_mode");
    const int64_t interpolation = mode == "bilinear" ? 0 : mode == "nearest" ? 1 : 2;
    const int64_t pad = padding == "zeros" ? 0 : padding == "border" ? 1 : 2;
    c.outputs = {at::grid_sampler(c.in(0), c.in(1), interpolation, pad, c.Int("align_corners") != 0)};
  };
  d.flops = PerOutputElement(12.0);
  return d;
}
RLFLOW_REGISTER_OP(GridSampleDef());

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

// ---- Einsum ----
// An equation "ab,bc->ac" (spaces ignored; "..." for broadcast leading
// dimensions; without "->" the output is the ellipsis dimensions, then the
// letters used once, in ASCII order, as in NumPy).
struct EinsumSpec {
  std::vector<std::string> terms;  // per input, letters with '.' for the ellipsis
  std::string output;              // likewise
};

EinsumSpec ParseEinsum(const AttrReader& a, size_t inputs) {
  std::string eq;
  for (char ch : a.String("equation"))
    if (ch != ' ') eq += ch;
  EinsumSpec spec;
  const size_t arrow = eq.find("->");
  const std::string lhs = eq.substr(0, arrow);
  auto term = [&](const std::string& t) {
    std::string out;
    for (size_t k = 0; k < t.size(); ++k) {
      if (t.compare(k, 3, "...") == 0) {
        if (out.find('.') != std::string::npos) a.Fail("'" + t + "' has two ellipses");
        out += '.';
        k += 2;
      } else if (std::isalpha(static_cast<unsigned char>(t[k]))) {
        out += t[k];
      } else {
        a.Fail("equation '" + a.String("equation") + "' has an unexpected '" + std::string(1, t[k]) + "'");
      }
    }
    return out;
  };
  size_t p = 0;
  while (true) {
    size_t q = lhs.find(',', p);
    spec.terms.push_back(term(lhs.substr(p, q == std::string::npos ? std::string::npos : q - p)));
    if (q == std::string::npos) break;
    p = q + 1;
  }
  if (spec.terms.size() != inputs)
    a.Fail("equation '" + a.String("equation") + "' has " + std::to_string(spec.terms.size()) + " operands for " +
           std::to_string(inputs) + " inputs");
  if (arrow != std::string::npos) {
    spec.output = term(eq.substr(arrow + 2));
  } else {
    std::map<char, int> count;
    bool ellipsis = false;
    for (const auto& t : spec.terms)
      for (char ch : t) {
        if (ch == '.')
          ellipsis = true;
        else
          ++count[ch];
      }
    if (ellipsis) spec.output += '.';
    for (const auto& [ch, n] : count)
      if (n == 1) spec.output += ch;
  }
  return spec;
}

OpDef EinsumDef() {
  OpDef d;
  d.name = "Einsum";
  d.since_opset = 12;
  d.min_inputs = 1;
  d.max_inputs = 1 << 10;
  d.attrs = {OptionalAttr("equation", AttrType::kString)};
  d.shape = [](const ShapeContext& c) {
    if (!c.Has("equation")) c.Fail("equation is required");
    EinsumSpec spec = ParseEinsum(c, static_cast<size_t>(c.num_inputs()));
    const DType dtype = c.input(0).dtype;
    std::map<char, int64_t> size;
    Shape ellipsis;  // broadcast of the inputs' ellipsis dimensions
    for (size_t i = 0; i < spec.terms.size(); ++i) {
      const TensorType& t = c.input(static_cast<int>(i));
      if (t.dtype != dtype) c.Fail("inputs have different element types");
      if (!t.rank_known) c.Unsupported("an input of unknown rank");
      const std::string& term = spec.terms[i];
      const bool has_ellipsis = term.find('.') != std::string::npos;
      const int64_t letters = static_cast<int64_t>(term.size()) - (has_ellipsis ? 1 : 0);
      if (t.rank() < letters || (!has_ellipsis && t.rank() != letters))
        c.Fail("operand " + std::to_string(i) + " '" + term + "' does not fit input " + t.ToString());
      const int64_t ell = t.rank() - letters;
      int64_t dim = 0;
      for (char ch : term) {
        if (ch == '.') {
          Shape part(t.shape.begin() + dim, t.shape.begin() + dim + ell);
          // Right-aligned broadcast with the others' ellipsis dimensions.
          Shape merged(std::max(part.size(), ellipsis.size()), 1);
          for (size_t k = 0; k < merged.size(); ++k) {
            int64_t x = k < part.size() ? part[part.size() - 1 - k] : 1;
            int64_t y = k < ellipsis.size() ? ellipsis[ellipsis.size() - 1 - k] : 1;
            if (x != y && x != 1 && y != 1) c.Fail("the ellipsis dimensions do not broadcast");
            merged[merged.size() - 1 - k] = x == 1 ? y : x;
          }
          ellipsis = merged;
          dim += ell;
          continue;
        }
        const int64_t n = t.shape[dim++];
        auto [it, inserted] = size.emplace(ch, n);
        if (!inserted && it->second != n) {
          if (it->second == 1 || it->second < 0)
            it->second = n;
          else if (n != 1 && n >= 0)
            c.Fail("index '" + std::string(1, ch) + "' has sizes " + std::to_string(it->second) + " and " +
                   std::to_string(n));
        }
      }
    }
    Shape out;
    for (char ch : spec.output) {
      if (ch == '.') {
        out.insert(out.end(), ellipsis.begin(), ellipsis.end());
        continue;
      }
      auto it = size.find(ch);
      if (it == size.end()) c.Fail("output index '" + std::string(1, ch) + "' is not an input index");
      out.push_back(it->second);
    }
    return std::vector<TensorType>{Type(dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    std::string eq;
    for (char ch : c.String("equation"))
      if (ch != ' ') eq += ch;
    c.outputs = {at::einsum(eq, c.inputs)};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>& out) {
    // A multiply-add per operand pair at each point of the joint index space
    // (every distinct letter once, times the output's ellipsis dimensions).
    EinsumSpec spec = ParseEinsum(c, static_cast<size_t>(c.num_inputs()));
    std::map<char, int64_t> size;
    for (size_t i = 0; i < spec.terms.size(); ++i) {
      const TensorType& t = c.input(static_cast<int>(i));
      const std::string& term = spec.terms[i];
      int64_t dim = 0;
      for (char ch : term) {
        if (ch == '.') {
          dim += t.rank() - static_cast<int64_t>(term.size()) + 1;
          continue;
        }
        size[ch] = std::max(size[ch], t.shape[dim++]);
      }
    }
    double points = 1;
    for (const auto& [ch, n] : size) points *= static_cast<double>(std::max<int64_t>(n, 1));
    const size_t at = spec.output.find('.');
    if (at != std::string::npos) {
      const int64_t ell = out[0].rank() - static_cast<int64_t>(spec.output.size()) + 1;
      for (int64_t k = 0; k < ell; ++k) points *= static_cast<double>(std::max<int64_t>(out[0].shape[at + k], 1));
    }
    return 2.0 * points * static_cast<double>(std::max(c.num_inputs() - 1, 1));
  };
  return d;
}
RLFLOW_REGISTER_OP(EinsumDef());

}  // namespace
}  // namespace rlflow::ops
