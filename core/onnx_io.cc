#include "core/onnx_io.h"

#include <onnx/checker.h>
#include <onnx/onnx_pb.h>
#include <onnx/shape_inference/implementation.h>
#include <onnx/version_converter/convert.h>

#include <climits>
#include <cstdint>
#include <cstring>
#include <map>
#include <set>

#include "core/error.h"
#include "core/file_util.h"
#include "core/op_registry.h"
#include "core/passes/fold_constants.h"

namespace rlflow {
namespace {

bool IsDefaultDomain(const std::string& d) { return d.empty() || d == "ai.onnx"; }

// ---- tensors ----
template <typename Field, typename T>
std::string PackField(const Field& field, int64_t n, const std::string& name) {
  if (static_cast<int64_t>(field.size()) != n)
    Fail("initializer '", name, "' has ", field.size(), " values, its shape needs ", n);
  std::string bytes(static_cast<size_t>(n) * sizeof(T), '\0');
  for (int64_t i = 0; i < n; ++i) {
    T v = static_cast<T>(field.Get(static_cast<int>(i)));
    std::memcpy(&bytes[i * sizeof(T)], &v, sizeof(T));
  }
  return bytes;
}

TensorData FromTensorProto(const onnx::TensorProto& t) {
  const std::string& name = t.name();
  if (t.data_location() == onnx::TensorProto::EXTERNAL)
    Fail("tensor '", name, "' stores its data in an external file, which is not supported");
  if (t.has_segment()) Fail("tensor '", name, "' is segmented, which is not supported");
  DType dtype = DTypeFromCode(t.data_type());
  if (dtype == DType::kUndefined || dtype == DType::kString)
    Fail("tensor '", name, "' has unsupported element type ", t.data_type());
  Shape shape(t.dims().begin(), t.dims().end());
  for (int64_t d : shape)
    if (d < 0) Fail("tensor '", name, "' has a negative dimension");
  int64_t n = NumElements(shape);
  if (t.has_raw_data()) {
    if (t.raw_data().size() != static_cast<size_t>(n) * DTypeSize(dtype))
      Fail("tensor '", name, "' has ", t.raw_data().size(), " bytes of data, its type ", DTypeName(dtype),
           ShapeToString(shape), " needs ", static_cast<size_t>(n) * DTypeSize(dtype));
    return TensorData(dtype, shape, t.raw_data());
  }
  std::string bytes;
  switch (dtype) {
    case DType::kFloat32: bytes = PackField<decltype(t.float_data()), float>(t.float_data(), n, name); break;
    case DType::kFloat64: bytes = PackField<decltype(t.double_data()), double>(t.double_data(), n, name); break;
    case DType::kInt64: bytes = PackField<decltype(t.int64_data()), int64_t>(t.int64_data(), n, name); break;
    case DType::kInt32: bytes = PackField<decltype(t.int32_data()), int32_t>(t.int32_data(), n, name); break;
    case DType::kInt16: bytes = PackField<decltype(t.int32_data()), int16_t>(t.int32_data(), n, name); break;
    case DType::kInt8: bytes = PackField<decltype(t.int32_data()), int8_t>(t.int32_data(), n, name); break;
    case DType::kUInt16: case DType::kFloat16: case DType::kBFloat16:
      bytes = PackField<decltype(t.int32_data()), uint16_t>(t.int32_data(), n, name); break;
    case DType::kUInt8: case DType::kBool: bytes = PackField<decltype(t.int32_data()), uint8_t>(t.int32_data(), n, name); break;
    case DType::kUInt32: bytes = PackField<decltype(t.uint64_data()), uint32_t>(t.uint64_data(), n, name); break;
    case DType::kUInt64: bytes = PackField<decltype(t.uint64_data()), uint64_t>(t.uint64_data(), n, name); break;
    default: Fail("tensor '", name, "' has unsupported element type ", DTypeName(dtype));
  }
  return TensorData(dtype, shape, std::move(bytes));
}

void ToTensorProto(const TensorData& data, const std::string& name, onnx::TensorProto* t) {
  t->set_name(name);
  t->set_data_type(static_cast<int32_t>(data.dtype()));
  for (int64_t d : data.shape()) t->add_dims(d);
  t->set_raw_data(data.bytes());
}

// ---- types ----
TensorType FromTypeProto(const onnx::TypeProto& tp, const std::string& name, bool* is_tensor) {
  TensorType t;
  *is_tensor = tp.has_tensor_type();
  if (!tp.has_tensor_type()) {
    t.rank_known = false;
    return t;
  }
  const auto& tt = tp.tensor_type();
  t.dtype = DTypeFromCode(tt.elem_type());
  if (!tt.has_shape()) {
    t.rank_known = false;
    return t;
  }
  for (const auto& dim : tt.shape().dim()) t.shape.push_back(dim.has_dim_value() ? dim.dim_value() : kUnknownDim);
  (void)name;
  return t;
}

void ToValueInfo(const std::string& name, const TensorType& t, onnx::ValueInfoProto* vi) {
  vi->set_name(name);
  auto* tt = vi->mutable_type()->mutable_tensor_type();
  tt->set_elem_type(static_cast<int32_t>(t.dtype));
  if (t.rank_known) {
    auto* shape = tt->mutable_shape();
    for (int64_t d : t.shape) {
      auto* dim = shape->add_dim();
      if (d >= 0) dim->set_dim_value(d);
    }
  }
}

// ---- attributes ----
Attribute FromAttributeProto(const onnx::AttributeProto& a) {
  switch (a.type()) {
    case onnx::AttributeProto::INT: return Attribute::Int(a.i());
    case onnx::AttributeProto::FLOAT: return Attribute::Float(a.f());
    case onnx::AttributeProto::STRING: return Attribute::String(a.s());
    case onnx::AttributeProto::INTS: return Attribute::Ints({a.ints().begin(), a.ints().end()});
    case onnx::AttributeProto::FLOATS: return Attribute::Floats({a.floats().begin(), a.floats().end()});
    case onnx::AttributeProto::STRINGS: return Attribute::Strings({a.strings().begin(), a.strings().end()});
    case onnx::AttributeProto::TENSOR:
      if (a.t().data_type() != onnx::TensorProto::STRING)
        return Attribute::Tensor(std::make_shared<const TensorData>(FromTensorProto(a.t())));
      break;
    default: break;
  }
  Attribute other;
  other.type = AttrType::kOther;
  other.s = a.SerializeAsString();
  return other;
}

void ToAttributeProto(const std::string& name, const Attribute& attr, onnx::AttributeProto* a) {
  if (attr.type == AttrType::kOther) {
    a->ParseFromString(attr.s);
    a->set_name(name);
    return;
  }
  a->set_name(name);
  switch (attr.type) {
    case AttrType::kInt: a->set_type(onnx::AttributeProto::INT); a->set_i(attr.i); break;
    case AttrType::kFloat: a->set_type(onnx::AttributeProto::FLOAT); a->set_f(attr.f); break;
    case AttrType::kString: a->set_type(onnx::AttributeProto::STRING); a->set_s(attr.s); break;
    case AttrType::kInts:
      a->set_type(onnx::AttributeProto::INTS);
      for (int64_t v : attr.ints) a->add_ints(v);
      break;
    case AttrType::kFloats:
      a->set_type(onnx::AttributeProto::FLOATS);
      for (float v : attr.floats) a->add_floats(v);
      break;
    case AttrType::kStrings:
      a->set_type(onnx::AttributeProto::STRINGS);
      for (const auto& v : attr.strings) a->add_strings(v);
      break;
    case AttrType::kTensor:
      a->set_type(onnx::AttributeProto::TENSOR);
      ToTensorProto(*attr.tensor, "", a->mutable_t());
      break;
    case AttrType::kOther: break;
  }
}

// Why a node cannot be modelled (empty if it can).
std::string ModelledReason(const onnx::NodeProto& np, const OpDef* def, int64_t opset, const AttributeMap& attrs,
                           const Node& probe) {
  if (def == nullptr) return "not in the op registry";
  if (opset < def->since_opset) return "opset " + std::to_string(opset) + " predates the modelled semantics";
  for (const auto& [name, attr] : attrs)
    if (attr.type == AttrType::kOther) return "attribute '" + name + "' has a form the registry does not model";
  try {
    CheckNodeAgainstDef(probe, *def);
  } catch (const Error& e) {
    return e.what();
  }
  (void)np;
  return "";
}

}  // namespace

Graph ImportOnnxFile(const std::string& path, const ImportOptions& options, ImportReport* report) {
  return ImportOnnxBytes(ReadFile(path, "model"), "'" + path + "'", options, report);
}

Graph ImportOnnxBytes(const std::string& bytes, const std::string& what, const ImportOptions& options,
                      ImportReport* report) {
  if (bytes.empty()) Fail("model ", what, " is empty");
  if (bytes.size() > static_cast<size_t>(INT32_MAX))
    Fail("model ", what, " is larger than 2 GB; models with external data files are not supported");
  onnx::ModelProto model;
  if (!model.ParseFromString(bytes))
    Fail("model ", what, " is not a valid ONNX protobuf (truncated or corrupt file?)");
  return ImportOnnxModel(std::move(model), what, options, report);
}

Graph ImportOnnxModel(onnx::ModelProto model, const std::string& what, const ImportOptions& options,
                      ImportReport* report) {
  ImportReport local;
  ImportReport& rep = report ? *report : local;
  if (model.ir_version() <= 0 || !model.has_graph())
    Fail("model ", what, " is not an ONNX model (no ir_version or no graph)");
  if (model.graph().node_size() == 0 && model.graph().output_size() == 0)
    Fail("model ", what, " has an empty graph");

  // ---- opsets ----
  int64_t opset = -1;
  for (const auto& imp : model.opset_import())
    if (IsDefaultDomain(imp.domain())) opset = imp.version();
  if (opset < 0) Fail("model ", what, " does not import the default ONNX opset");
  if (opset < kMinOpset || opset > kMaxOpset)
    Fail("model ", what, " uses unsupported opset ", opset, " (supported: ", kMinOpset, " to ", kMaxOpset, ")");
  rep.opset_before_conversion = static_cast<int>(opset);
  // ONNX shape inference fills value_info where types are missing (the
  // version converter needs it too, e.g. for Softmax 12 -> 13).
  auto onnx_shape_inference = [&]() {
    try {
      onnx::shape_inference::InferShapes(model, onnx::OpSchemaRegistry::Instance(),
                                         onnx::ShapeInferenceOptions(false, 0, true));
    } catch (const std::exception& e) {
      rep.warnings.push_back("ONNX shape inference failed: " + FirstLine(e.what()));
    }
  };
  onnx_shape_inference();
  if (opset < kCanonicalMinOpset) {
    try {
      model = onnx::version_conversion::ConvertVersion(model, kCanonicalMinOpset);
    } catch (const std::exception& e) {
      Fail("model ", what, ": converting opset ", opset, " to ", kCanonicalMinOpset, " failed: ", FirstLine(e.what()));
    }
    rep.warnings.push_back("converted opset " + std::to_string(opset) + " to " + std::to_string(kCanonicalMinOpset));
    opset = kCanonicalMinOpset;
    onnx_shape_inference();
  }

  const onnx::GraphProto& gp = model.graph();
  Graph g;
  ModelInfo& info = g.info();
  info.ir_version = model.ir_version();
  info.opsets.clear();
  for (const auto& imp : model.opset_import())
    info.opsets[IsDefaultDomain(imp.domain()) ? "" : imp.domain()] = imp.version();
  info.opsets[""] = opset;
  info.producer_name = model.producer_name();
  info.producer_version = model.producer_version();
  info.graph_name = gp.name().empty() ? "graph" : gp.name();
  info.doc = model.doc_string();
  for (const auto& kv : model.metadata_props()) info.metadata.push_back({kv.key(), kv.value()});
  for (const auto& f : model.functions()) info.functions.push_back(f.SerializeAsString());

  // Declared types: inputs, outputs and value_info (ONNX-inferred included).
  std::map<std::string, TensorType> declared;
  auto declare = [&](const onnx::ValueInfoProto& vi) {
    bool is_tensor = true;
    TensorType t = FromTypeProto(vi.type(), vi.name(), &is_tensor);
    if (!is_tensor) Fail("tensor '", vi.name(), "' is not a tensor (sequence/map/optional values are not supported)");
    declared[vi.name()] = t;
  };
  for (const auto& vi : gp.value_info()) declare(vi);
  for (const auto& vi : gp.output()) declare(vi);

  // Initializers, then graph inputs (skipping inputs that are initializers,
  // as IR < 4 models list them).
  std::set<std::string> init_names;
  for (const auto& t : gp.initializer()) {
    if (t.name().empty()) Fail("model ", what, " has an initializer without a name");
    g.AddInitializer(t.name(), FromTensorProto(t));
    init_names.insert(t.name());
  }
  if (gp.sparse_initializer_size() > 0) Fail("model ", what, " has sparse initializers, which are not supported");
  for (const auto& vi : gp.input()) {
    if (init_names.count(vi.name())) continue;
    bool is_tensor = true;
    TensorType t = FromTypeProto(vi.type(), vi.name(), &is_tensor);
    if (!is_tensor || t.dtype == DType::kUndefined)
      Fail("graph input '", vi.name(), "' is not a tensor of a supported element type");
    if (!t.rank_known) Fail("graph input '", vi.name(), "' has no shape");
    for (int64_t& d : t.shape) {
      if (d < 0) {
        d = options.free_dim_value;
        rep.warnings.push_back("graph input '" + vi.name() + "': unknown dimension bound to " +
                               std::to_string(options.free_dim_value));
      }
    }
    g.AddInput(vi.name(), t);
  }

  // Nodes: create all outputs first so that references resolve in any order.
  const OpRegistry& reg = OpRegistry::Global();
  std::vector<NodeId> ids;
  std::set<std::string> node_names;
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    std::string name = np.name();
    if (name.empty() || node_names.count(name)) name = g.UniqueName(np.op_type() + "_" + std::to_string(k));
    node_names.insert(name);
    std::vector<std::string> outs(np.output().begin(), np.output().end());
    // Omitted optional outputs ("") get private names.
    for (size_t o = 0; o < outs.size(); ++o)
      if (outs[o].empty()) outs[o] = g.UniqueName(name + ":unused" + std::to_string(o));
    for (const auto& o : outs)
      if (g.FindValue(o) != kNoValue) Fail("tensor '", o, "' is defined more than once (node '", name, "')");
    AttributeMap attrs;
    for (const auto& a : np.attribute()) attrs[a.name()] = FromAttributeProto(a);
    NodeId id = g.AddNode(np.op_type(), {}, static_cast<int>(outs.size()), std::move(attrs), name, outs);
    Node& node = g.mutable_node(id);
    node.domain = IsDefaultDomain(np.domain()) ? "" : np.domain();
    node.doc = np.doc_string();
    ids.push_back(id);
  }
  for (int k = 0; k < gp.node_size(); ++k) {
    const onnx::NodeProto& np = gp.node(k);
    Node& node = g.mutable_node(ids[k]);
    for (const auto& in : np.input()) {
      if (in.empty()) {
        node.inputs.push_back(kNoValue);
        continue;
      }
      ValueId v = g.FindValue(in);
      if (v == kNoValue)
        Fail("node ", node.Describe(), " reads tensor '", in,
             "', which is not a graph input, an initializer or a node output");
      node.inputs.push_back(v);
    }
    const OpDef* def = node.domain.empty() ? reg.Find("", node.op) : reg.Find(node.domain, node.op);
    std::string reason = ModelledReason(np, def, opset, node.attrs, node);
    if (!reason.empty()) {
      node.opaque_proto = std::make_shared<const std::string>(np.SerializeAsString());
      if (def != nullptr) rep.warnings.push_back("node " + node.Describe() + " kept opaque: " + reason);
    }
  }

  std::vector<ValueId> outputs;
  for (const auto& vi : gp.output()) {
    ValueId v = g.FindValue(vi.name());
    if (v == kNoValue) Fail("graph output '", vi.name(), "' is not produced by any node, input or initializer");
    outputs.push_back(v);
  }
  g.SetOutputs(outputs);

  g.Validate();  // cycles
  // Declared types on node outputs (opaque nodes rely on them; modelled
  // nodes are checked against them).
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    for (ValueId out : g.node(id).outputs) {
      auto it = declared.find(g.value(out).name);
      if (it != declared.end()) g.mutable_value(out).type = it->second;
    }
  rep.folded_nodes = InferShapesAndFold(g);
  // Graph outputs typed by the model must agree with what was inferred.
  for (const auto& vi : gp.output()) {
    const Value& v = g.value(g.FindValue(vi.name()));
    if (v.type.dtype == DType::kUndefined)
      rep.warnings.push_back("type of graph output '" + vi.name() + "' is unknown");
  }
  return g;
}

void ExportOnnxModel(const Graph& g, onnx::ModelProto* model) {
  const ModelInfo& info = g.info();
  model->Clear();
  model->set_ir_version(std::min<int64_t>(std::max<int64_t>(info.ir_version, 7), 8));
  model->set_producer_name("rlflow");
  model->set_producer_version("0.1");
  if (!info.doc.empty()) model->set_doc_string(info.doc);
  for (const auto& [domain, version] : info.opsets) {
    auto* imp = model->add_opset_import();
    imp->set_domain(domain);
    imp->set_version(version);
  }
  for (const auto& [k, v] : info.metadata) {
    auto* p = model->add_metadata_props();
    p->set_key(k);
    p->set_value(v);
  }
  for (const auto& f : info.functions) model->add_functions()->ParseFromString(f);

  onnx::GraphProto* gp = model->mutable_graph();
  gp->set_name(info.graph_name);
  for (ValueId in : g.inputs()) ToValueInfo(g.value(in).name, g.value(in).type, gp->add_input());
  std::vector<NodeId> order = g.TopologicalOrder();
  // Only values that are used (or are outputs) are exported as initializers.
  std::vector<char> used(g.num_values(), 0);
  for (NodeId id : order)
    for (ValueId in : g.node(id).inputs)
      if (in != kNoValue) used[in] = 1;
  for (ValueId out : g.outputs()) used[out] = 1;
  for (ValueId v : g.initializers())
    if (used[v]) ToTensorProto(*g.value(v).initializer, g.value(v).name, gp->add_initializer());
  std::set<ValueId> outputs(g.outputs().begin(), g.outputs().end());
  // ONNX Runtime rejects two nodes of one name: rename repeats ("x", "x_1", ...).
  std::set<std::string> node_names;
  for (NodeId id : order) node_names.insert(g.node(id).name);
  std::set<std::string> written_names;
  for (NodeId id : order) {
    const Node& n = g.node(id);
    onnx::NodeProto* np = gp->add_node();
    std::string node_name = n.name;
    if (!node_name.empty() && !written_names.insert(node_name).second) {
      for (int k = 1;; ++k) {
        std::string candidate = n.name + "_" + std::to_string(k);
        if (!node_names.count(candidate) && written_names.insert(candidate).second) {
          node_name = candidate;
          break;
        }
      }
    }
    if (n.opaque()) {
      np->ParseFromString(*n.opaque_proto);
      np->clear_input();
      np->clear_output();
    } else {
      np->set_op_type(n.op);
      if (!n.domain.empty()) np->set_domain(n.domain);
      for (const auto& [name, attr] : n.attrs) ToAttributeProto(name, attr, np->add_attribute());
      if (!n.doc.empty()) np->set_doc_string(n.doc);
    }
    np->set_name(node_name);
    size_t last = n.inputs.size();
    // Trailing omitted inputs are dropped, except on opaque nodes (unchanged).
    while (!n.opaque() && last > 0 && n.inputs[last - 1] == kNoValue) --last;
    for (size_t k = 0; k < last; ++k) np->add_input(n.inputs[k] == kNoValue ? "" : g.value(n.inputs[k]).name);
    // Outputs nobody reads are written as "" only when trailing optional ones
    // would otherwise be invented; keep names to stay faithful.
    for (ValueId out : n.outputs) np->add_output(g.value(out).name);
    for (ValueId out : n.outputs) {
      const Value& v = g.value(out);
      // onnx::checker requires a shape in every value_info: skip unknown ranks.
      if (!outputs.count(out) && v.type.dtype != DType::kUndefined && v.type.rank_known)
        ToValueInfo(v.name, v.type, gp->add_value_info());
    }
  }
  for (ValueId out : g.outputs()) ToValueInfo(g.value(out).name, g.value(out).type, gp->add_output());
  try {
    onnx::checker::check_model(*model);
  } catch (const std::exception& e) {
    Fail("the exported model fails onnx::checker: ", FirstLine(e.what()));
  }
}

std::string ExportOnnxBytes(const Graph& graph) {
  onnx::ModelProto model;
  ExportOnnxModel(graph, &model);
  std::string bytes;
  if (!model.SerializeToString(&bytes)) Fail("cannot serialize the exported model (larger than 2 GB?)");
  return bytes;
}

void WriteOnnxFile(const Graph& graph, const std::string& path) {
  CheckWritablePath(path, "model");
  WriteFileAtomically(path, ExportOnnxBytes(graph));
}

}  // namespace rlflow
