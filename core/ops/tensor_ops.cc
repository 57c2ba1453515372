// Data-movement and shape operators (opset 13+ forms: axes and split sizes
// are inputs). Constant, Shape, Range and friends are folded at import when
// their inputs are known.
#include <ATen/TensorOperators.h>
#include <ATen/ops/arange.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/cumsum.h>
#include <ATen/ops/gather.h>
#include <ATen/ops/index_reduce.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/scalar_tensor.h>
#include <ATen/ops/scatter.h>
#include <ATen/ops/scatter_reduce.h>
#include <ATen/ops/split_with_sizes.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>
#include <ATen/ops/zeros.h>

#include <numeric>

#include "core/error.h"
#include "core/ops/helpers.h"
#include "core/ops/semantics.h"
#include "core/symbolic.h"

namespace rlflow::ops {
namespace {

std::vector<int64_t> Sizes(const at::Tensor& t) { return std::vector<int64_t>(t.sizes().begin(), t.sizes().end()); }

// ---- Concat ----
void ConcatSymbolic(SymbolicContext& c) {
  int64_t axis = NormalizeAxis(c.Int("axis"), static_cast<int64_t>(c.in(0).shape.size()), c);
  SymTensor out;
  out.shape = c.in(0).shape;
  out.shape[axis] = 0;
  for (const SymTensor& t : c.inputs) out.shape[axis] += t.shape[axis];
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = Unravel(i, out.shape);
    for (const SymTensor& t : c.inputs) {
      if (idx[axis] < t.shape[axis]) {
        out.v.push_back(t.at(idx));
        break;
      }
      idx[axis] -= t.shape[axis];
    }
  }
  c.outputs = {out};
}

OpDef ConcatDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = ConcatSymbolic;
  d.name = "Concat";
  d.half_kernel = true;
  d.min_inputs = 1;
  d.max_inputs = 1 << 20;
  d.attrs = {RequiredInt("axis")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& first = c.input(0);
    int64_t r = RankOf(c, 0);
    int64_t axis = NormalizeAxis(c.Int("axis"), r, c);
    Shape out = first.shape;
    for (int i = 1; i < c.num_inputs(); ++i) {
      const TensorType& t = c.input(i);
      if (t.dtype != first.dtype || RankOf(c, i) != r)
        c.Fail("input " + std::to_string(i) + " " + t.ToString() + " does not match " + first.ToString());
      for (int64_t k = 0; k < r; ++k) {
        if (k == axis) {
          out[k] = (out[k] < 0 || t.shape[k] < 0) ? kUnknownDim : out[k] + t.shape[k];
        } else if (out[k] >= 0 && t.shape[k] >= 0 && out[k] != t.shape[k]) {
          c.Fail("input " + std::to_string(i) + " " + t.ToString() + " differs from " + first.ToString() +
                 " outside axis " + std::to_string(axis));
        }
      }
    }
    return std::vector<TensorType>{Type(first.dtype, out)};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {at::cat(c.inputs, NormalizeAxis(c.Int("axis"), c.in(0).dim(), c))}; };
  return d;
}
RLFLOW_REGISTER_OP(ConcatDef());

// ---- Split ----
std::vector<int64_t> SplitSizes(const AttrReader& a, int64_t dim, int parts, const std::vector<int64_t>* given) {
  if (given && !given->empty()) {
    if (static_cast<int>(given->size()) != parts)
      a.Fail("split has " + std::to_string(given->size()) + " sizes for " + std::to_string(parts) + " outputs");
    int64_t sum = std::accumulate(given->begin(), given->end(), int64_t{0});
    if (dim >= 0 && sum != dim) a.Fail("split sizes add up to " + std::to_string(sum) + ", not " + std::to_string(dim));
    return *given;
  }
  if (dim < 0) return std::vector<int64_t>(parts, kUnknownDim);
  if (dim % parts != 0)
    a.Fail("dimension " + std::to_string(dim) + " does not split evenly into " + std::to_string(parts));
  return std::vector<int64_t>(parts, dim / parts);
}

void SplitSymbolic(SymbolicContext& c) {
  const SymTensor& x = c.in(0);
  int64_t axis = NormalizeAxis(c.Int("axis"), static_cast<int64_t>(x.shape.size()), c);
  std::vector<int64_t> given;
  if (c.has(1)) given = c.ConstInts(1);
  int64_t offset = 0;
  for (int64_t size : SplitSizes(c, x.shape[axis], c.num_outputs(), &given)) {
    SymTensor part;
    part.shape = x.shape;
    part.shape[axis] = size;
    for (int64_t i = 0; i < part.numel(); ++i) {
      std::vector<int64_t> idx = Unravel(i, part.shape);
      idx[axis] += offset;
      part.v.push_back(x.at(idx));
    }
    offset += size;
    c.outputs.push_back(part);
  }
}

OpDef SplitDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = SplitSymbolic;
  d.name = "Split";
  d.half_kernel = true;
  d.since_opset = 13;
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.max_outputs = 1 << 20;
  d.attrs = {IntAttr("axis", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    int64_t axis = NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
    std::vector<int64_t> given;
    int parts = static_cast<int>(c.node().outputs.size());
    if (c.has_input(1)) {
      auto split = c.MaybeConstantInts(1);
      given = split ? *split : std::vector<int64_t>(parts, kUnknownDim);
      if (!split) {
        std::vector<TensorType> out(parts, Type(x.dtype, x.shape));
        for (auto& t : out) t.shape[axis] = kUnknownDim;
        return out;
      }
    }
    std::vector<TensorType> out;
    for (int64_t s : SplitSizes(c, x.shape[axis], parts, &given)) {
      Shape sh = x.shape;
      sh[axis] = s;
      out.push_back(Type(x.dtype, sh));
    }
    return out;
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    std::vector<int64_t> given;
    if (c.has(1)) given = c.IntsInput(1);
    auto parts = at::split_with_sizes(x, SplitSizes(c, x.size(axis), c.num_outputs(), &given), axis);
    c.outputs.assign(parts.begin(), parts.end());
  };
  return d;
}
RLFLOW_REGISTER_OP(SplitDef());

// ---- Slice ----
OpDef SliceDef() {
  OpDef d;
  d.name = "Slice";
  d.half_kernel = true;
  d.since_opset = 10;
  d.min_inputs = 3;
  d.max_inputs = 5;
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    RankOf(c, 0);
    auto st = c.MaybeConstantInts(1), en = c.MaybeConstantInts(2);
    std::optional<std::vector<int64_t>> ax, sp;
    if (c.has_input(3)) ax = c.MaybeConstantInts(3);
    if (c.has_input(4)) sp = c.MaybeConstantInts(4);
    bool dynamic = !st || !en || (c.has_input(3) && !ax) || (c.has_input(4) && !sp);
    Shape out = x.shape;
    if (dynamic) {
      if (c.has_input(3) && ax) {
        for (int64_t a : *ax) out[NormalizeAxis(a, x.rank(), c)] = kUnknownDim;
      } else if (c.has_input(3) || c.Length1D(1) < 0) {
        for (int64_t& d : out) d = kUnknownDim;
      } else {
        for (int64_t k = 0; k < c.Length1D(1) && k < x.rank(); ++k) out[k] = kUnknownDim;
      }
      return std::vector<TensorType>{Type(x.dtype, out)};
    }
    std::vector<int64_t> starts = *st, ends = *en, axes, steps;
    if (ax) axes = *ax;
    if (sp) steps = *sp;
    // A dimension the values set (NonZero's, an If's output): its slice's
    // length is known only at run time.
    Shape known = x.shape;
    for (int64_t& d : known) d = d < 0 ? 0 : d;
    for (const SliceSpec& s : SliceSpecs(c, known, starts, ends, &axes, &steps))
      out[s.axis] = x.shape[s.axis] < 0 ? kUnknownDim : s.count;
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor y = c.in(0);
    std::vector<int64_t> axes, steps;
    if (c.has(3)) axes = c.IntsInput(3);
    if (c.has(4)) steps = c.IntsInput(4);
    for (const SliceSpec& s : SliceSpecs(c, Sizes(y), c.IntsInput(1), c.IntsInput(2), &axes, &steps)) {
      if (s.step > 0) {
        y = y.slice(s.axis, s.start, s.start + s.count * s.step, s.step);
      } else {
        at::Tensor idx = at::arange(s.start, s.end, s.step, at::kLong);
        y = y.index_select(s.axis, idx);
      }
    }
    c.outputs = {y};
  };
  return d;
}
RLFLOW_REGISTER_OP(SliceDef());

// ---- Transpose ----
std::vector<int64_t> Perm(const AttrReader& a, int64_t r) {
  std::vector<int64_t> perm = a.Ints("perm");
  if (!a.Has("perm")) {
    perm.resize(r);
    for (int64_t k = 0; k < r; ++k) perm[k] = r - 1 - k;
  }
  if (static_cast<int64_t>(perm.size()) != r)
    a.Fail("perm has " + std::to_string(perm.size()) + " entries for rank " + std::to_string(r));
  std::vector<int64_t> sorted = perm;
  std::sort(sorted.begin(), sorted.end());
  for (int64_t k = 0; k < r; ++k)
    if (sorted[k] != k) a.Fail("perm is not a permutation");
  return perm;
}

void TransposeSymbolic(SymbolicContext& c) {
  const SymTensor& x = c.in(0);
  std::vector<int64_t> perm = Perm(c, static_cast<int64_t>(x.shape.size()));
  SymTensor out;
  for (int64_t p : perm) out.shape.push_back(x.shape[p]);
  for (int64_t i = 0; i < out.numel(); ++i) {
    std::vector<int64_t> idx = Unravel(i, out.shape), src(idx.size());
    for (size_t k = 0; k < perm.size(); ++k) src[perm[k]] = idx[k];
    out.v.push_back(x.at(src));
  }
  c.outputs = {out};
}

OpDef TransposeDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = TransposeSymbolic;
  d.name = "Transpose";
  d.half_kernel = true;
  d.attrs = {IntsAttr("perm")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    std::vector<int64_t> perm = Perm(c, RankOf(c, 0));
    Shape out(perm.size());
    for (size_t k = 0; k < perm.size(); ++k) out[k] = x.shape[perm[k]];
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {c.in(0).permute(Perm(c, c.in(0).dim()))}; };
  d.output_layout = OpDef::OutputLayout::kPermutedView;
  return d;
}
RLFLOW_REGISTER_OP(TransposeDef());

// ---- Reshape / Flatten / Squeeze / Unsqueeze ----
// Reshape-like ops keep the row-major data and change the shape.
SymTensor WithShape(const SymTensor& x, Shape shape) {
  SymTensor out = x;
  out.shape = std::move(shape);
  return out;
}

OpDef ReshapeDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = [](SymbolicContext& c) {
    c.outputs = {WithShape(c.in(0), ResolveReshape(c.in(0).shape, c.ConstInts(1), c.Int("allowzero") != 0, c))};
  };
  d.name = "Reshape";
  d.half_kernel = true;
  d.since_opset = 5;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("allowzero", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    RankOf(c, 0);
    auto target = c.MaybeConstantInts(1);
    if (!target) return std::vector<TensorType>{UnknownDims(x.dtype, c.Length1D(1))};
    Shape out = ResolveReshape(x.shape, *target, c.Int("allowzero") != 0, c);
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    c.outputs = {c.in(0).reshape(ResolveReshape(Sizes(c.in(0)), c.IntsInput(1), c.Int("allowzero") != 0, c))};
  };
  return d;
}
RLFLOW_REGISTER_OP(ReshapeDef());

Shape FlattenShape(const AttrReader& a, const Shape& in) {
  int64_t r = static_cast<int64_t>(in.size());
  int64_t axis = a.Int("axis");
  if (axis < -r || axis > r) a.Fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(r));
  if (axis < 0) axis += r;
  return {NumElements(Shape(in.begin(), in.begin() + axis)), NumElements(Shape(in.begin() + axis, in.end()))};
}

OpDef FlattenDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = [](SymbolicContext& c) { c.outputs = {WithShape(c.in(0), FlattenShape(c, c.in(0).shape))}; };
  d.name = "Flatten";
  d.half_kernel = true;
  d.attrs = {IntAttr("axis", 1)};
  d.shape = [](const ShapeContext& c) {
    RankOf(c, 0);
    return std::vector<TensorType>{Type(c.input(0).dtype, FlattenShape(c, c.input(0).shape))};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {c.in(0).reshape(FlattenShape(c, Sizes(c.in(0))))}; };
  return d;
}
RLFLOW_REGISTER_OP(FlattenDef());

Shape SqueezeShape(const AttrReader& a, const Shape& in, const std::vector<int64_t>* axes_in) {
  int64_t r = static_cast<int64_t>(in.size());
  std::vector<char> drop(r, 0);
  if (axes_in && !axes_in->empty()) {
    for (int64_t ax : *axes_in) {
      int64_t k = NormalizeAxis(ax, r, a);
      if (in[k] != 1 && in[k] >= 0)
        a.Fail("cannot squeeze axis " + std::to_string(ax) + " of size " + std::to_string(in[k]));
      drop[k] = 1;
    }
  } else {
    for (int64_t k = 0; k < r; ++k) drop[k] = in[k] == 1;
  }
  Shape out;
  for (int64_t k = 0; k < r; ++k)
    if (!drop[k]) out.push_back(in[k]);
  return out;
}

OpDef SqueezeDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = [](SymbolicContext& c) {
    std::vector<int64_t> axes;
    if (c.has(1) || (c.constants.size() > 1 && c.constants[1])) axes = c.ConstInts(1);
    c.outputs = {WithShape(c.in(0), SqueezeShape(c, c.in(0).shape, &axes))};
  };
  d.name = "Squeeze";
  d.half_kernel = true;
  d.since_opset = 13;
  d.min_inputs = 1;
  d.max_inputs = 2;
  d.shape = [](const ShapeContext& c) {
    RankOf(c, 0);
    std::vector<int64_t> axes;
    if (c.has_input(1)) {
      auto a = c.MaybeConstantInts(1);
      if (!a) return std::vector<TensorType>{UnknownDims(c.input(0).dtype, -1)};
      axes = *a;
    }
    return std::vector<TensorType>{Type(c.input(0).dtype, SqueezeShape(c, c.input(0).shape, &axes))};
  };
  d.kernel = [](KernelContext& c) {
    std::vector<int64_t> axes;
    if (c.has(1)) axes = c.IntsInput(1);
    c.outputs = {c.in(0).reshape(SqueezeShape(c, Sizes(c.in(0)), &axes))};
  };
  d.output_layout = OpDef::OutputLayout::kSameView;  // removing unit dimensions never copies
  return d;
}
RLFLOW_REGISTER_OP(SqueezeDef());

Shape UnsqueezeShape(const AttrReader& a, const Shape& in, const std::vector<int64_t>& axes) {
  int64_t r = static_cast<int64_t>(in.size() + axes.size());
  std::vector<char> insert(r, 0);
  for (int64_t ax : axes) {
    int64_t k = NormalizeAxis(ax, r, a);
    if (insert[k]) a.Fail("axes has a duplicate");
    insert[k] = 1;
  }
  Shape out;
  size_t next = 0;
  for (int64_t k = 0; k < r; ++k) out.push_back(insert[k] ? 1 : in[next++]);
  return out;
}

OpDef UnsqueezeDef() {
  OpDef d;
  d.exact_on_integers = true;
  d.symbolic = [](SymbolicContext& c) {
    c.outputs = {WithShape(c.in(0), UnsqueezeShape(c, c.in(0).shape, c.ConstInts(1)))};
  };
  d.name = "Unsqueeze";
  d.half_kernel = true;
  d.since_opset = 13;
  d.min_inputs = d.max_inputs = 2;
  d.shape = [](const ShapeContext& c) {
    RankOf(c, 0);
    auto axes = c.MaybeConstantInts(1);
    if (!axes) {
      int64_t n = c.Length1D(1);
      return std::vector<TensorType>{UnknownDims(c.input(0).dtype, n < 0 ? -1 : c.input(0).rank() + n)};
    }
    return std::vector<TensorType>{Type(c.input(0).dtype, UnsqueezeShape(c, c.input(0).shape, *axes))};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {c.in(0).reshape(UnsqueezeShape(c, Sizes(c.in(0)), c.IntsInput(1)))}; };
  d.output_layout = OpDef::OutputLayout::kSameView;  // inserting unit dimensions never copies
  return d;
}
RLFLOW_REGISTER_OP(UnsqueezeDef());

// Indices into a dimension of `dim` elements as int64, negative ones
// counted from the end; an index out of range fails the node.
at::Tensor IndicesInRange(const KernelContext& c, const at::Tensor& indices, int64_t dim) {
  at::Tensor idx = indices.to(at::kLong);
  idx = at::where(idx < 0, idx + dim, idx);
  if (idx.numel() > 0 && (idx.min().item<int64_t>() < 0 || idx.max().item<int64_t>() >= dim))
    c.Fail("index out of range for dimension of size " + std::to_string(dim));
  return idx;
}

// ---- Gather ----
OpDef GatherDef() {
  OpDef d;
  d.name = "Gather";
  d.half_kernel = true;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("axis", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& idx = c.input(1);
    if (!IsInteger(idx.dtype)) c.Fail("indices must be integers, got " + idx.ToString());
    int64_t axis = NormalizeAxis(c.Int("axis"), RankOf(c, 0), c);
    RankOf(c, 1);
    Shape out(x.shape.begin(), x.shape.begin() + axis);
    out.insert(out.end(), idx.shape.begin(), idx.shape.end());
    out.insert(out.end(), x.shape.begin() + axis + 1, x.shape.end());
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    at::Tensor idx = IndicesInRange(c, c.in(1), x.size(axis));
    std::vector<int64_t> out(x.sizes().begin(), x.sizes().begin() + axis);
    out.insert(out.end(), idx.sizes().begin(), idx.sizes().end());
    out.insert(out.end(), x.sizes().begin() + axis + 1, x.sizes().end());
    c.outputs = {x.index_select(axis, idx.reshape({-1})).reshape(out)};
  };
  return d;
}
RLFLOW_REGISTER_OP(GatherDef());

// GatherElements (opset 11): out[i][j][k] = data[index[i][j][k]][j][k] along
// `axis` (torch.gather; negative indices count from the end). Detection
// post-processing and losses write it.
OpDef GatherElementsDef() {
  OpDef d;
  d.name = "GatherElements";
  d.since_opset = 11;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("axis", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& idx = c.input(1);
    if (!IsInteger(idx.dtype)) c.Fail("indices must be integers, got " + idx.ToString());
    const int64_t rank = RankOf(c, 0);
    NormalizeAxis(c.Int("axis"), rank, c);
    if (RankOf(c, 1) != rank) c.Fail("indices " + idx.ToString() + " and data " + x.ToString() + " differ in rank");
    return std::vector<TensorType>{Type(x.dtype, idx.shape)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    at::Tensor idx = IndicesInRange(c, c.in(1), x.size(axis));
    for (int64_t k = 0; k < x.dim(); ++k)
      if (k != axis && idx.size(k) > x.size(k))
        c.Fail("indices dimension " + std::to_string(k) + " (" + std::to_string(idx.size(k)) +
               ") is larger than the data's (" + std::to_string(x.size(k)) + ")");
    c.outputs = {at::gather(x, axis, idx)};
  };
  return d;
}
RLFLOW_REGISTER_OP(GatherElementsDef());

// GatherND (opset 11; batch_dims since 12, 0 before): the slices of data
// that the last axis of indices names (k coordinates), after `batch_dims`
// leading axes that data and indices share; output indices.shape[:-1] +
// data.shape[b + k:] (tf2onnx's converted gather_nd, detection
// post-processing).
OpDef GatherNDDef() {
  OpDef d;
  d.name = "GatherND";
  d.since_opset = 11;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("batch_dims", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& idx = c.input(1);
    if (idx.dtype != DType::kInt64) c.Fail("indices must be int64, got " + idx.ToString());
    const int64_t r = RankOf(c, 0), q = RankOf(c, 1), b = c.Int("batch_dims");
    if (q < 1 || r < 1 || b < 0 || b >= std::min(r, q))
      c.Fail("batch_dims must be below the ranks of data and indices");
    const int64_t k = idx.shape.back();
    if (k < 0) c.Unsupported("the indices' last dimension is unknown");
    if (k < 1 || b + k > r)
      c.Fail("indices name " + std::to_string(k) + " axes after " + std::to_string(b) + " batch axes of data " +
             x.ToString());
    for (int64_t i = 0; i < b; ++i)
      if (x.shape[i] >= 0 && idx.shape[i] >= 0 && x.shape[i] != idx.shape[i])
        c.Fail("batch dimension " + std::to_string(i) + " differs between data and indices");
    Shape out(idx.shape.begin(), idx.shape.end() - 1);
    out.insert(out.end(), x.shape.begin() + b + k, x.shape.end());
    return std::vector<TensorType>{Type(x.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::Tensor& idx_in = c.in(1);
    const int64_t b = c.Int("batch_dims"), k = idx_in.size(-1);
    int64_t batch = 1, positions = 1;
    for (int64_t i = 0; i < b; ++i) batch *= x.size(i);
    std::vector<int64_t> rest(x.sizes().begin() + b + k, x.sizes().end());
    at::Tensor idx = idx_in.reshape({batch, -1, k});
    // Linear position of each coordinate tuple within the k indexed axes.
    at::Tensor linear = at::zeros({batch, idx.size(1)}, at::kLong);
    for (int64_t j = 0; j < k; ++j) {
      const int64_t dim = x.size(b + j);
      linear = linear * dim + IndicesInRange(c, idx.select(2, j), dim);
      positions *= dim;
    }
    at::Tensor flat = (at::arange(batch, at::kLong).unsqueeze(1) * positions + linear).reshape({-1});
    std::vector<int64_t> rows = {batch * positions};
    rows.insert(rows.end(), rest.begin(), rest.end());
    std::vector<int64_t> out(idx_in.sizes().begin(), idx_in.sizes().end() - 1);
    out.insert(out.end(), rest.begin(), rest.end());
    c.outputs = {at::index_select(x.reshape(rows), 0, flat).reshape(out)};
  };
  return d;
}
RLFLOW_REGISTER_OP(GatherNDDef());

// ReverseSequence (opset 10): along time_axis, the first sequence_lens[i]
// elements of batch entry i in reverse order, the rest as they are
// (bidirectional recurrent models written out).
OpDef ReverseSequenceDef() {
  OpDef d;
  d.name = "ReverseSequence";
  d.since_opset = 10;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("batch_axis", 1), IntAttr("time_axis", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    if (RankOf(c, 0) < 2) c.Fail("input must have rank >= 2");
    const int64_t batch = c.Int("batch_axis"), time = c.Int("time_axis");
    if (!((batch == 0 && time == 1) || (batch == 1 && time == 0)))
      c.Fail("batch_axis and time_axis must be 0 and 1 in either order");
    const TensorType& lens = c.input(1);
    if (lens.dtype != DType::kInt64 || RankOf(c, 1) != 1) c.Fail("sequence_lens must be 1-D int64");
    if (lens.shape[0] >= 0 && x.shape[batch] >= 0 && lens.shape[0] != x.shape[batch])
      c.Fail("sequence_lens has " + std::to_string(lens.shape[0]) + " entries for a batch of " +
             std::to_string(x.shape[batch]));
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t batch_axis = c.Int("batch_axis"), time_axis = c.Int("time_axis");
    const std::vector<int64_t> lens = c.IntsInput(1);
    if (static_cast<int64_t>(lens.size()) != x.size(batch_axis)) c.Fail("sequence_lens does not match the batch");
    at::Tensor y = x.clone();
    const int64_t time_in_entry = time_axis > batch_axis ? time_axis - 1 : time_axis;
    for (int64_t i = 0; i < x.size(batch_axis); ++i) {
      const int64_t n = lens[static_cast<size_t>(i)];
      if (n < 0 || n > x.size(time_axis)) c.Fail("sequence_lens[" + std::to_string(i) + "] is out of range");
      if (n > 1)
        y.select(batch_axis, i)
            .narrow(time_in_entry, 0, n)
            .copy_(x.select(batch_axis, i).narrow(time_in_entry, 0, n).flip({time_in_entry}));
    }
    c.outputs = {y};
  };
  return d;
}
RLFLOW_REGISTER_OP(ReverseSequenceDef());

// CumSum (opset 11): running sums along the axis given as a scalar integer
// input; `exclusive` leaves out the element itself, `reverse` sums from the
// end. Exports compute position ids from an attention mask so.
OpDef CumSumDef() {
  OpDef d;
  d.name = "CumSum";
  d.since_opset = 11;
  d.min_inputs = d.max_inputs = 2;
  d.attrs = {IntAttr("exclusive", 0), IntAttr("reverse", 0)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& axis = c.input(1);
    if (!IsInteger(axis.dtype) || (axis.rank_known && axis.rank() > 1) || (axis.IsStatic() && axis.NumElements() != 1))
      c.Fail("axis must be one integer, got " + axis.ToString());
    if (auto a = c.MaybeConstantInts(1); a && !a->empty()) NormalizeAxis((*a)[0], RankOf(c, 0), c);
    if (c.input(0).dtype == DType::kBool) c.Fail("input must be numeric, got " + c.input(0).ToString());
    return std::vector<TensorType>{c.input(0)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const std::vector<int64_t> axes = c.IntsInput(1);
    if (axes.size() != 1) c.Fail("axis must be one integer");
    const int64_t axis = NormalizeAxis(axes[0], x.dim(), c);
    const bool reverse = c.Int("reverse") != 0;
    at::Tensor t = reverse ? x.flip({axis}) : x;
    at::Tensor y = at::cumsum(t, axis, t.scalar_type());
    if (c.Int("exclusive") != 0 && t.size(axis) > 0) {
      // Shifted by one: 0, x0, x0 + x1, ... (exact, unlike y - x).
      std::vector<int64_t> zero_shape(t.sizes().begin(), t.sizes().end());
      zero_shape[axis] = 1;
      y = at::cat({at::zeros(zero_shape, t.options()), y.narrow(axis, 0, t.size(axis) - 1)}, axis);
    }
    c.outputs = {reverse ? y.flip({axis}) : y};
  };
  d.flops = PerOutputElement(1.0);
  return d;
}
RLFLOW_REGISTER_OP(CumSumDef());

// ScatterElements (opset 11; reductions since 16): data with the elements
// that indices name along `axis` replaced by (none), added to (add) or
// multiplied by (mul) updates; the inverse of GatherElements. Duplicate
// indices with reduction none leave the order undefined (ONNX), as here.
OpDef ScatterElementsDef() {
  OpDef d;
  d.name = "ScatterElements";
  d.since_opset = 11;
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {IntAttr("axis", 0), StringAttr("reduction", "none")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& idx = c.input(1);
    const TensorType& up = c.input(2);
    if (!IsInteger(idx.dtype)) c.Fail("indices must be integers, got " + idx.ToString());
    if (up.dtype != x.dtype) c.Fail("updates " + up.ToString() + " differ in type from data " + x.ToString());
    const int64_t rank = RankOf(c, 0);
    NormalizeAxis(c.Int("axis"), rank, c);
    if (RankOf(c, 1) != rank || (up.rank_known && up.shape.size() != idx.shape.size()))
      c.Fail("indices " + idx.ToString() + ", updates " + up.ToString() + " and data " + x.ToString() +
             " must have one rank");
    const std::string reduction = c.String("reduction");
    if (reduction != "none" && reduction != "add" && reduction != "mul")
      c.Unsupported("ScatterElements with reduction '" + reduction + "'");
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), x.dim(), c);
    at::Tensor idx = IndicesInRange(c, c.in(1), x.size(axis));
    if (!idx.sizes().equals(c.in(2).sizes())) c.Fail("updates and indices differ in shape");
    const std::string reduction = c.String("reduction");
    if (reduction == "none")
      c.outputs = {at::scatter(x, axis, idx, c.in(2))};
    else
      c.outputs = {at::scatter_reduce(x, axis, idx, c.in(2), reduction == "add" ? "sum" : "prod")};
  };
  return d;
}
RLFLOW_REGISTER_OP(ScatterElementsDef());

// OneHot (opset 11): along `axis`, `on` at each index (negative indices
// count from the end of depth; out-of-range ones give a row of `off`), `off`
// elsewhere; values = [off, on] gives the output's type.
OpDef OneHotDef() {
  OpDef d;
  d.name = "OneHot";
  d.since_opset = 11;
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {IntAttr("axis", -1)};
  d.shape = [](const ShapeContext& c) {
    const TensorType& idx = c.input(0);
    const TensorType& values = c.input(2);
    if (c.input(0).dtype == DType::kBool || c.input(1).dtype == DType::kBool)
      c.Fail("indices and depth must be numeric");
    if (values.IsStatic() && values.NumElements() != 2) c.Fail("values must hold [off, on], got " + values.ToString());
    const int64_t rank = RankOf(c, 0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), rank + 1, c);
    int64_t depth = kUnknownDim;
    if (const TensorData* t = c.constant(1)) {
      std::vector<double> v = t->ToDouble();
      if (v.size() != 1 || !(v[0] >= 1)) c.Fail("depth must be one value >= 1");
      depth = static_cast<int64_t>(v[0]);
    }
    Shape out = idx.shape;
    out.insert(out.begin() + axis, depth);
    return std::vector<TensorType>{Type(values.dtype, out)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const int64_t axis = NormalizeAxis(c.Int("axis"), x.dim() + 1, c);
    if (c.in(1).numel() != 1) c.Fail("depth must be one value");
    const int64_t depth = static_cast<int64_t>(c.in(1).to(at::kDouble).item<double>());
    if (depth < 1) c.Fail("depth must be >= 1");
    at::Tensor idx = c.in(0).to(at::kLong);  // non-integer indices truncate, as ONNX casts them
    idx = at::where(idx < 0, idx + depth, idx);
    at::Tensor hot = idx.unsqueeze(-1).eq(at::arange(depth, idx.options()));  // out of range: no match
    hot = hot.movedim(-1, axis);
    const at::Tensor values = c.in(2).reshape({-1});
    if (values.numel() != 2) c.Fail("values must hold [off, on]");
    c.outputs = {at::where(hot, values[1], values[0])};
  };
  d.flops = PerOutputElement(1.0);
  return d;
}
RLFLOW_REGISTER_OP(OneHotDef());

// ScatterND: data with the slices that indices [..., k] name replaced by
// (reduction "none") or added to ("add") updates. torch exports write
// slice assignment (x[a:b, c:d] = v) so. Other reductions stay opaque.
OpDef ScatterNDDef() {
  OpDef d;
  d.name = "ScatterND";
  d.min_inputs = d.max_inputs = 3;
  d.attrs = {StringAttr("reduction", "none")};
  d.shape = [](const ShapeContext& c) {
    const TensorType& x = c.input(0);
    const TensorType& idx = c.input(1);
    const TensorType& up = c.input(2);
    if (!IsInteger(idx.dtype)) c.Fail("indices must be integers, got " + idx.ToString());
    if (up.dtype != x.dtype) c.Fail("updates " + up.ToString() + " differ in type from data " + x.ToString());
    const std::string reduction = c.String("reduction");
    if (reduction != "none" && reduction != "add" && reduction != "mul")
      c.Unsupported("ScatterND with reduction '" + reduction + "'");
    if (x.rank_known && idx.rank_known && up.rank_known && idx.rank() > 0 && idx.shape.back() >= 0) {
      const int64_t k = idx.shape.back();
      if (k > x.rank())
        c.Fail("indices name " + std::to_string(k) + " axes of data of rank " + std::to_string(x.rank()));
      if (up.rank() != idx.rank() - 1 + x.rank() - k)
        c.Fail("updates " + up.ToString() + " do not fit indices " + idx.ToString() + " and data " + x.ToString());
    }
    return std::vector<TensorType>{x};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    at::Tensor idx = c.in(1).to(at::kLong);
    const int64_t k = idx.size(-1);
    at::Tensor flat = idx.reshape({-1, k});
    const int64_t n = flat.size(0);
    std::vector<int64_t> slice(x.sizes().begin() + k, x.sizes().end());
    std::vector<int64_t> up_shape{n};
    up_shape.insert(up_shape.end(), slice.begin(), slice.end());
    at::Tensor updates = c.in(2).reshape(up_shape);
    c10::List<c10::optional<at::Tensor>> where;
    for (int64_t a = 0; a < k; ++a) {
      at::Tensor i = flat.select(1, a);
      i = at::where(i < 0, i + x.size(a), i);
      if (n > 0 && (i.min().item<int64_t>() < 0 || i.max().item<int64_t>() >= x.size(a)))
        c.Fail("index out of range for dimension of size " + std::to_string(x.size(a)));
      where.push_back(i);
    }
    if (c.String("reduction") == "mul") {
      // Every update multiplies its slice, duplicates included: the slices
      // by their row-major position over the k indexed axes.
      at::Tensor position = at::zeros({n}, at::kLong);
      for (int64_t a = 0; a < k; ++a) position = position * x.size(a) + where.get(a).value();
      std::vector<int64_t> rows{-1};
      rows.insert(rows.end(), slice.begin(), slice.end());
      at::Tensor y = x.clone();
      y.reshape(rows).index_reduce_(0, position, updates, "prod", /*include_self=*/true);
      c.outputs = {y};
      return;
    }
    c.outputs = {x.clone().index_put_(where, updates, /*accumulate=*/c.String("reduction") == "add")};
  };
  d.flops = [](const ShapeContext& c, const std::vector<TensorType>&) {
    return static_cast<double>(std::max<int64_t>(c.input(2).NumElements(), 0));
  };
  return d;
}
RLFLOW_REGISTER_OP(ScatterNDDef());

// ---- Shape ----
std::pair<int64_t, int64_t> ShapeRange(const AttrReader& a, int64_t r) {
  int64_t start = a.Int("start");
  int64_t end = a.Has("end") ? a.Int("end") : r;
  if (start < 0) start += r;
  if (end < 0) end += r;
  start = std::clamp<int64_t>(start, 0, r);
  end = std::clamp<int64_t>(end, 0, r);
  return {start, std::max(start, end)};
}

OpDef ShapeDef() {
  OpDef d;
  d.name = "Shape";
  d.reads_shape_only = true;
  d.half_kernel = true;
  d.attrs = {IntAttr("start", 0), OptionalAttr("end", AttrType::kInt)};
  d.shape = [](const ShapeContext& c) {
    auto [s, e] = ShapeRange(c, RankOf(c, 0));
    return std::vector<TensorType>{Type(DType::kInt64, {e - s})};
  };
  d.kernel = [](KernelContext& c) {
    auto [s, e] = ShapeRange(c, c.in(0).dim());
    std::vector<int64_t> dims(c.in(0).sizes().begin() + s, c.in(0).sizes().begin() + e);
    c.outputs = {at::tensor(dims, at::kLong)};
  };
  return d;
}
RLFLOW_REGISTER_OP(ShapeDef());

// Size: the number of elements, an int64 scalar (folded where the shape is
// static, as Shape is).
OpDef SizeDef() {
  OpDef d;
  d.name = "Size";
  d.reads_shape_only = true;
  d.half_kernel = true;
  d.shape = [](const ShapeContext&) { return std::vector<TensorType>{Type(DType::kInt64, {})}; };
  d.kernel = [](KernelContext& c) { c.outputs = {at::scalar_tensor(c.in(0).numel(), at::kLong)}; };
  return d;
}
RLFLOW_REGISTER_OP(SizeDef());

// EyeLike (opset 9): ones on diagonal k of a matrix of the input's 2-D
// shape, in `dtype` (default the input's type); folded where the shape is
// static.
OpDef EyeLikeDef() {
  OpDef d;
  d.name = "EyeLike";
  d.reads_shape_only = true;
  d.since_opset = 9;
  d.attrs = {OptionalAttr("dtype", AttrType::kInt), IntAttr("k", 0)};
  d.shape = [](const ShapeContext& c) {
    if (RankOf(c, 0) != 2) c.Fail("input must be 2-D, got " + c.input(0).ToString());
    DType dtype = c.input(0).dtype;
    if (c.Has("dtype")) {
      dtype = DTypeFromCode(static_cast<int32_t>(c.Int("dtype")));
      if (dtype == DType::kUndefined || dtype == DType::kString)
        c.Fail("unsupported dtype " + std::to_string(c.Int("dtype")));
    }
    return std::vector<TensorType>{Type(dtype, c.input(0).shape)};
  };
  d.kernel = [](KernelContext& c) {
    const at::Tensor& x = c.in(0);
    const at::ScalarType type =
        c.Has("dtype") ? ToAtenType(DTypeFromCode(static_cast<int32_t>(c.Int("dtype")))) : x.scalar_type();
    at::Tensor y = at::zeros(x.sizes(), at::TensorOptions().dtype(type));
    const int64_t k = c.Int("k");
    if ((k >= 0 && k < x.size(1)) || (k < 0 && -k < x.size(0))) y.diagonal(k).fill_(1);
    c.outputs = {y};
  };
  // Constants: 1 where column - row = k, else 0 (whatever the input holds).
  d.symbolic = [](SymbolicContext& c) {
    const SymTensor& x = c.in(0);
    if (x.shape.size() != 2) c.Fail("input must be 2-D");
    const int64_t k = c.Int("k");
    SymTensor out;
    out.shape = x.shape;
    for (int64_t r = 0; r < x.shape[0]; ++r)
      for (int64_t col = 0; col < x.shape[1]; ++col) out.v.push_back(c.Real(col - r == k ? 1.0 : 0.0));
    c.outputs = {out};
  };
  return d;
}
RLFLOW_REGISTER_OP(EyeLikeDef());

// ---- Constant ----
TensorData ConstantValue(const AttrReader& a) {
  if (a.Has("value")) return *a.Tensor("value");
  if (a.Has("value_float")) return TensorData::FromFloat({a.Float("value_float")}, {});
  if (a.Has("value_floats")) {
    std::vector<float> v = a.Floats("value_floats");
    return TensorData::FromFloat(v, {static_cast<int64_t>(v.size())});
  }
  if (a.Has("value_int")) return TensorData::FromInt64({a.Int("value_int")}, {});
  if (a.Has("value_ints")) {
    std::vector<int64_t> v = a.Ints("value_ints");
    return TensorData::FromInt64(v, {static_cast<int64_t>(v.size())});
  }
  a.Fail("Constant needs one of value, value_float(s), value_int(s)");
}

OpDef ConstantDef() {
  OpDef d;
  d.name = "Constant";
  d.half_kernel = true;
  d.min_inputs = d.max_inputs = 0;
  d.attrs = {OptionalAttr("value", AttrType::kTensor), OptionalAttr("value_float", AttrType::kFloat),
             OptionalAttr("value_floats", AttrType::kFloats), OptionalAttr("value_int", AttrType::kInt),
             OptionalAttr("value_ints", AttrType::kInts)};
  d.shape = [](const ShapeContext& c) { return std::vector<TensorType>{ConstantValue(c).type()}; };
  d.kernel = [](KernelContext& c) {
    c.outputs = {ToAten(std::make_shared<const TensorData>(ConstantValue(c))).clone()};
  };
  return d;
}
RLFLOW_REGISTER_OP(ConstantDef());

OpDef ConstantOfShapeDef() {
  OpDef d;
  d.name = "ConstantOfShape";
  d.half_kernel = true;
  d.attrs = {OptionalAttr("value", AttrType::kTensor)};
  d.shape = [](const ShapeContext& c) {
    DType dt = c.Has("value") ? c.Tensor("value")->dtype() : DType::kFloat32;
    auto shape = c.MaybeConstantInts(0);
    if (!shape) return std::vector<TensorType>{UnknownDims(dt, c.Length1D(0))};
    return std::vector<TensorType>{Type(dt, *shape)};
  };
  d.kernel = [](KernelContext& c) {
    at::Tensor value = c.Has("value") ? ToAten(c.Tensor("value")).reshape({}) : at::zeros({}, at::kFloat);
    c.outputs = {value.expand(c.IntsInput(0)).clone()};
  };
  return d;
}
RLFLOW_REGISTER_OP(ConstantOfShapeDef());

// ---- Expand (bidirectional broadcast) ----
OpDef ExpandDef() {
  OpDef d;
  d.name = "Expand";
  d.half_kernel = true;
  d.min_inputs = d.max_inputs = 2;
  d.shape = [](const ShapeContext& c) {
    RankOf(c, 0);
    auto shape = c.MaybeConstantInts(1);
    if (!shape) {
      int64_t n = c.Length1D(1);
      return std::vector<TensorType>{UnknownDims(c.input(0).dtype, n < 0 ? -1 : std::max(n, c.input(0).rank()))};
    }
    return std::vector<TensorType>{Type(c.input(0).dtype, BroadcastShapes(c.input(0).shape, *shape, c))};
  };
  d.kernel = [](KernelContext& c) { c.outputs = {c.in(0).expand(BroadcastShapes(Sizes(c.in(0)), c.IntsInput(1), c))}; };
  return d;
}
RLFLOW_REGISTER_OP(ExpandDef());

OpDef RangeDef() {
  OpDef d;
  d.name = "Range";
  d.min_inputs = d.max_inputs = 3;
  d.shape = [](const ShapeContext& c) {
    const TensorData* s = c.constant(0);
    const TensorData* l = c.constant(1);
    const TensorData* dl = c.constant(2);
    if (!s || !l || !dl) return std::vector<TensorType>{Type(c.input(0).dtype, {kUnknownDim})};
    double start = s->ToDouble()[0], limit = l->ToDouble()[0], delta = dl->ToDouble()[0];
    if (delta == 0) c.Fail("delta cannot be 0");
    int64_t n = std::max<int64_t>(0, static_cast<int64_t>(std::ceil((limit - start) / delta)));
    return std::vector<TensorType>{Type(c.input(0).dtype, {n})};
  };
  d.kernel = [](KernelContext& c) {
    c.outputs = {at::arange(c.in(0).item(), c.in(1).item(), c.in(2).item(), c.in(0).options())};
  };
  return d;
}
RLFLOW_REGISTER_OP(RangeDef());

}  // namespace
}  // namespace rlflow::ops
