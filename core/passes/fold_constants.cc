#include "core/passes/fold_constants.h"

#include <ATen/ops/empty.h>

#include <algorithm>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/ops/kernel.h"

namespace rlflow {

std::vector<char> WeightOnlyNodes(const Graph& g) {
  std::vector<char> weight_only(g.num_nodes(), 0);
  std::vector<char> const_value(g.num_values(), 0);
  for (ValueId v = 0; v < g.num_values(); ++v) const_value[v] = g.IsConstant(v);
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    if (n.opaque() || n.inputs.empty()) continue;
    bool all = true;
    for (ValueId in : n.inputs)
      if (in != kNoValue && !const_value[in]) all = false;
    if (!all) continue;
    weight_only[id] = 1;
    for (ValueId out : n.outputs) const_value[out] = 1;
  }
  return weight_only;
}

namespace {
double ValueBytes(const Graph& g, ValueId v) {
  const Value& val = g.value(v);
  if (val.initializer) return static_cast<double>(val.initializer->NumElements()) * DTypeSize(val.initializer->dtype());
  return static_cast<double>(std::max<int64_t>(val.type.NumElements(), 0)) * DTypeSize(val.type.dtype);
}
}  // namespace

std::vector<char> WeightGrowingNodes(const Graph& g, const WeightGrowthBound& bound) {
  const std::vector<char> weight_only = WeightOnlyNodes(g);
  std::vector<char> keep(g.num_nodes(), 0);
  if (std::none_of(weight_only.begin(), weight_only.end(), [](char c) { return c != 0; })) return keep;
  const auto consumers = g.Consumers();
  std::vector<NodeId> producer(g.num_values(), kNoNode);
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    for (ValueId out : g.node(id).outputs)
      if (out != kNoValue) producer[out] = id;
  std::vector<char> graph_output(g.num_values(), 0);
  for (ValueId v : g.outputs()) graph_output[v] = 1;
  // The tensors weight-only subgraphs hand on, each with its subgraph's
  // nodes and the weights they read.
  struct Region {
    ValueId value;
    std::vector<NodeId> nodes;
    std::vector<ValueId> weights;
  };
  std::vector<Region> regions;
  std::vector<int> regions_reading(g.num_values(), 0);  // per weight
  // Visited marks: the number of the region that saw a node or value.
  std::vector<int> seen_node(g.num_nodes(), -1), seen_value(g.num_values(), -1);
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (!weight_only[id]) continue;
    for (ValueId out : g.node(id).outputs) {
      if (out == kNoValue) continue;
      bool handed_on = graph_output[out] != 0;
      for (const auto& [reader, slot] : consumers[out]) handed_on = handed_on || !weight_only[reader];
      if (!handed_on) continue;
      const int mark = static_cast<int>(regions.size());
      Region r{out, {}, {}};
      std::vector<NodeId> stack = {id};
      seen_node[id] = mark;
      while (!stack.empty()) {
        const NodeId n = stack.back();
        stack.pop_back();
        r.nodes.push_back(n);
        for (ValueId in : g.node(n).inputs) {
          if (in == kNoValue || seen_value[in] == mark) continue;
          seen_value[in] = mark;
          if (g.IsConstant(in)) {
            r.weights.push_back(in);
            ++regions_reading[in];
          } else if (const NodeId p = producer[in]; p != kNoNode && weight_only[p] && seen_node[p] != mark) {
            seen_node[p] = mark;
            stack.push_back(p);
          }
        }
      }
      regions.push_back(std::move(r));
    }
  }
  // Which weights stay stored whatever is folded: those read by a node that
  // runs, or that are graph outputs.
  std::vector<char> stays(g.num_values(), 0);
  for (ValueId v = 0; v < g.num_values(); ++v) {
    if (!g.IsConstant(v)) continue;
    stays[v] = graph_output[v];
    for (const auto& [reader, slot] : consumers[v]) stays[v] = stays[v] || !weight_only[reader];
  }
  std::vector<char> grows(regions.size(), 0);
  double growth = 0;
  for (size_t k = 0; k < regions.size(); ++k) {
    double in = 0;
    for (ValueId w : regions[k].weights)
      if (!stays[w]) in += ValueBytes(g, w) / regions_reading[w];
    const double out = ValueBytes(g, regions[k].value);
    // The model's own (every node imported, none a rewrite's).
    const bool own = std::all_of(regions[k].nodes.begin(), regions[k].nodes.end(),
                                 [&](NodeId n) { return g.node(n).source_proto != nullptr; });
    grows[k] = own && out > bound.ratio * in && out - in > static_cast<double>(bound.region_bytes);
    if (grows[k]) growth += out - in;
  }
  if (growth <= static_cast<double>(bound.bytes)) std::fill(grows.begin(), grows.end(), 0);
  std::vector<char> folded(g.num_nodes(), 0);
  for (size_t k = 0; k < regions.size(); ++k)
    for (NodeId n : regions[k].nodes) (grows[k] ? keep : folded)[n] = 1;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (folded[id]) keep[id] = 0;
  return keep;
}

int InferShapesAndFold(Graph& g, const FoldOptions& options) {
  const OpRegistry& reg = OpRegistry::Global();
  int folded = 0;
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    if (n.opaque()) continue;
    const OpDef* def = reg.Find(n.domain, n.op);
    RLFLOW_CHECK(def != nullptr, "node ", n.Describe(), ": operator is not in the registry");
    try {
      InferAndSetNodeShapes(g, id, *def, options.stale_shapes);
      {
        // ATen (libtorch 1.13) has no uint16/32/64 or string tensors: such
        // nodes stay opaque.
        auto foreign = [&](ValueId v) {
          DType t = v == kNoValue ? DType::kUndefined : g.value(v).type.dtype;
          return t == DType::kUInt16 || t == DType::kUInt32 || t == DType::kUInt64 || t == DType::kString;
        };
        for (ValueId v : n.inputs)
          if (foreign(v))
            throw Unsupported("node " + n.Describe() + ": " + DTypeName(g.value(v).type.dtype) + " has no CPU kernel");
        for (ValueId v : n.outputs)
          if (foreign(v))
            throw Unsupported("node " + n.Describe() + ": " + DTypeName(g.value(v).type.dtype) + " has no CPU kernel");
      }
    } catch (const Unsupported& e) {
      if (!n.source_proto) throw;  // built by rlflow, not imported: a real error
      Node& m = g.mutable_node(id);
      m.opaque_proto = m.source_proto;
      if (options.notes) options.notes->push_back(std::string(e.what()) + ": kept opaque");
      continue;
    }
    if (def->kernel == nullptr) continue;
    // Runtime values computed from symbolic dimensions are never folded.
    bool symbolic = false;
    for (ValueId out : n.outputs) {
      Value& v = g.mutable_value(out);
      if (options.symbolic != nullptr && options.symbolic->count(v.name)) v.symbolic = true;
      symbolic = symbolic || v.symbolic;
    }
    bool all_constant = true, all_known = true;
    bool small = true;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      const Value& v = g.value(in);
      if (!g.IsConstant(in)) all_constant = false;
      if (!v.initializer && !v.known) all_known = false;
      const TensorDataPtr& data = v.initializer ? v.initializer : v.known;
      if (data && data->NumElements() > options.max_elements) small = false;
      if (v.symbolic) symbolic = true;
    }
    double in_bytes = 0, out_bytes = 0;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      const Value& v = g.value(in);
      const TensorDataPtr& data = v.initializer ? v.initializer : v.known;
      if (data) in_bytes += static_cast<double>(data->NumElements()) * DTypeSize(data->dtype());
    }
    for (ValueId out : n.outputs) {
      int64_t numel = g.value(out).type.NumElements();
      if (numel < 0 || numel > options.max_elements) small = false;
      out_bytes += static_cast<double>(std::max<int64_t>(numel, 0)) * DTypeSize(g.value(out).type.dtype);
    }
    if (out_bytes > static_cast<double>(options.max_growth_bytes) && out_bytes > options.max_growth_ratio * in_bytes)
      small = false;
    const bool static_shape = def->reads_shape_only && g.value(n.inputs[0]).type.IsStatic();
    bool static_value = symbolic && options.static_values != nullptr && all_known && small;
    for (ValueId out : n.outputs) static_value = static_value && options.static_values->count(g.value(out).name);
    if (static_value) {
      for (ValueId out : n.outputs) g.mutable_value(out).symbolic = false;
      symbolic = false;
    }
    if (options.keep != nullptr && static_cast<size_t>(id) < options.keep->size() && (*options.keep)[id] && !symbolic &&
        !static_value)
      continue;
    bool compute = false;
    if (static_value) {
      compute = true;
    } else if (symbolic) {
      for (ValueId out : n.outputs) {
        g.mutable_value(out).symbolic = true;
        g.mutable_value(out).known = nullptr;
      }
      compute = small && (all_known || static_shape);
    } else if (n.op == "Constant" || static_shape) {
      compute = true;
    } else if (n.op == "Identity" && all_constant) {
      ValueId out = n.outputs[0];
      g.MakeConstant(out, g.value(n.inputs[0]).initializer);  // an alias: shares the data, copies nothing
      ++folded;
      continue;
    } else {
      compute = all_constant && small;
    }
    if (!compute) continue;
    std::vector<at::Tensor> inputs;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) {
        inputs.emplace_back();
        continue;
      }
      const Value& v = g.value(in);
      if (v.initializer || v.known) {
        inputs.push_back(ToAten(v.initializer ? v.initializer : v.known));
      } else {
        // A shape-only node of a static tensor: only its sizes matter.
        const Shape& s = v.type.shape;
        inputs.push_back(
            at::empty(std::vector<int64_t>(s.begin(), s.end()), at::TensorOptions().dtype(ToAtenType(v.type.dtype))));
      }
    }
    std::vector<at::Tensor> outs = RunKernel(n, *def, std::move(inputs), OutputTypes(g, n));
    std::vector<ValueId> out_ids = n.outputs;
    for (size_t k = 0; k < out_ids.size(); ++k) {
      TensorType expected = g.value(out_ids[k]).type;
      auto data = std::make_shared<const TensorData>(FromAten(outs[k]));
      if (expected.rank_known && expected.dtype != DType::kUndefined && data->type() != expected)
        Fail("folding node ", n.Describe(), " gave ", data->type().ToString(), ", expected ", expected.ToString());
      if (symbolic)
        g.mutable_value(out_ids[k]).known = data;
      else
        g.MakeConstant(out_ids[k], data);
    }
    if (!symbolic) ++folded;
  }
  if (folded > 0 && options.remove_dead) g.RemoveDeadCode();
  return folded;
}

}  // namespace rlflow
