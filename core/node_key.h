#pragma once
// The one canonical key of a node: what the node computes, independent of
// node and tensor names and node ids, and how its inputs are laid out. Every
// place that asks "is this the same node?" uses it: the graph's structural
// hash (Graph::StructuralHash, through OperatorHash), the cost model's
// timing cache on disk (NodeKeyText) and in memory (NodeKeyHash), and the
// rewrite engine's per-node noise keys (NodeKeyHash) and replacement-cost
// key (ValueKeyHash per matched input).
//
// Its parts:
//  - the operator: domain, op type and the effective attributes
//    (EffectiveAttributes: defaults dropped, auto_pad and kernel_shape
//    resolved, so a conv built by a rule with only `pads` and an imported one
//    with every attribute written out are one key), plus an opaque node's
//    stored NodeProto;
//  - per input: its type (dtype and shape), or "omitted"; for a stored
//    integer constant of at most kNodeKeyConstantElements elements (shapes,
//    axes, pads: they change what the op does) or a scalar (Pow's exponent
//    picks the kernel), its contents; larger weights and vectors of floats
//    (a small layer's bias: 4000 such layers were 4000 keys, each timed)
//    count by their type only; and whether it is a permuted view (PermutedView: the
//    CPU executor's Transpose returns one, and reading it costs more). Where
//    the input comes from counts only that far.
// NodeKeyText and NodeKeyHash are built from one walk over these parts, so
// two nodes have equal texts exactly when they have equal hashes (up to
// 64-bit collisions); a test checks this over the model zoo.
#include <cstdint>
#include <string>

#include "core/graph.h"

namespace rlflow {

inline constexpr int64_t kNodeKeyConstantElements = 64;

// The operator part: domain, op type, effective attributes, opaque proto.
uint64_t OperatorHash(const Graph& graph, NodeId id);
// The whole key as a hash; never 0.
uint64_t NodeKeyHash(const Graph& graph, NodeId id);
// One input's part of the key: the value's type, for a small stored
// constant its contents, and whether it is a permuted view. The rewrite
// engine keys a replacement's cost by the rule side and this, per matched
// input.
uint64_t ValueKeyHash(const Graph& graph, ValueId value);
// The whole key as text, e.g. "Conv#1f0c...a2 float32[1,64,56,56] float32[64,64,3,3]";
// a permuted input ends in "^t".
std::string NodeKeyText(const Graph& graph, NodeId id);
// Whether the value is laid out permuted when the CPU executor runs the
// graph: the output of an operator whose OpDef::output_layout is
// kPermutedView (a Transpose other than the identity permutation), through
// those of kSameView and kSameLayout, with the Transposes on the way
// composed (a pair that composes to the identity is no permutation); a
// graph input marked Value::arrives_permuted. Never, in a graph whose
// ModelInfo::permuted_views is false (costed for ONNX Runtime).
bool PermutedView(const Graph& graph, ValueId value);

}  // namespace rlflow
