#pragma once
// The graph IR: a DAG of operator nodes over tensor values, with graph
// inputs, weights (initializers) and outputs.
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "core/attribute.h"
#include "core/tensor.h"

namespace rlflow {

using ValueId = int32_t;
using NodeId = int32_t;
constexpr ValueId kNoValue = -1;  // an omitted optional input
constexpr NodeId kNoNode = -1;

struct Value {
  std::string name;
  TensorType type;
  NodeId producer = kNoNode;  // kNoNode for graph inputs and initializers
  int output_index = 0;
  TensorDataPtr initializer;  // set for weights / constants
  bool is_graph_input = false;
  // A graph input with a default value (an initializer of the same name, as
  // ONNX allows from IR 4): still an input, never treated as a constant.
  TensorDataPtr default_value;
  // Values a graph input is fed when the model is run on sample inputs (the
  // numeric check, timing), given by the user (--input_data); without them
  // RandomInputs fills the input. Never exported.
  TensorDataPtr sample_data;
  // Computed at run time from symbolic input dimensions (e.g. Shape of a
  // tensor with a dynamic batch): never folded into a constant, so that the
  // written model stays general. `known` holds its value at the dimensions the
  // graph is bound to, for the shape rules of the nodes that read it.
  bool symbolic = false;
  TensorDataPtr known;
  // A sequence, map or optional value (ONNX's non-tensor types): only opaque
  // nodes produce or read it, `type` stays unknown, and its declared type
  // travels in ModelInfo::interface_types for export. Never run, timed,
  // filled with sample data or compared.
  bool non_tensor = false;
  // For a graph input of a graph cut out of a larger one (a node timed
  // alone, a rewrite's replacement): in the larger graph the value is a
  // permuted view (PermutedView in core/node_key.h). The node key counts it
  // and the CPU timing backend feeds the input as such a view. Never
  // exported.
  bool arrives_permuted = false;
  std::string doc;
};

struct Node {
  std::string name;
  std::string op;               // operator type, e.g. "Conv"
  std::string domain;           // "" is the default ONNX domain
  std::vector<ValueId> inputs;  // kNoValue for omitted optional inputs
  std::vector<ValueId> outputs;
  AttributeMap attrs;
  // For operators the registry does not model: the original serialized ONNX
  // NodeProto, exported unchanged (only tensor names are re-linked).
  std::shared_ptr<const std::string> opaque_proto;
  bool opaque() const { return opaque_proto != nullptr; }
  // Opaque nodes with subgraphs (If, Loop, Scan) also read tensors of the
  // outer graph by name: those follow the explicit inputs in `inputs` (so
  // they stay alive and ordered) and are listed by the names the subgraphs
  // use. Only the explicit inputs are exported as node inputs.
  std::vector<std::string> implicit_inputs;
  size_t num_explicit_inputs() const { return inputs.size() - implicit_inputs.size(); }
  // The imported NodeProto, kept so that a node the registry turns out to be
  // unable to run (e.g. Dropout in training mode) can become opaque.
  std::shared_ptr<const std::string> source_proto;
  std::string doc;
  std::string Describe() const;  // "'conv1' (Conv)"
};

// Model-level information kept for export.
struct ModelInfo {
  int64_t ir_version = 8;
  std::map<std::string, int64_t> opsets = {{"", 17}};  // domain -> version
  // The default-domain opset of the imported file, before an upgrade to the
  // canonical opset (0: not imported). WriteOnnxFile converts back to it.
  int64_t source_opset = 0;
  std::string producer_name;
  std::string producer_version;
  std::string graph_name = "rlflow";
  std::string doc;
  // The model's identity (ModelProto.model_version and .domain) and the
  // graph's documentation, written back unchanged.
  int64_t model_version = 0;
  std::string model_domain;
  std::string graph_doc;
  std::vector<std::pair<std::string, std::string>> metadata;
  // Serialized FunctionProtos and other model parts exported unchanged.
  std::vector<std::string> functions;
  // The declared types (serialized onnx::TypeProto) of the graph inputs and
  // outputs, by name, written back unchanged so that the written model keeps
  // its interface (symbolic dimension names included).
  std::map<std::string, std::string> interface_types;
  // The graph inputs' and outputs' doc strings, by name (those not empty).
  std::map<std::string, std::string> interface_docs;
  // Some graph input has a symbolic dimension (bound to a value for the
  // optimisation, see ImportOptions::free_dim_value).
  bool symbolic_dims = false;
  // Symbolic axes of graph inputs that the model itself fixes (a CNN's
  // channels where the input declares no shape or names every dimension,
  // read by a Conv whose weight has 3: its nodes infer at the bound value
  // only), by input name: bound at that value for every binding, the
  // check's second one included (see ImportOnnxModel's probe).
  std::map<std::string, std::vector<int>> fixed_axes;
  // The imported file kept tensors in external data files: the written model
  // keeps its weights external too (WriteOptions::external).
  bool external_data = false;
  // The external data files it names (locations relative to the model's
  // directory), each once, sorted: files the model is read from, which an
  // output must never replace.
  std::vector<std::string> external_files;
  // Whether the runtime the graph is costed for reads a Transpose's output
  // as a permuted view of its input (rlflow's CPU executor: ATen's permute),
  // so that a node reading it is another cost key (PermutedView). False
  // where every tensor is materialised contiguous (ONNX Runtime: a
  // Transpose copies, or its optimiser cancels a pair and the nodes between
  // run on the original layout): a node costs the same whatever Transposes
  // are above it. Set from TimingBackend::permuted_views by the optimiser.
  bool permuted_views = true;
};

class Graph {
 public:
  Graph() = default;

  // ---- construction ----
  ValueId AddInput(const std::string& name, const TensorType& type);
  ValueId AddInitializer(const std::string& name, TensorDataPtr data);
  ValueId AddInitializer(const std::string& name, TensorData data);
  // Adds a node with `num_outputs` fresh output values (named
  // "<node name>:<k>" unless `output_names` is given). Types are unknown
  // until shape inference runs.
  NodeId AddNode(const std::string& op, const std::vector<ValueId>& inputs, int num_outputs, AttributeMap attrs = {},
                 const std::string& name = "", const std::vector<std::string>& output_names = {});
  void SetOutputs(const std::vector<ValueId>& outputs) { outputs_ = outputs; }
  // Replaces every use of `from` (node inputs and graph outputs) by `to`.
  void ReplaceAllUses(ValueId from, ValueId to);
  // Gives a value another name (which must be free).
  void RenameValue(ValueId value, const std::string& name);
  // Turns the value into an initializer holding `data` and detaches it from
  // its producer (which becomes dead if it has no other used output).
  void MakeConstant(ValueId value, TensorDataPtr data);
  // Drops nodes whose outputs are unused and values nobody refers to.
  // Invalidates NodeIds and ValueIds; the optional maps receive old id ->
  // new id (kNoNode / kNoValue for removed ones).
  void RemoveDeadCode(std::vector<NodeId>* node_map = nullptr, std::vector<ValueId>* value_map = nullptr);

  // ---- access ----
  const Value& value(ValueId id) const { return values_.at(id); }
  Value& mutable_value(ValueId id) { return values_.at(id); }
  const Node& node(NodeId id) const { return nodes_.at(id); }
  Node& mutable_node(NodeId id) { return nodes_.at(id); }
  int num_values() const { return static_cast<int>(values_.size()); }
  int num_nodes() const { return static_cast<int>(nodes_.size()); }
  const std::vector<ValueId>& inputs() const { return inputs_; }
  const std::vector<ValueId>& outputs() const { return outputs_; }
  std::vector<ValueId> initializers() const;
  ValueId FindValue(const std::string& name) const;  // kNoValue if absent
  bool IsConstant(ValueId v) const { return v != kNoValue && values_.at(v).initializer != nullptr; }
  ModelInfo& info() { return info_; }
  const ModelInfo& info() const { return info_; }
  int64_t opset() const;  // default-domain opset

  // Consumers of each value: (node, input index) pairs.
  std::vector<std::vector<std::pair<NodeId, int>>> Consumers() const;

  // ---- analysis ----
  // Nodes in a topological order (stable: ties keep insertion order).
  // Throws rlflow::Error naming the nodes of a cycle.
  std::vector<NodeId> TopologicalOrder() const;
  // Whether the graph has no cycle (the same walk, without the stable order
  // or the error: what a search refusing a rewrite needs).
  bool IsAcyclic() const;
  // Checks references, arity of nodes and acyclicity; throws on failure.
  void Validate() const;
  // Hash equal for isomorphic graphs however they were built: depends on
  // operators and their effective attributes (OperatorHash in
  // core/node_key.h: an attribute written out at its default is the same
  // node), wiring, graph input/output order, types and weight contents, not
  // on names or node insertion order.
  uint64_t StructuralHash() const;
  // Graphviz DOT text.
  std::string ToDot() const;
  // Counts by operator type (opaque ops included).
  std::map<std::string, int> OpCounts() const;
  // Number of weight elements.
  int64_t NumParameters() const;

  std::string UniqueName(const std::string& base) const;

 private:
  void IndexName(const std::string& name, ValueId id);

  std::vector<Value> values_;
  std::vector<Node> nodes_;
  std::vector<ValueId> inputs_;
  std::vector<ValueId> outputs_;
  std::map<std::string, ValueId> by_name_;
  ModelInfo info_;
};

}  // namespace rlflow
