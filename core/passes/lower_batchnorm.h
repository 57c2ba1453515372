#pragma once
// Lowers inference-mode BatchNormalization with constant parameters to its
// inference form, x * S + T with per-channel S = scale / sqrt(var + eps) and
// T = bias - mean * S (shape [C, 1, ..., 1]), the form the generated
// conv-folding rules are stated in.
#include "core/graph.h"

namespace rlflow {

// Returns the number of BatchNormalization nodes lowered. Nodes whose
// parameters are not all constants are left alone.
int LowerBatchNorm(Graph& graph);

}  // namespace rlflow
