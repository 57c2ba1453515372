#include "core/op_registry.h"

#include <algorithm>
#include <optional>

#include "core/error.h"

namespace rlflow {

const AttrSpec* OpDef::FindAttr(const std::string& attr) const {
  for (const AttrSpec& s : attrs)
    if (s.name == attr) return &s;
  return nullptr;
}

bool AttrReader::Has(const std::string& name) const { return node_.attrs.count(name) > 0; }

void AttrReader::Fail(const std::string& message) const { ::rlflow::Fail("node ", node_.Describe(), ": ", message); }

void AttrReader::Unsupported(const std::string& message) const {
  throw ::rlflow::Unsupported("node " + node_.Describe() + ": " + message);
}

const Attribute* AttrReader::Find(const std::string& name, AttrType type) const {
  auto it = node_.attrs.find(name);
  const Attribute* a = nullptr;
  if (it != node_.attrs.end()) {
    a = &it->second;
  } else {
    const AttrSpec* spec = def_.FindAttr(name);
    if (spec == nullptr) Fail("operator entry has no attribute '" + name + "'");
    if (!spec->default_value) {
      if (spec->required) Fail("required attribute '" + name + "' is missing");
      return nullptr;
    }
    a = &*spec->default_value;
  }
  if (a->type != type)
    Fail("attribute '" + name + "' has type " + AttrTypeName(a->type) + ", expected " + AttrTypeName(type));
  return a;
}

int64_t AttrReader::Int(const std::string& name) const {
  const Attribute* a = Find(name, AttrType::kInt);
  return a ? a->i : 0;
}
float AttrReader::Float(const std::string& name) const {
  const Attribute* a = Find(name, AttrType::kFloat);
  return a ? a->f : 0.0f;
}
std::string AttrReader::String(const std::string& name) const {
  const Attribute* a = Find(name, AttrType::kString);
  return a ? a->s : std::string();
}
std::vector<int64_t> AttrReader::Ints(const std::string& name) const {
  const Attribute* a = Find(name, AttrType::kInts);
  return a ? a->ints : std::vector<int64_t>();
}
std::vector<float> AttrReader::Floats(const std::string& name) const {
  const Attribute* a = Find(name, AttrType::kFloats);
  return a ? a->floats : std::vector<float>();
}
TensorDataPtr AttrReader::Tensor(const std::string& name) const {
  const Attribute* a = Find(name, AttrType::kTensor);
  return a ? a->tensor : nullptr;
}

const TensorType& ShapeContext::input(int i) const {
  if (!has_input(i)) Fail("input " + std::to_string(i) + " is missing");
  return *inputs_[i];
}

std::vector<int64_t> ShapeContext::ConstantInts(int i, const char* what) const {
  const TensorData* c = constant(i);
  if (c == nullptr) Fail(std::string(what) + " (input " + std::to_string(i) + ") must be a constant");
  return c->ToInt64();
}

std::optional<std::vector<int64_t>> ShapeContext::MaybeConstantInts(int i) const {
  const TensorData* c = constant(i);
  if (c == nullptr) return std::nullopt;
  return c->ToInt64();
}

int64_t ShapeContext::Length1D(int i) const {
  const TensorType& t = input(i);
  if (!t.rank_known || t.rank() != 1) return -1;
  return t.shape[0];
}

OpRegistry& OpRegistry::Global() {
  static OpRegistry* registry = new OpRegistry();
  return *registry;
}

void OpRegistry::Register(OpDef def) {
  auto key = std::make_pair(def.domain, def.name);
  RLFLOW_CHECK(!ops_.count(key), "operator ", def.name, " registered twice");
  auto& slot = ops_[key] = std::make_unique<OpDef>(std::move(def));
  if (slot->domain.empty()) default_domain_[slot->name] = slot.get();
}

const OpDef* OpRegistry::Find(const std::string& domain, const std::string& op) const {
  if (domain.empty() || domain == "ai.onnx") {
    auto it = default_domain_.find(op);
    return it == default_domain_.end() ? nullptr : it->second;
  }
  auto it = ops_.find({domain, op});
  return it == ops_.end() ? nullptr : it->second.get();
}

const OpDef* OpRegistry::FindQualified(const std::string& qualified) const {
  auto [domain, op] = SplitQualifiedOp(qualified);
  return Find(domain, op);
}

bool OpDef::RunsOn(const std::string& target) const {
  return targets.empty() || std::find(targets.begin(), targets.end(), target) != targets.end();
}

const std::vector<std::string>& KnownTargets() {
  static const std::vector<std::string> targets = {"onnx", "ort"};
  return targets;
}

std::string QualifiedOp(const std::string& domain, const std::string& op) {
  return domain.empty() || domain == "ai.onnx" ? op : domain + "." + op;
}

std::pair<std::string, std::string> SplitQualifiedOp(const std::string& qualified) {
  const size_t dot = qualified.rfind('.');
  if (dot == std::string::npos) return {"", qualified};
  return {qualified.substr(0, dot), qualified.substr(dot + 1)};
}

bool IsQualifiedOp(const std::string& domain, const std::string& op, const std::string& qualified) {
  if (domain.empty() || domain == "ai.onnx") return op == qualified;
  return qualified.size() == domain.size() + 1 + op.size() && qualified.compare(0, domain.size(), domain) == 0 &&
         qualified[domain.size()] == '.' && qualified.compare(domain.size() + 1, op.size(), op) == 0;
}

std::vector<const OpDef*> OpRegistry::All() const {
  std::vector<const OpDef*> out;
  for (const auto& [key, def] : ops_) out.push_back(def.get());
  return out;
}

void CheckNodeAgainstDef(const Node& node, const OpDef& def) {
  int nin = static_cast<int>(node.inputs.size());
  int nout = static_cast<int>(node.outputs.size());
  RLFLOW_CHECK(nin >= def.min_inputs && nin <= def.max_inputs, "node ", node.Describe(), " has ", nin,
               " inputs, expected ", def.min_inputs,
               (def.min_inputs == def.max_inputs ? "" : " to " + std::to_string(def.max_inputs)));
  RLFLOW_CHECK(nout >= def.min_outputs && nout <= def.max_outputs, "node ", node.Describe(), " has ", nout,
               " outputs, expected ", def.min_outputs,
               (def.min_outputs == def.max_outputs ? "" : " to " + std::to_string(def.max_outputs)));
  for (int k = 0; k < std::min(nin, def.min_inputs); ++k)
    RLFLOW_CHECK(node.inputs[k] != kNoValue, "node ", node.Describe(), ": required input ", k, " is missing");
  for (const auto& [name, attr] : node.attrs) {
    const AttrSpec* spec = def.FindAttr(name);
    RLFLOW_CHECK(spec != nullptr, "node ", node.Describe(), " has unknown attribute '", name, "'");
    RLFLOW_CHECK(spec->type == attr.type, "node ", node.Describe(), ": attribute '", name, "' has type ",
                 AttrTypeName(attr.type), ", expected ", AttrTypeName(spec->type));
  }
  for (const AttrSpec& spec : def.attrs)
    RLFLOW_CHECK(!spec.required || node.attrs.count(spec.name), "node ", node.Describe(), ": required attribute '",
                 spec.name, "' is missing");
}

std::vector<TensorType> InferNodeShapes(const Graph& graph, NodeId id, const OpDef& def) {
  const Node& n = graph.node(id);
  std::vector<const TensorType*> types;
  std::vector<const TensorData*> constants;
  for (ValueId in : n.inputs) {
    if (in == kNoValue) {
      types.push_back(nullptr);
      constants.push_back(nullptr);
      continue;
    }
    const Value& v = graph.value(in);
    if (v.type.dtype == DType::kUndefined) {
      if (v.producer != kNoNode && graph.node(v.producer).opaque())
        Fail("node ", n.Describe(), ": the type of input '", v.name, "' is unknown: it is an output of ",
             graph.node(v.producer).Describe(),
             ", which rlflow does not model; declare its type in the model's value_info");
      Fail("node ", n.Describe(), ": the type of input '", v.name, "' is unknown");
    }
    types.push_back(&v.type);
    constants.push_back(v.initializer ? v.initializer.get() : v.known.get());
  }
  ShapeContext ctx(n, def, std::move(types), std::move(constants));
  std::vector<TensorType> out = def.shape(ctx);
  if (out.size() < n.outputs.size()) Fail("node ", n.Describe(), ": shape rule gave ", out.size(), " outputs");
  return out;
}

namespace {
// Declared (imported) types may leave dimensions unknown; known ones must agree.
bool Compatible(const TensorType& declared, const TensorType& inferred) {
  if (declared.dtype != DType::kUndefined && inferred.dtype != DType::kUndefined && declared.dtype != inferred.dtype)
    return false;
  if (!declared.rank_known || !inferred.rank_known) return true;
  if (declared.shape.size() != inferred.shape.size()) return false;
  for (size_t k = 0; k < declared.shape.size(); ++k)
    if (declared.shape[k] >= 0 && inferred.shape[k] >= 0 && declared.shape[k] != inferred.shape[k]) return false;
  return true;
}
}  // namespace

void InferAndSetNodeShapes(Graph& graph, NodeId id, const OpDef& def, std::vector<std::string>* stale_shapes) {
  std::vector<TensorType> out = InferNodeShapes(graph, id, def);
  const Node& n = graph.node(id);
  for (size_t k = 0; k < n.outputs.size(); ++k) {
    Value& v = graph.mutable_value(n.outputs[k]);
    const bool same_dtype =
        v.type.dtype == DType::kUndefined || out[k].dtype == DType::kUndefined || v.type.dtype == out[k].dtype;
    if (stale_shapes != nullptr && same_dtype && !Compatible(v.type, out[k]))
      stale_shapes->push_back("'" + v.name + "' is declared " + v.type.ToString() + " but node " + n.Describe() +
                              " computes " + out[k].ToString());
    else if ((v.type.dtype != DType::kUndefined || v.type.rank_known) && !Compatible(v.type, out[k]))
      Fail(same_dtype ? "shape" : "type", " mismatch at node ", n.Describe(), ": output '", v.name, "' is declared ",
           v.type.ToString(), " but the inputs give ", out[k].ToString());
    CheckTensorFits(out[k], "node " + n.Describe() + ": output '" + v.name + "'");
    v.type = out[k];
  }
}

AttributeMap EffectiveAttributes(const Graph& graph, NodeId id) {
  const Node& n = graph.node(id);
  const OpDef* def = n.opaque() ? nullptr : OpRegistry::Global().Find(n.domain, n.op);
  if (def == nullptr) return n.attrs;
  AttributeMap out;
  for (const auto& [name, a] : n.attrs) {
    const AttrSpec* spec = def->FindAttr(name);
    if (spec != nullptr && spec->default_value && *spec->default_value == a) continue;
    out[name] = a;
  }
  if (def->canonical_attrs) {
    std::vector<const TensorType*> types;
    std::vector<const TensorData*> constants;
    for (ValueId in : n.inputs) {
      const Value* v = in == kNoValue ? nullptr : &graph.value(in);
      types.push_back(v ? &v->type : nullptr);
      constants.push_back(v ? (v->initializer ? v->initializer.get() : v->known.get()) : nullptr);
    }
    ShapeContext ctx(n, *def, std::move(types), std::move(constants));
    try {
      def->canonical_attrs(ctx, &out);
    } catch (const Error&) {
      // Shapes not known well enough: the attributes as given.
    }
  }
  return out;
}

// The effective value of window attribute `name` of graph node `id`: the
// registry's canonical form (auto_pad resolved to pads, defaults omitted)
// with the defaults written out.
std::optional<Attribute> EffectiveWindowAttribute(const Graph& g, NodeId id, const std::string& name) {
  AttributeMap eff = EffectiveAttributes(g, id);
  auto it = eff.find(name);
  if (it != eff.end()) return it->second;
  const Node& n = g.node(id);
  if (name == "group") return Attribute::Int(1);
  if (n.inputs.empty() || n.inputs[0] == kNoValue) return std::nullopt;
  const TensorType& x = g.value(n.inputs[0]).type;
  if (!x.rank_known || x.rank() < 3) return std::nullopt;
  int64_t spatial = x.rank() - 2;
  if (name == "pads") return Attribute::Ints(std::vector<int64_t>(2 * spatial, 0));
  if (name == "strides" || name == "dilations") return Attribute::Ints(std::vector<int64_t>(spatial, 1));
  if (name == "kernel_shape" && n.op == "Conv" && n.inputs.size() > 1 && n.inputs[1] != kNoValue) {
    const TensorType& w = g.value(n.inputs[1]).type;
    if (w.rank_known && w.rank() == x.rank() && w.IsStatic())
      return Attribute::Ints(std::vector<int64_t>(w.shape.begin() + 2, w.shape.end()));
  }
  return std::nullopt;
}

void InferShapes(Graph& graph) {
  const OpRegistry& reg = OpRegistry::Global();
  for (NodeId id : graph.TopologicalOrder()) {
    const Node& n = graph.node(id);
    if (n.opaque()) continue;
    const OpDef* def = reg.Find(n.domain, n.op);
    RLFLOW_CHECK(def != nullptr, "node ", n.Describe(), ": operator is not in the registry");
    InferAndSetNodeShapes(graph, id, *def);
  }
}

int64_t NormalizeAxis(int64_t axis, int64_t rank, const AttrReader& ctx) {
  if (axis < -rank || axis >= std::max<int64_t>(rank, 1))
    ctx.Fail("axis " + std::to_string(axis) + " is out of range for rank " + std::to_string(rank));
  return axis < 0 ? axis + rank : axis;
}

Shape BroadcastShapes(const Shape& a, const Shape& b, const AttrReader& ctx) {
  size_t rank = std::max(a.size(), b.size());
  Shape out(rank);
  for (size_t k = 0; k < rank; ++k) {
    int64_t da = k < rank - a.size() ? 1 : a[k - (rank - a.size())];
    int64_t db = k < rank - b.size() ? 1 : b[k - (rank - b.size())];
    if (da == db || db == 1)
      out[k] = da;
    else if (da == 1)
      out[k] = db;
    else if (da < 0 || db < 0)
      out[k] = std::max(da, db) > 1 ? std::max(da, db) : kUnknownDim;
    else
      ctx.Fail("cannot broadcast shapes " + ShapeToString(a) + " and " + ShapeToString(b));
  }
  return out;
}

int64_t OpsetNeeded(const Graph& graph) {
  int64_t opset = graph.opset();
  for (NodeId id = 0; id < graph.num_nodes(); ++id) {
    const Node& n = graph.node(id);
    if (n.opaque() || !n.domain.empty()) continue;
    if (const OpDef* def = OpRegistry::Global().Find("", n.op)) opset = std::max<int64_t>(opset, def->since_opset);
  }
  return opset;
}

}  // namespace rlflow
