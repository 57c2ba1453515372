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

// The relative error the check allows by default (the optimiser's
// --tolerance).
inline constexpr double kCheckTolerance = 1e-4;

// The relative error allowed for an output of element type `dtype`:
// `tolerance`, or for float16 and bfloat16 four units of the type's
// precision (2^-8 and 2^-5) where that is larger: a rewrite moves where a
// half model's values are rounded (a folded batch norm rounds its scaled
// weights once), which changes results by a few units of the stored type.
// CompareGraphs applies it to an output by the least precise type on its
// way (a float32 output computed through float16 values is allowed
// float16's).
double AllowedError(DType dtype, double tolerance);

struct EquivalenceResult {
  double max_error = 0;              // the relative error (RelativeError) at worst_output
  std::string worst_output;          // the output whose error is largest for its type (AllowedError)
  double allowed = kCheckTolerance;  // what AllowedError allows at worst_output
  bool within = true;                // every output within what AllowedError allows for its precision
  int outputs = 0;                   // outputs compared (values read by opaque nodes included)
  int opaque_nodes = 0;              // opaque nodes cut out
  std::vector<std::string> notes;    // e.g. reference outputs holding NaN or infinity
};

EquivalenceResult CompareGraphs(const Graph& reference, const Graph& candidate, uint64_t seed,
                                double tolerance = kCheckTolerance);

}  // namespace rlflow
