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

// Replaces foldable nodes' outputs by initializers and removes dead nodes.
// Returns the number of nodes folded. Opaque nodes are never folded.
int FoldConstants(Graph& graph, const FoldOptions& options = {});

}  // namespace rlflow
