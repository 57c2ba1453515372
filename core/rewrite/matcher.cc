#include "core/rewrite/matcher.h"

#include <algorithm>
#include <functional>
#include <map>
#include <set>

#include "core/error.h"
#include "core/op_registry.h"

namespace rlflow {
namespace {

bool Commutative(const std::string& op) { return op == "Add" || op == "Mul" || op == "Max" || op == "Min"; }

// Effective attribute value: the node's, else the registry default.
const Attribute* Effective(const Node& n, const OpDef& def, const std::string& name) {
  auto it = n.attrs.find(name);
  if (it != n.attrs.end()) return &it->second;
  const AttrSpec* spec = def.FindAttr(name);
  return spec && spec->default_value ? &*spec->default_value : nullptr;
}

// Attributes that only restate the kernel size or defaults compare by value.
bool AttrsMatch(const Node& n, const OpDef& def, const rules::Node& pn) {
  std::map<std::string, Attribute> want;
  for (const auto& a : pn.attrs()) want[a.name()] = AttributeFromProto(a);
  for (const AttrSpec& spec : def.attrs) {
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
  const std::vector<std::vector<std::pair<NodeId, int>>>& consumers;
  std::vector<NodeId> nodes;
  std::vector<ValueId> inputs;
  SymbolBinding symbols;
  std::set<NodeId> used;
};

bool BindInput(State& s, int input, ValueId v) {
  if (s.inputs[input] != kNoValue) return s.inputs[input] == v;
  const rules::TensorVar& var = s.rule.inputs(input);
  const Value& val = s.g.value(v);
  if (val.type.dtype != DTypeFromCode(var.dtype()) || !val.type.IsStatic()) return false;
  if (val.type.rank() != var.shape_size()) return false;
  SymbolBinding added;
  for (int k = 0; k < var.shape_size(); ++k) {
    const rules::Dim& d = var.shape(k);
    int64_t actual = val.type.shape[k];
    if (d.terms_size() == 0) {
      if (d.constant() != actual) return false;
      continue;
    }
    if (d.terms_size() != 1 || d.terms(0).coeff() != 1 || d.constant() != 0) return false;  // inputs use plain symbols
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

bool ConstantMatches(const State& s, const rules::Constant& c, ValueId v) {
  if (!s.g.IsConstant(v)) return false;
  const TensorData& t = *s.g.value(v).initializer;
  if (!IsInteger(t.dtype())) return false;
  std::vector<int64_t> values = t.ToInt64();
  return values.size() == static_cast<size_t>(c.int_values_size()) &&
         std::equal(values.begin(), values.end(), c.int_values().begin());
}

// Matches pattern reference `r` against graph value `v`.
bool MatchRef(State& s, const rules::Ref& r, ValueId v, const std::function<bool()>& k);

bool MatchNode(State& s, int pn, NodeId gn, const std::function<bool()>& k) {
  if (s.nodes[pn] != kNoNode) return s.nodes[pn] == gn && k();
  if (s.used.count(gn)) return false;
  const Node& n = s.g.node(gn);
  const rules::Node& pat = s.p.nodes(pn);
  if (n.opaque() || n.op != pat.op() || !n.domain.empty()) return false;
  if (static_cast<int>(n.inputs.size()) != pat.inputs_size() || static_cast<int>(n.outputs.size()) != pat.num_outputs())
    return false;
  const OpDef* def = OpRegistry::Global().Find("", n.op);
  if (def == nullptr || !AttrsMatch(n, *def, pat)) return false;
  s.nodes[pn] = gn;
  s.used.insert(gn);
  // Operand orders to try.
  std::vector<std::vector<int>> orders = {{}};
  for (int k2 = 0; k2 < pat.inputs_size(); ++k2) orders[0].push_back(k2);
  if (Commutative(n.op) && pat.inputs_size() == 2) orders.push_back({1, 0});
  bool ok = false;
  for (const auto& order : orders) {
    std::vector<ValueId> saved_inputs = s.inputs;
    SymbolBinding saved_symbols = s.symbols;
    std::vector<NodeId> saved_nodes = s.nodes;
    std::set<NodeId> saved_used = s.used;
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
    s.used.erase(gn);
  }
  return ok;
}

bool MatchRef(State& s, const rules::Ref& r, ValueId v, const std::function<bool()>& k) {
  switch (r.kind_case()) {
    case rules::Ref::kOmitted: return v == kNoValue && k();
    case rules::Ref::kConstant: return v != kNoValue && ConstantMatches(s, s.p.constants(r.constant()), v) && k();
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

// Replacing the match must not create a cycle: no bound input may depend on
// a matched node (possible when a multi-output pattern matches two nodes of
// which one feeds the other through unmatched nodes).
bool Convex(const State& s) {
  std::set<NodeId> seen;
  std::vector<NodeId> stack;
  for (ValueId v : s.inputs)
    if (v != kNoValue && s.g.value(v).producer != kNoNode) stack.push_back(s.g.value(v).producer);
  while (!stack.empty()) {
    NodeId n = stack.back();
    stack.pop_back();
    if (!seen.insert(n).second) continue;
    if (s.used.count(n)) return false;
    for (ValueId in : s.g.node(n).inputs)
      if (in != kNoValue && s.g.value(in).producer != kNoNode) stack.push_back(s.g.value(in).producer);
  }
  return true;
}

// Intermediate values (outputs of matched nodes that are not pattern
// outputs) must only feed matched nodes and not be graph outputs.
bool Closed(const State& s) {
  std::set<ValueId> pattern_outputs;
  for (const auto& r : s.p.outputs())
    if (r.kind_case() == rules::Ref::kNode) pattern_outputs.insert(s.g.node(s.nodes[r.node().node()]).outputs[r.node().output()]);
  std::set<ValueId> graph_outputs(s.g.outputs().begin(), s.g.outputs().end());
  for (NodeId gn : s.nodes) {
    for (ValueId out : s.g.node(gn).outputs) {
      if (pattern_outputs.count(out)) continue;
      if (graph_outputs.count(out)) return false;
      for (auto [consumer, idx] : s.consumers[out])
        if (!s.used.count(consumer)) return false;
    }
  }
  return true;
}

}  // namespace

Matcher::Matcher(const std::vector<rules::Rule>& rules, bool both_directions) : rules_(rules), both_(both_directions) {}

void Matcher::FindRule(const Graph& g, int rule_index, bool reverse, std::vector<Match>* out) const {
  FindRule(g, g.Consumers(), OpIndex(g), rule_index, reverse, out);
}

std::map<std::string, std::vector<NodeId>> Matcher::OpIndex(const Graph& g) {
  std::map<std::string, std::vector<NodeId>> index;
  for (NodeId n = 0; n < g.num_nodes(); ++n)
    if (!g.node(n).opaque() && g.node(n).domain.empty()) index[g.node(n).op].push_back(n);
  return index;
}

void Matcher::FindRule(const Graph& g, const std::vector<std::vector<std::pair<NodeId, int>>>& consumers,
                       const std::map<std::string, std::vector<NodeId>>& by_op, int rule_index, bool reverse,
                       std::vector<Match>* out) const {
  const rules::Rule& rule = rules_[rule_index];
  const rules::Pattern& p = reverse ? rule.target() : rule.source();
  if (p.nodes_size() == 0) return;
  for (const auto& r : p.outputs())
    if (r.kind_case() != rules::Ref::kNode) return;  // an output that is a bare input cannot be matched
  // Anchor: the first output's node, tried at every graph node of its op.
  const rules::Ref& anchor = p.outputs(0);
  auto anchors = by_op.find(p.nodes(anchor.node().node()).op());
  if (anchors == by_op.end()) return;
  static const std::vector<NodeId> kNone;
  std::set<std::vector<NodeId>> seen;
  for (NodeId gn : anchors->second) {
    State s{g, rule, p, consumers, std::vector<NodeId>(p.nodes_size(), kNoNode),
            std::vector<ValueId>(rule.inputs_size(), kNoValue), {}, {}};
    // Remaining outputs are matched after the anchor, each against graph
    // nodes that read an already-bound input (or any node of its op).
    std::function<bool(int)> match_outputs = [&](int i) -> bool {
      if (i == p.outputs_size()) {
        for (NodeId n : s.nodes)
          if (n == kNoNode) return false;  // a pattern node not reachable from outputs
        if (!Closed(s) || !Convex(s)) return false;
        if (!seen.insert(s.nodes).second) return false;
        Match m;
        m.rule = rule_index;
        m.reverse = reverse;
        m.nodes = s.nodes;
        m.inputs = s.inputs;
        m.symbols = s.symbols;
        out->push_back(std::move(m));
        return false;  // keep enumerating
      }
      const rules::Ref& r = p.outputs(i);
      auto it = by_op.find(p.nodes(r.node().node()).op());
      for (NodeId cand : it == by_op.end() ? kNone : it->second) {
        ValueId v = g.node(cand).outputs[r.node().output()];
        if (MatchRef(s, r, v, [&] { return match_outputs(i + 1); })) return true;
      }
      return false;
    };
    MatchRef(s, anchor, g.node(gn).outputs[anchor.node().output()], [&] { return match_outputs(1); });
  }
}

std::vector<Match> Matcher::FindAll(const Graph& g) const {
  std::vector<Match> out;
  auto consumers = g.Consumers();
  auto by_op = OpIndex(g);
  for (int r = 0; r < static_cast<int>(rules_.size()); ++r) {
    FindRule(g, consumers, by_op, r, false, &out);
    if (both_) FindRule(g, consumers, by_op, r, true, &out);
  }
  return out;
}

Graph Matcher::Apply(const Graph& graph, const Match& m) const {
  const rules::Rule& rule = rules_.at(m.rule);
  const rules::Pattern& from = m.reverse ? rule.target() : rule.source();
  const rules::Pattern& to = m.reverse ? rule.source() : rule.target();
  Graph g = graph;
  std::vector<ValueId> constants;
  for (int k = 0; k < to.constants_size(); ++k) {
    const rules::Constant& c = to.constants(k);
    std::vector<int64_t> v(c.int_values().begin(), c.int_values().end());
    constants.push_back(g.AddInitializer(g.UniqueName("rule_const"), TensorData::FromInt64(v, Shape(c.dims().begin(), c.dims().end()))));
  }
  std::vector<std::vector<ValueId>> outs;
  auto resolve = [&](const rules::Ref& r) -> ValueId {
    switch (r.kind_case()) {
      case rules::Ref::kInput: return m.inputs.at(r.input());
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
    for (const auto& a : pn.attrs()) attrs[a.name()] = AttributeFromProto(a);
    NodeId id = g.AddNode(pn.op(), ins, pn.num_outputs(), std::move(attrs), g.UniqueName(pn.op() + "_rw"));
    const OpDef* def = OpRegistry::Global().Find("", pn.op());
    if (def == nullptr) Fail("rule ", rule.id(), ": unknown operator ", pn.op());
    InferAndSetNodeShapes(g, id, *def);
    outs.push_back(g.node(id).outputs);
  }
  for (int k = 0; k < from.outputs_size(); ++k) {
    const rules::Ref& fr = from.outputs(k);
    ValueId old_v = graph.node(m.nodes.at(fr.node().node())).outputs.at(fr.node().output());
    ValueId new_v = resolve(to.outputs(k));
    if (g.value(old_v).type != g.value(new_v).type)
      Fail("rule ", rule.id(), ": rewrite changes type ", g.value(old_v).type.ToString(), " to ",
           g.value(new_v).type.ToString());
    g.ReplaceAllUses(old_v, new_v);
  }
  g.RemoveDeadCode();
  g.TopologicalOrder();  // throws on a cycle
  return g;
}

}  // namespace rlflow
