#include "core/summary.h"

#include <cstdio>
#include <sstream>

#include "core/op_registry.h"

namespace rlflow {

double NodeFlops(const Graph& g, NodeId id) {
  const Node& n = g.node(id);
  if (n.opaque()) return 0.0;
  const OpDef* def = OpRegistry::Global().Find(n.domain, n.op);
  if (def == nullptr || !def->flops) return 0.0;
  std::vector<const TensorType*> types;
  std::vector<const TensorData*> constants;
  for (ValueId in : n.inputs) {
    types.push_back(in == kNoValue ? nullptr : &g.value(in).type);
    constants.push_back(in == kNoValue ? nullptr : g.value(in).initializer.get());
  }
  std::vector<TensorType> outs;
  for (ValueId out : n.outputs) outs.push_back(g.value(out).type);
  ShapeContext ctx(n, *def, types, constants);
  return def->flops(ctx, outs);
}

GraphSummary Summarize(const Graph& g) {
  GraphSummary s;
  s.nodes = g.num_nodes();
  s.op_counts = g.OpCounts();
  for (NodeId id = 0; id < g.num_nodes(); ++id) {
    if (g.node(id).opaque()) ++s.opaque_nodes;
    s.flops += NodeFlops(g, id);
  }
  for (ValueId v : g.initializers()) {
    s.parameters += g.value(v).initializer->NumElements();
    s.parameter_bytes += static_cast<int64_t>(g.value(v).initializer->size_bytes());
  }
  return s;
}

std::string GraphSummary::ToString() const {
  std::ostringstream os;
  char buf[128];
  std::snprintf(buf, sizeof(buf), "%d nodes (%d opaque), %.2f M parameters (%.1f MB), %.3f GFLOPs", nodes, opaque_nodes,
                parameters / 1e6, parameter_bytes / 1e6, flops / 1e9);
  os << buf << "\n";
  for (const auto& [op, count] : op_counts) os << "  " << op << ": " << count << "\n";
  return os.str();
}

}  // namespace rlflow
