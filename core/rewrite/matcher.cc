#include "core/rewrite/matcher.h"

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <unordered_set>

#include "core/error.h"
#include "core/node_key.h"
#include "core/op_registry.h"

namespace rlflow {
namespace {

// Effective attribute value: the node's, else the registry default.
const Attribute* Effective(const Node& n, const OpDef& def, const std::string& name) {
  auto it = n.attrs.find(name);
  if (it != n.attrs.end()) return &it->second;
  const AttrSpec* spec = def.FindAttr(name);
  return spec && spec->default_value ? &*spec->default_value : nullptr;
}

// Attributes that only restate the kernel size or defaults compare by value.
// Attributes bound to variables (`vars`) are compared when bound, not here;
// with a window variable, auto_pad too (its effect is in the effective pads).
bool AttrsMatch(const Node& n, const OpDef& def, const AttributeMap& want,
                const std::map<std::string, std::string>& vars, const std::map<std::string, rules::Dim>& dims) {
  for (const AttrSpec& spec : def.attrs) {
    if (vars.count(spec.name) || dims.count(spec.name)) continue;
    if (spec.name == "auto_pad" && !vars.empty()) continue;
    if (spec.name == "kernel_shape" && !want.count(spec.name) && n.op == "Conv") continue;  // implied by W
    const Attribute* have = Effective(n, def, spec.name);
    auto w = want.find(spec.name);
    if (w != want.end()) {
      if (!have || *have != w->second) {
        // Absent "pads"/"strides"/"dilations" lists mean zeros / ones.
        if (!have && (spec.name == "pads" || spec.name == "strides" || spec.name == "dilations")) {
          int64_t fill = spec.name == "pads" ? 0 : 1;
          for (int64_t v : w->second.ints)
            if (v != fill) return false;
          continue;
        }
        return false;
      }
    } else if (have) {
      // The pattern leaves it at the default: the node must too.
      if (spec.default_value && *have == *spec.default_value) continue;
      if (spec.name == "strides" || spec.name == "dilations") {
        for (int64_t v : have->ints)
          if (v != 1) return false;
        continue;
      }
      if (spec.name == "pads") {
        for (int64_t v : have->ints)
          if (v != 0) return false;
        continue;
      }
      if (spec.name == "auto_pad" && (have->s == "NOTSET" || have->s.empty())) continue;
      if (spec.name == "kernel_shape") continue;
      return false;
    }
  }
  return true;
}

struct State {
  const Graph& g;
  const rules::Rule& rule;
  const rules::Pattern& p;
  const std::vector<CompiledNode>& compiled;
  const std::vector<std::vector<std::pair<NodeId, int>>>& consumers;
  std::vector<NodeId> nodes;
  std::vector<ValueId> inputs;
  SymbolBinding symbols;
  AttrBinding attrs;         // attribute variables bound so far
  std::vector<NodeId> used;  // matched graph nodes (a handful)
  // Symbolic constants matched so far (pattern constant, graph value): their
  // values are checked once every symbol is bound (DimsHold).
  std::vector<std::pair<int, ValueId>> symbolic_constants;
  const std::vector<int>& topo_pos;  // position of each node in a topological order
  bool Used(NodeId n) const { return std::find(used.begin(), used.end(), n) != used.end(); }
};

bool BindInput(State& s, int input, ValueId v) {
  if (s.inputs[input] != kNoValue) return s.inputs[input] == v;
  const rules::TensorVar& var = s.rule.inputs(input);
  const Value& val = s.g.value(v);
  if (!val.type.IsStatic()) return false;
  const DType want = DTypeFromCode(var.dtype());
  if (IsFloatingPoint(want)) {
    // Rules are proved over the reals: a floating-point variable binds a
    // value of any floating-point type (a float16 model's), one type for
    // all of a match's floating-point inputs.
    if (!IsFloatingPoint(val.type.dtype)) return false;
    for (size_t k = 0; k < s.inputs.size(); ++k) {
      if (s.inputs[k] == kNoValue || !IsFloatingPoint(DTypeFromCode(s.rule.inputs(static_cast<int>(k)).dtype())))
        continue;
      if (s.g.value(s.inputs[k]).type.dtype != val.type.dtype) return false;
    }
  } else if (val.type.dtype != want) {
    return false;
  }
  if (val.type.rank() != var.shape_size()) return false;
  SymbolBinding added;
  for (int k = 0; k < var.shape_size(); ++k) {
    const rules::Dim& d = var.shape(k);
    int64_t actual = val.type.shape[k];
    if (d.terms_size() == 0) {
      if (d.constant() != actual) return false;
      continue;
    }
    // Expressions (e.g. j + l) are checked when the match is complete (DimsHold).
    if (!DimIsPlainSymbol(d)) continue;
    const std::string& sym = d.terms(0).symbol();
    auto it = s.symbols.find(sym);
    if (it != s.symbols.end()) {
      if (it->second != actual) return false;
    } else {
      auto a = added.find(sym);
      if (a != added.end() && a->second != actual) return false;
      added[sym] = actual;
    }
  }
  for (const auto& [k, v2] : added) s.symbols[k] = v2;
  s.inputs[input] = v;
  return true;
}

// Floating values compared exactly in the graph constant's type (the
// pattern's 3.0 is the graph's 3.0f).
bool FloatValuesEqual(const TensorData& t, const std::vector<double>& want) {
  if (!IsFloatingPoint(t.dtype())) return false;
  std::vector<double> have = t.ToDouble();
  if (have.size() != want.size()) return false;
  for (size_t k = 0; k < have.size(); ++k)
    if (have[k] != RoundToFloatType(want[k], t.dtype())) return false;
  return true;
}

bool ConstantMatches(const State& s, const rules::Constant& c, ValueId v) {
  if (!s.g.IsConstant(v)) return false;
  const TensorData& t = *s.g.value(v).initializer;
  if (IsFloatConstant(c)) {
    // A scalar matches a one-element constant of any rank ([] or [1]); the
    // rewrite's shape check refuses a result whose shape would change.
    if (c.dims_size() > 0 && t.shape() != Shape(c.dims().begin(), c.dims().end())) return false;
    return FloatValuesEqual(t, std::vector<double>(c.float_values().begin(), c.float_values().end()));
  }
  if (IsFilledConstant(c)) {
    // Its shape (and a value divided by a dimension, fill_divisor) is
    // checked once every symbol is bound (DimsHold); here its elements must
    // be all the same.
    if (t.shape().size() != static_cast<size_t>(c.fill_shape_size())) return false;
    if (c.has_fill_divisor()) {
      if (t.NumElements() == 0 || !IsFloatingPoint(t.dtype())) return false;
      const std::vector<double> values = t.ToDouble();
      return std::all_of(values.begin(), values.end(), [&](double x) { return x == values[0]; });
    }
    return FloatValuesEqual(t, std::vector<double>(static_cast<size_t>(t.NumElements()), c.fill_value()));
  }
  if (!IsInteger(t.dtype())) return false;
  if (IsSymbolicConstant(c)) return t.NumElements() == c.dim_values_size();  // values: DimsHold
  std::vector<int64_t> values = t.ToInt64();
  return values.size() == static_cast<size_t>(c.int_values_size()) &&
         std::equal(values.begin(), values.end(), c.int_values().begin());
}

// A dimension expression's value where every symbol in it is bound.
std::optional<int64_t> BoundValue(const rules::Dim& d, const SymbolBinding& symbols) {
  int64_t v = d.constant();
  for (const auto& t : d.terms()) {
    std::optional<int64_t> value = EvalSymbol(t.symbol(), symbols);
    if (!value) return std::nullopt;  // a symbol nothing binds plainly
    v += t.coeff() * *value;
  }
  return v;
}

bool Holds(const rules::Dim& d, int64_t actual, const SymbolBinding& symbols) {
  return BoundValue(d, symbols) == actual;
}

// A complete match: every input dimension that is an expression and every
// symbolic constant agrees with the bound symbols. Symbols that no input
// binds plainly (the factors of a product such as heads*head_dim) are bound
// from the symbolic constants' plain entries (e.g. a Reshape target
// [n,m,c,w]) first.
bool DimsHold(State& s) {
  for (const auto& [c, v] : s.symbolic_constants) {
    const rules::Constant& constant = s.p.constants(c);
    if (IsFilledConstant(constant)) continue;
    std::vector<int64_t> values = s.g.value(v).initializer->ToInt64();
    for (int k = 0; k < constant.dim_values_size(); ++k) {
      const rules::Dim& d = constant.dim_values(k);
      if (!DimIsPlainSymbol(d)) continue;
      auto [it, inserted] = s.symbols.emplace(d.terms(0).symbol(), values[k]);
      if (!inserted && it->second != values[k]) return false;
    }
  }
  // A symbol that an input's dimension gives only as a multiple (2*h: a
  // contraction split in halves) is bound where the dimension divides.
  for (int k = 0; k < s.rule.inputs_size(); ++k) {
    if (s.inputs[k] == kNoValue) continue;
    const rules::TensorVar& var = s.rule.inputs(k);
    const Shape& shape = s.g.value(s.inputs[k]).type.shape;
    for (int d = 0; d < var.shape_size() && d < static_cast<int>(shape.size()); ++d) {
      const rules::Dim& dim = var.shape(d);
      if (dim.terms_size() != 1 || dim.constant() != 0 || dim.terms(0).coeff() < 2 ||
          IsProductSymbol(dim.terms(0).symbol()) || s.symbols.count(dim.terms(0).symbol()))
        continue;
      const int64_t coeff = dim.terms(0).coeff();
      if (shape[d] <= 0 || shape[d] % coeff != 0) return false;
      s.symbols.emplace(dim.terms(0).symbol(), shape[d] / coeff);
    }
  }
  for (int k = 0; k < s.rule.inputs_size(); ++k) {
    if (s.inputs[k] == kNoValue) continue;
    const rules::TensorVar& var = s.rule.inputs(k);
    const Shape& shape = s.g.value(s.inputs[k]).type.shape;
    for (int d = 0; d < var.shape_size(); ++d) {
      const rules::Dim& dim = var.shape(d);
      if (!DimIsPlainSymbol(dim) && dim.terms_size() > 0 && !Holds(dim, shape[d], s.symbols)) return false;
    }
  }
  for (const auto& [c, v] : s.symbolic_constants) {
    const rules::Constant& constant = s.p.constants(c);
    if (IsFilledConstant(constant)) {
      const Shape& shape = s.g.value(v).initializer->shape();
      for (int k = 0; k < constant.fill_shape_size(); ++k)
        if (!Holds(constant.fill_shape(k), shape[k], s.symbols)) return false;
      if (constant.has_fill_divisor()) {
        const std::optional<int64_t> divisor = BoundValue(constant.fill_divisor(), s.symbols);
        if (!divisor || *divisor <= 0) return false;
        const TensorData& t = *s.g.value(v).initializer;
        if (!FloatValuesEqual(t, std::vector<double>(static_cast<size_t>(t.NumElements()),
                                                     constant.fill_value() / static_cast<double>(*divisor))))
          return false;
      }
      continue;
    }
    std::vector<int64_t> values = s.g.value(v).initializer->ToInt64();
    for (int k = 0; k < constant.dim_values_size(); ++k)
      if (!Holds(constant.dim_values(k), values[k], s.symbols)) return false;
  }
  return true;
}

// A rule that divides by an input holds where that input has no zero: it
// applies only where the input is a constant without zeros.
// Inputs bounded above (UpperBounds): each a constant whose elements are
// all finite (the verifier's premise is over the reals: an infinite slope
// times 0 is NaN) and at most its bound.
bool BoundsHold(const State& s, const std::map<int, double>& bounds) {
  for (const auto& [in, bound] : bounds) {
    ValueId v = s.inputs[in];
    if (!s.g.IsConstant(v)) return false;
    for (double x : s.g.value(v).initializer->ToDouble())
      if (!std::isfinite(x) || x > bound) return false;
  }
  return true;
}

// Attributes given by dimension expressions (a depthwise conv's group=c)
// equal the matched nodes' effective values at the match's binding.
bool AttrDimsHold(const State& s) {
  for (size_t pn = 0; pn < s.compiled.size(); ++pn) {
    const CompiledNode& cn = s.compiled[pn];
    if (cn.attr_dims.empty()) continue;
    const Node& n = s.g.node(s.nodes[pn]);
    for (const auto& [name, dim] : cn.attr_dims) {
      const Attribute* have = Effective(n, *cn.def, name);
      if (have == nullptr || have->type != AttrType::kInt) return false;
      for (const auto& t : dim.terms())
        for (const std::string& f : SymbolFactors(t.symbol()))
          if (!s.symbols.count(f)) return false;
      if (have->i != EvalDim(dim, s.symbols)) return false;
    }
  }
  return true;
}

bool NonzeroDivisors(const State& s, const std::vector<int>& divisors) {
  for (int in : divisors) {
    ValueId v = s.inputs[in];
    if (!s.g.IsConstant(v)) return false;
    const TensorData& t = *s.g.value(v).initializer;
    if (t.NumElements() == 0) return false;
    for (double x : t.ToDouble())
      if (x == 0.0) return false;
  }
  return true;
}

// Matches pattern reference `r` against graph value `v`.
bool MatchRef(State& s, const rules::Ref& r, ValueId v, const std::function<bool()>& k);

bool MatchNode(State& s, int pn, NodeId gn, const std::function<bool()>& k) {
  if (s.nodes[pn] != kNoNode) return s.nodes[pn] == gn && k();
  if (s.Used(gn)) return false;
  const Node& n = s.g.node(gn);
  const rules::Node& pat = s.p.nodes(pn);
  if (n.opaque() || !IsQualifiedOp(n.domain, n.op, pat.op())) return false;
  if (static_cast<int>(n.inputs.size()) != pat.inputs_size() || static_cast<int>(n.outputs.size()) != pat.num_outputs())
    return false;
  const CompiledNode& cn = s.compiled[pn];
  if (cn.def == nullptr || !AttrsMatch(n, *cn.def, cn.attrs, cn.attr_vars, cn.attr_dims)) return false;
  AttrBinding saved_attrs = s.attrs;
  for (const auto& [name, var] : cn.attr_vars) {
    std::optional<Attribute> value = EffectiveWindowAttribute(s.g, gn, name);
    if (!value) return false;
    auto bound = s.attrs.find(var);
    if (bound == s.attrs.end()) {
      s.attrs.emplace(var, *value);
    } else if (bound->second != *value) {
      s.attrs = saved_attrs;
      return false;
    }
  }
  s.nodes[pn] = gn;
  s.used.push_back(gn);
  // Operand orders to try.
  std::vector<std::vector<int>> orders = {{}};
  for (int k2 = 0; k2 < pat.inputs_size(); ++k2) orders[0].push_back(k2);
  if (cn.def != nullptr && cn.def->commutative && pat.inputs_size() == 2) orders.push_back({1, 0});
  bool ok = false;
  for (const auto& order : orders) {
    std::vector<ValueId> saved_inputs = s.inputs;
    SymbolBinding saved_symbols = s.symbols;
    std::vector<NodeId> saved_nodes = s.nodes;
    std::vector<NodeId> saved_used = s.used;
    std::function<bool(int)> step = [&](int i) -> bool {
      if (i == pat.inputs_size()) return k();
      return MatchRef(s, pat.inputs(i), n.inputs[order[i]], [&] { return step(i + 1); });
    };
    if (step(0)) {
      ok = true;
      break;
    }
    s.inputs = saved_inputs;
    s.symbols = saved_symbols;
    s.nodes = saved_nodes;
    s.used = saved_used;
  }
  if (!ok) {
    s.nodes[pn] = kNoNode;
    s.used.erase(std::find(s.used.begin(), s.used.end(), gn));
    s.attrs = saved_attrs;
  }
  return ok;
}

bool MatchRef(State& s, const rules::Ref& r, ValueId v, const std::function<bool()>& k) {
  switch (r.kind_case()) {
    case rules::Ref::kOmitted: return v == kNoValue && k();
    case rules::Ref::kConstant: {
      if (v == kNoValue || !ConstantMatches(s, s.p.constants(r.constant()), v)) return false;
      if (!IsSymbolicConstant(s.p.constants(r.constant())) && !IsFilledConstant(s.p.constants(r.constant())))
        return k();
      s.symbolic_constants.push_back({r.constant(), v});
      if (k()) return true;
      s.symbolic_constants.pop_back();
      return false;
    }
    case rules::Ref::kInput: {
      if (v == kNoValue) return false;
      ValueId before = s.inputs[r.input()];
      SymbolBinding saved = s.symbols;
      if (!BindInput(s, r.input(), v)) return false;
      if (k()) return true;
      s.inputs[r.input()] = before;
      s.symbols = saved;
      return false;
    }
    case rules::Ref::kNode: {
      if (v == kNoValue) return false;
      const Value& val = s.g.value(v);
      if (val.producer == kNoNode || val.output_index != r.node().output()) return false;
      return MatchNode(s, r.node().node(), val.producer, k);
    }
    default: return false;
  }
}

// A quick necessary condition, without allocation: operators, arities and
// the kinds of operands agree below pattern node `pn` at graph node `gn`
// (commutative operands in either order). Most anchors fail here.
bool QuickCheck(const Graph& g, const rules::Pattern& p, const std::vector<CompiledNode>& compiled, int pn, NodeId gn) {
  const Node& n = g.node(gn);
  const CompiledNode& cn = compiled[pn];
  if (n.opaque() || !IsQualifiedOp(n.domain, n.op, cn.op)) return false;
  const int arity = static_cast<int>(cn.operands.size());
  if (static_cast<int>(n.inputs.size()) != arity || static_cast<int>(n.outputs.size()) != cn.num_outputs) return false;
  if (cn.def == nullptr || !AttrsMatch(n, *cn.def, cn.attrs, cn.attr_vars, cn.attr_dims)) return false;
  auto operand = [&](int pi, int gi) {
    const CompiledNode::Operand& r = cn.operands[pi];
    ValueId v = n.inputs[gi];
    switch (r.kind) {
      case rules::Ref::kOmitted: return v == kNoValue;
      case rules::Ref::kConstant: return v != kNoValue && g.IsConstant(v);
      case rules::Ref::kInput: return v != kNoValue;
      case rules::Ref::kNode: {
        if (v == kNoValue) return false;
        const Value& val = g.value(v);
        return val.producer != kNoNode && val.output_index == r.output &&
               QuickCheck(g, p, compiled, r.node, val.producer);
      }
      default: return false;
    }
  };
  bool straight = true;
  for (int i = 0; straight && i < arity; ++i) straight = operand(i, i);
  if (straight) return true;
  return cn.def->commutative && arity == 2 && operand(0, 1) && operand(1, 0);
}

// Rule inputs read anywhere below pattern node `pn`.
void SubtreeInputs(const rules::Pattern& p, int pn, std::vector<int>* out) {
  for (const auto& r : p.nodes(pn).inputs()) {
    if (r.kind_case() == rules::Ref::kInput) out->push_back(r.input());
    if (r.kind_case() == rules::Ref::kNode) SubtreeInputs(p, r.node().node(), out);
  }
}

// Replacing the match must not create a cycle: no bound input may depend on
// a matched node (possible when a multi-output pattern matches two nodes of
// which one feeds the other through unmatched nodes).
bool IsConvex(const Graph& g, const std::vector<int>& topo_pos, const std::vector<NodeId>& used,
              const std::vector<ValueId>& inputs) {
  // A path from a matched node to an input's producer only visits nodes
  // after the earliest matched node in topological order.
  int min_pos = INT32_MAX;
  for (NodeId n : used) min_pos = std::min(min_pos, topo_pos[n]);
  std::vector<NodeId> seen, stack;
  for (ValueId v : inputs)
    if (v != kNoValue && g.value(v).producer != kNoNode) stack.push_back(g.value(v).producer);
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (topo_pos[n] < min_pos) continue;
    if (std::find(seen.begin(), seen.end(), n) != seen.end()) continue;
    seen.push_back(n);
    if (std::find(used.begin(), used.end(), n) != used.end()) return false;
    for (ValueId in : g.node(n).inputs)
      if (in != kNoValue && g.value(in).producer != kNoNode) stack.push_back(g.value(in).producer);
  }
  return true;
}

bool Convex(const State& s) { return IsConvex(s.g, s.topo_pos, s.used, s.inputs); }

// The two parts of an unconnected pattern (e.g. two parallel convolutions to
// merge) are matched only within this many steps of each other: merging far
// apart ops is never worth it, and enumerating every pair is quadratic in
// the graph (a chain of 1000 Relus has 500,000 pairs). At most
// FindAllAfter's region radius, so that incremental matching stays exact.
constexpr int kParallelRadius = 4;
constexpr int kRegionRadius = 4;
static_assert(kParallelRadius <= kRegionRadius, "incremental matching needs the region to cover the pairs");

// Nodes within `radius` steps of `from` along data edges and between readers
// of one value (the adjacency of FindAllAfter's region), `from` included,
// sorted.
using Consumers = std::vector<std::vector<std::pair<NodeId, int>>>;

// Calls `visit` with every neighbour of node `n`: the producers of its
// inputs, the other readers of its inputs, the readers of its outputs. The
// relation is symmetric; Neighbourhood and the incremental-matching regions
// both use it (FindAllAfter's bounds rely on that).
template <class Visit>
void ForEachNeighbour(const Graph& g, const Consumers& consumers, NodeId n, Visit&& visit) {
  for (ValueId in : g.node(n).inputs) {
    if (in == kNoValue) continue;
    visit(g.value(in).producer);
    for (auto [c, idx] : consumers[in]) visit(c);
  }
  for (ValueId o : g.node(n).outputs)
    for (auto [c, idx] : consumers[o]) visit(c);
}

// Marks in `in` every node within `radius` neighbour steps of `frontier`
// (nodes already marked are not expanded again).
void GrowRegion(const Graph& g, const Consumers& consumers, std::vector<NodeId> frontier, int radius,
                std::vector<char>* in) {
  for (int step = 0; step < radius && !frontier.empty(); ++step) {
    std::vector<NodeId> next;
    for (NodeId n : frontier)
      ForEachNeighbour(g, consumers, n, [&](NodeId m) {
        if (m != kNoNode && !(*in)[m]) {
          (*in)[m] = 1;
          next.push_back(m);
        }
      });
    frontier = std::move(next);
  }
}

std::vector<NodeId> Neighbourhood(const Graph& g, const Consumers& consumers, NodeId from, int radius) {
  std::vector<NodeId> out{from};
  std::unordered_set<NodeId> seen{from};
  std::vector<NodeId> frontier{from};
  for (int step = 0; step < radius && !frontier.empty(); ++step) {
    std::vector<NodeId> next;
    for (NodeId n : frontier)
      ForEachNeighbour(g, consumers, n, [&](NodeId m) {
        if (m != kNoNode && seen.insert(m).second) {
          out.push_back(m);
          next.push_back(m);
        }
      });
    frontier = std::move(next);
  }
  std::sort(out.begin(), out.end());
  return out;
}

// Intermediate values (outputs of matched nodes that are not pattern
// outputs) must only feed matched nodes and not be graph outputs.
bool Closed(const State& s) {
  std::set<ValueId> pattern_outputs;
  for (const auto& r : s.p.outputs())
    if (r.kind_case() == rules::Ref::kNode)
      pattern_outputs.insert(s.g.node(s.nodes[r.node().node()]).outputs[r.node().output()]);
  std::set<ValueId> graph_outputs(s.g.outputs().begin(), s.g.outputs().end());
  for (NodeId gn : s.nodes) {
    for (ValueId out : s.g.node(gn).outputs) {
      if (pattern_outputs.count(out)) continue;
      if (graph_outputs.count(out)) return false;
      for (auto [consumer, idx] : s.consumers[out])
        if (!s.Used(consumer)) return false;
    }
  }
  return true;
}

}  // namespace

Matcher::Matcher(const std::vector<rules::Rule>& rules, bool both_directions, std::vector<char> enabled)
    : rules_(rules), enabled_(std::move(enabled)), both_(both_directions) {
  RLFLOW_CHECK(enabled_.empty() || enabled_.size() == rules_.size(), "Matcher: ", enabled_.size(),
               " enabled flags for ", rules_.size(), " rules");
  for (const rules::Rule& rule : rules_) {
    std::array<std::vector<CompiledNode>, 2> sides;
    for (int side = 0; side < 2; ++side) {
      const rules::Pattern& p = side == 0 ? rule.source() : rule.target();
      for (const auto& pn : p.nodes()) {
        CompiledNode cn;
        cn.def = OpRegistry::Global().FindQualified(pn.op());
        cn.op = pn.op();
        cn.num_outputs = pn.num_outputs();
        for (const auto& r : pn.inputs()) {
          CompiledNode::Operand o;
          o.kind = static_cast<int>(r.kind_case());
          if (r.kind_case() == rules::Ref::kNode) {
            o.node = r.node().node();
            o.output = r.node().output();
          }
          cn.operands.push_back(o);
        }
        for (const auto& a : pn.attrs()) {
          if (IsAttributeVariable(a))
            cn.attr_vars[a.name()] = a.var();
          else if (IsDimAttribute(a))
            cn.attr_dims[a.name()] = a.dim();
          else
            cn.attrs[a.name()] = AttributeFromProto(a);
        }
        sides[side].push_back(std::move(cn));
      }
    }
    compiled_.push_back(std::move(sides));
    std::array<bool, 2> matchable{};
    std::array<int, 2> anchor{-1, -1};
    for (int side = 0; side < 2; ++side) {
      const rules::Pattern& p = side == 0 ? rule.source() : rule.target();
      matchable[side] =
          p.nodes_size() > 0 && p.outputs_size() > 0 && this->enabled(static_cast<int>(matchable_.size()));
      for (const auto& r : p.outputs()) matchable[side] = matchable[side] && r.kind_case() == rules::Ref::kNode;
      if (matchable[side]) anchor[side] = p.outputs(0).node().node();
    }
    matchable_.push_back(matchable);
    anchor_node_.push_back(anchor);
    // Connected: every pattern node reachable from every other along data
    // edges or a shared rule input (so a match lies within a few steps).
    std::array<bool, 2> connected{};
    for (int side = 0; side < 2; ++side) {
      const rules::Pattern& p = side == 0 ? rule.source() : rule.target();
      int n = p.nodes_size();
      std::vector<int> parent(n);
      for (int k = 0; k < n; ++k) parent[k] = k;
      std::function<int(int)> find = [&](int x) { return parent[x] == x ? x : parent[x] = find(parent[x]); };
      std::map<int, int> reader_of_input;
      for (int k = 0; k < n; ++k)
        for (const auto& r : p.nodes(k).inputs()) {
          if (r.kind_case() == rules::Ref::kNode) parent[find(k)] = find(r.node().node());
          if (r.kind_case() == rules::Ref::kInput) {
            auto it = reader_of_input.find(r.input());
            if (it == reader_of_input.end())
              reader_of_input[r.input()] = k;
            else
              parent[find(k)] = find(it->second);
          }
        }
      bool ok = true;
      for (int k = 1; k < n; ++k) ok = ok && find(k) == find(0);
      connected[side] = ok;
    }
    connected_.push_back(connected);
    divisors_.push_back(DivisorInputs(rule));
    bounds_.push_back(UpperBounds(rule));
  }
  // Rule sides by the op of their anchor (first output's node) and, within
  // an op, by what the quick check of the anchor looks at (QuickKey): the
  // sides of one group pass it at the same graph nodes, so incremental
  // matching checks each node once per group.
  std::map<std::string, int> op_ids;
  std::vector<std::map<std::string, int>> group_ids;
  for (int r = 0; r < static_cast<int>(rules_.size()); ++r)
    for (int side = 0; side < (both_ ? 2 : 1); ++side) {
      if (!matchable_[r][side]) continue;
      const std::vector<CompiledNode>& compiled = compiled_[r][side];
      const int pn = anchor_node_[r][side];
      auto [op, added] = op_ids.emplace(compiled[pn].op, static_cast<int>(anchor_groups_.size()));
      if (added) {
        anchor_ops_.push_back(compiled[pn].op);
        anchor_groups_.emplace_back();
        group_ids.emplace_back();
      }
      std::vector<AnchorGroup>& groups = anchor_groups_[op->second];
      auto [g, fresh] = group_ids[op->second].emplace(QuickKey(compiled, pn), static_cast<int>(groups.size()));
      if (fresh) groups.push_back(AnchorGroup{r, side == 1, {}});
      groups[g->second].sides.push_back({r, side == 1});
    }
}

// Everything QuickCheck reads below pattern node `pn`.
std::string Matcher::QuickKey(const std::vector<CompiledNode>& compiled, int pn) {
  const CompiledNode& cn = compiled[pn];
  std::string k = cn.op + "/" + std::to_string(cn.num_outputs) + "{";
  for (const auto& [name, a] : cn.attrs) k += name + "=" + std::to_string(a.Hash()) + ":" + a.ToString() + ";";
  for (const auto& [name, var] : cn.attr_vars) k += name + "=?;";
  for (const auto& [name, dim] : cn.attr_dims) k += name + "=" + DimToString(dim) + ";";
  k += "}(";
  for (const CompiledNode::Operand& o : cn.operands) {
    k += std::to_string(o.kind);
    if (o.kind == rules::Ref::kNode) k += "." + std::to_string(o.output) + ":" + QuickKey(compiled, o.node);
    k += ",";
  }
  return k + ")";
}

void Matcher::FindRule(const Graph& g, int rule_index, bool reverse, std::vector<Match>* out) const {
  FindRule(g, Index(g), rule_index, reverse, out);
}

Matcher::GraphIndex Matcher::Index(const Graph& g) {
  GraphIndex index;
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    if (!g.node(n).opaque()) index.by_op[QualifiedOp(g.node(n).domain, g.node(n).op)].push_back(n);
  index.consumers = g.Consumers();
  index.topo_pos.assign(g.num_nodes(), 0);
  std::vector<NodeId> order = g.TopologicalOrder();
  for (size_t k = 0; k < order.size(); ++k) index.topo_pos[order[k]] = static_cast<int>(k);
  return index;
}

void Matcher::FindRule(const Graph& g, const GraphIndex& index, int rule_index, bool reverse, std::vector<Match>* out,
                       const std::vector<char>* region, RegionMode mode,
                       const std::vector<NodeId>* anchor_nodes) const {
  const auto& consumers = index.consumers;
  const auto& by_op = index.by_op;
  const rules::Rule& rule = rules_[rule_index];
  const rules::Pattern& p = reverse ? rule.target() : rule.source();
  const std::vector<CompiledNode>& compiled = compiled_[rule_index][reverse ? 1 : 0];
  // No nodes, or an output that is a bare input: nothing to match.
  if (!matchable_[rule_index][reverse ? 1 : 0]) return;
  // Anchor: the first output's node, tried at every graph node of its op.
  // The anchor's pattern node, from the compiled copy (the rule protos are
  // touched only for anchors that pass the quick check).
  const int anchor_pn = anchor_node_[rule_index][reverse ? 1 : 0];
  const std::vector<NodeId>* anchor_list = anchor_nodes;
  if (anchor_list == nullptr) {
    auto anchors = by_op.find(compiled[anchor_pn].op);
    if (anchors == by_op.end()) return;
    anchor_list = &anchors->second;
  }
  static const std::vector<NodeId> kNone;
  std::set<std::vector<NodeId>> seen;
  for (NodeId gn : *anchor_list) {
    if (mode == RegionMode::kAnchorInside && !(*region)[gn]) continue;
    if (mode == RegionMode::kOtherOutputInside && (*region)[gn]) continue;
    if (!QuickCheck(g, p, compiled, anchor_pn, gn)) continue;
    const rules::Ref& anchor = p.outputs(0);
    State s{g,
            rule,
            p,
            compiled,
            consumers,
            std::vector<NodeId>(p.nodes_size(), kNoNode),
            std::vector<ValueId>(rule.inputs_size(), kNoValue),
            {},
            {},
            {},
            {},
            index.topo_pos};
    std::vector<NodeId> near;  // the anchor's neighbourhood, for unconnected parts
    // Remaining outputs are matched after the anchor, each against graph
    // nodes that read an already-bound input (or any node of its op).
    std::function<bool(int)> match_outputs = [&](int i) -> bool {
      if (i == p.outputs_size()) {
        for (NodeId n : s.nodes)
          if (n == kNoNode) return false;  // a pattern node not reachable from outputs
        SymbolBinding bound = s.symbols;   // DimsHold may bind more; restored for the next candidate
        bool ok = DimsHold(s) && AttrDimsHold(s) && NonzeroDivisors(s, divisors_[rule_index]) &&
                  BoundsHold(s, bounds_[rule_index]) && Closed(s) && Convex(s) && seen.insert(s.nodes).second;
        if (!ok) {
          s.symbols = std::move(bound);
          return false;
        }
        Match m;
        m.rule = rule_index;
        m.reverse = reverse;
        m.nodes = s.nodes;
        m.inputs = s.inputs;
        m.symbols = s.symbols;
        m.attrs = s.attrs;
        out->push_back(std::move(m));
        s.symbols = std::move(bound);
        return false;  // keep enumerating
      }
      const rules::Ref& r = p.outputs(i);
      auto it = by_op.find(p.nodes(r.node().node()).op());
      const std::vector<NodeId>* cands = it == by_op.end() ? &kNone : &it->second;
      // If the output's subtree reads an input bound already, only nodes a
      // few steps downstream of that value can match.
      std::vector<NodeId> local;
      std::vector<int> sub_inputs;
      SubtreeInputs(p, r.node().node(), &sub_inputs);
      std::vector<ValueId> frontier;
      for (int in : sub_inputs)
        if (s.inputs[in] != kNoValue) frontier.push_back(s.inputs[in]);
      if (!frontier.empty()) {
        const std::string& op = p.nodes(r.node().node()).op();
        for (int depth = 0; depth < p.nodes_size() && !frontier.empty(); ++depth) {
          std::vector<ValueId> next;
          for (ValueId v : frontier)
            for (auto [c, idx] : consumers[v]) {
              if (g.node(c).op == op) local.push_back(c);
              for (ValueId o : g.node(c).outputs) next.push_back(o);
            }
          frontier = std::move(next);
        }
        std::sort(local.begin(), local.end());
        local.erase(std::unique(local.begin(), local.end()), local.end());
        cands = &local;
      } else if (!connected_[rule_index][reverse ? 1 : 0]) {
        if (near.empty()) near = Neighbourhood(g, consumers, gn, kParallelRadius);
        const std::string& op = p.nodes(r.node().node()).op();
        for (NodeId n : near)
          if (g.node(n).op == op) local.push_back(n);
        cands = &local;
      }
      for (NodeId cand : *cands) {
        if (mode == RegionMode::kOtherOutputInside && !(*region)[cand]) continue;
        if (!QuickCheck(g, p, compiled, r.node().node(), cand)) continue;
        ValueId v = g.node(cand).outputs[r.node().output()];
        if (MatchRef(s, r, v, [&] { return match_outputs(i + 1); })) return true;
      }
      return false;
    };
    MatchRef(s, anchor, g.node(gn).outputs[anchor.node().output()], [&] { return match_outputs(1); });
  }
}

namespace {
bool MatchLess(const Match& a, const Match& b) {
  if (a.rule != b.rule) return a.rule < b.rule;
  if (a.reverse != b.reverse) return !a.reverse;
  return a.nodes < b.nodes;
}
}  // namespace

std::vector<Match> Matcher::FindAll(const Graph& g) const {
  std::vector<Match> out;
  GraphIndex index = Index(g);
  for (int r = 0; r < static_cast<int>(rules_.size()); ++r) {
    FindRule(g, index, r, false, &out);
    if (both_) FindRule(g, index, r, true, &out);
  }
  std::stable_sort(out.begin(), out.end(), MatchLess);
  return out;
}

NodeId Matcher::Anchor(const Match& m) const {
  const rules::Rule& rule = rules_.at(m.rule);
  const rules::Pattern& p = m.reverse ? rule.target() : rule.source();
  return m.nodes.at(p.outputs(0).node().node());
}

std::vector<Match> Matcher::FindAllAfter(const Graph& g, const std::vector<Match>& parent,
                                         const ApplyInfo& info) const {
  GraphIndex index = Index(g);
  // The region: nodes within a few steps of a changed node (along data
  // edges, and between readers of one value). A match anchored outside it
  // touches nothing that changed, so it is the parent's match, renumbered.
  std::vector<char> region(g.num_nodes(), 0);
  std::vector<NodeId> frontier;
  for (NodeId n : info.changed)
    if (n != kNoNode && !region[n]) {
      region[n] = 1;
      frontier.push_back(n);
    }
  GrowRegion(g, index.consumers, std::move(frontier), kRegionRadius, &region);
  // Connected patterns: parent matches anchored outside the region are kept,
  // those anchored inside found again. Patterns of two unconnected parts
  // (at most two outputs, by construction of the generator): parent matches
  // entirely outside the region are kept; matches anchored inside, or with
  // the other output inside, are found again.
  std::vector<Match> out;
  for (const Match& m : parent) {
    bool connected = connected_[m.rule][m.reverse ? 1 : 0];
    Match c = m;
    bool alive = true, inside = false;
    for (NodeId& n : c.nodes) {
      n = n < static_cast<NodeId>(info.node_map.size()) ? info.node_map[n] : kNoNode;
      alive = alive && n != kNoNode;
      inside = inside || (n != kNoNode && region[n]);
    }
    if (!alive || region[Anchor(c)] || (!connected && inside)) continue;
    for (ValueId& v : c.inputs) {
      v = v >= 0 && v < static_cast<ValueId>(info.value_map.size()) ? info.value_map[v] : kNoValue;
      alive = alive && v != kNoValue;
    }
    // Unconnected parts far apart can still become dependent through the
    // rewritten region (a new path between them): check again.
    if (alive && !connected && !IsConvex(g, index.topo_pos, c.nodes, c.inputs)) alive = false;
    // ... or further apart than kParallelRadius.
    if (alive && !connected) {
      const rules::Rule& rule = rules_.at(c.rule);
      const rules::Pattern& p = c.reverse ? rule.target() : rule.source();
      std::vector<NodeId> near = Neighbourhood(g, index.consumers, Anchor(c), kParallelRadius);
      for (int o = 1; o < p.outputs_size(); ++o)
        if (!std::binary_search(near.begin(), near.end(), c.nodes.at(p.outputs(o).node().node()))) alive = false;
    }
    if (alive) out.push_back(std::move(c));
  }
  // New matches: connected patterns anchored inside the region; patterns
  // of two unconnected parts also anchored outside it with their other
  // output inside. The other part of such a match lies within
  // kParallelRadius of its anchor (FindRule: it shares no input with the
  // anchor's part, so it is looked for in the anchor's Neighbourhood, a
  // symmetric relation), so only anchors within kParallelRadius of the
  // region can have one. Anchors are tried per op, in ascending node order
  // as FindRule would; the result is sorted below.
  std::vector<char> near = region;
  {
    std::vector<NodeId> ring;
    for (NodeId n = 0; n < g.num_nodes(); ++n)
      if (region[n]) ring.push_back(n);
    GrowRegion(g, index.consumers, std::move(ring), kParallelRadius, &near);
  }
  for (size_t op = 0; op < anchor_ops_.size(); ++op) {
    auto nodes = index.by_op.find(anchor_ops_[op]);
    if (nodes == index.by_op.end()) continue;
    std::vector<NodeId> inside, outside_near;
    for (NodeId n : nodes->second) {
      if (region[n])
        inside.push_back(n);
      else if (near[n])
        outside_near.push_back(n);
    }
    if (inside.empty() && outside_near.empty()) continue;
    for (const AnchorGroup& group : anchor_groups_[op]) {
      const std::vector<CompiledNode>& compiled = compiled_[group.rule][group.reverse ? 1 : 0];
      const rules::Pattern& p = group.reverse ? rules_[group.rule].target() : rules_[group.rule].source();
      const int pn = anchor_node_[group.rule][group.reverse ? 1 : 0];
      std::vector<NodeId> pass_inside, pass_near;
      for (NodeId n : inside)
        if (QuickCheck(g, p, compiled, pn, n)) pass_inside.push_back(n);
      bool any_unconnected = false;
      for (const auto& [r, reverse] : group.sides) any_unconnected = any_unconnected || !connected_[r][reverse ? 1 : 0];
      if (any_unconnected)
        for (NodeId n : outside_near)
          if (QuickCheck(g, p, compiled, pn, n)) pass_near.push_back(n);
      if (pass_inside.empty() && pass_near.empty()) continue;
      for (const auto& [r, reverse] : group.sides) {
        if (!pass_inside.empty())
          FindRule(g, index, r, reverse, &out, &region, RegionMode::kAnchorInside, &pass_inside);
        if (!connected_[r][reverse ? 1 : 0] && !pass_near.empty())
          FindRule(g, index, r, reverse, &out, &region, RegionMode::kOtherOutputInside, &pass_near);
      }
    }
  }
  std::stable_sort(out.begin(), out.end(), MatchLess);
  return out;
}

namespace {

// Adds the nodes of pattern `to` to `g`, reading rule inputs from `inputs`;
// returns the values of the pattern's outputs.
std::vector<ValueId> AddPattern(Graph& g, const rules::Rule& rule, const rules::Pattern& to,
                                const std::vector<ValueId>& inputs, const AttrBinding& bound,
                                const SymbolBinding& symbols) {
  // Floating constants take the element type of the match's first
  // floating input.
  DType float_dtype = DType::kUndefined;
  for (ValueId in : inputs)
    if (float_dtype == DType::kUndefined && in != kNoValue && IsFloatingPoint(g.value(in).type.dtype))
      float_dtype = g.value(in).type.dtype;
  std::vector<ValueId> constants;
  for (int k = 0; k < to.constants_size(); ++k)
    constants.push_back(
        g.AddInitializer(g.UniqueName("rule_const"), ConstantData(to.constants(k), symbols, float_dtype)));
  std::vector<std::vector<ValueId>> outs;
  auto resolve = [&](const rules::Ref& r) -> ValueId {
    switch (r.kind_case()) {
      case rules::Ref::kInput: return inputs.at(r.input());
      case rules::Ref::kConstant: return constants.at(r.constant());
      case rules::Ref::kNode: return outs.at(r.node().node()).at(r.node().output());
      default: return kNoValue;
    }
  };
  for (int k = 0; k < to.nodes_size(); ++k) {
    const rules::Node& pn = to.nodes(k);
    std::vector<ValueId> ins;
    for (const auto& r : pn.inputs()) ins.push_back(resolve(r));
    AttributeMap attrs;
    for (const auto& a : pn.attrs()) {
      if (!IsAttributeVariable(a)) {
        attrs[a.name()] = AttributeAt(a, symbols);
        continue;
      }
      auto it = bound.find(a.var());
      if (it == bound.end()) Fail("rule ", rule.id(), ": attribute variable $", a.var(), " is not bound by the match");
      attrs[a.name()] = it->second;
    }
    const OpDef* def = OpRegistry::Global().FindQualified(pn.op());
    if (def == nullptr) Fail("rule ", rule.id(), ": unknown operator ", pn.op());
    NodeId id = g.AddNode(def->name, ins, pn.num_outputs(), std::move(attrs), g.UniqueName(def->name + "_rw"));
    g.mutable_node(id).domain = def->domain;
    InferAndSetNodeShapes(g, id, *def);
    outs.push_back(g.node(id).outputs);
  }
  std::vector<ValueId> result;
  for (int k = 0; k < to.outputs_size(); ++k) result.push_back(resolve(to.outputs(k)));
  return result;
}

}  // namespace

Graph Matcher::Apply(const Graph& graph, const Match& m, ApplyInfo* info) const {
  std::string why;
  std::optional<Graph> g = TryApply(graph, m, info, &why);
  if (!g) Fail(why);
  return std::move(*g);
}

std::optional<Graph> Matcher::TryApply(const Graph& graph, const Match& m, ApplyInfo* info, std::string* why) const {
  const rules::Rule& rule = rules_.at(m.rule);
  const rules::Pattern& from = m.reverse ? rule.target() : rule.source();
  const rules::Pattern& to = m.reverse ? rule.source() : rule.target();
  Graph g = graph;
  std::vector<ValueId> new_outputs = AddPattern(g, rule, to, m.inputs, m.attrs, m.symbols);
  std::vector<NodeId> changed;
  for (NodeId n = graph.num_nodes(); n < g.num_nodes(); ++n) changed.push_back(n);
  for (ValueId v : m.inputs)
    if (v != kNoValue && graph.value(v).producer != kNoNode) changed.push_back(graph.value(v).producer);
  for (int k = 0; k < from.outputs_size(); ++k) {
    const rules::Ref& fr = from.outputs(k);
    ValueId old_v = graph.node(m.nodes.at(fr.node().node())).outputs.at(fr.node().output());
    ValueId new_v = new_outputs.at(k);
    if (g.value(old_v).type != g.value(new_v).type) {
      if (why != nullptr)
        *why = "rule " + rule.id() + ": rewrite changes type " + g.value(old_v).type.ToString() + " to " +
               g.value(new_v).type.ToString();
      return std::nullopt;
    }
    for (NodeId n = 0; n < graph.num_nodes(); ++n)  // readers rewired to the new value
      for (ValueId in : g.node(n).inputs)
        if (in == old_v) changed.push_back(n);
    g.ReplaceAllUses(old_v, new_v);
  }
  std::vector<NodeId> nmap;
  std::vector<ValueId> vmap;
  g.RemoveDeadCode(&nmap, &vmap);
  if (!g.IsAcyclic()) {
    if (why != nullptr) *why = "rule " + rule.id() + ": the rewrite would make a cycle";
    return std::nullopt;
  }
  if (info != nullptr) {
    info->node_map.assign(nmap.begin(), nmap.begin() + graph.num_nodes());
    info->value_map.assign(vmap.begin(), vmap.begin() + graph.num_values());
    info->changed.clear();
    for (NodeId n : changed)
      if (nmap[n] != kNoNode) info->changed.push_back(nmap[n]);
  }
  return g;
}

Graph Matcher::Replacement(const Graph& graph, const Match& m, const std::vector<TensorDataPtr>* constants) const {
  return Side(graph, m, true, constants);
}

Graph Matcher::Matched(const Graph& graph, const Match& m, const std::vector<TensorDataPtr>* constants) const {
  return Side(graph, m, false, constants);
}

std::vector<ValueId> Matcher::MatchedOutputs(const Graph& graph, const Match& m) const {
  const rules::Rule& rule = rules_.at(m.rule);
  const rules::Pattern& from = m.reverse ? rule.target() : rule.source();
  std::vector<ValueId> out;
  for (const rules::Ref& r : from.outputs())
    out.push_back(graph.node(m.nodes.at(r.node().node())).outputs.at(r.node().output()));
  return out;
}

Graph Matcher::Side(const Graph& graph, const Match& m, bool replacement,
                    const std::vector<TensorDataPtr>* constants) const {
  const rules::Rule& rule = rules_.at(m.rule);
  const rules::Pattern& side = m.reverse == replacement ? rule.source() : rule.target();
  Graph g;
  g.info() = graph.info();
  std::vector<ValueId> inputs;
  for (size_t k = 0; k < m.inputs.size(); ++k) {
    const Value& val = graph.value(m.inputs[k]);
    std::string name = "in" + std::to_string(k);
    TensorDataPtr data = val.initializer;
    if (constants != nullptr && k < constants->size() && (*constants)[k]) data = (*constants)[k];
    inputs.push_back(data ? g.AddInitializer(name, data) : g.AddInput(name, val.type));
    // Costed as it reads the matched value: a permuted view or not.
    if (!data) g.mutable_value(inputs.back()).arrives_permuted = PermutedView(graph, m.inputs[k]);
  }
  g.SetOutputs(AddPattern(g, rule, side, inputs, m.attrs, m.symbols));
  return g;
}

}  // namespace rlflow
