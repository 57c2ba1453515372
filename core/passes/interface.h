#pragma once
// Keeping an optimised graph a drop-in replacement for the original, and
// cutting a graph at its opaque nodes so that the rest can be run and
// compared.
#include "core/graph.h"

namespace rlflow {

// Makes `g`'s interface the original's: the same graph inputs (names, order,
// types; checked, throws rlflow::Error if they differ) and the same output
// names in the same order. An output that a rewrite now computes under
// another name gets its original name back (an Identity where the value is
// also an input, an initializer or another output). Returns the number of
// outputs renamed or aliased.
int RestoreInterface(const Graph& original, Graph& g);

// The graph with every opaque node removed: each opaque node's outputs
// become extra graph inputs and each value it reads an extra graph output,
// so that what remains runs on the executor. The extra inputs and outputs
// are ordered by (opaque node name, position): two graphs with the same
// opaque nodes (rewrites never cross them) cut to graphs with matching
// interfaces, and the original is equivalent to the rewritten graph if
// their cuts compute the same function. Returns `g` itself if it has no
// opaque node. Graph inputs only opaque nodes read, and opaque outputs no
// other node reads (graph outputs of opaque nodes), are left out: they are
// the same in both graphs and may have types the executor lacks (uint16);
// so are sequence, map and optional graph inputs (Value::non_tensor).
// Throws if an opaque node's output that another node reads has no static
// type.
Graph CutAtOpaque(const Graph& g);

}  // namespace rlflow
