// Fusion passes: folding batch norms and per-channel Mul / Add into
// convolutions, MatMul + Add to Gemm, transposes into Gemm, and merging
// parallel convolutions / MatMuls that read the same input. Weights are
// computed here (float32, in ATen), so no weight-only node is left behind.
#include <ATen/TensorOperators.h>
#include <ATen/ops/cat.h>
#include <ATen/ops/ones_like.h>
#include <ATen/ops/sqrt.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/zeros.h>
#include <ATen/ops/zeros_like.h>

#include <map>

#include "core/error.h"
#include "core/passes/pass_util.h"

namespace rlflow::passes {
namespace {

// A Conv whose weights (and bias, if any) are floating-point constants (of
// one type), whose output only `consumer` reads (and is not a graph output).
bool FoldableConv(const Graph& g, NodeId conv, ValueId out) {
  const Node& c = g.node(conv);
  if (!Is(c, "Conv") || c.outputs[0] != out || IsGraphOutput(g, out) || Uses(g, out) != 1) return false;
  at::Tensor w = Constant(g, c.inputs[1]);
  if (!w.defined() || !w.is_floating_point()) return false;
  if (c.inputs.size() > 2 && c.inputs[2] != kNoValue) {
    at::Tensor b = Constant(g, c.inputs[2]);
    if (!b.defined() || b.scalar_type() != w.scalar_type()) return false;
  }
  return g.value(out).type.IsStatic();
}

// Replaces `result` (computed from conv's output by a per-channel affine
// map y * scale + shift) by a new Conv with scaled weights and bias
// (computed in float32 or wider and rounded once to the weights' type).
bool ReplaceWithScaledConv(Graph& g, NodeId conv, ValueId result, const at::Tensor& scale, const at::Tensor& shift) {
  const Node c = g.node(conv);
  const at::Tensor w0 = Constant(g, c.inputs[1]);
  const at::ScalarType type = w0.scalar_type();
  const at::ScalarType wide = type == at::kDouble ? at::kDouble : at::kFloat;
  at::Tensor w = w0.to(wide);
  const int64_t oc = w.size(0);
  at::Tensor b = c.inputs.size() > 2 && c.inputs[2] != kNoValue ? Constant(g, c.inputs[2]).to(wide)
                                                                : at::zeros({oc}, at::TensorOptions().dtype(wide));
  std::vector<int64_t> bshape(static_cast<size_t>(w.dim()), 1);
  bshape[0] = oc;
  at::Tensor nw = (w * scale.to(wide).reshape(bshape)).to(type), nb = (b * scale.to(wide) + shift.to(wide)).to(type);
  ValueId vw = AddConstant(g, c.name + ".w_folded", nw), vb = AddConstant(g, c.name + ".b_folded", nb);
  NodeId n = AddNode(g, "Conv", {c.inputs[0], vw, vb}, 1, c.attrs, c.name + ".folded");
  return Forward(g, result, g.node(n).outputs[0]);
}

class FoldBatchNormIntoConv : public LocalPass {
 public:
  std::string Name() const override { return "fold_batchnorm_into_conv"; }
  std::string Description() const override {
    return "inference BatchNormalization after a Conv folded into its weights and bias (a bias added if none)";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "BatchNormalization") || n.outputs.size() != 1) return false;
    NodeId conv = g.value(n.inputs[0]).producer;
    if (conv == kNoNode || !FoldableConv(g, conv, n.inputs[0])) return false;
    at::Tensor p[4];
    for (int k = 0; k < 4; ++k) {
      p[k] = Constant(g, n.inputs[k + 1]);
      if (!p[k].defined() || !p[k].is_floating_point() || p[k].dim() != 1) return false;
      if (p[k].scalar_type() != at::kDouble) p[k] = p[k].to(at::kFloat);  // half widened
    }
    const float eps = Attrs(g, id).Float("epsilon");
    at::Tensor scale = p[0] / at::sqrt(p[3] + eps);
    at::Tensor shift = p[1] - p[2] * scale;
    if (scale.size(0) != Constant(g, g.node(conv).inputs[1]).size(0)) return false;
    return ReplaceWithScaledConv(g, conv, n.outputs[0], scale, shift);
  }
};
RLFLOW_REGISTER_PASS(FoldBatchNormIntoConv);

// Conv -> Mul / Add by a per-channel constant.
class FoldAffineIntoConv : public LocalPass {
 public:
  explicit FoldAffineIntoConv(const char* op) : op_(op) {}
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, op_)) return false;
    for (int side = 0; side < 2; ++side) {
      ValueId y = n.inputs[side], c = n.inputs[1 - side];
      NodeId conv = g.value(y).producer;
      if (conv == kNoNode || !FoldableConv(g, conv, y)) continue;
      if (g.value(n.outputs[0]).type != g.value(y).type) continue;
      const TensorType& t = g.value(y).type;
      at::Tensor v = PerChannel(g, c, t.rank(), t.shape[1]);
      if (!v.defined()) continue;
      bool mul = std::string(op_) == "Mul";
      at::Tensor scale = mul ? v : at::ones_like(v), shift = mul ? at::zeros_like(v) : v;
      if (ReplaceWithScaledConv(g, conv, n.outputs[0], scale, shift)) return true;
    }
    return false;
  }

 private:
  const char* op_;
};

class FoldMulIntoConv : public FoldAffineIntoConv {
 public:
  FoldMulIntoConv() : FoldAffineIntoConv("Mul") {}
  std::string Name() const override { return "fold_mul_into_conv"; }
  std::string Description() const override { return "a per-channel constant Mul after a Conv folded into its weights"; }
};
RLFLOW_REGISTER_PASS(FoldMulIntoConv);

class FoldAddIntoConv : public FoldAffineIntoConv {
 public:
  FoldAddIntoConv() : FoldAffineIntoConv("Add") {}
  std::string Name() const override { return "fold_add_into_conv"; }
  std::string Description() const override { return "a per-channel constant Add after a Conv folded into its bias"; }
};
RLFLOW_REGISTER_PASS(FoldAddIntoConv);

class MatMulAddToGemm : public LocalPass {
 public:
  std::string Name() const override { return "matmul_add_to_gemm"; }
  std::string Description() const override { return "2-D MatMul followed by an Add of a bias to one Gemm"; }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Add")) return false;
    for (int side = 0; side < 2; ++side) {
      ValueId y = n.inputs[side], c = n.inputs[1 - side];
      NodeId mm = g.value(y).producer;
      if (mm == kNoNode || !Is(g.node(mm), "MatMul") || IsGraphOutput(g, y) || Uses(g, y) != 1) continue;
      const Node m = g.node(mm);
      const TensorType &a = g.value(m.inputs[0]).type, &b = g.value(m.inputs[1]).type, &ct = g.value(c).type;
      if (a.rank() != 2 || b.rank() != 2 || !a.rank_known || !b.rank_known || !ct.rank_known || ct.rank() > 2) continue;
      if (!IsFloatingPoint(a.dtype) || g.value(n.outputs[0]).type != g.value(y).type) continue;
      NodeId gemm = AddNode(g, "Gemm", {m.inputs[0], m.inputs[1], c}, 1, {}, m.name + ".gemm");
      if (Forward(g, n.outputs[0], g.node(gemm).outputs[0])) return true;
    }
    return false;
  }
};
RLFLOW_REGISTER_PASS(MatMulAddToGemm);

// perm [1, 0] of a 2-D tensor.
bool IsTranspose2D(const Graph& g, ValueId v) {
  NodeId t = g.value(v).producer;
  if (t == kNoNode || !Is(g.node(t), "Transpose") || g.value(v).type.rank() != 2 || !g.value(v).type.rank_known)
    return false;
  const Node& n = g.node(t);
  return !n.attrs.count("perm") || n.attrs.at("perm").ints == std::vector<int64_t>{1, 0};
}

class TransposeIntoGemm : public LocalPass {
 public:
  std::string Name() const override { return "transpose_into_gemm"; }
  std::string Description() const override {
    return "a 2-D Transpose feeding a Gemm (or a 2-D MatMul, which becomes a Gemm) folded into transA / transB";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    const bool gemm = Is(n, "Gemm"), matmul = Is(n, "MatMul");
    if (!gemm && !matmul) return false;
    if (matmul && (g.value(n.inputs[0]).type.rank() != 2 || g.value(n.inputs[1]).type.rank() != 2 ||
                   !IsFloatingPoint(g.value(n.inputs[0]).type.dtype)))
      return false;
    std::vector<ValueId> ins = n.inputs;
    AttributeMap attrs = n.attrs;
    AttrReader r = Attrs(g, id);
    int64_t trans[2] = {gemm ? r.Int("transA") : 0, gemm ? r.Int("transB") : 0};
    bool any = false;
    for (int k = 0; k < 2; ++k) {
      if (!IsTranspose2D(g, ins[k]) || Uses(g, ins[k]) != 1 || IsGraphOutput(g, ins[k])) continue;
      ins[k] = g.node(g.value(ins[k]).producer).inputs[0];
      trans[k] = 1 - trans[k];
      any = true;
    }
    if (!any) return false;
    attrs["transA"] = Attribute::Int(trans[0]);
    attrs["transB"] = Attribute::Int(trans[1]);
    NodeId nn = AddNode(g, "Gemm", ins, 1, attrs, n.name + ".trans");
    return Forward(g, g.node(id).outputs[0], g.node(nn).outputs[0]);
  }
};
RLFLOW_REGISTER_PASS(TransposeIntoGemm);

// Nodes of `op` reading `x` as input 0 with constant float32 weights as
// input 1, grouped by `key` (equal keys can be merged).
template <class KeyFn>
std::map<std::string, std::vector<NodeId>> Parallel(const Graph& g, const char* op, KeyFn key) {
  std::map<std::string, std::vector<NodeId>> groups;
  for (NodeId id : g.TopologicalOrder()) {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, op) || n.inputs.size() < 2 || !Live(g, id)) continue;
    at::Tensor w = Constant(g, n.inputs[1]);
    if (!w.defined() || w.scalar_type() != at::kFloat) continue;
    std::string k = key(id);
    if (!k.empty()) groups[std::to_string(n.inputs[0]) + "|" + k].push_back(id);
  }
  return groups;
}

// Replaces each node's output by a part of `merged`'s output, split along `axis`.
bool SplitBack(Graph& g, const std::vector<NodeId>& nodes, ValueId merged, int64_t axis,
               const std::vector<int64_t>& sizes) {
  ValueId split = AddConstant(g, "split_sizes", at::tensor(sizes, at::kLong));
  NodeId s = AddNode(g, "Split", {merged, split}, static_cast<int>(nodes.size()), {{"axis", Attribute::Int(axis)}},
                     g.node(nodes[0]).name + ".split");
  bool any = false;  // (a node whose output cannot be renamed keeps computing it)
  for (size_t k = 0; k < nodes.size(); ++k) any = Forward(g, g.node(nodes[k]).outputs[0], g.node(s).outputs[k]) || any;
  return any;
}

class MergeParallelConvs : public Pass {
 public:
  std::string Name() const override { return "merge_parallel_convs"; }
  std::string Description() const override {
    return "Convs that read the same input with the same attributes and kernel merged into one Conv + Split";
  }
  bool Run(Graph& g) const override {
    if (g.opset() < 13) return false;  // Split's sizes are an input from opset 13
    auto groups = Parallel(g, "Conv", [&](NodeId id) -> std::string {
      const Node n = g.node(id);  // a copy: adding nodes moves them
      if (Attrs(g, id).Int("group") != 1) return "";
      if (n.inputs.size() > 2 && n.inputs[2] != kNoValue && !g.IsConstant(n.inputs[2])) return "";
      if (!g.value(n.outputs[0]).type.IsStatic()) return "";
      const Shape& w = g.value(n.inputs[1]).type.shape;
      return AttrKey(EffectiveAttributes(g, id)) + "|" + ShapeToString(Shape(w.begin() + 1, w.end()));
    });
    bool changed = false;
    for (const auto& [key, nodes] : groups) {
      if (nodes.size() < 2) continue;
      std::vector<at::Tensor> ws, bs;
      std::vector<int64_t> sizes;
      for (NodeId id : nodes) {
        const Node n = g.node(id);  // a copy: adding nodes moves them
        at::Tensor w = Constant(g, n.inputs[1]);
        ws.push_back(w);
        bs.push_back(n.inputs.size() > 2 && n.inputs[2] != kNoValue ? Constant(g, n.inputs[2])
                                                                    : at::zeros({w.size(0)}));
        sizes.push_back(w.size(0));
      }
      const Node& first = g.node(nodes[0]);
      ValueId vw = AddConstant(g, first.name + ".merged_w", at::cat(ws, 0));
      ValueId vb = AddConstant(g, first.name + ".merged_b", at::cat(bs, 0));
      NodeId conv = AddNode(g, "Conv", {first.inputs[0], vw, vb}, 1, first.attrs, first.name + ".merged");
      changed = SplitBack(g, nodes, g.node(conv).outputs[0], 1, sizes) || changed;
    }
    if (changed) g.RemoveDeadCode();
    return changed;
  }
};
RLFLOW_REGISTER_PASS(MergeParallelConvs);

class MergeParallelMatMuls : public Pass {
 public:
  std::string Name() const override { return "merge_parallel_matmuls"; }
  std::string Description() const override {
    return "MatMuls of the same input by constant 2-D weights merged into one MatMul + Split";
  }
  bool Run(Graph& g) const override {
    if (g.opset() < 13) return false;
    auto groups = Parallel(g, "MatMul", [&](NodeId id) -> std::string {
      const Node n = g.node(id);  // a copy: adding nodes moves them
      const TensorType &x = g.value(n.inputs[0]).type, &w = g.value(n.inputs[1]).type;
      if (w.rank() != 2 || !x.IsStatic() || x.rank() < 1) return "";
      return std::to_string(w.shape[0]);
    });
    bool changed = false;
    for (const auto& [key, nodes] : groups) {
      if (nodes.size() < 2) continue;
      std::vector<at::Tensor> ws;
      std::vector<int64_t> sizes;
      for (NodeId id : nodes) {
        ws.push_back(Constant(g, g.node(id).inputs[1]));
        sizes.push_back(ws.back().size(1));
      }
      const Node& first = g.node(nodes[0]);
      ValueId vw = AddConstant(g, first.name + ".merged_w", at::cat(ws, 1));
      NodeId mm = AddNode(g, "MatMul", {first.inputs[0], vw}, 1, {}, first.name + ".merged");
      const int64_t axis = g.value(g.node(mm).outputs[0]).type.rank() - 1;
      changed = SplitBack(g, nodes, g.node(mm).outputs[0], axis, sizes) || changed;
    }
    if (changed) g.RemoveDeadCode();
    return changed;
  }
};
RLFLOW_REGISTER_PASS(MergeParallelMatMuls);

}  // namespace
}  // namespace rlflow::passes
