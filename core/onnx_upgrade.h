#pragma once
// rlflow's own opset upgrades, for what ONNX's version converter (1.12)
// cannot do: models at opsets 7 to 10 (published models and older
// converters) and Softmax-family nodes whose input rank it cannot see.
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class GraphProto;
}  // namespace onnx

namespace rlflow {

// Rewrites a model whose default-domain opset is 7 to 10 into opset-11 form,
// node by node, subgraphs included, and sets its opset to 11. Between 7 and
// 11 only these operators changed signature: Upsample (deprecated; becomes
// Resize-11 with asymmetric coordinates, floor rounding, as Upsample
// computes), Resize-10 (gains the roi input), Slice (attributes -> inputs
// at 10), Pad and Clip (attributes -> inputs at 11), TopK (k -> input at 10)
// and BatchNormalization (`spatial` dropped at 9), and Scan (batched at 8:
// becomes a Scan over the batch of a Scan over the sequence); every other
// change added element types, attributes with compatible defaults, or
// operators. A node that has no opset-11 form (BatchNormalization with
// spatial=0, Scan-8 with sequence_lens) is an error naming it. `notes`
// receives one line per kind of upgrade.
void UpgradeToOpset11(onnx::ModelProto* model, std::vector<std::string>* notes);

// Before opset 13, Softmax, LogSoftmax and Hardmax work on their input
// coerced to 2-D at `axis`; ONNX's 12 -> 13 adapter needs the input's rank
// to translate that and asserts without it. Each such node whose input rank
// the graph does not state (inputs, initializers, value_info) becomes
// Shape(x), Flatten(x, axis), the op over axis 1 of the 2-D tensor (whose
// rank is then stated), Reshape back: the same function at any rank.
// Returns the number of nodes rewritten.
int ExpandSoftmaxOfUnknownRank(onnx::GraphProto* graph);

}  // namespace rlflow
