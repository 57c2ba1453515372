#include "core/graph.h"

#include <algorithm>
#include <functional>
#include <set>
#include <sstream>

#include "core/error.h"
#include "core/node_key.h"

namespace rlflow {

std::string Node::Describe() const { return "'" + name + "' (" + (domain.empty() ? "" : domain + ".") + op + ")"; }

void Graph::IndexName(const std::string& name, ValueId id) {
  RLFLOW_CHECK(!name.empty(), "a tensor needs a name");
  auto [it, inserted] = by_name_.emplace(name, id);
  RLFLOW_CHECK(inserted, "tensor '", name, "' is defined more than once");
}

std::string Graph::UniqueName(const std::string& base) const {
  // Also free as a node name whose outputs get the default "<name>:0".
  auto taken = [&](const std::string& n) { return by_name_.count(n) || by_name_.count(n + ":0"); };
  if (!taken(base)) return base;
  for (int k = 1;; ++k) {
    std::string candidate = base + "_" + std::to_string(k);
    if (!taken(candidate)) return candidate;
  }
}

void Graph::RenameValue(ValueId value, const std::string& name) {
  Value& v = values_.at(value);
  if (v.name == name) return;
  IndexName(name, value);
  auto it = by_name_.find(v.name);
  if (it != by_name_.end() && it->second == value) by_name_.erase(it);
  v.name = name;
}

ValueId Graph::AddInput(const std::string& name, const TensorType& type) {
  ValueId id = static_cast<ValueId>(values_.size());
  IndexName(name, id);
  Value v;
  v.name = name;
  v.type = type;
  v.is_graph_input = true;
  values_.push_back(std::move(v));
  inputs_.push_back(id);
  return id;
}

ValueId Graph::AddInitializer(const std::string& name, TensorDataPtr data) {
  RLFLOW_CHECK(data != nullptr, "initializer '", name, "' has no data");
  ValueId id = static_cast<ValueId>(values_.size());
  IndexName(name, id);
  Value v;
  v.name = name;
  v.type = data->type();
  v.initializer = std::move(data);
  values_.push_back(std::move(v));
  return id;
}

ValueId Graph::AddInitializer(const std::string& name, TensorData data) {
  return AddInitializer(name, std::make_shared<const TensorData>(std::move(data)));
}

NodeId Graph::AddNode(const std::string& op, const std::vector<ValueId>& inputs, int num_outputs, AttributeMap attrs,
                      const std::string& name, const std::vector<std::string>& output_names) {
  NodeId id = static_cast<NodeId>(nodes_.size());
  for (ValueId in : inputs) {
    RLFLOW_CHECK(in == kNoValue || (in >= 0 && in < num_values()), "node '", name, "' (", op, ") reads value id ", in,
                 ", which does not exist");
  }
  RLFLOW_CHECK(output_names.empty() || static_cast<int>(output_names.size()) == num_outputs, "node '", name,
               "': ", output_names.size(), " output names for ", num_outputs, " outputs");
  Node n;
  n.name = name.empty() ? UniqueName(op + "_" + std::to_string(id)) : name;
  n.op = op;
  n.inputs = inputs;
  n.attrs = std::move(attrs);
  for (int k = 0; k < num_outputs; ++k) {
    ValueId vid = static_cast<ValueId>(values_.size());
    Value v;
    v.name = output_names.empty() ? UniqueName(n.name + ":" + std::to_string(k)) : output_names[k];
    v.producer = id;
    v.output_index = k;
    v.type.rank_known = false;
    IndexName(v.name, vid);
    values_.push_back(std::move(v));
    n.outputs.push_back(vid);
  }
  nodes_.push_back(std::move(n));
  return id;
}

void Graph::ReplaceAllUses(ValueId from, ValueId to) {
  for (Node& n : nodes_)
    for (ValueId& in : n.inputs)
      if (in == from) in = to;
  for (ValueId& out : outputs_)
    if (out == from) out = to;
}

void Graph::MakeConstant(ValueId id, TensorDataPtr data) {
  Value& v = values_.at(id);
  v.type = data->type();
  v.initializer = std::move(data);
  if (v.producer != kNoNode) {
    Node& p = nodes_.at(v.producer);
    // The node keeps a placeholder output so that its arity stays intact.
    std::string placeholder = UniqueName(v.name + ":folded");
    ValueId pid = static_cast<ValueId>(values_.size());
    Value dead;
    dead.name = placeholder;
    dead.producer = v.producer;
    dead.output_index = v.output_index;
    dead.type = v.type;
    p.outputs[v.output_index] = pid;
    v.producer = kNoNode;
    v.output_index = 0;
    values_.push_back(std::move(dead));
    by_name_[placeholder] = pid;
  }
}

std::vector<ValueId> Graph::initializers() const {
  std::vector<ValueId> out;
  for (ValueId i = 0; i < num_values(); ++i)
    if (values_[i].initializer) out.push_back(i);
  return out;
}

ValueId Graph::FindValue(const std::string& name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? kNoValue : it->second;
}

int64_t Graph::opset() const {
  auto it = info_.opsets.find("");
  return it == info_.opsets.end() ? 0 : it->second;
}

std::vector<std::vector<std::pair<NodeId, int>>> Graph::Consumers() const {
  std::vector<std::vector<std::pair<NodeId, int>>> out(values_.size());
  for (NodeId n = 0; n < num_nodes(); ++n)
    for (int k = 0; k < static_cast<int>(nodes_[n].inputs.size()); ++k)
      if (nodes_[n].inputs[k] != kNoValue) out[nodes_[n].inputs[k]].push_back({n, k});
  return out;
}

namespace {

// Kahn's algorithm: the nodes in an order where each comes after its
// producers, as far as one exists (all of them iff the graph is acyclic);
// `pending` is left with each unplaced node's count of unplaced producers.
// stable: the smallest ready node first (deterministic, insertion order where
// free); else the last made ready (cheaper).
std::vector<NodeId> KahnOrder(const Graph& g, bool stable, std::vector<int>& pending) {
  const int n = g.num_nodes();
  pending.assign(n, 0);
  // Each node's users, as one array (user_start[p] .. user_start[p + 1]).
  std::vector<int> user_start(n + 1, 0);
  for (NodeId i = 0; i < n; ++i)
    for (ValueId in : g.node(i).inputs)
      if (in != kNoValue && g.value(in).producer != kNoNode) {
        ++pending[i];
        ++user_start[g.value(in).producer + 1];
      }
  for (int i = 0; i < n; ++i) user_start[i + 1] += user_start[i];
  std::vector<NodeId> users(user_start[n]);
  std::vector<int> fill(user_start.begin(), user_start.end() - 1);
  for (NodeId i = 0; i < n; ++i)
    for (ValueId in : g.node(i).inputs)
      if (in != kNoValue && g.value(in).producer != kNoNode) users[fill[g.value(in).producer]++] = i;
  std::vector<NodeId> ready;
  const auto push = [&](NodeId i) {
    ready.push_back(i);
    if (stable) std::push_heap(ready.begin(), ready.end(), std::greater<NodeId>());
  };
  for (NodeId i = 0; i < n; ++i)
    if (pending[i] == 0) push(i);
  std::vector<NodeId> order;
  order.reserve(n);
  while (!ready.empty()) {
    if (stable) std::pop_heap(ready.begin(), ready.end(), std::greater<NodeId>());
    NodeId i = ready.back();
    ready.pop_back();
    order.push_back(i);
    for (int k = user_start[i]; k < user_start[i + 1]; ++k)
      if (--pending[users[k]] == 0) push(users[k]);
  }
  return order;
}

}  // namespace

bool Graph::IsAcyclic() const {
  std::vector<int> pending;
  return static_cast<int>(KahnOrder(*this, /*stable=*/false, pending).size()) == num_nodes();
}

std::vector<NodeId> Graph::TopologicalOrder() const {
  const int n = num_nodes();
  std::vector<int> pending;
  std::vector<NodeId> order = KahnOrder(*this, /*stable=*/true, pending);
  if (static_cast<int>(order.size()) != n) {
    // Walk back along unfinished producers to name one cycle.
    NodeId start = kNoNode;
    for (NodeId i = 0; i < n; ++i)
      if (pending[i] > 0) {
        start = i;
        break;
      }
    std::vector<NodeId> path;
    std::vector<int> seen(n, -1);
    NodeId cur = start;
    while (seen[cur] < 0) {
      seen[cur] = static_cast<int>(path.size());
      path.push_back(cur);
      NodeId next = kNoNode;
      for (ValueId in : nodes_[cur].inputs) {
        if (in == kNoValue) continue;
        NodeId p = values_[in].producer;
        if (p != kNoNode && pending[p] > 0) {
          next = p;
          break;
        }
      }
      if (next == kNoNode) break;
      cur = next;
    }
    std::ostringstream os;
    os << "graph has a cycle: ";
    size_t from = seen[cur] >= 0 ? static_cast<size_t>(seen[cur]) : 0;
    for (size_t k = path.size(); k-- > from;) os << nodes_[path[k]].Describe() << " -> ";
    os << nodes_[path.back() == cur ? cur : path[from]].Describe();
    Fail(os.str());
  }
  return order;
}

void Graph::Validate() const {
  for (const Node& n : nodes_) {
    for (ValueId in : n.inputs)
      RLFLOW_CHECK(in == kNoValue || (in >= 0 && in < num_values()), "node ", n.Describe(), " reads an invalid value");
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value& v = values_.at(n.outputs[k]);
      RLFLOW_CHECK(v.producer == &n - nodes_.data() && v.output_index == static_cast<int>(k), "node ", n.Describe(),
                   ": output ", k, " is not linked back to it");
    }
  }
  for (ValueId out : outputs_) RLFLOW_CHECK(out >= 0 && out < num_values(), "graph output refers to an invalid value");
  TopologicalOrder();
}

uint64_t Graph::StructuralHash() const {
  std::vector<NodeId> order = TopologicalOrder();
  std::vector<uint64_t> vh(values_.size(), 0);
  for (size_t k = 0; k < inputs_.size(); ++k) {
    const Value& v = values_[inputs_[k]];
    uint64_t h = HashCombine(0x1111, k);
    h = HashCombine(h, static_cast<uint64_t>(v.type.dtype));
    for (int64_t d : v.type.shape) h = HashCombine(h, static_cast<uint64_t>(d));
    vh[inputs_[k]] = h;
  }
  for (ValueId i = 0; i < num_values(); ++i)
    if (values_[i].initializer) vh[i] = HashCombine(0x2222, values_[i].initializer->content_hash());
  std::vector<uint64_t> node_hashes;
  node_hashes.reserve(order.size());
  for (NodeId id : order) {
    const Node& n = nodes_[id];
    // The operator as the canonical node key has it (effective attributes),
    // then where its inputs come from.
    uint64_t h = OperatorHash(*this, id);
    for (ValueId in : n.inputs) h = HashCombine(h, in == kNoValue ? 0x3333 : vh[in]);
    node_hashes.push_back(h);
    for (size_t k = 0; k < n.outputs.size(); ++k) vh[n.outputs[k]] = HashCombine(h, k + 1);
  }
  uint64_t g = 0x4444;
  for (ValueId out : outputs_) g = HashCombine(g, vh[out]);
  // Nodes that do not reach an output still count, independent of order.
  std::sort(node_hashes.begin(), node_hashes.end());
  for (uint64_t h : node_hashes) g = HashCombine(g, h);
  return g;
}

namespace {
std::string DotEscape(const std::string& s) {
  std::string out;
  for (char c : s) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out;
}
}  // namespace

std::string Graph::ToDot() const {
  std::ostringstream os;
  os << "digraph \"" << DotEscape(info_.graph_name) << "\" {\n  rankdir=TB;\n  node [fontsize=10];\n";
  for (ValueId in : inputs_)
    os << "  v" << in << " [shape=ellipse,style=filled,fillcolor=lightblue,label=\"" << DotEscape(values_[in].name)
       << "\\n"
       << values_[in].type.ToString() << "\"];\n";
  for (NodeId id = 0; id < num_nodes(); ++id) {
    const Node& n = nodes_[id];
    os << "  n" << id << " [shape=box," << (n.opaque() ? "style=dashed," : "") << "label=\"" << DotEscape(n.op);
    int shown = 0;
    for (const auto& [name, attr] : n.attrs) {
      if (attr.type == AttrType::kTensor || attr.type == AttrType::kOther || shown++ >= 4) continue;
      os << "\\n" << DotEscape(name) << "=" << DotEscape(attr.ToString());
    }
    os << "\"];\n";
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      const Value& v = values_[in];
      if (v.producer != kNoNode) {
        os << "  n" << v.producer << " -> n" << id << " [label=\"" << v.type.ToString() << "\"];\n";
      } else if (v.is_graph_input) {
        os << "  v" << in << " -> n" << id << ";\n";
      } else {
        os << "  w" << in << " [shape=note,label=\"" << DotEscape(v.name) << "\\n" << v.type.ToString() << "\"];\n";
        os << "  w" << in << " -> n" << id << ";\n";
      }
    }
  }
  for (size_t k = 0; k < outputs_.size(); ++k) {
    const Value& v = values_[outputs_[k]];
    os << "  out" << k << " [shape=ellipse,style=filled,fillcolor=lightgreen,label=\"" << DotEscape(v.name) << "\\n"
       << v.type.ToString() << "\"];\n";
    if (v.producer != kNoNode) os << "  n" << v.producer << " -> out" << k << ";\n";
  }
  os << "}\n";
  return os.str();
}

std::map<std::string, int> Graph::OpCounts() const {
  std::map<std::string, int> counts;
  for (const Node& n : nodes_) ++counts[n.domain.empty() ? n.op : n.domain + "." + n.op];
  return counts;
}

int64_t Graph::NumParameters() const {
  int64_t total = 0;
  for (const Value& v : values_)
    if (v.initializer) total += v.initializer->NumElements();
  return total;
}

void Graph::RemoveDeadCode(std::vector<NodeId>* node_map, std::vector<ValueId>* value_map) {
  // Live nodes: those reachable backwards from the graph outputs.
  std::vector<char> live_node(nodes_.size(), 0), live_value(values_.size(), 0);
  std::vector<ValueId> stack(outputs_.begin(), outputs_.end());
  for (ValueId in : inputs_) live_value[in] = 1;  // graph inputs always stay
  while (!stack.empty()) {
    ValueId v = stack.back();
    stack.pop_back();
    if (v == kNoValue || live_value[v] == 2) continue;
    live_value[v] = 2;
    NodeId p = values_[v].producer;
    if (p != kNoNode && !live_node[p]) {
      live_node[p] = 1;
      for (ValueId in : nodes_[p].inputs) stack.push_back(in);
      for (ValueId out : nodes_[p].outputs)
        if (!live_value[out]) live_value[out] = 1;
    }
  }
  std::vector<ValueId> vmap(values_.size(), kNoValue);
  std::vector<NodeId> nmap(nodes_.size(), kNoNode);
  std::vector<Value> values;
  std::vector<Node> nodes;
  for (ValueId i = 0; i < num_values(); ++i) {
    if (!live_value[i]) continue;
    vmap[i] = static_cast<ValueId>(values.size());
    values.push_back(std::move(values_[i]));
  }
  for (NodeId i = 0; i < num_nodes(); ++i) {
    if (!live_node[i]) continue;
    nmap[i] = static_cast<NodeId>(nodes.size());
    nodes.push_back(std::move(nodes_[i]));
  }
  for (Value& v : values)
    if (v.producer != kNoNode) v.producer = nmap[v.producer];
  for (Node& n : nodes) {
    for (ValueId& in : n.inputs)
      if (in != kNoValue) in = vmap[in];
    for (ValueId& out : n.outputs) out = vmap[out];
  }
  for (ValueId& in : inputs_) in = vmap[in];
  for (ValueId& out : outputs_) out = vmap[out];
  values_ = std::move(values);
  nodes_ = std::move(nodes);
  by_name_.clear();
  for (ValueId i = 0; i < num_values(); ++i) by_name_[values_[i].name] = i;
  if (node_map) *node_map = std::move(nmap);
  if (value_map) *value_map = std::move(vmap);
}

}  // namespace rlflow
