#include "verifier/verify.h"

#include <z3++.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/parallel.h"
#include "core/symbolic.h"
#include "runtime/executor.h"

namespace rlflow::verifier {

const char* OutcomeName(Outcome o) {
  switch (o) {
    case Outcome::kProved: return "proved";
    case Outcome::kRefutedNumeric: return "refuted (float64 check)";
    case Outcome::kRefutedZ3: return "refuted (Z3 counterexample)";
    case Outcome::kTimeout: return "timed out";
    case Outcome::kPrunedDuplicate: return "pruned: duplicate up to renaming";
    case Outcome::kPrunedCommonSubgraph: return "pruned: common subgraph";
    case Outcome::kPrunedCommonContext: return "pruned: common context";
    case Outcome::kPrunedComposite: return "pruned: shares an inner subgraph (composite)";
    case Outcome::kError: return "error";
  }
  return "?";
}

namespace {

// |x|. Not z3::abs: Debian's z3++.h (4.8.12) passes Z3_mk_ge's result, not
// yet reference-counted, to Z3_mk_ite beside the temporary -x, and where
// the compiler evaluates the arguments left to right (clang) creating -x
// frees it first: Z3 stopped on "UNEXPECTED CODE WAS REACHED" (ast.cpp 414)
// under the clang build. Every intermediate here is a counted z3::expr.
z3::expr Abs(const z3::expr& x) {
  const z3::expr non_negative = x >= 0;
  const z3::expr negated = -x;
  return z3::ite(non_negative, x, negated);
}

SymbolBinding Bind(const rules::Rule& rule, const std::map<std::string, int64_t>& values, int64_t fallback) {
  SymbolBinding b;
  for (const auto& s : RuleSymbols(rule)) {
    auto it = values.find(s);
    b[s] = it == values.end() ? fallback : it->second;
  }
  return b;
}

uint64_t RuleSeed(const rules::Rule& rule) { return HashString(rule.id()); }

// Random float64 inputs for a side of `rule` (its inputs first, in order),
// those bounded above (UpperBounds) clamped to their bound, so that a
// premise holds and its boundary is hit.
std::vector<at::Tensor> RandomDoubles(const rules::Rule& rule, const Graph& g, uint64_t seed) {
  std::vector<at::Tensor> inputs = RandomInputs(g, seed);
  for (auto& t : inputs) t = t.to(at::kDouble);
  for (const auto& [k, bound] : UpperBounds(rule))
    if (k < static_cast<int>(inputs.size())) inputs[static_cast<size_t>(k)].clamp_max_(bound);
  return inputs;
}

double MaxError(const std::vector<at::Tensor>& a, const std::vector<at::Tensor>& b) {
  if (a.size() != b.size()) return std::numeric_limits<double>::infinity();
  double worst = 0;
  for (size_t k = 0; k < a.size(); ++k) worst = std::max(worst, RelativeError(a[k], b[k]));
  return worst;
}

constexpr double kNumericTolerance = 1e-9;

// Replaces the outputs of node `name` by fresh graph inputs (appended).
void AbstractNode(Graph& g, const std::string& name) {
  NodeId target = kNoNode;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).name == name) target = id;
  if (target == kNoNode) Fail("AbstractNode: no node ", name);
  std::vector<ValueId> outs = g.node(target).outputs;
  for (size_t k = 0; k < outs.size(); ++k) {
    ValueId fresh = g.AddInput("abstract_" + std::to_string(k), g.value(outs[k]).type);
    g.ReplaceAllUses(outs[k], fresh);
  }
  g.RemoveDeadCode();
}

// Does the rule still hold with node `src_node`/`tgt_node` (same expression)
// replaced by a free input on both sides?
bool HoldsWhenAbstracted(const rules::Rule& rule, int src_node, int tgt_node) {
  for (const SymbolBinding& b : CheckBindings(rule)) {
    Graph s = InstantiatePattern(rule, rule.source(), b, DType::kFloat64);
    Graph t = InstantiatePattern(rule, rule.target(), b, DType::kFloat64);
    AbstractNode(s, "n" + std::to_string(src_node));
    AbstractNode(t, "n" + std::to_string(tgt_node));
    if (s.inputs().size() != t.inputs().size()) return false;
    std::vector<at::Tensor> in = RandomDoubles(rule, s, RuleSeed(rule) + 17);
    if (MaxError(Executor(s).Run(in), Executor(t).Run(in)) > kNumericTolerance) return false;
  }
  return true;
}

// A sub-rule from one input position of the two root nodes.
rules::Rule SubRule(const rules::Rule& rule, const rules::Ref& a, const rules::Ref& b) {
  rules::Rule sub;
  *sub.mutable_inputs() = rule.inputs();
  *sub.mutable_source() = rule.source();
  *sub.mutable_target() = rule.target();
  sub.mutable_source()->clear_outputs();
  sub.mutable_target()->clear_outputs();
  *sub.mutable_source()->add_outputs() = a;
  *sub.mutable_target()->add_outputs() = b;
  sub.set_id(rule.id() + ".sub");
  return sub;
}

bool SameRefText(const rules::Rule& rule, const rules::Ref& a, const rules::Ref& b,
                 const std::vector<std::string>& src_expr, const std::vector<std::string>& tgt_expr) {
  if (a.kind_case() != b.kind_case()) return false;
  switch (a.kind_case()) {
    case rules::Ref::kInput: return a.input() == b.input();
    case rules::Ref::kConstant:
      return SerializeDeterministic(rule.source().constants(a.constant())) ==
             SerializeDeterministic(rule.target().constants(b.constant()));
    case rules::Ref::kNode:
      return a.node().output() == b.node().output() && src_expr[a.node().node()] == tgt_expr[b.node().node()];
    default: return a.kind_case() == b.kind_case();
  }
}

// Common context: both roots are the same operator with the same attributes
// and operands except one, and those two operands are equal on their own.
bool CommonContext(const rules::Rule& rule) {
  if (rule.source().outputs_size() != 1) return false;
  const rules::Ref& so = rule.source().outputs(0);
  const rules::Ref& to = rule.target().outputs(0);
  if (so.kind_case() != rules::Ref::kNode || to.kind_case() != rules::Ref::kNode) return false;
  const rules::Node& sn = rule.source().nodes(so.node().node());
  const rules::Node& tn = rule.target().nodes(to.node().node());
  if (sn.op() != tn.op() || sn.inputs_size() != tn.inputs_size() || so.node().output() != to.node().output())
    return false;
  if (sn.attrs_size() != tn.attrs_size()) return false;
  for (int k = 0; k < sn.attrs_size(); ++k)
    if (SerializeDeterministic(sn.attrs(k)) != SerializeDeterministic(tn.attrs(k))) return false;
  std::vector<std::string> se = NodeExpressions(rule, rule.source()), te = NodeExpressions(rule, rule.target());
  int differing = -1;
  for (int k = 0; k < sn.inputs_size(); ++k) {
    if (SameRefText(rule, sn.inputs(k), tn.inputs(k), se, te)) continue;
    if (differing >= 0) return false;
    differing = k;
  }
  if (differing < 0) return false;
  rules::Rule sub = SubRule(rule, sn.inputs(differing), tn.inputs(differing));
  try {
    for (const SymbolBinding& b : CheckBindings(rule))
      if (NumericError(sub, b, RuleSeed(rule) + 29) > kNumericTolerance) return false;
  } catch (const Error&) {
    return false;
  }
  return true;
}

bool IsOutputNode(const rules::Pattern& p, int node) {
  for (const auto& r : p.outputs())
    if (r.kind_case() == rules::Ref::kNode && r.node().node() == node) return true;
  return false;
}

enum class Common { kNone, kFactored, kComposite };

// Sides sharing a sub-expression. kFactored: replacing it by a free input
// on both sides leaves a rule that still holds (a smaller rule implies this
// one). kComposite: TASO's criterion -- an inner sub-expression (not a whole
// side) is shared, and the rule is a composition of smaller ones.
Common CommonSubgraph(const rules::Rule& rule) {
  std::vector<std::string> se = NodeExpressions(rule, rule.source()), te = NodeExpressions(rule, rule.target());
  bool inner_shared = false;
  for (size_t i = 0; i < se.size(); ++i)
    for (size_t j = 0; j < te.size(); ++j)
      if (se[i] == te[j]) {
        try {
          if (HoldsWhenAbstracted(rule, static_cast<int>(i), static_cast<int>(j))) return Common::kFactored;
        } catch (const Error&) {
        }
        inner_shared = inner_shared || (!IsOutputNode(rule.source(), static_cast<int>(i)) &&
                                        !IsOutputNode(rule.target(), static_cast<int>(j)));
      }
  return inner_shared ? Common::kComposite : Common::kNone;
}

// ---- Z3 ----
std::vector<SymTensor> Symbolic(const Graph& g, z3::context& z3, const std::vector<SymTensor>& inputs) {
  std::vector<SymTensor> vals(g.num_values());
  for (size_t k = 0; k < g.inputs().size(); ++k) vals[g.inputs()[k]] = inputs[k];
  for (ValueId v : g.initializers()) vals[v] = SymConstant(z3, *g.value(v).initializer);
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    const OpDef* def = OpRegistry::Global().Find(n.domain, n.op);
    std::vector<SymTensor> args;
    std::vector<const TensorData*> constants;
    for (ValueId in : n.inputs) {
      args.push_back(in == kNoValue ? SymTensor() : vals[in]);
      constants.push_back(in == kNoValue ? nullptr : g.value(in).initializer.get());
    }
    std::vector<SymTensor> outs = RunSymbolic(n, *def, z3, std::move(args), std::move(constants));
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      if (outs[k].shape != g.value(n.outputs[k]).type.shape)
        Fail("node ", n.Describe(), ": symbolic shape ", ShapeToString(outs[k].shape), " differs from ",
             g.value(n.outputs[k]).type.ToString());
      vals[n.outputs[k]] = std::move(outs[k]);
    }
  }
  std::vector<SymTensor> out;
  for (ValueId v : g.outputs()) out.push_back(vals[v]);
  return out;
}

// What the uninterpreted Sqrt of the symbolic semantics is known to be: for
// x >= 0, Sqrt(x) >= 0 and Sqrt(x)^2 = x, for each application in `e` (so
// a rule may divide by the square root of a positive sum). Only those of
// the element being proved: each is a nonlinear premise.
void AddSqrtFacts(const z3::expr& e0, z3::solver* solver) {
  std::set<unsigned> seen;
  std::vector<z3::expr> stack = {e0};
  while (!stack.empty()) {
    z3::expr e = stack.back();
    stack.pop_back();
    if (!e.is_app() || !seen.insert(e.id()).second) continue;
    if (e.num_args() == 1 && e.decl().decl_kind() == Z3_OP_UNINTERPRETED && e.decl().name().str() == "Sqrt")
      solver->add(z3::implies(e.arg(0) >= 0, e >= 0 && e * e == e.arg(0)));
    for (unsigned i = 0; i < e.num_args(); ++i) stack.push_back(e.arg(i));
  }
}

}  // namespace

std::vector<SymbolBinding> ProofBindings(const rules::Rule& rule) {
  return {Bind(rule, {}, 2),
          Bind(rule, {{"n", 1}, {"c", 3}, {"d", 2}, {"h", 3}, {"w", 4}, {"m", 3}, {"k", 2}, {"j", 4}, {"l", 3}}, 3)};
}

std::vector<SymbolBinding> CheckBindings(const rules::Rule& rule) {
  return {Bind(rule, {{"n", 2}, {"c", 3}, {"d", 4}, {"h", 5}, {"w", 6}, {"m", 3}, {"k", 4}, {"j", 5}, {"l", 2}}, 3),
          Bind(rule, {{"n", 1}, {"c", 5}, {"d", 3}, {"h", 4}, {"w", 3}, {"m", 6}, {"k", 3}, {"j", 2}, {"l", 4}}, 4)};
}

double NumericError(const rules::Rule& rule, const SymbolBinding& binding, uint64_t seed) {
  Graph s = InstantiatePattern(rule, rule.source(), binding, DType::kFloat64);
  Graph t = InstantiatePattern(rule, rule.target(), binding, DType::kFloat64);
  std::vector<at::Tensor> in = RandomDoubles(rule, s, seed);
  return MaxError(Executor(s).Run(in), Executor(t).Run(in));
}

Outcome ProveAt(const rules::Rule& rule, const SymbolBinding& binding, const Options& options, uint64_t* rlimit_used,
                bool* by_simplification, std::string* detail) {
  Graph s = InstantiatePattern(rule, rule.source(), binding);
  Graph t = InstantiatePattern(rule, rule.target(), binding);
  z3::context z3;
  std::vector<SymTensor> inputs;
  for (ValueId in : s.inputs()) inputs.push_back(SymVariables(z3, s.value(in).name, s.value(in).type.shape));
  std::vector<SymTensor> a = Symbolic(s, z3, inputs);
  std::vector<SymTensor> b = Symbolic(t, z3, inputs);
  // A rule that divides by an input is proved where that input has no zero
  // (the matcher applies it only there: a constant without zeros).
  z3::expr_vector premises(z3);
  for (int in : DivisorInputs(rule))
    for (const z3::expr& e : inputs[static_cast<size_t>(in)].v) premises.push_back(e != z3.real_val(0));
  // An input bounded above is proved for every value at most its bound.
  for (const auto& [in, bound] : UpperBounds(rule))
    for (const z3::expr& e : inputs[static_cast<size_t>(in)].v) premises.push_back(e <= ExactReal(z3, bound));
  z3::params simp(z3);
  simp.set("som", true);
  simp.set("arith_lhs", true);
  z3::expr_vector differ(z3);
  // A rule with a tolerance (a float32 attribute standing for a real
  // number) is proved to hold within tolerance * (1 + |source|) per element.
  const bool approximate = rule.tolerance() > 0;
  const z3::expr tol = ExactReal(z3, rule.tolerance());
  for (size_t k = 0; k < a.size(); ++k) {
    if (a[k].shape != b[k].shape) {
      *detail = "output shapes differ";
      return Outcome::kRefutedZ3;
    }
    for (size_t i = 0; i < a[k].v.size(); ++i) {
      z3::expr d = (a[k].v[i] - b[k].v[i]).simplify(simp);
      if (d.is_numeral()) {
        if (d.get_decimal_string(6) != "0" && !approximate) {
          *detail = "output " + std::to_string(k) + " element " + std::to_string(i) + " differs by a constant";
          return Outcome::kRefutedZ3;
        }
        if (d.get_decimal_string(6) == "0") continue;
      }
      if (approximate)
        differ.push_back(Abs(a[k].v[i] - b[k].v[i]) > tol * (z3.real_val(1) + Abs(a[k].v[i])));
      else
        differ.push_back(a[k].v[i] != b[k].v[i]);
    }
  }
  if (differ.empty()) {
    *by_simplification = true;
    return Outcome::kProved;
  }
  *by_simplification = false;
  // Elements are checked one at a time, each with a fresh (non-incremental)
  // solver: many small problems are far easier for Z3 than one large
  // disjunction, and incremental solving would lose the nonlinear tactics.
  uint64_t used = 0;
  Outcome outcome = Outcome::kProved;
  for (unsigned k = 0; k < differ.size() && outcome == Outcome::kProved; ++k) {
    z3::solver solver(z3);
    z3::params p(z3);
    p.set("rlimit", static_cast<unsigned>(std::min<uint64_t>(options.rlimit, 4000000000ULL)));
    p.set("timeout", static_cast<unsigned>(options.timeout_ms));
    solver.set(p);
    for (unsigned i = 0; i < premises.size(); ++i) solver.add(premises[i]);
    AddSqrtFacts(differ[k], &solver);
    solver.add(differ[k]);
    z3::check_result r = solver.check();
    z3::stats st = solver.statistics();
    for (unsigned i = 0; i < st.size(); ++i)
      if (st.key(i) == "rlimit count")
        used += static_cast<uint64_t>(st.is_uint(i) ? st.uint_value(i) : st.double_value(i));
    if (r == z3::sat) {
      *detail = "Z3 found a counterexample";
      outcome = Outcome::kRefutedZ3;
    } else if (r == z3::unknown) {
      *detail = "Z3: " + solver.reason_unknown();
      outcome = Outcome::kTimeout;
    }
  }
  *rlimit_used += used;
  return outcome;
}

// ---- attribute-generic rules ----

namespace {

bool IsPool(const std::string& op) { return op == "MaxPool" || op == "AveragePool"; }

// Rule inputs that reach operand `operand` of pattern node `node` (walking
// producers backwards).
void InputsFeeding(const rules::Pattern& p, const rules::Ref& r, std::set<int>* out) {
  if (r.kind_case() == rules::Ref::kInput) {
    out->insert(r.input());
  } else if (r.kind_case() == rules::Ref::kNode) {
    for (const auto& in : p.nodes(r.node().node()).inputs()) InputsFeeding(p, in, out);
  }
}

struct WindowInstance {
  std::map<std::string, int64_t> symbols;
  std::map<std::string, std::vector<int64_t>> attrs;  // pads, strides, dilations / kernel_shape
  int64_t group = 1;
};

std::vector<WindowInstance> ConvInstances(bool with_group) {
  std::vector<WindowInstance> v = {
      {{{"kh", 1}, {"kw", 1}, {"h", 3}, {"w", 3}, {"c", 2}},
       {{"pads", {0, 0, 0, 0}}, {"strides", {1, 1}}, {"dilations", {1, 1}}}},
      {{{"kh", 3}, {"kw", 3}, {"h", 3}, {"w", 3}, {"c", 2}},
       {{"pads", {1, 1, 1, 1}}, {"strides", {1, 1}}, {"dilations", {1, 1}}}},
      {{{"kh", 3}, {"kw", 3}, {"h", 4}, {"w", 4}, {"c", 2}},
       {{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}, {"dilations", {1, 1}}}},
      {{{"kh", 2}, {"kw", 3}, {"h", 4}, {"w", 3}, {"c", 1}},
       {{"pads", {0, 1, 1, 0}}, {"strides", {2, 1}}, {"dilations", {1, 1}}}},
      {{{"kh", 3}, {"kw", 1}, {"h", 3}, {"w", 2}, {"c", 1}},
       {{"pads", {2, 0, 2, 0}}, {"strides", {1, 1}}, {"dilations", {2, 1}}}},
  };
  for (auto& i : v) i.symbols["cg"] = i.symbols["c"];
  if (with_group) {
    v.push_back({{{"kh", 3}, {"kw", 3}, {"h", 3}, {"w", 3}, {"c", 4}, {"cg", 2}},
                 {{"pads", {1, 1, 1, 1}}, {"strides", {2, 2}}, {"dilations", {1, 1}}},
                 2});
    v.push_back({{{"kh", 3}, {"kw", 3}, {"h", 3}, {"w", 3}, {"c", 2}, {"cg", 1}},
                 {{"pads", {1, 1, 1, 1}}, {"strides", {1, 1}}, {"dilations", {1, 1}}},
                 2});
  }
  return v;
}

std::vector<WindowInstance> PoolInstances() {
  return {
      {{{"h", 3}, {"w", 3}}, {{"kernel_shape", {3, 3}}, {"pads", {1, 1, 1, 1}}, {"strides", {1, 1}}}},
      {{{"h", 5}, {"w", 5}}, {{"kernel_shape", {3, 3}}, {"pads", {0, 0, 0, 0}}, {"strides", {2, 2}}}},
      {{{"h", 4}, {"w", 3}}, {{"kernel_shape", {2, 3}}, {"pads", {0, 1, 1, 0}}, {"strides", {2, 1}}}},
      {{{"h", 4}, {"w", 4}}, {{"kernel_shape", {1, 1}}, {"pads", {0, 0, 0, 0}}, {"strides", {2, 2}}}},
  };
}

}  // namespace

std::optional<rules::Rule> Generalise(const rules::Rule& proved, bool with_group, const Options& options) {
  // The window nodes and their effective attributes, from the rule at a proof binding.
  SymbolBinding at = ProofBindings(proved)[0];
  Graph sides[2] = {InstantiatePattern(proved, proved.source(), at), InstantiatePattern(proved, proved.target(), at)};
  const rules::Pattern* patterns[2] = {&proved.source(), &proved.target()};
  bool conv = false, pool = false;
  std::vector<std::string> names;
  std::map<std::string, Attribute> common;
  std::vector<int64_t> kernel;
  std::set<int> weight_inputs;
  for (int side = 0; side < 2; ++side) {
    const rules::Pattern& p = *patterns[side];
    for (int k = 0; k < p.nodes_size(); ++k) {
      const std::string& op = p.nodes(k).op();
      if (op != "Conv" && !IsPool(op)) continue;
      (op == "Conv" ? conv : pool) = true;
      // InstantiatePattern adds the pattern's nodes in order.
      const Graph& g = sides[side];
      NodeId id = static_cast<NodeId>(k);
      std::vector<std::string> attrs = op == "Conv" ? std::vector<std::string>{"dilations", "pads", "strides"}
                                                    : std::vector<std::string>{"kernel_shape", "pads", "strides"};
      if (op == "Conv" && with_group) attrs.push_back("group");
      for (const std::string& name : attrs) {
        std::optional<Attribute> a = EffectiveWindowAttribute(g, id, name);
        if (!a) return std::nullopt;
        auto [it, inserted] = common.emplace(name, *a);
        if (!inserted && it->second != *a) return std::nullopt;  // the window nodes differ
      }
      if (op == "Conv") {
        const TensorType& w = g.value(g.node(id).inputs[1]).type;
        std::vector<int64_t> kw(w.shape.begin() + 2, w.shape.end());
        if (!kernel.empty() && kernel != kw) return std::nullopt;
        kernel = kw;
        InputsFeeding(p, p.nodes(k).inputs(1), &weight_inputs);
      }
    }
  }
  if (conv == pool) return std::nullopt;  // none, or both kinds
  if (pool && with_group) return std::nullopt;
  if (common.count("group") && common.at("group").i != 1) return std::nullopt;  // generalised from group 1 only
  rules::Rule g = proved;
  g.clear_provenance();
  // Kernel (and, with groups, per-group channel) dimensions of the conv weights become symbols.
  if (conv) {
    if (kernel.size() != 2) return std::nullopt;
    for (int in : weight_inputs) {
      // Weight-shaped inputs only (a per-channel scale on the way is left as it is).
      rules::TensorVar* var = g.mutable_inputs(in);
      if (var->shape_size() != 4 || !DimIsConst(var->shape(2), kernel[0]) || !DimIsConst(var->shape(3), kernel[1]))
        continue;
      *var->mutable_shape(2) = DimSymbol("kh");
      *var->mutable_shape(3) = DimSymbol("kw");
      if (with_group) {
        if (DimToString(var->shape(1)) != "c") return std::nullopt;
        *var->mutable_shape(1) = DimSymbol("cg");
      }
    }
  }
  for (rules::Pattern* p : {g.mutable_source(), g.mutable_target()}) {
    for (auto& n : *p->mutable_nodes()) {
      if (n.op() != "Conv" && !IsPool(n.op())) continue;
      std::map<std::string, rules::Attribute> attrs;
      for (const auto& a : n.attrs()) attrs[a.name()] = a;
      attrs.erase("auto_pad");
      for (const auto& [name, value] : common) {
        rules::Attribute v;
        v.set_name(name);
        v.set_var(name);
        attrs[name] = v;
      }
      if (n.op() == "Conv") attrs.erase("kernel_shape");
      n.clear_attrs();
      for (auto& [name, a] : attrs) *n.add_attrs() = a;
    }
  }
  // Proved at every instance.
  rules::Provenance prov = proved.provenance();
  prov.clear_proved_on();
  uint64_t rlimit = 0;
  bool all_simplified = true;
  const std::vector<std::string> symbols = RuleSymbols(g);
  for (const WindowInstance& inst : conv ? ConvInstances(with_group) : PoolInstances()) {
    SymbolBinding b = at;
    for (const auto& [sym, v] : inst.symbols) b[sym] = v;
    for (auto it = b.begin(); it != b.end();)  // only the rule's own symbols
      it = std::find(symbols.begin(), symbols.end(), it->first) == symbols.end() ? b.erase(it) : std::next(it);
    if (b.count("d")) b["d"] = 2;
    if (b.count("n")) b["n"] = 1;
    AttrBinding values;
    for (const auto& [name, v] : inst.attrs)
      if (common.count(name)) values[name] = Attribute::Ints(v);
    if (common.count("group")) values["group"] = Attribute::Int(inst.group);
    rules::Rule concrete = BindAttributes(g, values);
    try {
      if (!(NumericError(concrete, b, RuleSeed(proved)) <= kNumericTolerance)) return std::nullopt;
      bool simplified = false;
      std::string detail;
      if (ProveAt(concrete, b, options, &rlimit, &simplified, &detail) != Outcome::kProved) return std::nullopt;
      all_simplified = all_simplified && simplified;
    } catch (const Error&) {
      return std::nullopt;  // shapes do not infer at this instance
    }
    rules::ShapeInstance* si = prov.add_proved_on();
    for (const auto& [sym, v] : b) {
      auto* bind = si->add_bindings();
      bind->set_symbol(sym);
      bind->set_value(v);
    }
    for (const auto& [name, v] : values) *si->add_attrs() = AttributeToProto(name, v);
  }
  prov.set_proof_rlimit(rlimit);
  prov.set_proved_by_simplification(all_simplified);
  *g.mutable_provenance() = prov;
  g.set_id(RuleId(g));
  return g;
}

Result VerifyOne(const rules::Rule& candidate, const Options& options) {
  auto start = std::chrono::steady_clock::now();
  Result r;
  r.rule = candidate;
  auto done = [&](Outcome o) {
    r.outcome = o;
    r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    return r;
  };
  try {
    for (const SymbolBinding& b : CheckBindings(candidate)) {
      double err = NumericError(candidate, b, RuleSeed(candidate));
      if (!(err <= std::max(kNumericTolerance, 10 * candidate.tolerance()))) {
        r.detail = "relative error " + std::to_string(err);
        return done(Outcome::kRefutedNumeric);
      }
    }
    // Written rules are wanted as written: only the generator's candidates
    // are pruned for being implied by smaller ones.
    if (candidate.written_name().empty()) {
      Common common = CommonSubgraph(candidate);
      if (common == Common::kFactored) return done(Outcome::kPrunedCommonSubgraph);
      if (common == Common::kComposite) return done(Outcome::kPrunedComposite);
      if (CommonContext(candidate)) return done(Outcome::kPrunedCommonContext);
    }
    uint64_t rlimit = 0;
    bool all_simplified = true;
    rules::Provenance* prov = r.rule.mutable_provenance();
    prov->clear_proved_on();
    for (const SymbolBinding& b : ProofBindings(candidate)) {
      bool simplified = false;
      Outcome o = ProveAt(candidate, b, options, &rlimit, &simplified, &r.detail);
      if (o != Outcome::kProved) return done(o);
      all_simplified = all_simplified && simplified;
      auto* inst = prov->add_proved_on();
      for (const auto& [sym, value] : b) {
        auto* bind = inst->add_bindings();
        bind->set_symbol(sym);
        bind->set_value(value);
      }
    }
    prov->set_proof_rlimit(rlimit);
    prov->set_proved_by_simplification(all_simplified);
    // Written rules are kept as written (their ids name them in the
    // database); generated ones generalise their window attributes.
    for (bool with_group : {true, false}) {
      if (!candidate.written_name().empty()) break;
      if (std::optional<rules::Rule> g = Generalise(r.rule, with_group, options)) {
        r.rule = std::move(*g);
        r.generalised = true;
        break;
      }
    }
    return done(Outcome::kProved);
  } catch (const std::exception& e) {
    r.detail = FirstLine(e.what());
    return done(Outcome::kError);
  }
}

std::vector<Result> VerifyAll(const rules::CandidateSet& candidates, const Options& options,
                              const std::function<void(const std::string&)>& progress, const std::atomic<bool>* stop) {
  // Shards split by rule id, so that duplicates (same canonical form, same
  // id) land in the same shard and cost no work there either.
  std::vector<int> mine;
  for (int k = 0; k < candidates.candidates_size(); ++k)
    if (static_cast<int>(HashString(candidates.candidates(k).id()) % options.shard_count) == options.shard_index)
      mine.push_back(k);
  // Duplicates (same canonical form) need no work: only the first is verified.
  std::map<std::string, int> first;
  std::vector<char> duplicate(mine.size(), 0);
  for (size_t k = 0; k < mine.size(); ++k) {
    auto [it, inserted] = first.emplace(CanonicalForm(candidates.candidates(mine[k])), static_cast<int>(k));
    duplicate[k] = !inserted;
  }
  auto one = [&](size_t k) {
    const rules::Rule& c = candidates.candidates(mine[k]);
    if (!duplicate[k]) return VerifyOne(c, options);
    Result r;
    r.rule = c;
    r.outcome = Outcome::kPrunedDuplicate;
    return r;
  };
  auto start = std::chrono::steady_clock::now();
  auto report = [&](size_t done) {
    if (!progress) return;
    double el = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    progress("verifying: " + std::to_string(done) + "/" + std::to_string(mine.size()) + " candidates, " +
             std::to_string(static_cast<int>(el)) + " s");
  };
  std::vector<Result> results(mine.size());
  if (options.world != nullptr && options.world->size() > 1) {
    // Over the MPI job's ranks: each result comes back to rank 0 as bytes.
    std::vector<std::string> bytes = options.world->RunTasks(
        static_cast<int64_t>(mine.size()), [&](int64_t k) { return EncodeResult(one(static_cast<size_t>(k))); },
        [&](int64_t done, int64_t) { report(static_cast<size_t>(done)); }, stop);
    if (!options.world->root()) return {};
    for (size_t k = 0; k < mine.size(); ++k) results[k] = DecodeResult(bytes[k]);
    return results;
  }
  std::atomic<size_t> finished{0};
  std::mutex mu;
  ParallelFor(mine.size(), options.threads, stop, [&](int, size_t k) {
    results[k] = one(k);
    size_t f = ++finished;
    std::lock_guard<std::mutex> lock(mu);
    report(f);
  });
  if (stop && stop->load()) Fail("interrupted");
  return results;
}

std::string EncodeResult(const Result& r) {
  std::string out;
  auto put = [&out](const void* p, size_t n) { out.append(static_cast<const char*>(p), n); };
  const int32_t outcome = static_cast<int32_t>(r.outcome);
  const uint8_t generalised = r.generalised ? 1 : 0;
  const uint64_t detail = r.detail.size();
  put(&outcome, sizeof outcome);
  put(&generalised, sizeof generalised);
  put(&r.seconds, sizeof r.seconds);
  put(&detail, sizeof detail);
  out += r.detail;
  out += SerializeDeterministic(r.rule);
  return out;
}

Result DecodeResult(const std::string& bytes) {
  Result r;
  size_t at = 0;
  auto get = [&](void* p, size_t n) {
    if (at + n > bytes.size()) Fail("a verifier result of ", bytes.size(), " bytes is cut short");
    std::memcpy(p, bytes.data() + at, n);
    at += n;
  };
  int32_t outcome = 0;
  uint8_t generalised = 0;
  uint64_t detail = 0;
  get(&outcome, sizeof outcome);
  get(&generalised, sizeof generalised);
  get(&r.seconds, sizeof r.seconds);
  get(&detail, sizeof detail);
  if (outcome < 0 || outcome > static_cast<int32_t>(Outcome::kError) || detail > bytes.size() - at)
    Fail("a verifier result is malformed");
  r.outcome = static_cast<Outcome>(outcome);
  r.generalised = generalised != 0;
  r.detail = bytes.substr(at, detail);
  at += detail;
  if (!r.rule.ParseFromString(bytes.substr(at))) Fail("a verifier result's rule does not parse");
  return r;
}

rules::RuleDatabase Assemble(const rules::GeneratorSettings& settings, const std::vector<rules::Rule>& proved,
                             int64_t* duplicates) {
  std::map<std::string, const rules::Rule*> by_form;
  for (const rules::Rule& r : proved) {
    std::string form = CanonicalForm(r);
    auto it = by_form.find(form);
    if (it == by_form.end() || r.id() < it->second->id()) by_form[form] = &r;
  }
  std::vector<const rules::Rule*> kept;
  for (const auto& [form, r] : by_form) kept.push_back(r);
  std::sort(kept.begin(), kept.end(), [](const rules::Rule* a, const rules::Rule* b) { return a->id() < b->id(); });
  if (duplicates) *duplicates = static_cast<int64_t>(proved.size() - kept.size());
  rules::RuleDatabase db;
  db.set_magic(kRuleDatabaseMagic);
  db.set_format_version(kRuleFormatVersion);
  *db.mutable_settings() = settings;
  for (const rules::Rule* r : kept) *db.add_rules() = *r;
  return db;
}

}  // namespace rlflow::verifier
