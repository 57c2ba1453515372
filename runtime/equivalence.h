#pragma once
// The numeric check every optimised graph passes before it is written: the
// original and the candidate run on the same seeded random inputs and their
// outputs are compared. Graphs with opaque nodes (operators the executor
// cannot run) are compared around them: both are cut at their opaque nodes
// (core/passes/interface.h), which are the same in both, and the cuts must
// agree on every original output and on every value an opaque node reads.
#include <cstdint>
#include <string>
#include <vector>

#include "core/graph.h"

namespace rlflow {

struct EquivalenceResult {
  double max_error = 0;            // largest relative error (RelativeError) over the compared outputs
  std::string worst_output;        // the output where it occurs
  int outputs = 0;                 // outputs compared (values read by opaque nodes included)
  int opaque_nodes = 0;            // opaque nodes cut out
  std::vector<std::string> notes;  // e.g. reference outputs holding NaN or infinity
};

EquivalenceResult CompareGraphs(const Graph& reference, const Graph& candidate, uint64_t seed);

}  // namespace rlflow
