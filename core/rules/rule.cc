#include "core/rules/rule.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/op_registry.h"

namespace rlflow {

// ---- symbolic dimensions ----
rules::Dim DimConst(int64_t value) {
  rules::Dim d;
  d.set_constant(value);
  return d;
}

rules::Dim DimSymbol(const std::string& symbol) {
  rules::Dim d;
  auto* t = d.add_terms();
  t->set_symbol(symbol);
  t->set_coeff(1);
  return d;
}

rules::Dim DimProduct(const std::string& a, const std::string& b) {
  return DimSymbol(a < b ? a + "*" + b : b + "*" + a);
}

std::vector<std::string> SymbolFactors(const std::string& symbol) {
  std::vector<std::string> out;
  size_t start = 0;
  for (;;) {
    size_t star = symbol.find('*', start);
    out.push_back(symbol.substr(start, star == std::string::npos ? std::string::npos : star - start));
    if (star == std::string::npos) return out;
    start = star + 1;
  }
}

std::optional<int64_t> EvalSymbol(const std::string& symbol, const SymbolBinding& binding) {
  int64_t v = 1;
  for (const std::string& f : SymbolFactors(symbol)) {
    auto it = binding.find(f);
    if (it == binding.end()) return std::nullopt;
    v *= it->second;
  }
  return v;
}

bool DimIsPlainSymbol(const rules::Dim& d) {
  return d.terms_size() == 1 && d.terms(0).coeff() == 1 && d.constant() == 0 && !IsProductSymbol(d.terms(0).symbol());
}

namespace {
rules::Dim Normalize(const std::map<std::string, int64_t>& coeffs, int64_t constant) {
  rules::Dim d;
  d.set_constant(constant);
  for (const auto& [sym, c] : coeffs) {
    if (c == 0) continue;
    auto* t = d.add_terms();
    t->set_symbol(sym);
    t->set_coeff(c);
  }
  return d;
}
std::map<std::string, int64_t> Coeffs(const rules::Dim& d) {
  std::map<std::string, int64_t> m;
  for (const auto& t : d.terms()) m[t.symbol()] += t.coeff();
  return m;
}
}  // namespace

rules::Dim DimAdd(const rules::Dim& a, const rules::Dim& b) {
  auto m = Coeffs(a);
  for (const auto& t : b.terms()) m[t.symbol()] += t.coeff();
  return Normalize(m, a.constant() + b.constant());
}

rules::Dim DimScale(const rules::Dim& a, int64_t factor) {
  auto m = Coeffs(a);
  for (auto& [s, c] : m) c *= factor;
  return Normalize(m, a.constant() * factor);
}

std::optional<rules::Dim> DimHalf(const rules::Dim& a) {
  if (a.constant() % 2 != 0) return std::nullopt;
  auto m = Coeffs(a);
  for (auto& [s, c] : m) {
    if (c % 2 != 0) return std::nullopt;
    c /= 2;
  }
  rules::Dim half = Normalize(m, a.constant() / 2);
  if (half.terms_size() == 0 && half.constant() <= 0) return std::nullopt;
  return half;
}

bool DimEqual(const rules::Dim& a, const rules::Dim& b) {
  return a.constant() == b.constant() && Coeffs(a) == Coeffs(b);
}

bool DimIsConst(const rules::Dim& a, int64_t value) { return a.terms_size() == 0 && a.constant() == value; }

int64_t EvalDim(const rules::Dim& dim, const SymbolBinding& binding) {
  int64_t v = dim.constant();
  for (const auto& t : dim.terms()) {
    std::optional<int64_t> value = EvalSymbol(t.symbol(), binding);
    if (!value) Fail("shape symbol '", t.symbol(), "' has no value");
    v += t.coeff() * *value;
  }
  return v;
}

std::string DimToString(const rules::Dim& dim) {
  std::ostringstream os;
  bool first = true;
  for (const auto& t : dim.terms()) {
    if (!first) os << "+";
    if (t.coeff() != 1) os << t.coeff();
    os << t.symbol();
    first = false;
  }
  if (dim.constant() != 0 || first) os << (first ? "" : "+") << dim.constant();
  return os.str();
}

Shape EvalShape(const rules::TensorVar& var, const SymbolBinding& binding) {
  Shape s;
  for (const auto& d : var.shape()) s.push_back(EvalDim(d, binding));
  return s;
}

std::string ShapeToString(const rules::TensorVar& var) {
  std::string s = "[";
  for (int k = 0; k < var.shape_size(); ++k) s += (k ? "," : "") + DimToString(var.shape(k));
  return s + "]";
}

// " <= 1" for an input bounded above, else "": part of the canonical form.
static std::string BoundText(const rules::TensorVar& var) {
  if (!var.bounded_above()) return "";
  char buf[40];
  std::snprintf(buf, sizeof buf, " <= %.17g", var.upper_bound());
  return buf;
}

std::vector<int> DivisorInputs(const rules::Rule& rule) {
  std::set<int> out;
  for (const rules::Pattern* p : {&rule.source(), &rule.target()})
    for (const auto& n : p->nodes())
      if (n.op() == "Div" && n.inputs_size() == 2 && n.inputs(1).kind_case() == rules::Ref::kInput)
        out.insert(n.inputs(1).input());
      else if (n.op() == "Reciprocal" && n.inputs_size() == 1 && n.inputs(0).kind_case() == rules::Ref::kInput)
        out.insert(n.inputs(0).input());
  return {out.begin(), out.end()};
}

std::map<int, double> UpperBounds(const rules::Rule& rule) {
  std::map<int, double> out;
  for (int k = 0; k < rule.inputs_size(); ++k)
    if (rule.inputs(k).bounded_above()) out[k] = rule.inputs(k).upper_bound();
  return out;
}

std::vector<std::string> RuleSymbols(const rules::Rule& rule) {
  std::set<std::string> syms;
  for (const auto& in : rule.inputs())
    for (const auto& d : in.shape())
      for (const auto& t : d.terms())
        for (const std::string& f : SymbolFactors(t.symbol())) syms.insert(f);
  return {syms.begin(), syms.end()};
}

// ---- attributes ----
Attribute AttributeFromProto(const rules::Attribute& a) {
  switch (a.value_case()) {
    case rules::Attribute::kI: return Attribute::Int(a.i());
    case rules::Attribute::kF: return Attribute::Float(a.f());
    case rules::Attribute::kS: return Attribute::String(a.s());
    case rules::Attribute::kInts: return Attribute::Ints({a.ints().values().begin(), a.ints().values().end()});
    case rules::Attribute::kFloats: return Attribute::Floats({a.floats().values().begin(), a.floats().values().end()});
    case rules::Attribute::kVar:
      Fail("attribute '", a.name(), "' is the attribute variable $", a.var(), ": bind it first (BindAttributes)");
    case rules::Attribute::kDim:
      Fail("attribute '", a.name(), "' is the dimension expression ", DimToString(a.dim()),
           ": evaluate it at a binding (AttributeAt)");
    default: Fail("attribute '", a.name(), "' has no value");
  }
}

Attribute AttributeAt(const rules::Attribute& a, const SymbolBinding& binding) {
  if (IsDimAttribute(a)) return Attribute::Int(EvalDim(a.dim(), binding));
  return AttributeFromProto(a);
}

rules::Attribute AttributeToProto(const std::string& name, const Attribute& a) {
  rules::Attribute out;
  out.set_name(name);
  switch (a.type) {
    case AttrType::kInt: out.set_i(a.i); break;
    case AttrType::kFloat: out.set_f(a.f); break;
    case AttrType::kString: out.set_s(a.s); break;
    case AttrType::kInts:
      for (int64_t v : a.ints) out.mutable_ints()->add_values(v);
      break;
    case AttrType::kFloats:
      for (float v : a.floats) out.mutable_floats()->add_values(v);
      break;
    default: Fail("attribute '", name, "' cannot be stored in a rule");
  }
  return out;
}

std::vector<std::string> AttributeVariables(const rules::Rule& rule) {
  std::set<std::string> vars;
  for (const rules::Pattern* p : {&rule.source(), &rule.target()})
    for (const auto& n : p->nodes())
      for (const auto& a : n.attrs())
        if (IsAttributeVariable(a)) vars.insert(a.var());
  return {vars.begin(), vars.end()};
}

rules::Rule BindAttributes(const rules::Rule& rule, const AttrBinding& values) {
  rules::Rule out = rule;
  for (rules::Pattern* p : {out.mutable_source(), out.mutable_target()})
    for (auto& n : *p->mutable_nodes())
      for (auto& a : *n.mutable_attrs()) {
        if (!IsAttributeVariable(a)) continue;
        auto it = values.find(a.var());
        if (it == values.end()) Fail("rule ", rule.id(), ": attribute variable $", a.var(), " is not bound");
        a = AttributeToProto(a.name(), it->second);
      }
  return out;
}

SymbolBinding InstanceSymbols(const rules::ShapeInstance& instance) {
  SymbolBinding b;
  for (const auto& x : instance.bindings()) b[x.symbol()] = x.value();
  return b;
}

AttrBinding InstanceAttributes(const rules::ShapeInstance& instance) {
  AttrBinding b;
  for (const auto& a : instance.attrs()) b[a.name()] = AttributeFromProto(a);
  return b;
}

namespace {
std::string AttrText(const rules::Attribute& a) {
  if (IsAttributeVariable(a)) return a.name() + "=$" + a.var();
  if (IsDimAttribute(a)) return a.name() + "=" + DimToString(a.dim());
  return a.name() + "=" + AttributeFromProto(a).ToString();
}

std::string FloatText(double v) {
  std::ostringstream os;
  os.precision(9);
  os << v;
  std::string t = os.str();
  if (t.find_first_of(".e") == std::string::npos && t.find("inf") == std::string::npos &&
      t.find("nan") == std::string::npos)
    t += ".0";
  return t;
}

std::string ConstantText(const rules::Constant& c) {
  if (IsFilledConstant(c)) {
    std::string s = "fill(" + FloatText(c.fill_value()) +
                    (c.has_fill_divisor() ? " / (" + DimToString(c.fill_divisor()) + ")" : "") + ", [";
    for (int k = 0; k < c.fill_shape_size(); ++k) s += (k ? "," : "") + DimToString(c.fill_shape(k));
    return s + "])";
  }
  if (IsFloatConstant(c) && c.dims_size() == 0 && c.float_values_size() == 1) return FloatText(c.float_values(0));
  std::string s = "[";
  for (int k = 0; k < c.int_values_size(); ++k) s += (k ? "," : "") + std::to_string(c.int_values(k));
  for (int k = 0; k < c.dim_values_size(); ++k) s += (k ? "," : "") + DimToString(c.dim_values(k));
  for (int k = 0; k < c.float_values_size(); ++k) s += (k ? "," : "") + FloatText(c.float_values(k));
  return s + "]";
}
}  // namespace

double FillValue(const rules::Constant& c, const SymbolBinding& binding) {
  if (!c.has_fill_divisor()) return c.fill_value();
  const int64_t divisor = EvalDim(c.fill_divisor(), binding);
  if (divisor <= 0) Fail("a filled rule constant's divisor ", DimToString(c.fill_divisor()), " is ", divisor);
  return c.fill_value() / static_cast<double>(divisor);
}

std::vector<int64_t> ConstantValues(const rules::Constant& c, const SymbolBinding& binding) {
  if (IsFloatConstant(c) || IsFilledConstant(c)) Fail("a floating-point rule constant has no integer values");
  if (!IsSymbolicConstant(c)) return std::vector<int64_t>(c.int_values().begin(), c.int_values().end());
  std::vector<int64_t> out;
  for (const auto& d : c.dim_values()) out.push_back(EvalDim(d, binding));
  return out;
}

TensorData ConstantData(const rules::Constant& c, const SymbolBinding& binding, DType float_dtype) {
  if (IsFloatConstant(c) || IsFilledConstant(c)) {
    Shape dims(c.dims().begin(), c.dims().end());
    std::vector<double> values(c.float_values().begin(), c.float_values().end());
    if (IsFilledConstant(c)) {
      dims.clear();
      for (const auto& d : c.fill_shape()) dims.push_back(EvalDim(d, binding));
      values.assign(static_cast<size_t>(NumElements(dims)), FillValue(c, binding));
    }
    if (static_cast<int64_t>(values.size()) != NumElements(dims))
      Fail("a rule constant has ", values.size(), " values for shape ", ShapeToString(dims));
    if (float_dtype == DType::kUndefined) float_dtype = DType::kFloat32;
    if (!IsFloatingPoint(float_dtype))
      Fail("a floating-point rule constant cannot be made as ", DTypeName(float_dtype));
    return TensorData::FromDouble(values, dims, float_dtype);
  }
  return TensorData::FromInt64(ConstantValues(c, binding), Shape(c.dims().begin(), c.dims().end()));
}

int PatternOpCount(const rules::Pattern& p) { return p.nodes_size(); }

Graph InstantiatePattern(const rules::Rule& rule, const rules::Pattern& p, const SymbolBinding& binding, DType dtype) {
  Graph g;
  g.info().opsets = {{"", 17}};
  std::vector<ValueId> inputs, constants;
  for (const auto& in : rule.inputs()) {
    TensorType t;
    t.dtype = dtype == DType::kUndefined ? DTypeFromCode(in.dtype()) : dtype;
    t.shape = EvalShape(in, binding);
    for (int64_t d : t.shape)
      if (d <= 0) Fail("rule ", rule.id(), ": input ", in.name(), " has non-positive dimension at this binding");
    inputs.push_back(g.AddInput(in.name(), t));
  }
  // Floating constants take the inputs' element type (float64 for checks).
  DType float_dtype = dtype;
  for (const auto& in : rule.inputs())
    if (float_dtype == DType::kUndefined && IsFloatingPoint(DTypeFromCode(in.dtype())))
      float_dtype = DTypeFromCode(in.dtype());
  for (int k = 0; k < p.constants_size(); ++k)
    constants.push_back(
        g.AddInitializer("const" + std::to_string(k), ConstantData(p.constants(k), binding, float_dtype)));
  std::vector<std::vector<ValueId>> node_outputs;
  auto resolve = [&](const rules::Ref& r) -> ValueId {
    switch (r.kind_case()) {
      case rules::Ref::kInput:
        if (r.input() < 0 || r.input() >= static_cast<int>(inputs.size())) Fail("rule ", rule.id(), ": bad input ref");
        return inputs[r.input()];
      case rules::Ref::kConstant:
        if (r.constant() < 0 || r.constant() >= static_cast<int>(constants.size()))
          Fail("rule ", rule.id(), ": bad constant ref");
        return constants[r.constant()];
      case rules::Ref::kNode:
        if (r.node().node() < 0 || r.node().node() >= static_cast<int>(node_outputs.size()) || r.node().output() < 0 ||
            r.node().output() >= static_cast<int>(node_outputs[r.node().node()].size()))
          Fail("rule ", rule.id(), ": bad node ref (nodes must be in topological order)");
        return node_outputs[r.node().node()][r.node().output()];
      case rules::Ref::kOmitted: return kNoValue;
      default: Fail("rule ", rule.id(), ": empty reference");
    }
  };
  const OpRegistry& reg = OpRegistry::Global();
  for (int k = 0; k < p.nodes_size(); ++k) {
    const rules::Node& n = p.nodes(k);
    const OpDef* def = reg.FindQualified(n.op());
    if (def == nullptr) Fail("rule ", rule.id(), ": operator '", n.op(), "' is not in the registry");
    // Arity before anything is allocated: a corrupt count (2^31-1 outputs)
    // must be refused, not built.
    if (n.num_outputs() < def->min_outputs || n.num_outputs() > def->max_outputs)
      Fail("rule ", rule.id(), ": node ", k, " (", n.op(), ") declares ", n.num_outputs(), " outputs; ", n.op(),
           " has ", def->min_outputs, " to ", def->max_outputs);
    if (n.inputs_size() > def->max_inputs)
      Fail("rule ", rule.id(), ": node ", k, " (", n.op(), ") has ", n.inputs_size(), " inputs; ", n.op(),
           " takes at most ", def->max_inputs);
    std::vector<ValueId> ins;
    for (const auto& r : n.inputs()) ins.push_back(resolve(r));
    AttributeMap attrs;
    for (const auto& a : n.attrs()) attrs[a.name()] = AttributeAt(a, binding);
    NodeId id = g.AddNode(def->name, ins, n.num_outputs(), std::move(attrs), "n" + std::to_string(k));
    g.mutable_node(id).domain = def->domain;
    CheckNodeAgainstDef(g.node(id), *def);
    node_outputs.push_back(g.node(id).outputs);
  }
  std::vector<ValueId> outs;
  for (const auto& r : p.outputs()) outs.push_back(resolve(r));
  g.SetOutputs(outs);
  InferShapes(g);
  return g;
}

namespace {
// Expression text of a reference; `names` maps input index -> display name.
std::string RefText(const rules::Pattern& p, const rules::Ref& r, const std::vector<std::string>& names) {
  switch (r.kind_case()) {
    case rules::Ref::kInput: return names.at(r.input());
    case rules::Ref::kConstant: return ConstantText(p.constants(r.constant()));
    case rules::Ref::kOmitted: return "_";
    case rules::Ref::kNode: {
      const rules::Node& n = p.nodes(r.node().node());
      std::string s = n.op();
      if (n.attrs_size() > 0) {
        s += "[";
        for (int k = 0; k < n.attrs_size(); ++k) s += (k ? "," : "") + AttrText(n.attrs(k));
        s += "]";
      }
      s += "(";
      for (int k = 0; k < n.inputs_size(); ++k) s += (k ? "," : "") + RefText(p, n.inputs(k), names);
      s += ")";
      if (n.num_outputs() > 1) s += "#" + std::to_string(r.node().output());
      return s;
    }
    default: return "?";
  }
}

std::string PatternText(const rules::Pattern& p, const std::vector<std::string>& names) {
  if (p.outputs_size() == 1) return RefText(p, p.outputs(0), names);
  std::string s = "(";
  for (int k = 0; k < p.outputs_size(); ++k) s += (k ? ", " : "") + RefText(p, p.outputs(k), names);
  return s + ")";
}

// Inputs in order of first use by the pattern(s) (depth-first from outputs).
void FirstUse(const rules::Pattern& p, const rules::Ref& r, std::vector<int>* order, std::vector<char>* seen) {
  if (r.kind_case() == rules::Ref::kInput) {
    if (!(*seen)[r.input()]) {
      (*seen)[r.input()] = 1;
      order->push_back(r.input());
    }
  } else if (r.kind_case() == rules::Ref::kNode) {
    for (const auto& in : p.nodes(r.node().node()).inputs()) FirstUse(p, in, order, seen);
  }
}

std::string CanonicalPair(const rules::Rule& rule, const rules::Pattern& a, const rules::Pattern& b) {
  std::vector<int> order;
  std::vector<char> seen(rule.inputs_size(), 0);
  for (const auto& r : a.outputs()) FirstUse(a, r, &order, &seen);
  for (const auto& r : b.outputs()) FirstUse(b, r, &order, &seen);
  std::vector<std::string> names(rule.inputs_size(), "?");
  std::string types;
  for (size_t k = 0; k < order.size(); ++k) {
    const auto& in = rule.inputs(order[k]);
    names[order[k]] = "$" + std::to_string(k);
    types += names[order[k]] + ":" + std::to_string(in.dtype()) + ShapeToString(in) + BoundText(in) + ";";
  }
  return types + PatternText(a, names) + "=>" + PatternText(b, names);
}
}  // namespace

std::vector<std::string> NodeExpressions(const rules::Rule& rule, const rules::Pattern& pattern) {
  std::vector<std::string> names;
  for (const auto& in : rule.inputs()) names.push_back(in.name());
  std::vector<std::string> out;
  for (int k = 0; k < pattern.nodes_size(); ++k) {
    rules::Ref r;
    r.mutable_node()->set_node(k);
    r.mutable_node()->set_output(0);
    std::string text = RefText(pattern, r, names);
    if (pattern.nodes(k).num_outputs() > 1) text = text.substr(0, text.rfind('#'));
    out.push_back(text);
  }
  return out;
}

std::string PatternToString(const rules::Rule& rule, const rules::Pattern& pattern) {
  std::vector<std::string> names;
  for (const auto& in : rule.inputs()) names.push_back(in.name());
  return PatternText(pattern, names);
}

std::string RuleToString(const rules::Rule& rule) {
  return PatternToString(rule, rule.source()) + " => " + PatternToString(rule, rule.target());
}

std::string CanonicalPattern(const rules::Rule& rule, const rules::Pattern& pattern) {
  std::vector<int> order;
  std::vector<char> seen(rule.inputs_size(), 0);
  for (const auto& r : pattern.outputs()) FirstUse(pattern, r, &order, &seen);
  std::vector<std::string> names(rule.inputs_size(), "?");
  std::string types;
  for (size_t k = 0; k < order.size(); ++k) {
    names[order[k]] = "$" + std::to_string(k);
    types += names[order[k]] + ShapeToString(rule.inputs(order[k])) + BoundText(rule.inputs(order[k])) + ";";
  }
  return types + PatternText(pattern, names);
}

std::string CanonicalForm(const rules::Rule& rule) {
  // Minimum over side swap and over orders of the outputs (applied to both
  // sides alike), so that a rule has one form however it was written.
  std::vector<int> perm(rule.source().outputs_size());
  for (size_t k = 0; k < perm.size(); ++k) perm[k] = static_cast<int>(k);
  std::string best;
  bool first = true;
  do {
    rules::Pattern src = rule.source(), tgt = rule.target();
    for (size_t k = 0; k < perm.size(); ++k) {
      *src.mutable_outputs(static_cast<int>(k)) = rule.source().outputs(perm[k]);
      *tgt.mutable_outputs(static_cast<int>(k)) = rule.target().outputs(perm[k]);
    }
    for (const std::string& form : {CanonicalPair(rule, src, tgt), CanonicalPair(rule, tgt, src)}) {
      if (first || form < best) best = form;
      first = false;
    }
  } while (perm.size() <= 4 && std::next_permutation(perm.begin(), perm.end()));
  return best;
}

std::string RuleId(const rules::Rule& rule) {
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%012llx",
                static_cast<unsigned long long>(HashString(CanonicalForm(rule)) & 0xffffffffffffULL));
  return buf;
}

void ValidateRule(const rules::Rule& rule) {
  if (rule.id().empty()) Fail("a rule has no id");
  if (rule.source().outputs_size() == 0 || rule.source().outputs_size() != rule.target().outputs_size())
    Fail("rule ", rule.id(), ": source and target must have the same, non-zero number of outputs");
  for (const auto& in : rule.inputs())
    if (DTypeFromCode(in.dtype()) == DType::kUndefined)
      Fail("rule ", rule.id(), ": input ", in.name(), " has a bad type");
  // Instantiating at a default binding checks refs, ops, arity and shapes;
  // an attribute-generic rule at its first proved instance.
  SymbolBinding b;
  for (const auto& s : RuleSymbols(rule)) b[s] = 4;
  // Most rules have no attribute variables: they are instantiated as they
  // are, not copied (a rule's copy includes its provenance).
  rules::Rule attr_bound;
  const rules::Rule* bound = &rule;
  if (!AttributeVariables(rule).empty()) {
    if (rule.provenance().proved_on_size() == 0 || rule.provenance().proved_on(0).attrs_size() == 0)
      Fail("rule ", rule.id(), ": attribute variables but no proved instance binding them");
    const rules::ShapeInstance& inst = rule.provenance().proved_on(0);
    for (const auto& [sym, v] : InstanceSymbols(inst)) b[sym] = v;
    attr_bound = BindAttributes(rule, InstanceAttributes(inst));
    bound = &attr_bound;
  }
  Graph src = InstantiatePattern(*bound, bound->source(), b);
  Graph tgt = InstantiatePattern(*bound, bound->target(), b);
  for (size_t k = 0; k < src.outputs().size(); ++k)
    if (src.value(src.outputs()[k]).type != tgt.value(tgt.outputs()[k]).type)
      Fail("rule ", rule.id(), ": output ", k, " types differ between source and target");
}

int64_t RuleOpset(const rules::Rule& rule) {
  int64_t opset = 1;
  for (const auto* p : {&rule.source(), &rule.target()})
    for (const auto& n : p->nodes())
      if (const OpDef* def = OpRegistry::Global().FindQualified(n.op()))
        opset = std::max<int64_t>(opset, def->since_opset);
  return opset;
}

std::vector<char> RulesEnabledFor(const std::vector<rules::Rule>& rules, const std::string& target, int64_t max_opset) {
  std::vector<char> enabled;
  enabled.reserve(rules.size());
  for (const rules::Rule& r : rules) enabled.push_back(RuleRunsOn(r, target) && RuleOpset(r) <= max_opset);
  return enabled;
}

bool RuleRunsOn(const rules::Rule& rule, const std::string& target) {
  for (const auto* p : {&rule.source(), &rule.target()})
    for (const auto& n : p->nodes()) {
      const OpDef* def = OpRegistry::Global().FindQualified(n.op());
      if (def != nullptr && !def->RunsOn(target)) return false;
    }
  return true;
}

// ---- files ----
std::string SerializeDeterministic(const google::protobuf::Message& message) {
  std::string out;
  {
    google::protobuf::io::StringOutputStream raw(&out);
    google::protobuf::io::CodedOutputStream coded(&raw);
    coded.SetSerializationDeterministic(true);
    if (!message.SerializeToCodedStream(&coded)) Fail("cannot serialize ", message.GetTypeName());
  }
  return out;
}

void SaveMessageAtomically(const google::protobuf::Message& message, const std::string& path) {
  WriteFileAtomically(path, SerializeDeterministic(message));
}

void ParseRulesBytes(const std::string& bytes, const std::string& path, const std::string& magic,
                     google::protobuf::Message* message, const std::string& what) {
  if (bytes.empty()) Fail(what, " '", path, "' is empty");
  if (!message->ParseFromString(bytes)) Fail(what, " '", path, "' is corrupt or truncated (protobuf parse failed)");
  const auto* desc = message->GetDescriptor();
  const auto* refl = message->GetReflection();
  std::string got = refl->GetString(*message, desc->FindFieldByName("magic"));
  if (got != magic) Fail(what, " '", path, "' is not a ", magic, " file");
  uint32_t version = refl->GetUInt32(*message, desc->FindFieldByName("format_version"));
  if (version < kOldestRuleFormatVersion || version > kRuleFormatVersion)
    Fail(what, " '", path, "' has format version ", version, "; this build reads versions ", kOldestRuleFormatVersion,
         " to ", kRuleFormatVersion);
}

void ReadRulesFile(const std::string& path, const std::string& magic, google::protobuf::Message* message,
                   const std::string& what) {
  ParseRulesBytes(ReadFile(path, what), path, magic, message, what);
}

std::string RuleDatabasePath(const std::string& path, const std::string& argv0) {
  if (!path.empty()) return ResolveUserPath(path);
  std::string found = FindRunfile("rules/default.rules.pb", argv0);
  if (found.empty()) Fail("the default rule database was not found (run through ./bazelw run, or pass --rules=PATH)");
  return found;
}

rules::RuleDatabase LoadRuleDatabase(const std::string& path) {
  return ParseRuleDatabase(ReadFile(path, "rule database"), path);
}

std::vector<rules::Rule> RuleList(const rules::RuleDatabase& db) { return {db.rules().begin(), db.rules().end()}; }

rules::RuleDatabase ParseRuleDatabase(const std::string& bytes, const std::string& path) {
  rules::RuleDatabase db;
  ParseRulesBytes(bytes, path, kRuleDatabaseMagic, &db, "rule database");
  std::set<std::string> ids;
  for (const auto& r : db.rules()) {
    try {
      ValidateRule(r);
    } catch (const Error& e) {
      Fail("rule database '", path, "': ", e.what());
    }
    if (!ids.insert(r.id()).second) Fail("rule database '", path, "': rule id ", r.id(), " appears twice");
  }
  return db;
}

}  // namespace rlflow
