#pragma once
// Lowers inference-mode BatchNormalization with constant parameters to its
// inference form, x * S + T with per-channel S = scale / sqrt(var + eps) and
// T = bias - mean * S (shape [C, 1, ..., 1]), the form the generated
// conv-folding rules are stated in.
#include <vector>

#include "core/graph.h"

namespace rlflow {

// Returns the number of BatchNormalization nodes lowered. Nodes whose
// parameters are not all constants are left alone.
int LowerBatchNorm(Graph& graph);

// The inverse, for what the search left unfolded: Add(Mul(x, S), T) with
// constant per-channel S and T (shape [C, 1, ..., 1], x of rank >= 3 with C
// channels, the product used only by the Add) becomes one
// BatchNormalization(x, S, T, mean 0, var 1, epsilon 0), one pass over x
// instead of two. Returns the number of nodes raised.
int RaiseBatchNorm(Graph& graph);

// The Mul/Add pairs RaiseBatchNorm would raise (disjoint).
struct BatchNormPair {
  NodeId mul, add;
  ValueId x, scale, shift;  // scale and shift: constant per-channel [C, 1, ..., 1]
};
std::vector<BatchNormPair> FindBatchNormPairs(const Graph& graph);

}  // namespace rlflow
