// The builtin passes: cleanup, constant folding, algebraic simplification,
// and the optimiser's own canonicalisation steps. Fusions are in
// fusion_passes.cc.
#include <ATen/TensorOperators.h>

#include <limits>
#include <map>
#include <numeric>

#include "core/error.h"
#include "core/passes/fold_constants.h"
#include "core/passes/interface.h"
#include "core/passes/lower_batchnorm.h"
#include "core/passes/pass_util.h"

namespace rlflow::passes {
namespace {

// ---------------------------------------------------------------- cleanup

class Dce : public Pass {
 public:
  std::string Name() const override { return "dce"; }
  std::string Description() const override {
    return "dead-code elimination: nodes whose outputs nothing reads, values nobody refers to";
  }
  bool Run(Graph& g) const override {
    int nodes = g.num_nodes(), values = g.num_values();
    g.RemoveDeadCode();
    return g.num_nodes() != nodes || g.num_values() != values;
  }
};
RLFLOW_REGISTER_PASS(Dce);

class Cse : public Pass {
 public:
  std::string Name() const override { return "cse"; }
  std::string Description() const override {
    return "common-subexpression elimination: nodes with the same operator, attributes and inputs computed once";
  }
  bool Run(Graph& g) const override {
    bool changed = false;
    for (int sweep = 0; sweep < 16; ++sweep) {
      std::map<std::string, NodeId> seen;
      bool any = false;
      for (NodeId id : g.TopologicalOrder()) {
        const Node n = g.node(id);  // a copy: adding nodes moves them
        if (n.opaque() || n.op == "Constant") continue;
        std::string key = n.domain + "/" + n.op + "/" + std::to_string(n.outputs.size()) + "/";
        for (ValueId in : n.inputs) key += std::to_string(in) + ",";
        key += "/" + AttrKey(n.attrs);
        auto [it, fresh] = seen.emplace(key, id);
        if (fresh) continue;
        const Node& first = g.node(it->second);
        bool all = true;
        for (size_t k = 0; k < n.outputs.size(); ++k) {
          ValueId out = g.node(id).outputs[k];
          if (Uses(g, out) == 0) continue;
          all = Forward(g, out, first.outputs[k]) && all;
        }
        any = any || all;
      }
      if (!any) break;
      changed = true;
      g.RemoveDeadCode();
    }
    return changed;
  }
};
RLFLOW_REGISTER_PASS(Cse);

class DedupInitializers : public Pass {
 public:
  std::string Name() const override { return "dedup_initializers"; }
  std::string Description() const override { return "initializers with equal type and contents stored once"; }
  bool Run(Graph& g) const override {
    std::map<uint64_t, std::vector<ValueId>> by_hash;
    bool changed = false;
    for (ValueId v : g.initializers()) {
      const Value& val = g.value(v);
      if (val.is_graph_input || IsGraphOutput(g, v)) continue;
      bool merged = false;
      for (ValueId w : by_hash[val.initializer->content_hash()]) {
        if (*g.value(w).initializer == *val.initializer) {
          g.ReplaceAllUses(v, w);
          merged = changed = true;
          break;
        }
      }
      if (!merged) by_hash[val.initializer->content_hash()].push_back(v);
    }
    if (changed) g.RemoveDeadCode();
    return changed;
  }
};
RLFLOW_REGISTER_PASS(DedupInitializers);

// A node that passes its first input through unchanged under `applies`.
class NopPass : public LocalPass {
 public:
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (n.inputs.empty() || n.inputs[0] == kNoValue || !IsNop(g, id)) return false;
    return Forward(g, n.outputs[0], n.inputs[0]);
  }
  virtual bool IsNop(const Graph& g, NodeId id) const = 0;
};

class RemoveIdentity : public NopPass {
 public:
  std::string Name() const override { return "remove_identity"; }
  std::string Description() const override { return "Identity nodes removed"; }
  bool IsNop(const Graph& g, NodeId id) const override { return Is(g.node(id), "Identity"); }
};
RLFLOW_REGISTER_PASS(RemoveIdentity);

class RemoveDropout : public NopPass {
 public:
  std::string Name() const override { return "remove_dropout"; }
  std::string Description() const override {
    return "inference-mode Dropout removed (its mask output unread, training_mode absent or false)";
  }
  bool IsNop(const Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Dropout")) return false;
    if (n.outputs.size() > 1 && Uses(g, n.outputs[1]) > 0) return false;
    if (n.inputs.size() > 2 && n.inputs[2] != kNoValue && !ConstantAll(g, n.inputs[2], 0)) return false;
    return true;
  }
};
RLFLOW_REGISTER_PASS(RemoveDropout);

class RemoveNopCast : public NopPass {
 public:
  std::string Name() const override { return "remove_nop_cast"; }
  std::string Description() const override { return "Cast to the type the tensor already has removed"; }
  bool IsNop(const Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    return Is(n, "Cast") && g.value(n.inputs[0]).type.dtype != DType::kUndefined &&
           g.value(n.inputs[0]).type.dtype == g.value(n.outputs[0]).type.dtype;
  }
};
RLFLOW_REGISTER_PASS(RemoveNopCast);

class RemoveNopPad : public NopPass {
 public:
  std::string Name() const override { return "remove_nop_pad"; }
  std::string Description() const override { return "Pad with all pads zero removed"; }
  bool IsNop(const Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    return Is(n, "Pad") && n.inputs.size() > 1 && ConstantAll(g, n.inputs[1], 0);
  }
};
RLFLOW_REGISTER_PASS(RemoveNopPad);

class RemoveNopSlice : public NopPass {
 public:
  std::string Name() const override { return "remove_nop_slice"; }
  std::string Description() const override { return "Slice with unit steps that keeps the whole tensor removed"; }
  bool IsNop(const Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Slice")) return false;
    if (n.inputs.size() > 4 && n.inputs[4] != kNoValue && !ConstantAll(g, n.inputs[4], 1)) return false;
    const TensorType& a = g.value(n.inputs[0]).type;
    return a.IsStatic() && a == g.value(n.outputs[0]).type;
  }
};
RLFLOW_REGISTER_PASS(RemoveNopSlice);

class RemoveNopExpand : public NopPass {
 public:
  std::string Name() const override { return "remove_nop_expand"; }
  std::string Description() const override { return "Expand to the shape the tensor already has removed"; }
  bool IsNop(const Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Expand") || !ConstInts(g, n.inputs[1])) return false;
    const TensorType& a = g.value(n.inputs[0]).type;
    return a.IsStatic() && a == g.value(n.outputs[0]).type;
  }
};
RLFLOW_REGISTER_PASS(RemoveNopExpand);

class RemoveSingleInputConcat : public LocalPass {
 public:
  std::string Name() const override { return "remove_single_input_concat"; }
  std::string Description() const override { return "Concat of one tensor and Split into one part removed"; }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if ((Is(n, "Concat") && n.inputs.size() == 1) || (Is(n, "Split") && n.outputs.size() == 1))
      return Forward(g, n.outputs[0], n.inputs[0]);
    return false;
  }
};
RLFLOW_REGISTER_PASS(RemoveSingleInputConcat);

// ---------------------------------------------------------------- constants

class FoldConstants : public Pass {
 public:
  std::string Name() const override { return "fold_constants"; }
  std::string Description() const override {
    return "constant folding: nodes whose inputs are all constants (weights included) become initializers, but "
           "for those that would store more weight data than the model holds (WeightGrowingNodes)";
  }
  bool Run(Graph& g) const override {
    FoldOptions o;
    o.max_elements = std::numeric_limits<int64_t>::max();
    const std::vector<char> keep = WeightGrowingNodes(g);
    o.keep = &keep;
    return InferShapesAndFold(g, o) > 0;
  }
};
RLFLOW_REGISTER_PASS(FoldConstants);

// Runs a rewrite that may rename graph outputs and gives them their names back.
bool KeepingInterface(Graph& g, int (*rewrite)(Graph&)) {
  Graph before = g;  // weights are shared, not copied
  if (rewrite(g) == 0) return false;
  RestoreInterface(before, g);
  return true;
}

class LowerBatchNormPass : public Pass {
 public:
  std::string Name() const override { return "lower_batchnorm"; }
  std::string Description() const override {
    return "canonicalisation: constant-parameter BatchNormalization to x * S + T (the form the rules fold)";
  }
  bool Run(Graph& g) const override { return KeepingInterface(g, LowerBatchNorm); }
};
RLFLOW_REGISTER_PASS(LowerBatchNormPass);

class RaiseBatchNormPass : public Pass {
 public:
  std::string Name() const override { return "raise_batchnorm"; }
  std::string Description() const override {
    return "per-channel constant Mul + Add pairs back to one BatchNormalization (one pass over the tensor)";
  }
  bool Run(Graph& g) const override { return KeepingInterface(g, RaiseBatchNorm); }
};
RLFLOW_REGISTER_PASS(RaiseBatchNormPass);

// ---------------------------------------------------------------- algebra

// Binary node `id` = op(x, c) where c is a constant of all `neutral` that
// does not change x's type by broadcasting: forwards x.
bool ForwardNeutral(Graph& g, NodeId id, bool either_side, double neutral) {
  const Node n = g.node(id);  // a copy: adding nodes moves them
  for (int side = 0; side < (either_side ? 2 : 1); ++side) {
    ValueId x = n.inputs[side], c = n.inputs[1 - side];
    if (g.IsConstant(x) || !ConstantAll(g, c, neutral)) continue;
    if (g.value(x).type != g.value(n.outputs[0]).type) continue;
    if (Forward(g, n.outputs[0], x)) return true;
  }
  return false;
}

class RemoveMulOne : public LocalPass {
 public:
  std::string Name() const override { return "remove_mul_one"; }
  std::string Description() const override { return "x * 1, 1 * x and x / 1 replaced by x"; }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (Is(n, "Mul")) return ForwardNeutral(g, id, true, 1.0);
    if (Is(n, "Div")) return ForwardNeutral(g, id, false, 1.0);
    return false;
  }
};
RLFLOW_REGISTER_PASS(RemoveMulOne);

class RemoveAddZero : public LocalPass {
 public:
  std::string Name() const override { return "remove_add_zero"; }
  std::string Description() const override { return "x + 0, 0 + x and x - 0 replaced by x"; }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (Is(n, "Add")) return ForwardNeutral(g, id, true, 0.0);
    if (Is(n, "Sub")) return ForwardNeutral(g, id, false, 0.0);
    return false;
  }
};
RLFLOW_REGISTER_PASS(RemoveAddZero);

class CombineConstantChains : public LocalPass {
 public:
  std::string Name() const override { return "combine_constant_chains"; }
  std::string Description() const override {
    return "(x + a) + b to x + (a + b) and (x * a) * b to x * (a * b) for constants a, b (one node instead of two)";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    const bool add = Is(n, "Add"), mul = Is(n, "Mul");
    if (!add && !mul) return false;
    for (int side = 0; side < 2; ++side) {
      ValueId inner = n.inputs[side], b = n.inputs[1 - side];
      if (!g.IsConstant(b) || g.value(inner).producer == kNoNode || Uses(g, inner) != 1) continue;
      const Node m = g.node(g.value(inner).producer);
      if (!Is(m, n.op.c_str())) continue;
      for (int ms = 0; ms < 2; ++ms) {
        ValueId x = m.inputs[ms], a = m.inputs[1 - ms];
        if (g.IsConstant(x) || !g.IsConstant(a)) continue;
        at::Tensor ta = Constant(g, a), tb = Constant(g, b);
        if (ta.scalar_type() != tb.scalar_type() || !at::isFloatingType(ta.scalar_type())) continue;
        at::Tensor c = add ? ta + tb : ta * tb;
        ValueId vc = AddConstant(g, g.node(id).name + ".combined", c);
        NodeId nn = AddNode(g, g.node(id).op, {x, vc}, 1, {}, g.node(id).name + ".combined");
        ValueId out = g.node(nn).outputs[0];
        // (If refused, the new node is dead and dropped after the sweep.)
        if (Forward(g, g.node(id).outputs[0], out)) return true;
      }
    }
    return false;
  }
};
RLFLOW_REGISTER_PASS(CombineConstantChains);

std::vector<int64_t> Perm(const Graph& g, NodeId id) {
  const Node n = g.node(id);  // a copy: adding nodes moves them
  if (n.attrs.count("perm")) return n.attrs.at("perm").ints;
  int64_t r = g.value(n.inputs[0]).type.rank();
  std::vector<int64_t> p(static_cast<size_t>(r));
  for (int64_t k = 0; k < r; ++k) p[k] = r - 1 - k;
  return p;
}

bool IsIdentityPerm(const std::vector<int64_t>& p) {
  for (size_t k = 0; k < p.size(); ++k)
    if (p[k] != static_cast<int64_t>(k)) return false;
  return true;
}

class TransposeTranspose : public LocalPass {
 public:
  std::string Name() const override { return "transpose_transpose"; }
  std::string Description() const override {
    return "Transpose of a Transpose to one Transpose with the composed permutation (none if it is the identity)";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Transpose") || !g.value(n.inputs[0]).type.rank_known) return false;
    NodeId inner_id = g.value(n.inputs[0]).producer;
    if (inner_id == kNoNode || !Is(g.node(inner_id), "Transpose")) return false;
    ValueId x = g.node(inner_id).inputs[0];
    if (!g.value(x).type.rank_known) return false;
    std::vector<int64_t> p1 = Perm(g, inner_id), p2 = Perm(g, id), p(p2.size());
    for (size_t k = 0; k < p2.size(); ++k) p[k] = p1[p2[k]];
    if (IsIdentityPerm(p)) return Forward(g, n.outputs[0], x);
    NodeId t = AddNode(g, "Transpose", {x}, 1, {{"perm", Attribute::Ints(p)}}, n.name + ".composed");
    return Forward(g, g.node(id).outputs[0], g.node(t).outputs[0]);
  }
};
RLFLOW_REGISTER_PASS(TransposeTranspose);

class RemoveNopTranspose : public NopPass {
 public:
  std::string Name() const override { return "remove_nop_transpose"; }
  std::string Description() const override { return "Transpose with the identity permutation removed"; }
  bool IsNop(const Graph& g, NodeId id) const override {
    return Is(g.node(id), "Transpose") && g.value(g.node(id).inputs[0]).type.rank_known && IsIdentityPerm(Perm(g, id));
  }
};
RLFLOW_REGISTER_PASS(RemoveNopTranspose);

class ReshapeReshape : public LocalPass {
 public:
  std::string Name() const override { return "reshape_reshape"; }
  std::string Description() const override {
    return "Reshape of a Reshape / Flatten / Squeeze / Unsqueeze to one Reshape (constant target without zeros)";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Reshape")) return false;
    std::optional<std::vector<int64_t>> target = ConstInts(g, n.inputs[1]);
    if (!target) return false;
    for (int64_t d : *target)
      if (d == 0) return false;  // 0 copies a dimension of the input: depends on it
    NodeId inner_id = g.value(n.inputs[0]).producer;
    if (inner_id == kNoNode) return false;
    const Node& m = g.node(inner_id);
    if (!Is(m, "Reshape") && !Is(m, "Flatten") && !Is(m, "Squeeze") && !Is(m, "Unsqueeze")) return false;
    if (m.outputs.size() != 1) return false;
    for (size_t k = 1; k < m.inputs.size(); ++k)
      if (m.inputs[k] != kNoValue && !ConstInts(g, m.inputs[k])) return false;
    ValueId x = m.inputs[0];
    NodeId r = AddNode(g, "Reshape", {x, n.inputs[1]}, 1, {}, n.name + ".merged");
    return Forward(g, g.node(id).outputs[0], g.node(r).outputs[0]);
  }
};
RLFLOW_REGISTER_PASS(ReshapeReshape);

bool ShapeOnly(const Graph& g, const Node& n) {
  if (!Is(n, "Reshape") && !Is(n, "Flatten") && !Is(n, "Squeeze") && !Is(n, "Unsqueeze")) return false;
  for (size_t k = 1; k < n.inputs.size(); ++k)
    if (n.inputs[k] != kNoValue && !ConstInts(g, n.inputs[k])) return false;
  return true;
}

class RemoveNopReshape : public NopPass {
 public:
  std::string Name() const override { return "remove_nop_reshape"; }
  std::string Description() const override {
    return "Reshape / Flatten / Squeeze / Unsqueeze (constant parameters) that keep the shape removed";
  }
  bool IsNop(const Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!ShapeOnly(g, n)) return false;
    const TensorType& a = g.value(n.inputs[0]).type;
    return a.IsStatic() && a == g.value(n.outputs[0]).type;
  }
};
RLFLOW_REGISTER_PASS(RemoveNopReshape);

class SqueezeUnsqueeze : public LocalPass {
 public:
  std::string Name() const override { return "squeeze_unsqueeze"; }
  std::string Description() const override {
    return "pairs of Squeeze / Unsqueeze / Reshape / Flatten that give back their input's shape removed";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!ShapeOnly(g, n)) return false;
    NodeId inner_id = g.value(n.inputs[0]).producer;
    if (inner_id == kNoNode || !ShapeOnly(g, g.node(inner_id))) return false;
    ValueId x = g.node(inner_id).inputs[0];
    const TensorType& a = g.value(x).type;
    if (!a.IsStatic() || a != g.value(n.outputs[0]).type) return false;
    return Forward(g, n.outputs[0], x);
  }
};
RLFLOW_REGISTER_PASS(SqueezeUnsqueeze);

class ConcatSplit : public LocalPass {
 public:
  std::string Name() const override { return "concat_split"; }
  std::string Description() const override {
    return "Split of a Concat along the same axis into the same parts: the Concat's inputs used directly";
  }
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    if (!Is(n, "Split")) return false;
    NodeId c_id = g.value(n.inputs[0]).producer;
    if (c_id == kNoNode || !Is(g.node(c_id), "Concat")) return false;
    const Node& c = g.node(c_id);
    if (c.inputs.size() != n.outputs.size()) return false;
    const TensorType& t = g.value(n.inputs[0]).type;
    if (!t.IsStatic()) return false;
    int64_t r = t.rank();
    int64_t sa = Attrs(g, id).Int("axis"), ca = Attrs(g, c_id).Int("axis");
    if ((sa < 0 ? sa + r : sa) != (ca < 0 ? ca + r : ca)) return false;
    for (size_t k = 0; k < c.inputs.size(); ++k)
      if (g.value(c.inputs[k]).type != g.value(n.outputs[k]).type) return false;
    bool any = false;
    std::vector<ValueId> ins = c.inputs, outs = n.outputs;
    for (size_t k = 0; k < ins.size(); ++k) {
      if (Uses(g, outs[k]) == 0) continue;
      any = Forward(g, outs[k], ins[k]) || any;
    }
    return any;
  }
};
RLFLOW_REGISTER_PASS(ConcatSplit);

// f(f(x)) -> f(x) for an idempotent f, or -> x for an involution.
class UnaryPair : public LocalPass {
 public:
  UnaryPair(std::vector<std::string> ops, bool involution) : ops_(std::move(ops)), involution_(involution) {}
  bool Rewrite(Graph& g, NodeId id) const override {
    const Node n = g.node(id);  // a copy: adding nodes moves them
    bool mine = false;
    for (const std::string& op : ops_) mine = mine || Is(n, op.c_str());
    if (!mine) return false;
    NodeId inner = g.value(n.inputs[0]).producer;
    if (inner == kNoNode || !Is(g.node(inner), n.op.c_str())) return false;
    return Forward(g, n.outputs[0], involution_ ? g.node(inner).inputs[0] : g.node(inner).outputs[0]);
  }

 private:
  std::vector<std::string> ops_;
  bool involution_;
};

class IdempotentUnary : public UnaryPair {
 public:
  IdempotentUnary() : UnaryPair({"Relu", "Abs", "Floor", "Ceil"}, false) {}
  std::string Name() const override { return "idempotent_unary"; }
  std::string Description() const override { return "Relu(Relu(x)), Abs(Abs(x)), Floor, Ceil: applied once"; }
};
RLFLOW_REGISTER_PASS(IdempotentUnary);

class NegNeg : public UnaryPair {
 public:
  NegNeg() : UnaryPair({"Neg"}, true) {}
  std::string Name() const override { return "neg_neg"; }
  std::string Description() const override { return "Neg(Neg(x)) replaced by x"; }
};
RLFLOW_REGISTER_PASS(NegNeg);

}  // namespace
}  // namespace rlflow::passes
