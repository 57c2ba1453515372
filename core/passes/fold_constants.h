#pragma once
// Constant folding.
#include <cstdint>

#include "core/graph.h"

namespace rlflow {

struct FoldOptions {
  // Fold a node only if every constant input and every output has at most
  // this many elements (shape arithmetic, not weights). Constant nodes and
  // Shape nodes with a static input are always folded. Use a large value to
  // fold weight-only subgraphs too.
  int64_t max_elements = 4096;
};

// One pass in topological order that infers each modelled node's output
// types (as InferShapes does) and replaces foldable nodes' outputs by
// initializers, so that shapes computed by folded subgraphs (Shape -> Gather
// -> Concat -> Reshape) are known to the nodes after them. Removes the dead
// nodes. Returns the number of nodes folded. Opaque nodes are never folded.
int InferShapesAndFold(Graph& graph, const FoldOptions& options = {});

}  // namespace rlflow
