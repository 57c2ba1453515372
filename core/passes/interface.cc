#include "core/passes/interface.h"

#include <algorithm>
#include <map>
#include <set>

#include "core/error.h"

namespace rlflow {

int RestoreInterface(const Graph& original, Graph& g) {
  const auto& oi = original.inputs();
  RLFLOW_CHECK(oi.size() == g.inputs().size(), "the optimised graph has ", g.inputs().size(), " inputs, the original ",
               oi.size());
  for (size_t k = 0; k < oi.size(); ++k) {
    const Value& a = original.value(oi[k]);
    const Value& b = g.value(g.inputs()[k]);
    RLFLOW_CHECK(a.name == b.name && a.type == b.type, "graph input ", k, " changed from '", a.name, "' ",
                 a.type.ToString(), " to '", b.name, "' ", b.type.ToString());
  }
  const auto& oo = original.outputs();
  RLFLOW_CHECK(oo.size() == g.outputs().size(), "the optimised graph has ", g.outputs().size(),
               " outputs, the original ", oo.size());
  std::vector<ValueId> outs = g.outputs();
  int changed = 0;
  std::set<ValueId> claimed;
  for (size_t k = 0; k < outs.size(); ++k) {
    const std::string& want = original.value(oo[k]).name;
    // A tensor the original lists more than once as an output (valid ONNX,
    // and ONNX Runtime runs it) stays one value listed more than once.
    auto earlier = std::find_if(oo.begin(), oo.begin() + k, [&](ValueId o) { return original.value(o).name == want; });
    if (earlier != oo.begin() + k) {
      if (outs[k] != outs[earlier - oo.begin()]) ++changed;
      outs[k] = outs[earlier - oo.begin()];
      continue;
    }
    ValueId v = outs[k];
    if (g.value(v).name == want && claimed.insert(v).second) continue;
    ++changed;
    ValueId holder = g.FindValue(want);
    // The name is taken by another value (still used inside the graph):
    // free it by renaming that value.
    if (holder != kNoValue && holder != v) g.RenameValue(holder, g.UniqueName(want + "_inner"));
    const Value& val = g.value(v);
    bool alias = val.producer == kNoNode || claimed.count(v) > 0;
    if (!alias) {
      // Another output may still want this value under its current name.
      for (size_t j = k + 1; j < outs.size(); ++j)
        if (outs[j] == v && original.value(oo[j]).name == val.name) alias = true;
    }
    if (alias) {
      NodeId id = g.AddNode("Identity", {v}, 1, {}, g.UniqueName(want + "_identity"), {want});
      ValueId out = g.node(id).outputs[0];
      g.mutable_value(out).type = g.value(v).type;
      outs[k] = out;
    } else {
      g.RenameValue(v, want);
    }
    claimed.insert(outs[k]);
  }
  g.SetOutputs(outs);
  return changed;
}

Graph CutAtOpaque(const Graph& g) {
  std::vector<NodeId> opaque;
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (g.node(id).opaque()) opaque.push_back(id);
  if (opaque.empty()) return g;
  std::sort(opaque.begin(), opaque.end(), [&](NodeId a, NodeId b) { return g.node(a).name < g.node(b).name; });
  Graph cut;
  cut.info() = g.info();
  std::vector<ValueId> map(g.num_values(), kNoValue);
  std::set<NodeId> is_opaque(opaque.begin(), opaque.end());
  // Graph inputs only opaque nodes read are not inputs of the cut (they may
  // be of types the executor lacks, e.g. uint16 into an opaque BitShift).
  std::vector<char> read(g.num_values(), 0);
  for (NodeId id = 0; id < g.num_nodes(); ++id)
    if (!is_opaque.count(id))
      for (ValueId in : g.node(id).inputs)
        if (in != kNoValue) read[in] = 1;
  for (ValueId in : g.inputs()) {
    if (!read[in] && std::find(g.outputs().begin(), g.outputs().end(), in) == g.outputs().end()) continue;
    if (g.value(in).non_tensor) continue;  // sequences etc.: the same in both graphs, never run
    map[in] = cut.AddInput(g.value(in).name, g.value(in).type);
    cut.mutable_value(map[in]).sample_data = g.value(in).sample_data;
  }
  for (NodeId id : opaque) {
    for (ValueId out : g.node(id).outputs) {
      const Value& v = g.value(out);
      // Outputs no kept node reads (graph outputs of the opaque node, unused
      // ones) are the same in both graphs: not compared, not needed.
      if (!read[out]) continue;
      if (!v.type.IsStatic() || v.type.dtype == DType::kUndefined)
        Fail("output '", v.name, "' of opaque node ", g.node(id).Describe(),
             " has no static type, so the graph around it cannot be run on random inputs");
      map[out] = cut.AddInput(v.name, v.type);
    }
  }
  for (ValueId v = 0; v < g.num_values(); ++v)
    if (g.value(v).initializer) map[v] = cut.AddInitializer(g.value(v).name, g.value(v).initializer);
  for (NodeId id : g.TopologicalOrder()) {
    if (is_opaque.count(id)) continue;
    const Node& n = g.node(id);
    std::vector<ValueId> ins;
    for (ValueId in : n.inputs) ins.push_back(in == kNoValue ? kNoValue : map[in]);
    std::vector<std::string> names;
    for (ValueId out : n.outputs) names.push_back(g.value(out).name);
    NodeId nid = cut.AddNode(n.op, ins, static_cast<int>(n.outputs.size()), n.attrs, n.name, names);
    cut.mutable_node(nid).domain = n.domain;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const Value& src = g.value(n.outputs[k]);
      Value& dst = cut.mutable_value(cut.node(nid).outputs[k]);
      dst.type = src.type;
      dst.symbolic = src.symbolic;
      dst.known = src.known;
      map[n.outputs[k]] = cut.node(nid).outputs[k];
    }
  }
  std::vector<ValueId> outs;
  for (ValueId out : g.outputs())
    if (map[out] != kNoValue) outs.push_back(map[out]);
  for (NodeId id : opaque)
    for (ValueId in : g.node(id).inputs)
      if (in != kNoValue && map[in] != kNoValue) outs.push_back(map[in]);
  cut.SetOutputs(outs);
  return cut;
}

}  // namespace rlflow
