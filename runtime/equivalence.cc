#include "runtime/equivalence.h"

#include <ATen/ops/isfinite.h>

#include <algorithm>
#include <cstring>
#include <vector>

#include "core/error.h"
#include "core/passes/interface.h"
#include "runtime/executor.h"

namespace rlflow {

double AllowedError(DType dtype, double tolerance) {
  if (dtype == DType::kFloat16) return std::max(tolerance, 4.0 / 1024);
  if (dtype == DType::kBFloat16) return std::max(tolerance, 4.0 / 128);
  return tolerance;
}

namespace {

// Per value of `g`: the least precise floating-point type among it and
// everything it is computed from (float16 or bfloat16 where a half value is
// on the way, else its own type). A float32 output of a model that computes
// in float16 between casts (converted with its inputs and outputs kept
// float32) carries float16's precision.
std::vector<DType> LeastPreciseOnTheWay(const Graph& g) {
  auto rank = [](DType t) { return t == DType::kBFloat16 ? 2 : t == DType::kFloat16 ? 1 : 0; };
  std::vector<DType> least(static_cast<size_t>(g.num_values()));
  for (ValueId v = 0; v < g.num_values(); ++v) least[v] = g.value(v).type.dtype;
  for (NodeId id : g.TopologicalOrder()) {
    const Node& n = g.node(id);
    DType worst = DType::kUndefined;
    for (ValueId in : n.inputs)
      if (in != kNoValue && rank(least[in]) > rank(worst)) worst = least[in];
    if (worst == DType::kUndefined) continue;
    for (ValueId out : n.outputs)
      if (out != kNoValue && rank(worst) > rank(least[out])) least[out] = worst;
  }
  return least;
}

}  // namespace

EquivalenceResult CompareGraphs(const Graph& reference, const Graph& candidate, uint64_t seed, double tolerance) {
  EquivalenceResult r;
  r.allowed = tolerance;
  for (NodeId id = 0; id < reference.num_nodes(); ++id) r.opaque_nodes += reference.node(id).opaque();
  Graph ref_cut = CutAtOpaque(reference);
  Graph cand_cut = CutAtOpaque(candidate);
  RLFLOW_CHECK(
      ref_cut.inputs().size() == cand_cut.inputs().size() && ref_cut.outputs().size() == cand_cut.outputs().size(),
      "the optimised graph does not have the original's opaque nodes");
  for (size_t k = 0; k < ref_cut.inputs().size(); ++k)
    RLFLOW_CHECK(ref_cut.value(ref_cut.inputs()[k]).type == cand_cut.value(cand_cut.inputs()[k]).type, "input '",
                 ref_cut.value(ref_cut.inputs()[k]).name, "' differs between the graphs being compared");
  // Weights an opaque node reads (outputs of the cut graphs) that both
  // graphs hold alike are equal without running anything: compared by
  // their bytes, not copied and compared element by element (a merged
  // decoder's If reads every weight of the model).
  std::vector<ValueId> ref_outs, cand_outs;
  for (size_t k = 0; k < ref_cut.outputs().size(); ++k) {
    const Value& a = ref_cut.value(ref_cut.outputs()[k]);
    const Value& b = cand_cut.value(cand_cut.outputs()[k]);
    const bool alike =
        a.producer == kNoNode && b.producer == kNoNode && a.initializer && b.initializer &&
        (a.initializer == b.initializer ||
         (a.initializer->dtype() == b.initializer->dtype() && a.initializer->shape() == b.initializer->shape() &&
          std::memcmp(a.initializer->data(), b.initializer->data(), a.initializer->size_bytes()) == 0));
    if (alike) {
      ++r.outputs;
      if (r.worst_output.empty()) r.worst_output = a.name;
      continue;
    }
    ref_outs.push_back(ref_cut.outputs()[k]);
    cand_outs.push_back(cand_cut.outputs()[k]);
  }
  if (ref_outs.empty()) return r;  // nothing computed to compare
  ref_cut.SetOutputs(ref_outs);
  cand_cut.SetOutputs(cand_outs);
  std::vector<at::Tensor> inputs = RandomInputs(ref_cut, seed);
  std::vector<at::Tensor> expected = Executor(ref_cut).Run(inputs);
  std::vector<at::Tensor> actual = Executor(cand_cut).Run(inputs);
  r.outputs += static_cast<int>(expected.size());
  const std::vector<DType> least = LeastPreciseOnTheWay(ref_cut);
  for (size_t k = 0; k < expected.size(); ++k) {
    const Value& out = ref_cut.value(ref_cut.outputs()[k]);
    const std::string& name = out.name;
    // A weight read by an opaque node (an output of the cut graph) may hold
    // infinities by design (a mask's -inf): only computed values are noted.
    const bool computed = out.producer != kNoNode || out.initializer == nullptr;
    if (computed && expected[k].is_floating_point() && !at::isfinite(expected[k]).all().item<bool>())
      r.notes.push_back("the original's output '" + name + "' holds NaN or infinity on the random inputs (seed " +
                        std::to_string(seed) + "): those elements are compared for equality");
    const double e = RelativeError(actual[k], expected[k]);
    const double allowed = AllowedError(least[ref_cut.outputs()[k]], tolerance);
    // The worst output: the largest error for the precision it has.
    if (r.worst_output.empty() || e / allowed > r.max_error / r.allowed) {
      r.worst_output = name;
      r.max_error = e;
      r.allowed = allowed;
    }
    if (!(e <= allowed)) r.within = false;
  }
  return r;
}

}  // namespace rlflow
