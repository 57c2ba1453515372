#include "runtime/cuda/plan.h"

#include <algorithm>
#include <cstring>
#include <map>
#include <numeric>
#include <set>
#include <sstream>
#include <tuple>
#include <utility>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/ops/semantics.h"

namespace rlflow::cuda {
namespace {

const Shape& StaticShape(const Graph& g, ValueId v, const Node& n) {
  const TensorType& t = g.value(v).type;
  if (!t.IsStatic()) throw Unsupported("node " + n.Describe() + ": the CUDA backend needs static shapes");
  return t.shape;
}

std::vector<int64_t> WindowInts(const Graph& g, NodeId id, const std::string& name) {
  std::optional<Attribute> a = EffectiveWindowAttribute(g, id, name);
  if (!a) throw Unsupported("node " + g.node(id).Describe() + ": its " + name + " are not known");
  if (a->type == AttrType::kInt) return {a->i};
  return a->ints;
}

AttrReader Attrs(const Node& node) {
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op);
  if (def == nullptr) throw Error("node " + node.Describe() + ": not in the registry");
  return AttrReader(node, *def);
}

// The node's `axis` attribute in [0, rank).
int64_t Axis(const Node& node, int64_t rank) {
  int64_t axis = Attrs(node).Int("axis");
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= std::max<int64_t>(rank, 1)) throw Error("node " + node.Describe() + ": axis out of range");
  return axis;
}

// Sizes of an [outer, axis, inner] view of `x` around `axis`.
void AroundAxis(const Shape& x, int64_t axis, int64_t* outer, int64_t* dim, int64_t* inner) {
  for (int64_t d = 0; d < static_cast<int64_t>(x.size()); ++d) {
    if (d < axis) *outer *= x[d];
    if (d == axis) *dim = x[d];
    if (d > axis) *inner *= x[d];
  }
}

// Spatial window attributes as 2-D (height 1 for 1-D ones).
void To2D(std::vector<int64_t>* v, int64_t fill) {
  if (v->size() == 1) v->insert(v->begin(), fill);
}

// `x` (the input) and `other` (the weights or the output) as 4-D NCHW: a
// 1-D window gets height 1; more spatial dimensions are unsupported.
void To4D(const Node& node, const char* what, Shape* x, Shape* other) {
  if (x->size() != 3 && x->size() != 4)
    throw Unsupported("node " + node.Describe() + ": the CUDA backend " + what + " 1-D and 2-D inputs");
  if (x->size() == 3) {
    x->insert(x->begin() + 2, 1);
    other->insert(other->begin() + 2, 1);
  }
}

// The node's effective pads as (height, width); cuDNN pads both sides of a
// dimension alike, so asymmetric padding is unsupported.
std::pair<int64_t, int64_t> SymmetricPads(const Graph& g, NodeId id) {
  std::vector<int64_t> pads = WindowInts(g, id, "pads");
  if (pads.size() == 2) pads = {0, pads[0], 0, pads[1]};
  if (pads.size() != 4) throw Error("node " + g.node(id).Describe() + ": pads of the wrong length");
  if (pads[0] != pads[2] || pads[1] != pads[3])
    throw Unsupported("node " + g.node(id).Describe() + ": asymmetric padding (cuDNN pads both sides alike)");
  return {pads[0], pads[1]};
}

// A constant integer operand (Slice's starts, Pad's pads, ...), read on the
// host; one computed at run time keeps the node on the host.
std::vector<int64_t> ConstInts(const Graph& g, const Node& node, size_t k, const char* what) {
  if (k >= node.inputs.size() || node.inputs[k] == kNoValue) return {};
  const Value& v = g.value(node.inputs[k]);
  if (v.initializer == nullptr)
    throw Unsupported("node " + node.Describe() + ": its " + what + " are computed at run time");
  return v.initializer->ToInt64();
}

// A constant scalar operand (Clip's bounds, Pad's value), or `fallback`
// where it is absent.
float ConstScalar(const Graph& g, const Node& node, size_t k, float fallback, const char* what) {
  if (k >= node.inputs.size() || node.inputs[k] == kNoValue) return fallback;
  const Value& v = g.value(node.inputs[k]);
  if (v.initializer == nullptr || v.initializer->NumElements() != 1)
    throw Unsupported("node " + node.Describe() + ": its " + what + " is computed at run time");
  return static_cast<float>(v.initializer->ToDouble().at(0));
}

}  // namespace

std::vector<int64_t> Strides(const Shape& shape) {
  std::vector<int64_t> s(shape.size(), 1);
  for (size_t d = shape.size(); d-- > 1;) s[d - 1] = s[d] * shape[d];
  return s;
}

GemmPlan PlanMatMul(const Shape& a_in, const Shape& b_in) {
  if (a_in.empty() || b_in.empty()) throw Unsupported("MatMul of a scalar");
  Shape a = a_in, b = b_in;
  if (a.size() == 1) a.insert(a.begin(), 1);  // [k] -> [1, k]
  if (b.size() == 1) b.push_back(1);          // [k] -> [k, 1]
  GemmPlan p;
  p.m = a[a.size() - 2];
  p.k = a[a.size() - 1];
  p.n = b[b.size() - 1];
  if (b[b.size() - 2] != p.k)
    throw Error("MatMul: inner dimensions differ (" + std::to_string(p.k) + " and " + std::to_string(b[b.size() - 2]) +
                ")");
  p.lda = p.k;
  p.ldb = p.n;
  p.ldc = p.n;
  const Shape batch_a(a.begin(), a.end() - 2), batch_b(b.begin(), b.end() - 2);
  auto count = [](const Shape& s) { return std::accumulate(s.begin(), s.end(), int64_t{1}, std::multiplies<>()); };
  const int64_t na = count(batch_a), nb = count(batch_b);
  // Batch dimensions aligned from the right, as numpy broadcasts them.
  const size_t rank = std::max(batch_a.size(), batch_b.size());
  Shape pa(rank - batch_a.size(), 1), pb(rank - batch_b.size(), 1);
  pa.insert(pa.end(), batch_a.begin(), batch_a.end());
  pb.insert(pb.end(), batch_b.begin(), batch_b.end());
  if (na == nb && pa == pb) {
    p.batch = na;
    p.stride_a = p.m * p.k;
    p.stride_b = p.k * p.n;
  } else if (na == 1) {
    p.batch = nb;
    p.stride_a = 0;
    p.stride_b = p.k * p.n;
  } else if (nb == 1) {
    // b shared by every batch entry: one product of the stacked a.
    p.batch = na;
    p.stride_a = p.m * p.k;
    p.stride_b = 0;
  } else {
    throw Unsupported("MatMul: batch broadcast between " + std::to_string(na) + " and " + std::to_string(nb) +
                      " entries (only equal batches or a batch of one)");
  }
  p.stride_c = p.m * p.n;
  return p;
}

GemmPlan PlanGemm(const Shape& a, const Shape& b, bool trans_a, bool trans_b, float alpha, float beta, bool has_c) {
  if (a.size() != 2 || b.size() != 2) throw Error("Gemm: operands must be 2-D");
  GemmPlan p;
  p.trans_a = trans_a;
  p.trans_b = trans_b;
  p.m = trans_a ? a[1] : a[0];
  p.k = trans_a ? a[0] : a[1];
  p.n = trans_b ? b[0] : b[1];
  const int64_t kb = trans_b ? b[1] : b[0];
  if (kb != p.k)
    throw Error("Gemm: inner dimensions differ (" + std::to_string(p.k) + " and " + std::to_string(kb) + ")");
  p.lda = a[1];
  p.ldb = b[1];
  p.ldc = p.n;
  p.alpha = alpha;
  p.beta = has_c ? beta : 0.0f;
  p.stride_c = p.m * p.n;
  return p;
}

std::string ConvPlan::Key() const {
  std::ostringstream key;
  key << n << ',' << c << ',' << h << ',' << w << '|' << k << ',' << r << ',' << s << '|' << groups << '|' << pad_h
      << ',' << pad_w << '|' << stride_h << ',' << stride_w << '|' << dil_h << ',' << dil_w;
  return key.str();
}

ConvPlan PlanConv(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  Shape x = StaticShape(g, node.inputs[0], node), w = StaticShape(g, node.inputs[1], node);
  To4D(node, "convolves", &x, &w);
  std::vector<int64_t> strides = WindowInts(g, id, "strides"), dil = WindowInts(g, id, "dilations");
  To2D(&strides, 1);
  To2D(&dil, 1);
  if (strides.size() != 2 || dil.size() != 2)
    throw Error("node " + node.Describe() + ": window attributes of the wrong length");
  const auto [pad_h, pad_w] = SymmetricPads(g, id);
  ConvPlan p;
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.k = w[0];
  p.r = w[2];
  p.s = w[3];
  p.groups = WindowInts(g, id, "group").at(0);
  if (p.groups < 1 || p.c % p.groups != 0 || w[1] * p.groups != p.c)
    throw Error("node " + node.Describe() + ": channels do not match the groups");
  p.pad_h = pad_h;
  p.pad_w = pad_w;
  p.stride_h = strides[0];
  p.stride_w = strides[1];
  p.dil_h = dil[0];
  p.dil_w = dil[1];
  p.out_h = (p.h + 2 * p.pad_h - p.dil_h * (p.r - 1) - 1) / p.stride_h + 1;
  p.out_w = (p.w + 2 * p.pad_w - p.dil_w * (p.s - 1) - 1) / p.stride_w + 1;
  if (p.out_h < 1 || p.out_w < 1) throw Error("node " + node.Describe() + ": the window is larger than the input");
  p.has_bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
  if (p.r == 1 && p.s == 1 && p.stride_h == 1 && p.stride_w == 1 && p.pad_h == 0 && p.pad_w == 0 && p.groups == 1) {
    // Y_i[k, hw] = W[k, c] X_i[c, hw] for every image i: one strided batch.
    p.method = ConvPlan::Method::kGemm;
    GemmPlan& gm = p.gemm;
    gm.m = p.k;
    gm.k = p.c;
    gm.n = p.h * p.w;
    gm.lda = p.c;
    gm.ldb = gm.n;
    gm.ldc = gm.n;
    gm.batch = p.n;
    gm.stride_a = 0;
    gm.stride_b = p.c * gm.n;
    gm.stride_c = p.k * gm.n;
  }
  return p;
}

PoolPlan PlanPool(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  Shape x = StaticShape(g, node.inputs[0], node), y = StaticShape(g, node.outputs[0], node);
  To4D(node, "pools", &x, &y);
  PoolPlan p;
  p.n = x[0];
  p.c = x[1];
  p.h = x[2];
  p.w = x[3];
  p.out_h = y[2];
  p.out_w = y[3];
  if (node.op == "GlobalAveragePool" || node.op == "GlobalMaxPool") {
    p.max = node.op == "GlobalMaxPool";
    p.win_h = p.h;
    p.win_w = p.w;
    return p;
  }
  if (node.op != "MaxPool" && node.op != "AveragePool") throw Error("PlanPool: not a pooling node: " + node.op);
  p.max = node.op == "MaxPool";
  AttrReader attrs = Attrs(node);
  if (!p.max) p.count_include_pad = attrs.Int("count_include_pad") != 0;
  std::vector<int64_t> kernel = WindowInts(g, id, "kernel_shape"), strides = WindowInts(g, id, "strides");
  To2D(&kernel, 1);
  To2D(&strides, 1);
  if (node.op == "MaxPool" && attrs.Has("dilations")) {
    for (int64_t d : attrs.Ints("dilations"))
      if (d != 1) throw Unsupported("node " + node.Describe() + ": dilated pooling");
  }
  std::tie(p.pad_h, p.pad_w) = SymmetricPads(g, id);
  p.win_h = kernel[0];
  p.win_w = kernel[1];
  p.stride_h = strides[0];
  p.stride_w = strides[1];
  // cuDNN's output size rounds down; ceil_mode's larger output is not expressible.
  const int64_t floor_h = (p.h + 2 * p.pad_h - p.win_h) / p.stride_h + 1;
  const int64_t floor_w = (p.w + 2 * p.pad_w - p.win_w) / p.stride_w + 1;
  if (floor_h != p.out_h || floor_w != p.out_w)
    throw Unsupported("node " + node.Describe() + ": ceil_mode output sizes (cuDNN rounds down)");
  return p;
}

BroadcastPlan PlanBroadcast(const std::vector<Shape>& inputs) {
  BroadcastPlan p;
  size_t rank = 0;
  for (const Shape& s : inputs) rank = std::max(rank, s.size());
  if (rank > static_cast<size_t>(kMaxRank)) throw Unsupported("elementwise op of rank " + std::to_string(rank));
  p.out.assign(rank, 1);
  for (const Shape& s : inputs) {
    const size_t off = rank - s.size();
    for (size_t d = 0; d < s.size(); ++d) {
      int64_t& o = p.out[off + d];
      if (s[d] == o || s[d] == 1) continue;
      if (o != 1) throw Error("shapes do not broadcast");
      o = s[d];
    }
  }
  p.numel = std::accumulate(p.out.begin(), p.out.end(), int64_t{1}, std::multiplies<>());
  for (const Shape& s : inputs) {
    const size_t off = rank - s.size();
    std::vector<int64_t> dense = Strides(s), strides(rank, 0);
    for (size_t d = 0; d < s.size(); ++d) strides[off + d] = s[d] == 1 && p.out[off + d] != 1 ? 0 : dense[d];
    if (s != p.out) p.same_shapes = false;
    p.strides.push_back(std::move(strides));
  }
  return p;
}

CopyPlan PlanTranspose(const Shape& in, std::vector<int64_t> perm) {
  const int64_t rank = static_cast<int64_t>(in.size());
  if (perm.empty())
    for (int64_t d = rank; d-- > 0;) perm.push_back(d);
  if (static_cast<int64_t>(perm.size()) != rank) throw Error("Transpose: perm has the wrong length");
  if (rank > kMaxRank) throw Unsupported("Transpose of rank " + std::to_string(rank));
  const std::vector<int64_t> in_strides = Strides(in);
  CopyPlan p;
  for (int64_t d = 0; d < rank; ++d) {
    if (perm[d] < 0 || perm[d] >= rank) throw Error("Transpose: perm out of range");
    p.shape.push_back(in[perm[d]]);
    p.in_strides.push_back(in_strides[perm[d]]);
  }
  p.out_strides = Strides(p.shape);
  return p;
}

std::vector<CopyPlan> PlanConcat(const std::vector<Shape>& inputs, int64_t axis) {
  if (inputs.empty()) throw Error("Concat of nothing");
  const int64_t rank = static_cast<int64_t>(inputs[0].size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) throw Error("Concat: axis out of range");
  if (rank > kMaxRank) throw Unsupported("Concat of rank " + std::to_string(rank));
  Shape out = inputs[0];
  out[axis] = 0;
  for (const Shape& s : inputs) out[axis] += s[axis];
  const std::vector<int64_t> out_strides = Strides(out);
  std::vector<CopyPlan> plans;
  int64_t at = 0;
  for (const Shape& s : inputs) {
    CopyPlan p;
    p.shape = s;
    p.in_strides = Strides(s);
    p.out_strides = out_strides;
    p.out_offset = at * out_strides[axis];
    at += s[axis];
    plans.push_back(std::move(p));
  }
  return plans;
}

SoftmaxPlan PlanSoftmax(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  SoftmaxPlan p;
  p.log = node.op == "LogSoftmax";
  AroundAxis(x, Axis(node, static_cast<int64_t>(x.size())), &p.outer, &p.dim, &p.inner);
  return p;
}

BatchNormPlan PlanBatchNorm(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  if (x.size() < 2) throw Unsupported("node " + node.Describe() + ": BatchNormalization of rank < 2");
  AttrReader attrs = Attrs(node);
  if (attrs.Int("training_mode") != 0) throw Unsupported("node " + node.Describe() + ": training mode");
  BatchNormPlan p;
  p.n = x[0];
  p.c = x[1];
  p.h = x.size() > 2 ? x[2] : 1;
  for (size_t d = 3; d < x.size(); ++d) p.w *= x[d];
  p.epsilon = attrs.Float("epsilon");
  return p;
}

GatherPlan PlanGather(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const Shape& idx = StaticShape(g, node.inputs[1], node);
  GatherPlan p;
  AroundAxis(x, Axis(node, static_cast<int64_t>(x.size())), &p.outer, &p.axis_dim, &p.inner);
  p.indices = std::accumulate(idx.begin(), idx.end(), int64_t{1}, std::multiplies<>());
  return p;
}

LayerNormPlan PlanLayerNorm(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const int64_t rank = static_cast<int64_t>(x.size());
  const int64_t axis = Axis(node, rank);
  for (size_t k = 1; k < node.outputs.size(); ++k)
    if (node.outputs[k] != kNoValue)
      throw Unsupported("node " + node.Describe() + ": LayerNormalization's mean and inverse deviation outputs");
  LayerNormPlan p;
  for (int64_t d = 0; d < rank; ++d) (d < axis ? p.rows : p.cols) *= x[d];
  p.epsilon = Attrs(node).Float("epsilon");
  p.has_bias = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
  return p;
}

CopyPlan PlanSlice(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  if (x.size() > static_cast<size_t>(kMaxRank)) throw Unsupported("Slice of rank " + std::to_string(x.size()));
  const std::vector<int64_t> starts = ConstInts(g, node, 1, "starts"), ends = ConstInts(g, node, 2, "ends"),
                             axes = ConstInts(g, node, 3, "axes"), steps = ConstInts(g, node, 4, "steps");
  CopyPlan p;
  p.shape = x;
  p.in_strides = Strides(x);
  for (const ops::SliceSpec& sp : ops::SliceSpecs(Attrs(node), x, starts, ends, &axes, &steps)) {
    p.in_offset += sp.start * p.in_strides[sp.axis];
    p.in_strides[sp.axis] *= sp.step;
    p.shape[sp.axis] = sp.count;
  }
  p.out_strides = Strides(p.shape);
  return p;
}

std::vector<CopyPlan> PlanSplit(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  if (x.size() > static_cast<size_t>(kMaxRank)) throw Unsupported("Split of rank " + std::to_string(x.size()));
  const int64_t axis = Axis(node, static_cast<int64_t>(x.size()));
  const std::vector<int64_t> in_strides = Strides(x);
  std::vector<CopyPlan> plans;
  int64_t at = 0;
  for (size_t k = 0; k < node.outputs.size(); ++k) {
    if (node.outputs[k] == kNoValue) throw Unsupported("node " + node.Describe() + ": an absent output");
    const Shape& y = StaticShape(g, node.outputs[k], node);
    CopyPlan p;
    p.shape = y;
    p.in_strides = in_strides;
    p.in_offset = at * in_strides[axis];
    p.out_strides = Strides(y);
    p.output = static_cast<int>(k);
    at += y[axis];
    plans.push_back(std::move(p));
  }
  if (at != x[axis]) throw Error("node " + node.Describe() + ": the outputs do not add up to the input");
  return plans;
}

CopyPlan PlanExpand(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const Shape& y = StaticShape(g, node.outputs[0], node);
  const BroadcastPlan b = PlanBroadcast({x, y});
  if (b.out != y) throw Error("node " + node.Describe() + ": the input does not broadcast to the output");
  CopyPlan p;
  p.shape = y;
  p.in_strides = b.strides[0];
  p.out_strides = Strides(y);
  return p;
}

CopyPlan PlanDepthToSpace(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const Shape& y = StaticShape(g, node.outputs[0], node);
  if (x.size() != 4 || y.size() != 4) throw Error("node " + node.Describe() + ": not 4-D");
  const AttrReader attrs = Attrs(node);
  const int64_t b = attrs.Int("blocksize");
  const std::vector<int64_t> xs = Strides(x);
  CopyPlan p;
  if (node.op == "DepthToSpace") {
    // y[n, c, h*b + i, w*b + j] = x[n, channel(c, i, j), h, w]; DCR:
    // channel = (i*b + j)*C' + c, CRD: c*b*b + i*b + j.
    const int64_t c_out = y[1];
    p.shape = {y[0], c_out, x[2], b, x[3], b};
    if (attrs.String("mode") == "CRD")
      p.in_strides = {xs[0], b * b * xs[1], xs[2], b * xs[1], xs[3], xs[1]};
    else
      p.in_strides = {xs[0], xs[1], xs[2], b * c_out * xs[1], xs[3], c_out * xs[1]};
  } else {
    // y[n, (i*b + j)*C + c, h, w] = x[n, c, h*b + i, w*b + j]: the output
    // is row-major over [N, b, b, C, H', W'].
    p.shape = {x[0], b, b, x[1], y[2], y[3]};
    p.in_strides = {xs[0], xs[2], xs[3], xs[1], b * xs[2], b * xs[3]};
  }
  if (node.op == "DepthToSpace") {
    const std::vector<int64_t> ys = Strides(y);  // y [N, C', H*b, W*b]
    p.out_strides = {ys[0], ys[1], b * ys[2], ys[2], b, 1};
  } else {
    p.out_strides = Strides(p.shape);
  }
  return p;
}

CopyPlan PlanTile(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const Shape& y = StaticShape(g, node.outputs[0], node);
  if (2 * x.size() > static_cast<size_t>(kMaxRank)) throw Unsupported("Tile of rank " + std::to_string(x.size()));
  const std::vector<int64_t> xs = Strides(x), ys = Strides(y);
  CopyPlan p;
  for (size_t d = 0; d < x.size(); ++d) {
    if (x[d] == 0 || y[d] % x[d] != 0) throw Unsupported("node " + node.Describe() + ": an empty dimension");
    p.shape.push_back(y[d] / x[d]);  // the repeat index
    p.shape.push_back(x[d]);
    p.in_strides.push_back(0);
    p.in_strides.push_back(xs[d]);
    p.out_strides.push_back(x[d] * ys[d]);
    p.out_strides.push_back(ys[d]);
  }
  return p;
}

PadPlan PlanPad(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const Shape& y = StaticShape(g, node.outputs[0], node);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank > kMaxRank) throw Unsupported("Pad of rank " + std::to_string(rank));
  if (Attrs(node).String("mode") != "constant")
    throw Unsupported("node " + node.Describe() + ": Pad mode '" + Attrs(node).String("mode") + "'");
  const std::vector<int64_t> pads = ConstInts(g, node, 1, "pads");
  if (static_cast<int64_t>(pads.size()) != 2 * rank)
    throw Error("node " + node.Describe() + ": pads of the wrong length");
  PadPlan p;
  p.value = ConstScalar(g, node, 2, 0.0f, "constant value");
  CopyPlan& c = p.interior;
  const std::vector<int64_t> in_strides = Strides(x), out_strides = Strides(y);
  c.in_strides = in_strides;
  c.out_strides = out_strides;
  for (int64_t d = 0; d < rank; ++d) {
    const int64_t begin = pads[d], end = pads[d + rank];
    c.shape.push_back(std::max<int64_t>(0, x[d] + std::min<int64_t>(begin, 0) + std::min<int64_t>(end, 0)));
    c.in_offset += std::max<int64_t>(-begin, 0) * in_strides[d];
    c.out_offset += std::max<int64_t>(begin, 0) * out_strides[d];
    if (x[d] + begin + end != y[d]) throw Error("node " + node.Describe() + ": pads do not give the output's shape");
  }
  return p;
}

ReducePlan PlanReduce(const Graph& g, NodeId id) {
  static const std::map<std::string, ReduceOp> kOps = {
      {"ReduceSum", ReduceOp::kSum},       {"ReduceMean", ReduceOp::kMean},
      {"ReduceMax", ReduceOp::kMax},       {"ReduceMin", ReduceOp::kMin},
      {"ReduceProd", ReduceOp::kProd},     {"ReduceSumSquare", ReduceOp::kSumSquare},
      {"ReduceL1", ReduceOp::kL1},         {"ReduceL2", ReduceOp::kL2},
      {"ReduceLogSum", ReduceOp::kLogSum}, {"ReduceLogSumExp", ReduceOp::kLogSumExp}};
  const Node& node = g.node(id);
  auto it = kOps.find(node.op);
  if (it == kOps.end()) throw Error("PlanReduce: not a reduction: " + node.op);
  const Shape& x = StaticShape(g, node.inputs[0], node);
  const int64_t rank = static_cast<int64_t>(x.size());
  if (rank > kMaxRank) throw Unsupported("reduction of rank " + std::to_string(rank));
  const AttrReader attrs = Attrs(node);
  const std::vector<int64_t> axes = node.op == "ReduceSum"
                                        ? ops::ReduceSumAxes(attrs, ConstInts(g, node, 1, "axes"), rank)
                                        : ops::ReduceAxes(attrs, rank);
  const std::set<int64_t> reduced(axes.begin(), axes.end());
  ReducePlan p;
  p.op = it->second;
  const std::vector<int64_t> strides = Strides(x);
  for (int64_t d = 0; d < rank; ++d) {
    if (reduced.count(d)) {
      p.reduced.push_back(x[d]);
      p.reduced_strides.push_back(strides[d]);
      p.count *= x[d];
    } else {
      p.kept.push_back(x[d]);
      p.kept_strides.push_back(strides[d]);
      p.outputs *= x[d];
    }
  }
  return p;
}

namespace {

const std::map<std::string, UnaryOp>& UnaryOps() {
  static const std::map<std::string, UnaryOp> ops = {
      {"Relu", UnaryOp::kRelu},
      {"Sigmoid", UnaryOp::kSigmoid},
      {"Tanh", UnaryOp::kTanh},
      {"Exp", UnaryOp::kExp},
      {"Log", UnaryOp::kLog},
      {"Sqrt", UnaryOp::kSqrt},
      {"Neg", UnaryOp::kNeg},
      {"Abs", UnaryOp::kAbs},
      {"Erf", UnaryOp::kErf},
      {"Floor", UnaryOp::kFloor},
      {"Ceil", UnaryOp::kCeil},
      {"Clip", UnaryOp::kClip},
      {"LeakyRelu", UnaryOp::kLeakyRelu},
      {"HardSigmoid", UnaryOp::kHardSigmoid},
      {"HardSwish", UnaryOp::kHardSwish},
      {"Reciprocal", UnaryOp::kReciprocal},
      {"Elu", UnaryOp::kElu},
      {"Selu", UnaryOp::kSelu},
      {"Celu", UnaryOp::kCelu},
      {"Softplus", UnaryOp::kSoftplus},
      {"Softsign", UnaryOp::kSoftsign},
      {"ThresholdedRelu", UnaryOp::kThresholdedRelu},
  };
  return ops;
}
const std::map<std::string, BinaryOp>& BinaryOps() {
  static const std::map<std::string, BinaryOp> ops = {
      {"Add", BinaryOp::kAdd}, {"Sub", BinaryOp::kSub}, {"Mul", BinaryOp::kMul}, {"Div", BinaryOp::kDiv},
      {"Pow", BinaryOp::kPow}, {"Max", BinaryOp::kMax}, {"Min", BinaryOp::kMin}, {"PRelu", BinaryOp::kPRelu}};
  return ops;
}
// The output is the input's bytes, whatever its type.
const std::set<std::string>& BytesCopyOps() {
  static const std::set<std::string> ops = {"Reshape", "Flatten", "Squeeze", "Unsqueeze", "Identity", "Dropout"};
  return ops;
}
// Each of these ops' own plan (registry operators).
const std::set<std::string>& PlannedOps() {
  static const std::set<std::string> ops = {"Conv",
                                            "MatMul",
                                            "Gemm",
                                            "MaxPool",
                                            "AveragePool",
                                            "GlobalAveragePool",
                                            "Softmax",
                                            "BatchNormalization",
                                            "Transpose",
                                            "Concat",
                                            "Gather",
                                            "LayerNormalization",
                                            "Slice",
                                            "Split",
                                            "Expand",
                                            "Pad",
                                            "Where",
                                            "ReduceSum",
                                            "ReduceMean",
                                            "ReduceMax",
                                            "ReduceMin",
                                            "ReduceProd",
                                            "ReduceSumSquare",
                                            "ReduceL1",
                                            "ReduceL2",
                                            "ReduceLogSum",
                                            "ReduceLogSumExp",
                                            "DepthToSpace",
                                            "SpaceToDepth",
                                            "Tile"};
  return ops;
}

// The operands a device step reads: every present input but the constant
// parameters read on the host (shapes, axes, starts, pads, bounds).
std::vector<size_t> DeviceOperands(const Node& node) {
  static const std::set<std::string> first_only = {"Reshape", "Squeeze", "Unsqueeze", "Slice",   "Split", "Expand",
                                                   "Pad",     "Clip",    "ReduceSum", "Dropout", "Tile"};
  std::vector<size_t> k;
  for (size_t i = 0; i < node.inputs.size(); ++i)
    if (node.inputs[i] != kNoValue && (i == 0 || !first_only.count(node.op))) k.push_back(i);
  return k;
}

// The type a device kernel reads operand k of `node` as.
DType DeviceOperandType(const Node& node, size_t k) {
  if (node.op == "Gather" && k == 1) return DType::kInt64;
  if (node.op == "Where" && k == 0) return DType::kBool;
  return DType::kFloat32;
}

void PlanDeviceStep(const Graph& g, NodeId id, NodePlan& p) {
  const Node& node = g.node(id);
  const AttrReader attrs = Attrs(node);
  auto shape = [&](size_t k) -> const Shape& { return StaticShape(g, node.inputs.at(k), node); };
  const std::string& op = node.op;
  if (auto u = UnaryOps().find(op); u != UnaryOps().end()) {
    p.kind = NodePlan::Kind::kUnary;
    p.unary = u->second;
    if (op == "Clip") {
      p.p0 = ConstScalar(g, node, 1, -3.4028235e38f, "minimum");
      p.p1 = ConstScalar(g, node, 2, 3.4028235e38f, "maximum");
    } else if (op == "LeakyRelu" || op == "Elu" || op == "Celu" || op == "ThresholdedRelu") {
      p.p0 = attrs.Float("alpha");
    } else if (op == "HardSigmoid") {
      p.p0 = attrs.Float("alpha");
      p.p1 = attrs.Float("beta");
    } else if (op == "Selu") {
      p.p0 = attrs.Float("alpha");
      p.p1 = attrs.Float("gamma");
    }
  } else if (auto b = BinaryOps().find(op); b != BinaryOps().end()) {
    if (node.inputs.size() != 2) throw Unsupported("node " + node.Describe() + ": only two operands");
    p.kind = NodePlan::Kind::kBinary;
    p.binary = b->second;
    p.broadcast = PlanBroadcast({shape(0), shape(1)});
  } else if (BytesCopyOps().count(op)) {
    p.kind = NodePlan::Kind::kBytesCopy;
  } else if (op == "MatMul") {
    p.kind = NodePlan::Kind::kMatMul;
    p.gemm = PlanMatMul(shape(0), shape(1));
  } else if (op == "Gemm") {
    p.kind = NodePlan::Kind::kGemm;
    const bool has_c = node.inputs.size() > 2 && node.inputs[2] != kNoValue;
    if (has_c) p.broadcast = PlanBroadcast({shape(2), StaticShape(g, node.outputs[0], node)});
    p.gemm = PlanGemm(shape(0), shape(1), attrs.Int("transA") != 0, attrs.Int("transB") != 0, attrs.Float("alpha"),
                      attrs.Float("beta"), has_c);
  } else if (op == "Conv") {
    p.kind = NodePlan::Kind::kConv;
    p.conv = PlanConv(g, id);
  } else if (op == "MaxPool" || op == "AveragePool" || op == "GlobalAveragePool" || op == "GlobalMaxPool") {
    p.kind = NodePlan::Kind::kPool;
    p.pool = PlanPool(g, id);
  } else if (op == "Softmax" || op == "LogSoftmax") {
    p.kind = NodePlan::Kind::kSoftmax;
    p.softmax = PlanSoftmax(g, id);
  } else if (op == "BatchNormalization") {
    if (node.inputs.size() != 5) throw Error("node " + node.Describe() + ": BatchNormalization needs 5 inputs");
    p.kind = NodePlan::Kind::kBatchNorm;
    p.batch_norm = PlanBatchNorm(g, id);
  } else if (op == "Gather") {
    p.kind = NodePlan::Kind::kGather;
    p.gather = PlanGather(g, id);
  } else if (op == "LayerNormalization") {
    p.kind = NodePlan::Kind::kLayerNorm;
    p.layer_norm = PlanLayerNorm(g, id);
  } else if (op == "Transpose") {
    p.copies = {PlanTranspose(shape(0), attrs.Has("perm") ? attrs.Ints("perm") : std::vector<int64_t>{})};
  } else if (op == "Concat") {
    std::vector<Shape> shapes;
    for (size_t k = 0; k < node.inputs.size(); ++k) shapes.push_back(shape(k));
    p.copies = PlanConcat(shapes, attrs.Int("axis"));
    for (size_t k = 0; k < p.copies.size(); ++k) p.copies[k].input = static_cast<int>(k);
  } else if (op == "Slice") {
    p.copies = {PlanSlice(g, id)};
  } else if (op == "Split") {
    p.copies = PlanSplit(g, id);
  } else if (op == "Expand") {
    p.copies = {PlanExpand(g, id)};
  } else if (op == "DepthToSpace" || op == "SpaceToDepth") {
    p.copies = {PlanDepthToSpace(g, id)};
  } else if (op == "Tile") {
    p.copies = {PlanTile(g, id)};
  } else if (op == "Pad") {
    const PadPlan pad = PlanPad(g, id);
    p.fill = true;
    p.p0 = pad.value;
    p.copies = {pad.interior};
  } else if (op == "Where") {
    p.kind = NodePlan::Kind::kWhere;
    p.broadcast = PlanBroadcast({shape(0), shape(1), shape(2)});
  } else if (op.rfind("Reduce", 0) == 0) {
    p.kind = NodePlan::Kind::kReduce;
    p.reduce = PlanReduce(g, id);
  } else {
    throw Unsupported("no CUDA kernel for " + op);
  }
  if (!p.copies.empty()) p.kind = NodePlan::Kind::kCopies;
}

}  // namespace

std::vector<std::string> DeviceOps() {
  std::set<std::string> ops = PlannedOps();
  for (const auto& [name, op] : UnaryOps()) ops.insert(name);
  for (const auto& [name, op] : BinaryOps()) ops.insert(name);
  ops.insert(BytesCopyOps().begin(), BytesCopyOps().end());
  return {ops.begin(), ops.end()};
}

NodePlan PlanNode(const Graph& g, NodeId id) {
  const Node& node = g.node(id);
  if (node.opaque()) throw Unsupported("node " + node.Describe() + ": opaque (no kernel on any device)");
  const OpDef* def = OpRegistry::Global().Find(node.domain, node.op);
  if (def == nullptr || def->kernel == nullptr)
    throw Unsupported("node " + node.Describe() + ": no kernel on any device");
  NodePlan p;
  p.op = node.op;
  p.outputs = node.outputs;
  auto host = [&](const std::string& why) {
    NodePlan h;
    h.kind = NodePlan::Kind::kHost;
    h.reason = why;
    h.op = node.op;
    h.outputs = node.outputs;
    for (ValueId v : node.inputs)
      if (v != kNoValue) h.inputs.push_back(v);
    return h;
  };
  if (!node.domain.empty()) return host("no CUDA kernel for " + node.domain + "." + node.op);
  // A Cast to the type it already has is a copy of its bytes.
  if (node.op == "Cast" && node.inputs.size() == 1 && node.outputs.size() == 1 &&
      g.value(node.inputs[0]).type.dtype == g.value(node.outputs[0]).type.dtype &&
      g.value(node.inputs[0]).type.IsStatic()) {
    p.kind = NodePlan::Kind::kBytesCopy;
    p.inputs = {node.inputs[0]};
    return p;
  }
  const bool known = UnaryOps().count(node.op) || BinaryOps().count(node.op) || BytesCopyOps().count(node.op) ||
                     PlannedOps().count(node.op);
  if (!known) return host("no CUDA kernel for " + node.op);
  const bool bytes = BytesCopyOps().count(node.op) > 0;
  // Dropout's mask, MaxPool's indices, LayerNormalization's statistics:
  // the device steps write the first output only (Split writes them all).
  if (node.op != "Split")
    for (size_t k = 1; k < node.outputs.size(); ++k)
      if (node.outputs[k] != kNoValue) return host(node.op + "'s output " + std::to_string(k));
  for (size_t k : DeviceOperands(node)) {
    const TensorType& t = g.value(node.inputs[k]).type;
    if (!t.IsStatic()) return host("input " + std::to_string(k) + " has no static shape");
    if (!bytes && t.dtype != DeviceOperandType(node, k))
      return host("input " + std::to_string(k) + " is " + DTypeName(t.dtype) + " (the device kernel reads " +
                  DTypeName(DeviceOperandType(node, k)) + ")");
    p.inputs.push_back(node.inputs[k]);
  }
  for (ValueId v : node.outputs) {
    if (v == kNoValue) continue;
    const TensorType& t = g.value(v).type;
    if (!t.IsStatic()) return host("an output has no static shape");
    if (!bytes && t.dtype != DType::kFloat32) return host("an output is " + DTypeName(t.dtype));
  }
  try {
    PlanDeviceStep(g, id, p);
  } catch (const Unsupported& e) {
    return host(e.what());
  }
  return p;
}

}  // namespace rlflow::cuda
