#include "core/onnx_branches.h"

#include <onnx/onnx_pb.h>

#include <algorithm>
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

// The subgraph attributes the stage takes: an If's branches, a Loop's or a
// Scan's body.
bool IsSubgraph(const std::string& op, const onnx::AttributeProto& a) {
  if (!a.has_g()) return false;
  return op == "If" ? a.name() == "then_branch" || a.name() == "else_branch"
                    : (op == "Loop" || op == "Scan") && a.name() == "body";
}

// The body's own inputs before its carried values: a Loop's iteration
// number and condition; none for a Scan (its state variables, then its
// scan inputs' elements).
int FirstCarried(const std::string& op) { return op == "Loop" ? 2 : 0; }

// A value declared as a tensor of a known element type (torch.onnx declares
// a list a Loop carries with no type at all).
bool IsTypedTensor(const onnx::ValueInfoProto& vi) {
  return vi.type().has_tensor_type() && vi.type().tensor_type().elem_type() != 0;
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

// Operators that make a sequence (or an optional) from no sequence.
bool MakesSequence(const onnx::NodeProto& n) {
  static const std::set<std::string> kOps = {"SequenceEmpty", "SequenceConstruct", "SplitToSequence", "Optional"};
  return IsDefault(n.domain()) && kOps.count(n.op_type());
}

// Splits the nodes of a Loop body that carries a sequence off `body` (see
// Subgraph::outside_nodes): the nodes that read a sequence input, make a
// sequence or read what such nodes compute go to `sub->outside_nodes`, and
// the body's outputs they compute are dropped from `body`. `bridges`: the
// values they read from the rest of the body that are not outputs of it
// (the caller makes them outputs).
void SplitOffSequences(onnx::GraphProto* body, Subgraph* sub, std::vector<std::string>* bridges) {
  std::set<std::string> outside;  // values computed from sequences, and the sequences
  for (int k = 2; k < body->input_size(); ++k)
    if (!IsTypedTensor(body->input(k))) outside.insert(body->input(k).name());
  std::set<std::string> defined;  // by the body's own inputs and kept nodes
  for (const auto& vi : body->input())
    if (!outside.count(vi.name())) defined.insert(vi.name());
  for (const auto& t : body->initializer()) defined.insert(t.name());
  google::protobuf::RepeatedPtrField<onnx::NodeProto> kept;
  std::vector<std::string> read_by_outside;
  for (const auto& n : body->node()) {
    std::set<std::string> reads(n.input().begin(), n.input().end());
    for (const auto& a : n.attribute()) {
      if (a.has_g()) onnx_detail::CollectOuterReads(a.g(), {}, &reads);
      for (const auto& sub_graph : a.graphs()) onnx_detail::CollectOuterReads(sub_graph, {}, &reads);
    }
    const bool out = MakesSequence(n) || std::any_of(reads.begin(), reads.end(),
                                                     [&](const std::string& r) { return outside.count(r) > 0; });
    if (!out) {
      *kept.Add() = n;
      for (const auto& o : n.output()) defined.insert(o);
      continue;
    }
    sub->outside_nodes.push_back(n.SerializeAsString());
    for (const auto& o : n.output()) outside.insert(o);
    for (const std::string& r : reads)
      if (defined.count(r) && std::find(read_by_outside.begin(), read_by_outside.end(), r) == read_by_outside.end())
        read_by_outside.push_back(r);
  }
  body->mutable_node()->Swap(&kept);
  google::protobuf::RepeatedPtrField<onnx::ValueInfoProto> outputs;
  std::set<std::string> listed;
  for (const auto& vi : body->output())
    if (!outside.count(vi.name()) && listed.insert(vi.name()).second) *outputs.Add() = vi;
  body->mutable_output()->Swap(&outputs);
  for (const std::string& name : read_by_outside)
    if (!listed.count(name)) bridges->push_back(name);
}

// Makes `names` (values of the model's graph) outputs of `model`, typed as
// `declared` (the subgraph as it came) states them or else as ONNX's shape
// inference on the model gives them; returns why not where neither does.
std::string AddTypedOutputs(const onnx::GraphProto& declared, const std::vector<std::string>& names,
                            onnx::ModelProto* model) {
  std::map<std::string, onnx::ValueInfoProto> types;
  const auto add = [&types](const onnx::GraphProto& from) {
    for (const auto* list : {&from.value_info(), &from.output(), &from.input()})
      for (const auto& vi : *list)
        if (IsTypedTensor(vi)) types.emplace(vi.name(), vi);
  };
  add(declared);
  add(model->graph());
  if (std::any_of(names.begin(), names.end(), [&](const std::string& n) { return !types.count(n); })) {
    onnx::ModelProto copy = *model;
    std::string why;
    InferValueInfo(&copy, &why);
    add(copy.graph());
  }
  for (const std::string& name : names) {
    auto it = types.find(name);
    if (it == types.end())
      return "the sequence nodes of its body read '" + name + "', whose type ONNX's shape inference does not know";
    *model->mutable_graph()->add_output() = it->second;
  }
  return "";
}

}  // namespace

std::vector<Subgraph> ExtractSubgraphs(const onnx::ModelProto& model) {
  const onnx::GraphProto& g = model.graph();
  int64_t opset = 0;  // of the default domain
  for (const auto& op : model.opset_import())
    if (IsDefault(op.domain())) opset = op.version();
  std::map<std::string, const onnx::TensorProto*> inits;
  std::map<std::string, const onnx::NodeProto*> constants;  // Constant nodes, by their output
  std::map<std::string, const onnx::ValueInfoProto*> typed;
  std::set<std::string> inputs;
  for (const auto& t : g.initializer()) inits[t.name()] = &t;
  for (const auto& vi : g.input()) inputs.insert(vi.name());
  const auto typed_from = [&typed](const onnx::GraphProto& from) {
    for (const auto& vi : from.value_info())
      if (IsTypedTensor(vi)) typed[vi.name()] = &vi;
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
    if ((np.op_type() != "If" && np.op_type() != "Loop" && np.op_type() != "Scan") || !IsDefault(np.domain())) continue;
    // Scan-8 (a batch axis, sequence lengths) is upgraded at import; its
    // body is left as it is.
    if (np.op_type() == "Scan" && opset < 9) continue;
    for (const auto& a : np.attribute()) {
      if (!IsSubgraph(np.op_type(), a)) continue;
      Subgraph b;
      b.node = k;
      b.op = np.op_type();
      b.node_name = np.name().empty() ? b.op + "_" + std::to_string(k) : np.name();
      b.attribute = a.name();
      b.nodes = a.g().node_size();
      onnx::GraphProto interface;
      *interface.mutable_input() = a.g().input();
      *interface.mutable_output() = a.g().output();
      b.interface = interface.SerializeAsString();
      // A Loop body that carries a sequence: its model is the body without
      // its sequence nodes (a copy made only then; a branch is read in place).
      bool sequences = false;
      for (int f = 2; b.op == "Loop" && f < a.g().input_size(); ++f)
        sequences = sequences || !IsTypedTensor(a.g().input(f));
      onnx::GraphProto split;
      std::vector<std::string> bridges;  // outputs the model gets for its sequence nodes
      if (sequences) {
        split = a.g();
        SplitOffSequences(&split, &b, &bridges);
      }
      const onnx::GraphProto& body = sequences ? split : a.g();
      std::set<std::string> reads;
      CollectOuterReads(body, {}, &reads);
      onnx::ModelProto m;
      m.set_ir_version(model.ir_version());
      *m.mutable_opset_import() = model.opset_import();
      *m.mutable_functions() = model.functions();
      m.set_producer_name("rlflow (the " + b.attribute + " of " + b.op + " '" + b.node_name + "')");
      onnx::GraphProto* mg = m.mutable_graph();
      mg->set_name(a.g().name());
      // A body's own inputs first (an If branch has none), as declared:
      // each must be a typed tensor for the body to be a model.
      const size_t first_carried = FirstCarried(b.op);
      for (const auto& vi : body.input()) {
        if (!b.why_not.empty()) break;
        const bool tensor = IsTypedTensor(vi);
        if (!tensor && b.op == "Loop" && b.formal_inputs.size() >= first_carried) {  // a carried sequence
          b.formal_inputs.push_back(vi.name());
          continue;
        }
        if (!tensor) {
          b.why_not = "its input '" + vi.name() + "' is not a typed tensor";
          break;
        }
        // A loop-carried value declared without a shape may change shape
        // from step to step, and a model's input needs one (its dimensions
        // symbolic where they may change, so that nothing is folded at the
        // first step's). A Scan's alike: its rank at least.
        if (b.formal_inputs.size() >= first_carried && !vi.type().tensor_type().has_shape()) {
          b.why_not = std::string(b.op == "Loop" ? "its loop-carried input '" : "its input '") + vi.name() +
                      "' declares no shape";
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
        for (const auto& n : body.node()) *mg->add_node() = n;
        for (const auto& t : body.initializer()) *mg->add_initializer() = t;
        for (const auto& t : body.sparse_initializer()) *mg->add_sparse_initializer() = t;
        for (const auto& vi : body.value_info()) *mg->add_value_info() = vi;
        for (const auto& vi : body.output()) *mg->add_output() = vi;
        if (!bridges.empty()) b.why_not = AddTypedOutputs(a.g(), bridges, &m);
        for (const auto& vi : mg->input()) b.inputs.push_back(vi.name());
        for (const auto& vi : mg->output()) b.outputs.push_back(vi.name());
        if (b.why_not.empty()) b.model = m.SerializeAsString();
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
  // The subgraph's own inputs and outputs as it declared them (the model's
  // other inputs are read from the outer graph again).
  onnx::GraphProto interface;
  if (!interface.ParseFromString(branch.interface)) Fail(what, ": the subgraph's interface does not parse");
  ng.clear_input();
  for (const auto& vi : interface.input()) *ng.add_input() = vi;
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
  for (const std::string& bytes : branch.outside_nodes)
    if (!ng.add_node()->ParseFromString(bytes)) Fail(what, ": a node kept outside it does not parse");
  *ng.mutable_output() = interface.output();
  for (auto& vi : *ng.mutable_output())  // renamed with what defines it
    if (auto it = to.find(vi.name()); it != to.end()) vi.set_name(it->second);
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
