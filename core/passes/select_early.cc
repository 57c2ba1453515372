// select_rows_early: a selection of rows (Gather with constant indices, or
// a Slice of rows that are the same at every length, as TensorFlow's and
// Paddle's exports write `x[:, 0]`: Slice, then Squeeze) is
// moved towards the inputs through the operators that compute each row of
// their output from the same row of their inputs, so that the rows nobody
// reads are never computed. A ViT or BERT classifier reads only the class
// token (`x[:, 0]`) of its last layer: the layer's feed-forward block, its
// layer norms and residual sums (and, where the heads are laid out as
// [B, T, H, D], its query projection and attention rows) then run on one
// token instead of every token.
//
// A selection moves into its producer P when every reader of P's output is
// the same selection (same axis and indices) and the output is no graph
// output; P is then computed again on selected inputs and the old P is
// dead. Readers selecting different rows along one axis (a class and a
// distillation token) first read them from one selection of all their rows.
// An input whose axis is broadcast (size 1, or absent) is read as it is; a
// constant input is selected here. A scalar index (the axis dropped)
// becomes a one-element index and a Squeeze of that axis after it.
#include <ATen/TensorOperators.h>
#include <ATen/ops/index_select.h>
#include <ATen/ops/tensor.h>
#include <ATen/ops/where.h>

#include <algorithm>
#include <optional>
#include <set>

#include "core/ops/kernel.h"
#include "core/passes/pass_util.h"

namespace rlflow::passes {
namespace {

// A Gather on a constant integer index (scalar or 1-D) whose data's rank and
// dimension along the axis are known and larger than the count of indices.
struct Selection {
  NodeId node = kNoNode;
  ValueId data = kNoValue;
  int64_t axis = 0;  // of data, non-negative
  at::Tensor index;  // the index constant as it is (scalar or 1-D)
  bool scalar = false;
};

// A Slice along one axis with constant starts, ends, axes and steps whose
// rows are the same at every length of that axis that holds them: counted
// from the front (`x[:, 0:1]`, both ends non-negative, its end within the
// axis) or from the back (`x[:, -1:]`, a negative start to the end or to a
// negative end), step 1 or more. As the rows' indices as written (a
// negative index counts from the back, as Gather's does); nullopt for any
// other Slice (`x[:, 1:]` selects all but one row at every length).
std::optional<at::Tensor> SliceRows(const Graph& g, const Node& n, int64_t* axis) {
  if (n.inputs.size() < 3 || n.outputs.size() != 1) return std::nullopt;
  const TensorType& x = g.value(n.inputs[0]).type;
  if (!x.rank_known || x.rank() == 0) return std::nullopt;
  // Input i as constant integers: starts (1) and ends (2) must be given,
  // axes (3) and steps (4) may be left out (empty).
  std::vector<int64_t> starts, ends, axes, steps;
  const auto read = [&](size_t i, std::vector<int64_t>* out) {
    if (i >= n.inputs.size() || n.inputs[i] == kNoValue) return i >= 3;
    if (g.value(n.inputs[i]).symbolic) return false;
    std::optional<std::vector<int64_t>> v = ConstInts(g, n.inputs[i]);
    if (v) *out = std::move(*v);
    return v.has_value();
  };
  if (!read(1, &starts) || !read(2, &ends) || !read(3, &axes) || !read(4, &steps)) return std::nullopt;
  if (starts.size() != 1 || ends.size() != 1 || axes.size() > 1 || steps.size() > 1) return std::nullopt;
  *axis = axes.empty() ? 0 : axes[0];
  if (*axis < 0) *axis += x.rank();
  if (*axis < 0 || *axis >= x.rank()) return std::nullopt;
  const int64_t dim = x.shape[*axis], step = steps.empty() ? 1 : steps[0];
  const int64_t start = starts[0], end = ends[0];
  if (dim <= 0 || step < 1) return std::nullopt;
  std::vector<int64_t> rows;
  if (start >= 0 && end <= dim && start < end) {
    for (int64_t i = start; i < end; i += step) rows.push_back(i);
  } else if (start < 0 && start >= -dim && (end >= dim || (end < 0 && start < end))) {
    for (int64_t i = start; i < (end < 0 ? end : 0); i += step) rows.push_back(i);
  } else {
    return std::nullopt;
  }
  return at::tensor(rows, at::kLong);
}

std::optional<Selection> AsSelection(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (Is(n, "Slice") && !g.value(n.inputs[0]).known) {
    int64_t axis = 0;
    std::optional<at::Tensor> rows = SliceRows(g, n, &axis);
    if (!rows || rows->numel() >= g.value(n.inputs[0]).type.shape[axis]) return std::nullopt;
    return Selection{id, n.inputs[0], axis, *rows, false};
  }
  if (!Is(n, "Gather") || n.inputs.size() != 2 || n.outputs.size() != 1) return std::nullopt;
  at::Tensor index = Constant(g, n.inputs[1]);
  if (!index.defined() || index.dim() > 1 || index.numel() == 0 || g.value(n.inputs[1]).symbolic) return std::nullopt;
  // Shape arithmetic (small values computed from symbolic dimensions, whose
  // values at the bound ones the shape rules read) is left to the folding
  // that keeps it general.
  if (g.value(n.inputs[0]).known) return std::nullopt;
  const TensorType& x = g.value(n.inputs[0]).type;
  if (!x.rank_known || x.rank() == 0) return std::nullopt;
  int64_t axis = Attrs(g, id).Int("axis");
  if (axis < 0) axis += x.rank();
  if (axis < 0 || axis >= x.rank()) return std::nullopt;
  const int64_t dim = x.shape[axis];
  if (dim <= 0 || index.numel() >= dim) return std::nullopt;  // fewer rows than the axis has, or nothing to gain
  return Selection{id, n.inputs[0], axis, index, index.dim() == 0};
}

bool SameSelection(const Selection& a, const Selection& b) {
  return a.axis == b.axis && a.scalar == b.scalar && a.index.scalar_type() == b.index.scalar_type() &&
         a.index.sizes() == b.index.sizes() && a.index.equal(b.index);
}

// Which axis of each input of `p` holds the rows of its output's axis `a`
// (-1: the input does not vary along it and is read as it is; a Reshape's
// shape, which ReshapeTo makes anew). False: rows of the output are not
// computed from rows of the inputs alone (or not handled).
bool InputAxes(const Graph& g, NodeId pid, int64_t a, std::vector<int64_t>* axes) {
  const Node& p = g.node(pid);
  const TensorType& out = g.value(p.outputs[0]).type;
  const int64_t r = out.rank();
  axes->assign(p.inputs.size(), -1);
  // Inputs aligned from the right, broadcasting (an axis of size 1 or
  // absent is read whole).
  const auto aligned = [&](size_t i, int64_t axis) {
    if (p.inputs[i] == kNoValue) return;
    const TensorType& t = g.value(p.inputs[i]).type;
    const int64_t b = axis - (r - t.rank());
    if (b >= 0 && t.shape[b] == out.shape[axis]) (*axes)[i] = b;
  };
  static const std::set<std::string> elementwise = {
      "Add",  "Sub",        "Mul",   "Div",      "Pow",       "Max",         "Min",       "Where",
      "Relu", "Sigmoid",    "Tanh",  "Erf",      "Exp",       "Log",         "Sqrt",      "Neg",
      "Abs",  "Reciprocal", "Cast",  "Identity", "LeakyRelu", "HardSigmoid", "HardSwish", "Elu",
      "Selu", "Softplus",   "Clip",  "Gelu",     "Mish",      "Floor",       "Ceil",      "Sin",
      "Cos",  "Softsign",   "Equal", "Less",     "Greater",   "Not",         "And",       "Or"};
  for (ValueId in : p.inputs)
    if (in != kNoValue && !g.value(in).type.rank_known) return false;
  if (elementwise.count(p.op)) {
    for (size_t i = 0; i < p.inputs.size(); ++i) aligned(i, a);
    return true;
  }
  if (p.op == "MatMul") {
    const TensorType &ta = g.value(p.inputs[0]).type, &tb = g.value(p.inputs[1]).type;
    if (ta.rank() < 2 || tb.rank() < 2) return false;
    if (a < r - 2) {  // a batch axis
      aligned(0, a);
      aligned(1, a);
    } else if (a == r - 2) {
      (*axes)[0] = ta.rank() - 2;
    } else {
      (*axes)[1] = tb.rank() - 1;
    }
    return true;
  }
  if (p.op == "Gemm") {
    // Rows of Y = A' B' + C are rows of A' (A, or A's columns with transA),
    // its columns B''s; C's own where it has them, else C is read whole.
    AttrReader at = Attrs(g, pid);
    if (r != 2) return false;
    if (a == 0)
      (*axes)[0] = at.Int("transA") != 0 ? 1 : 0;
    else
      (*axes)[1] = at.Int("transB") != 0 ? 0 : 1;
    if (p.inputs.size() > 2) aligned(2, a);
    return true;
  }
  if (p.op == "Transpose") {
    std::vector<int64_t> perm = Attrs(g, pid).Ints("perm");
    if (perm.empty()) {
      perm.resize(static_cast<size_t>(r));
      for (int64_t k = 0; k < r; ++k) perm[k] = r - 1 - k;
    }
    if (static_cast<int64_t>(perm.size()) != r) return false;
    (*axes)[0] = perm[a];
    return true;
  }
  if (p.op == "Softmax" || p.op == "LogSoftmax") {
    int64_t axis = Attrs(g, pid).Int("axis");
    if (axis < 0) axis += r;
    if (axis == a) return false;
    (*axes)[0] = a;
    return true;
  }
  if (p.op == "LayerNormalization") {
    int64_t axis = Attrs(g, pid).Int("axis");
    if (axis < 0) axis += r;
    if (a >= axis) return false;
    (*axes)[0] = a;  // scale and bias span the normalised axes only
    return true;
  }
  if (p.op == "ReduceMean" || p.op == "ReduceMax" || p.op == "ReduceMin" || p.op == "ReduceL2") {
    // Axes as an attribute (the forms the registry holds); kept dimensions.
    AttrReader at = Attrs(g, pid);
    if (p.inputs.size() != 1 || at.Int("keepdims") == 0 || !at.Has("axes")) return false;
    for (int64_t ax : at.Ints("axes"))
      if ((ax < 0 ? ax + r : ax) == a) return false;
    (*axes)[0] = a;
    return true;
  }
  if (p.op == "Concat") {
    int64_t axis = Attrs(g, pid).Int("axis");
    if (axis < 0) axis += r;
    if (axis == a) return false;
    for (size_t i = 0; i < p.inputs.size(); ++i) (*axes)[i] = a;
    return true;
  }
  if (p.op == "Reshape") {
    // Axes up to a kept as they are, those after it split or merged
    // ([B, T, 768] <-> [B, T, 12, 64] along T). The graph is at one binding
    // of its symbolic dimensions, where a dimension bound to 1 can hide a
    // merge ([T * B, 768] -> [T, B, 768] looks like T -> T at B = 1): no
    // dimension after a may be 1 (the optimiser checks the result at a
    // second binding too).
    const TensorType& in = g.value(p.inputs[0]).type;
    if (!in.IsStatic() || !out.IsStatic() || in.rank() <= a) return false;
    for (int64_t k = 0; k <= a; ++k)
      if (in.shape[k] != out.shape[k]) return false;
    for (int64_t k = a + 1; k < in.rank(); ++k)
      if (in.shape[k] == 1) return false;
    for (int64_t k = a + 1; k < r; ++k)
      if (out.shape[k] == 1) return false;
    (*axes)[0] = a;
    (*axes)[1] = -1;  // replaced by ReshapeTo
    return true;
  }
  return false;
}

// The shape input of a Reshape whose output's axis a now holds `rows`: a
// constant with that entry replaced, or (where the shape is computed from
// symbolic dimensions) a Concat of one-element pieces with that piece a
// constant. kNoValue where it is neither.
ValueId ReshapeTo(Graph& g, ValueId shape, int64_t a, int64_t rows, const std::string& base) {
  const Value& v = g.value(shape);
  const TensorDataPtr data = v.initializer ? v.initializer : v.known;
  if (!data || (data->dtype() != DType::kInt64)) return kNoValue;
  std::vector<int64_t> values = data->ToInt64();
  if (a >= static_cast<int64_t>(values.size())) return kNoValue;
  values[a] = rows;
  at::Tensor t = at::tensor(values, at::kLong);
  if (!v.symbolic) return AddConstant(g, base + ".shape", t);
  if (v.producer == kNoNode) return kNoValue;
  const Node c = g.node(v.producer);
  if (!Is(c, "Concat") || static_cast<int64_t>(c.inputs.size()) != static_cast<int64_t>(values.size())) return kNoValue;
  for (ValueId piece : c.inputs)
    if (g.value(piece).type.shape != Shape{1}) return kNoValue;
  std::vector<ValueId> pieces = c.inputs;
  pieces[a] = AddConstant(g, base + ".rows", at::tensor(std::vector<int64_t>{rows}, at::kLong));
  NodeId cat = AddNode(g, "Concat", pieces, 1, c.attrs, base + ".shape");
  Value& out = g.mutable_value(g.node(cat).outputs[0]);
  out.symbolic = true;
  out.known = std::make_shared<TensorData>(FromAten(t));
  return g.node(cat).outputs[0];
}

class SelectRowsEarly : public LocalPass {
 public:
  std::string Name() const override { return "select_rows_early"; }
  std::string Description() const override {
    return "a Gather of constant rows moved before the operators that compute each row alone (rows nobody reads "
           "are not computed)";
  }
  // A selection moves one operator a sweep, and a transformer layer is
  // tens of operators deep.
  int MaxSweeps(const Graph& g) const override { return g.num_nodes() + 1; }
  bool Rewrite(Graph& g, NodeId id) const override {
    std::optional<Selection> s = AsSelection(g, id);
    if (!s) return false;
    const ValueId x = s->data;
    const NodeId pid = g.value(x).producer;
    if (pid == kNoNode || IsGraphOutput(g, x)) return false;
    const Node p = g.node(pid);  // a copy: adding nodes moves them
    if (p.opaque() || !p.domain.empty() || p.outputs[0] != x) return false;
    for (size_t k = 1; k < p.outputs.size(); ++k)
      if (Uses(g, p.outputs[k]) > 0) return false;
    // Every reader of x is a selection along the same axis; where they
    // select different rows, one selection of all their rows comes first.
    std::vector<Selection> readers;
    bool same = true;
    for (NodeId r = 0; r < g.num_nodes(); ++r) {
      const Node& n = g.node(r);
      bool reads = false;
      for (ValueId in : n.inputs) reads = reads || in == x;
      if (!reads || !Live(g, r)) continue;  // a dead reader goes with the old P
      std::optional<Selection> t = AsSelection(g, r);
      if (!t || t->data != x || t->axis != s->axis) return false;
      same = same && SameSelection(*s, *t);
      readers.push_back(*t);
    }
    std::vector<int64_t> axes;
    if (!InputAxes(g, pid, s->axis, &axes)) return false;
    for (size_t i = 0; i < axes.size(); ++i)
      if (axes[i] >= 0 && g.value(p.inputs[i]).known) return false;
    if (!same) return SelectTheUnion(g, x, s->axis, readers);
    const std::string base = p.name + ".selected";
    const at::Tensor rows = s->index.reshape({-1});
    ValueId rows_value = kNoValue;
    std::vector<ValueId> inputs = p.inputs;
    for (size_t i = 0; i < inputs.size(); ++i) {
      if (axes[i] < 0) continue;
      const ValueId in = inputs[i];
      at::Tensor c = Constant(g, in);
      if (c.defined() && !g.value(in).symbolic) {
        at::Tensor idx = rows.to(at::kLong);
        idx = at::where(idx < 0, idx + c.size(axes[i]), idx);
        inputs[i] = AddConstant(g, g.value(in).name + ".selected", at::index_select(c, axes[i], idx));
        continue;
      }
      if (rows_value == kNoValue) rows_value = AddConstant(g, base + ".rows", rows);
      inputs[i] =
          g.node(AddNode(g, "Gather", {in, rows_value}, 1, {{"axis", Attribute::Int(axes[i])}}, base)).outputs[0];
    }
    if (p.op == "Reshape") {
      inputs[1] = ReshapeTo(g, p.inputs[1], s->axis, rows.numel(), base);
      if (inputs[1] == kNoValue) return false;
    }
    const NodeId q = AddNode(g, p.op, inputs, 1, p.attrs, base);
    ValueId result = g.node(q).outputs[0];
    if (s->scalar) {
      ValueId axes_value = AddConstant(g, base + ".axes", at::tensor(std::vector<int64_t>{s->axis}, at::kLong));
      result = g.node(AddNode(g, "Squeeze", {result, axes_value}, 1, {}, base + ".squeeze")).outputs[0];
    }
    bool changed = false;
    for (const Selection& r : readers) changed = Forward(g, g.node(r.node).outputs[0], result) || changed;
    return changed;
  }

 private:
  // The rows the readers select, each once (indices as written: -1 and 49
  // are other rows at another length), selected first; each reader then
  // selects its rows from those. False where they are all the rows.
  static bool SelectTheUnion(Graph& g, ValueId x, int64_t axis, const std::vector<Selection>& readers) {
    std::vector<int64_t> rows;
    for (const Selection& r : readers) {
      const at::Tensor idx = r.index.to(at::kLong).reshape({-1}).contiguous();
      for (int64_t k = 0; k < idx.numel(); ++k) {
        const int64_t i = idx.data_ptr<int64_t>()[k];
        if (std::find(rows.begin(), rows.end(), i) == rows.end()) rows.push_back(i);
      }
    }
    if (static_cast<int64_t>(rows.size()) >= g.value(x).type.shape[axis]) return false;
    const std::string base = g.value(x).name + ".rows";
    const ValueId all = AddConstant(g, base, at::tensor(rows, at::kLong));
    const ValueId selected =
        g.node(AddNode(g, "Gather", {x, all}, 1, {{"axis", Attribute::Int(axis)}}, base)).outputs[0];
    bool changed = false;
    for (const Selection& r : readers) {
      at::Tensor at_rows = r.index.to(at::kLong).clone();
      int64_t* p = at_rows.data_ptr<int64_t>();
      for (int64_t k = 0; k < at_rows.numel(); ++k) p[k] = std::find(rows.begin(), rows.end(), p[k]) - rows.begin();
      const ValueId positions = AddConstant(g, base + ".of", at_rows);
      const NodeId n = AddNode(g, "Gather", {selected, positions}, 1, {{"axis", Attribute::Int(axis)}}, base);
      changed = Forward(g, g.node(r.node).outputs[0], g.node(n).outputs[0]) || changed;
    }
    return changed;
  }
};
RLFLOW_REGISTER_PASS(SelectRowsEarly);

}  // namespace
}  // namespace rlflow::passes
