#include "core/onnx_branches.h"

#include <onnx/onnx_pb.h>

#include <map>
#include <set>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/onnx_detail.h"

namespace rlflow {
namespace {

using onnx_detail::CollectOuterReads;
using onnx_detail::FreshNames;
using onnx_detail::InferValueInfo;
using onnx_detail::IsDefault;
using onnx_detail::SameTensorBytes;

// The subgraph attributes the stage takes: an If's branches, a Loop's body.
bool IsSubgraph(const std::string& op, const onnx::AttributeProto& a) {
  if (!a.has_g()) return false;
  return op == "If" ? a.name() == "then_branch" || a.name() == "else_branch" : op == "Loop" && a.name() == "body";
}

bool IsExternal(const onnx::TensorProto& t) { return t.data_location() == onnx::TensorProto::EXTERNAL; }

// The same tensor up to its name: type, shape and data (in any of the
// fields that can hold it, or in an external data file under `data_dir`).
bool SameTensor(const onnx::TensorProto& a, const onnx::TensorProto& b, const std::string* data_dir) {
  if (a.data_type() != b.data_type() || a.dims_size() != b.dims_size()) return false;
  for (int k = 0; k < a.dims_size(); ++k)
    if (a.dims(k) != b.dims(k)) return false;
  if (IsExternal(a) && IsExternal(b) && a.external_data().size() == b.external_data().size()) {
    bool same_place = true;  // the same bytes of the same file
    for (int k = 0; k < a.external_data_size(); ++k)
      same_place = same_place && a.external_data(k).key() == b.external_data(k).key() &&
                   a.external_data(k).value() == b.external_data(k).value();
    if (same_place) return true;
  }
  if (!a.raw_data().empty() && !b.raw_data().empty()) return a.raw_data() == b.raw_data();
  try {
    // One as raw data, the other as float_data (say), or in a data file.
    return SameTensorBytes(a, b, data_dir);
  } catch (const Error&) {
    onnx::TensorProto x = a, y = b;
    x.clear_name(), y.clear_name(), x.clear_doc_string(), y.clear_doc_string();
    return x.SerializeAsString() == y.SerializeAsString();
  }
}

// Renames, in `g` and the subgraphs it holds, every use and definition of
// the names in `to` (names are unique across nested scopes: no shadowing).
void Rename(onnx::GraphProto* g, const std::map<std::string, std::string>& to) {
  const auto fix = [&](std::string* name) {
    auto it = to.find(*name);
    if (it != to.end()) *name = it->second;
  };
  for (auto& t : *g->mutable_initializer()) fix(t.mutable_name());
  for (auto& vi : *g->mutable_value_info()) fix(vi.mutable_name());
  for (auto& vi : *g->mutable_output()) fix(vi.mutable_name());
  for (auto& n : *g->mutable_node()) {
    for (auto& in : *n.mutable_input()) fix(&in);
    for (auto& out : *n.mutable_output()) fix(&out);
    for (auto& a : *n.mutable_attribute()) {
      if (a.has_g()) Rename(a.mutable_g(), to);
      for (auto& sub : *a.mutable_graphs()) Rename(&sub, to);
    }
  }
}

}  // namespace

std::vector<Subgraph> ExtractSubgraphs(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  std::map<std::string, const onnx::TensorProto*> inits;
  std::map<std::string, const onnx::NodeProto*> constants;  // Constant nodes, by their output
  std::map<std::string, const onnx::ValueInfoProto*> typed;
  std::set<std::string> inputs;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  for (const auto& vi : g.input()) inputs.insert(vi.name());
  const auto typed_from = [&typed](const onnx::GraphProto& from) {
    for (const auto& vi : from.value_info())
      if (vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0) typed[vi.name()] = &vi;
  };
  typed_from(g);
  // Values of the outer graph a branch reads that the model does not type:
  // ONNX's shape inference on a copy, once (exporters rarely write
  // value_info; torch.onnx does not).
  onnx::ModelProto inferred;
  std::string inference_failed;
  const auto infer_once = [&] {
    if (inferred.has_graph() || !inference_failed.empty()) return;
    inferred = model;
    if (!InferValueInfo(&inferred, &inference_failed) && inference_failed.empty()) inference_failed = "it failed";
    typed_from(inferred.graph());
  };
  for (const auto& n : g.node())
    if (n.op_type() == "Constant" && IsDefault(n.domain()) && n.output_size() == 1) constants[n.output(0)] = &n;
  std::vector<Subgraph> out;
  for (int k = 0; k < g.node_size(); ++k) {
    const onnx::NodeProto& np = g.node(k);
    if ((np.op_type() != "If" && np.op_type() != "Loop") || !IsDefault(np.domain())) continue;
    for (const auto& a : np.attribute()) {
      if (!IsSubgraph(np.op_type(), a)) continue;
      Subgraph b;
      b.node = k;
      b.op = np.op_type();
      b.node_name = np.name().empty() ? b.op + "_" + std::to_string(k) : np.name();
      b.attribute = a.name();
      b.nodes = a.g().node_size();
      std::set<std::string> reads;
      CollectOuterReads(a.g(), {}, &reads);
      onnx::ModelProto m;
      m.set_ir_version(model.ir_version());
      *m.mutable_opset_import() = model.opset_import();
      *m.mutable_functions() = model.functions();
      m.set_producer_name("rlflow (the " + b.attribute + " of " + b.op + " '" + b.node_name + "')");
      onnx::GraphProto* mg = m.mutable_graph();
      mg->set_name(a.g().name());
      // A Loop body's own inputs first (an If branch has none), as declared:
      // each must be a typed tensor for the body to be a model.
      for (const auto& vi : a.g().input()) {
        if (!vi.type().has_tensor_type() || vi.type().tensor_type().elem_type() == 0) {
          b.why_not = "its input '" + vi.name() + "' is not a typed tensor (a sequence, or no declared type)";
          break;
        }
        // A loop-carried value declared without a shape may change shape
        // from step to step, and a model's input needs one (its dimensions
        // symbolic where they may change, so that nothing is folded at the
        // first step's).
        if (b.formal_inputs.size() >= 2 && !vi.type().tensor_type().has_shape()) {
          b.why_not = "its loop-carried input '" + vi.name() + "' declares no shape";
          break;
        }
        *mg->add_input() = vi;
        b.formal_inputs.push_back(vi.name());
      }
      // Outer inputs in the model's order, then the weights and constants.
      for (const auto& vi : g.input())
        if (reads.count(vi.name())) *mg->add_input() = vi;
      for (const std::string& name : reads) {
        if (!b.why_not.empty()) break;
        if (inputs.count(name)) {
          if (inits.count(name)) *mg->add_initializer() = *inits[name];  // its default value
        } else if (inits.count(name)) {
          *mg->add_initializer() = *inits[name];
        } else if (constants.count(name)) {
          *mg->add_node() = *constants[name];
        } else {
          if (!typed.count(name)) infer_once();
          if (!typed.count(name)) {
            b.why_not = "it reads '" + name + "', computed in the outer graph, whose type ONNX's shape inference " +
                        (inference_failed.empty() ? "does not know" : "could not give (" + inference_failed + ")");
            break;
          }
          *mg->add_input() = *typed[name];
        }
      }
      if (b.why_not.empty()) {
        for (const auto& n : a.g().node()) *mg->add_node() = n;
        for (const auto& t : a.g().initializer()) *mg->add_initializer() = t;
        for (const auto& t : a.g().sparse_initializer()) *mg->add_sparse_initializer() = t;
        for (const auto& vi : a.g().value_info()) *mg->add_value_info() = vi;
        for (const auto& vi : a.g().output()) *mg->add_output() = vi;
        for (const auto& vi : mg->input()) b.inputs.push_back(vi.name());
        for (const auto& vi : mg->output()) b.outputs.push_back(vi.name());
        b.model = m.SerializeAsString();
      }
      out.push_back(std::move(b));
    }
  }
  return out;
}

void ReplaceSubgraph(onnx::ModelProto* model, const Subgraph& branch, const onnx::ModelProto& optimised,
                     const std::string* data_dir) {
  onnx::GraphProto* g = model->mutable_graph();
  if (branch.node < 0 || branch.node >= g->node_size() || g->node(branch.node).op_type() != branch.op)
    Fail("node ", branch.node, " of the model is not a", branch.op == "If" ? "n " : " ", branch.op);
  onnx::AttributeProto* attr = nullptr;
  for (auto& a : *g->mutable_node(branch.node)->mutable_attribute())
    if (a.name() == branch.attribute && IsSubgraph(branch.op, a)) attr = &a;
  if (attr == nullptr) Fail(branch.op, " '", branch.node_name, "' has no ", branch.attribute);
  const std::string what = "the optimised " + branch.attribute + " of " + branch.op + " '" + branch.node_name + "'";
  // The interface: inputs by name, outputs in order.
  const std::set<std::string> in_before(branch.inputs.begin(), branch.inputs.end());
  std::set<std::string> in_after;
  for (const auto& vi : optimised.graph().input()) in_after.insert(vi.name());
  if (in_before != in_after) Fail(what, " has other inputs than the branch");
  const int outputs = static_cast<int>(branch.outputs.size());
  if (outputs != optimised.graph().output_size())
    Fail(what, " has ", optimised.graph().output_size(), " outputs, the branch ", outputs);
  for (int k = 0; k < outputs; ++k)
    if (branch.outputs[k] != optimised.graph().output(k).name())
      Fail(what, ": output ", k, " is '", optimised.graph().output(k).name(), "', was '", branch.outputs[k], "'");
  // Opsets: the branch runs at the model's.
  std::vector<const onnx::OperatorSetIdProto*> missing;
  for (const auto& op : optimised.opset_import()) {
    const std::string domain = IsDefault(op.domain()) ? "" : op.domain();
    bool found = false;
    for (const auto& mine : model->opset_import()) {
      if ((IsDefault(mine.domain()) ? "" : mine.domain()) != domain) continue;
      found = true;
      if (mine.version() != op.version())
        Fail(what, " is at opset ", op.version(), " of domain '", domain, "', the model at ", mine.version());
    }
    if (!found) missing.push_back(&op);
  }
  for (const auto* op : missing) *model->add_opset_import() = *op;
  onnx::GraphProto ng = optimised.graph();
  // The formal inputs stay the subgraph's, in their order; the others are
  // read from the outer graph again.
  std::map<std::string, const onnx::ValueInfoProto*> declared;
  for (const auto& vi : optimised.graph().input()) declared[vi.name()] = &vi;
  ng.clear_input();
  for (const std::string& name : branch.formal_inputs) *ng.add_input() = *declared.at(name);
  ng.set_name(attr->g().name());
  // What the outer graph defines: a subgraph reads it, never redefines it.
  std::set<std::string> outer;
  std::map<std::string, const onnx::TensorProto*> outer_inits;
  for (const auto& vi : g->input()) outer.insert(vi.name());
  for (const auto& t : g->initializer()) outer.insert(t.name()), outer_inits[t.name()] = &t;
  for (const auto& t : g->sparse_initializer()) outer.insert(t.values().name());
  for (const auto& n : g->node())
    for (const auto& o : n.output()) outer.insert(o);
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  for (const auto& t : ng.initializer()) {
    auto it = outer_inits.find(t.name());
    if (it != outer_inits.end() && SameTensor(*it->second, t, data_dir)) continue;
    *kept.Add() = t;
  }
  ng.mutable_initializer()->Swap(&kept);
  FreshNames fresh;
  fresh.Collect(model->graph());
  fresh.Collect(ng);
  std::map<std::string, std::string> to;
  const auto define = [&](const std::string& name) {
    if (!name.empty() && outer.count(name) && !to.count(name)) to[name] = fresh.Fresh(name);
  };
  for (const auto& t : ng.initializer()) define(t.name());
  for (const auto& n : ng.node())
    for (const auto& o : n.output()) define(o);
  Rename(&ng, to);
  *attr->mutable_g() = std::move(ng);
}

int DropUnreadInitializers(onnx::ModelProto* model) {
  onnx::GraphProto* g = model->mutable_graph();
  std::set<std::string> used;
  for (const auto& vi : g->input()) used.insert(vi.name());
  for (const auto& vi : g->output()) used.insert(vi.name());
  for (const auto& n : g->node()) {
    for (const auto& in : n.input()) used.insert(in);
    for (const auto& a : n.attribute()) {
      if (a.has_g()) CollectOuterReads(a.g(), {}, &used);
      for (const auto& sub : a.graphs()) CollectOuterReads(sub, {}, &used);
    }
  }
  google::protobuf::RepeatedPtrField<onnx::TensorProto> kept;
  int dropped = 0;
  for (const auto& t : g->initializer()) {
    if (used.count(t.name()))
      *kept.Add() = t;
    else
      ++dropped;
  }
  g->mutable_initializer()->Swap(&kept);
  return dropped;
}

}  // namespace rlflow
