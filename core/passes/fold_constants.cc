#include "core/passes/fold_constants.h"

#include <ATen/ops/empty.h>

#include <algorithm>

#include "core/error.h"
#include "core/op_registry.h"
#include "core/ops/kernel.h"

namespace rlflow {

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
