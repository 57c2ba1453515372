#include "core/passes/fold_constants.h"

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
    InferAndSetNodeShapes(g, id, *def);
    if (def->kernel == nullptr) continue;
    bool all_constant = true;
    bool small = true;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) continue;
      if (!g.IsConstant(in)) all_constant = false;
      else if (g.value(in).initializer->NumElements() > options.max_elements) small = false;
    }
    for (ValueId out : n.outputs) {
      int64_t numel = g.value(out).type.NumElements();
      if (numel < 0 || numel > options.max_elements) small = false;
    }
    bool fold = false;
    if (n.op == "Constant") {
      fold = true;
    } else if (n.op == "Shape" && g.value(n.inputs[0]).type.IsStatic()) {
      fold = true;
    } else if (n.op == "Identity" && all_constant) {
      fold = true;  // an alias: shares the data, copies nothing
    } else {
      fold = all_constant && small;
    }
    if (!fold) continue;
    if (n.op == "Identity" && all_constant) {
      ValueId out = n.outputs[0];
      g.MakeConstant(out, g.value(n.inputs[0]).initializer);
      ++folded;
      continue;
    }
    std::vector<at::Tensor> inputs;
    for (ValueId in : n.inputs) {
      if (in == kNoValue) {
        inputs.emplace_back();
      } else if (g.IsConstant(in)) {
        inputs.push_back(ToAten(g.value(in).initializer));
      } else {
        // Shape of a static non-constant tensor: only its sizes matter.
        const Shape& s = g.value(in).type.shape;
        inputs.push_back(at::empty(std::vector<int64_t>(s.begin(), s.end()),
                                   at::TensorOptions().dtype(ToAtenType(g.value(in).type.dtype))));
      }
    }
    std::vector<at::Tensor> outs = RunKernel(n, *def, std::move(inputs));
    std::vector<ValueId> out_ids = n.outputs;
    for (size_t k = 0; k < out_ids.size(); ++k) {
      TensorType expected = g.value(out_ids[k]).type;
      auto data = std::make_shared<const TensorData>(FromAten(outs[k]));
      if (expected.rank_known && expected.dtype != DType::kUndefined && data->type() != expected)
        Fail("folding node ", n.Describe(), " gave ", data->type().ToString(), ", expected ", expected.ToString());
      g.MakeConstant(out_ids[k], data);
    }
    ++folded;
  }
  if (folded > 0) g.RemoveDeadCode();
  return folded;
}

}  // namespace rlflow
