#include "runtime/equivalence.h"

#include <ATen/ops/isfinite.h>

#include "core/error.h"
#include "core/passes/interface.h"
#include "runtime/executor.h"

namespace rlflow {

EquivalenceResult CompareGraphs(const Graph& reference, const Graph& candidate, uint64_t seed) {
  EquivalenceResult r;
  for (NodeId id = 0; id < reference.num_nodes(); ++id) r.opaque_nodes += reference.node(id).opaque();
  Graph ref_cut = CutAtOpaque(reference);
  Graph cand_cut = CutAtOpaque(candidate);
  RLFLOW_CHECK(
      ref_cut.inputs().size() == cand_cut.inputs().size() && ref_cut.outputs().size() == cand_cut.outputs().size(),
      "the optimised graph does not have the original's opaque nodes");
  for (size_t k = 0; k < ref_cut.inputs().size(); ++k)
    RLFLOW_CHECK(ref_cut.value(ref_cut.inputs()[k]).type == cand_cut.value(cand_cut.inputs()[k]).type, "input '",
                 ref_cut.value(ref_cut.inputs()[k]).name, "' differs between the graphs being compared");
  std::vector<at::Tensor> inputs = RandomInputs(ref_cut, seed);
  std::vector<at::Tensor> expected = Executor(ref_cut).Run(inputs);
  std::vector<at::Tensor> actual = Executor(cand_cut).Run(inputs);
  r.outputs = static_cast<int>(expected.size());
  for (size_t k = 0; k < expected.size(); ++k) {
    const Value& out = ref_cut.value(ref_cut.outputs()[k]);
    const std::string& name = out.name;
    // A weight read by an opaque node (an output of the cut graph) may hold
    // infinities by design (a mask's -inf): only computed values are noted.
    const bool computed = out.producer != kNoNode || out.initializer == nullptr;
    if (computed && expected[k].is_floating_point() && !at::isfinite(expected[k]).all().item<bool>())
      r.notes.push_back("the original's output '" + name + "' holds NaN or infinity on the random inputs (seed " +
                        std::to_string(seed) + "): those elements are compared for equality");
    double e = RelativeError(actual[k], expected[k]);
    if (e > r.max_error || r.worst_output.empty()) {
      r.max_error = std::max(r.max_error, e);
      if (e >= r.max_error) r.worst_output = name;
    }
  }
  return r;
}

}  // namespace rlflow
