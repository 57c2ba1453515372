#include "core/passes/pass_util.h"

#include <ATen/TensorOperators.h>
#include <ATen/ops/all.h>

#include <sstream>

#include "core/error.h"
#include "core/ops/kernel.h"

namespace rlflow::passes {

bool Is(const Node& n, const char* op) { return !n.opaque() && n.domain.empty() && n.op == op; }

bool IsGraphOutput(const Graph& g, ValueId v) {
  for (ValueId o : g.outputs())
    if (o == v) return true;
  return false;
}

int Uses(const Graph& g, ValueId v) {
  int n = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    for (ValueId in : g.node(id).inputs) n += in == v;
  for (ValueId o : g.outputs()) n += o == v;
  return n;
}

bool Live(const Graph& g, NodeId id) {
  for (ValueId out : g.node(id).outputs)
    if (Uses(g, out) > 0) return true;
  return false;
}

AttrReader Attrs(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  const OpDef* def = OpRegistry::Global().Find(n.domain, n.op);
  RLFLOW_CHECK(def != nullptr, "node ", n.Describe(), ": operator is not in the registry");
  return AttrReader(n, *def);
}

std::string AttrKey(const AttributeMap& attrs) {
  std::ostringstream k;
  for (const auto& [name, a] : attrs) {
    k << name << '=' << static_cast<int>(a.type) << ':' << a.i << ':' << a.f << ':' << a.s << ':';
    for (int64_t x : a.ints) k << x << ',';
    k << ':';
    for (float x : a.floats) k << x << ',';
    k << ':';
    for (const std::string& x : a.strings) k << x.size() << '/' << x << ',';
    if (a.tensor) k << ':' << a.tensor->content_hash();
    k << ';';
  }
  return k.str();
}

bool Forward(Graph& g, ValueId from, ValueId to) {
  if (from == to) return false;
  const TensorType& ft = g.value(from).type;
  const TensorType& tt = g.value(to).type;
  if (ft.dtype != tt.dtype || (ft.rank_known && tt.rank_known && ft.shape != tt.shape)) return false;
  if (!IsGraphOutput(g, from)) {
    g.ReplaceAllUses(from, to);
    return true;
  }
  if (g.value(to).producer == kNoNode || IsGraphOutput(g, to)) return false;
  std::string name = g.value(from).name;
  g.RenameValue(from, g.UniqueName(name + "_removed"));
  g.ReplaceAllUses(from, to);
  g.RenameValue(to, name);
  return true;
}

NodeId AddNode(Graph& g, std::string op, const std::vector<ValueId>& inputs, int num_outputs, AttributeMap attrs,
               const std::string& base) {
  NodeId id = g.AddNode(op, inputs, num_outputs, std::move(attrs), g.UniqueName(base));
  const OpDef* def = OpRegistry::Global().Find("", op);
  RLFLOW_CHECK(def != nullptr, "pass: operator ", op, " is not in the registry");
  InferAndSetNodeShapes(g, id, *def);
  return id;
}

at::Tensor Constant(const Graph& g, ValueId v) {
  if (!g.IsConstant(v)) return {};
  return ToAten(g.value(v).initializer);
}

ValueId AddConstant(Graph& g, const std::string& base, const at::Tensor& t) {
  return g.AddInitializer(g.UniqueName(base), FromAten(t.contiguous().clone()));
}

bool ConstantAll(const Graph& g, ValueId v, double x) {
  at::Tensor t = Constant(g, v);
  if (!t.defined() || t.numel() == 0) return false;
  return at::all(t.to(at::kDouble) == x).item<bool>();
}

at::Tensor PerChannel(const Graph& g, ValueId v, int64_t rank, int64_t channels) {
  at::Tensor t = Constant(g, v);
  if (!t.defined() || !t.is_floating_point() || t.dim() > rank) return {};
  std::vector<int64_t> shape(t.sizes().begin(), t.sizes().end());
  while (static_cast<int64_t>(shape.size()) < rank) shape.insert(shape.begin(), 1);
  for (int64_t k = 0; k < rank; ++k)
    if (k != 1 && shape[k] != 1) return {};
  if (shape[1] != 1 && shape[1] != channels) return {};
  // Half values widened to float32 (what the folding computes in).
  if (t.scalar_type() != at::kDouble) t = t.to(at::kFloat);
  return t.reshape({-1}).expand({channels}).contiguous();
}

std::optional<std::vector<int64_t>> ConstInts(const Graph& g, ValueId v) {
  if (v == kNoValue || !g.IsConstant(v) || g.value(v).symbolic) return std::nullopt;
  const TensorDataPtr& d = g.value(v).initializer;
  if (d->dtype() != DType::kInt64 && d->dtype() != DType::kInt32) return std::nullopt;
  return d->ToInt64();
}

bool LocalPass::Run(Graph& g) const {
  const int start = g.num_nodes();
  bool changed = false;
  const int sweeps = MaxSweeps(g);
  for (int sweep = 0; sweep < sweeps; ++sweep) {
    bool any = false;
    for (NodeId id : g.TopologicalOrder()) {
      if (g.node(id).opaque() || !Live(g, id)) continue;
      if (Rewrite(g, id)) any = true;
    }
    if (!any) break;
    changed = true;
    g.RemoveDeadCode();
  }
  // A rewrite refused after building its replacement leaves it dead.
  if (!changed && g.num_nodes() != start) g.RemoveDeadCode();
  return changed;
}

}  // namespace rlflow::passes
