#pragma once
// rlflow's own opset upgrades, for what ONNX's version converter (1.12)
// cannot do: models at opsets 7 to 10 (published models and older
// converters) and Softmax-family nodes whose input rank it cannot see.
#include <cstdint>
#include <string>
#include <vector>

namespace onnx {
class ModelProto;
class GraphProto;
class NodeProto;
}  // namespace onnx

namespace rlflow {

// Rewrites a model whose default-domain opset is 7 to 10 into opset-11 form,
// node by node, subgraphs included, and sets its opset to 11. Between 7 and
// 11 only these operators changed signature: Upsample (deprecated; becomes
// Resize-11 with asymmetric coordinates, floor rounding, as Upsample
// computes), Resize-10 (gains the roi input), Slice (attributes -> inputs
// at 10), Pad and Clip (attributes -> inputs at 11), TopK (k -> input at 10)
// and BatchNormalization (`spatial` dropped at 9), Scan (batched at 8:
// becomes a Scan over the batch of a Scan over the sequence) and Scatter
// (deprecated at 11: becomes ScatterElements, which computes the same); every other
// change added element types, attributes with compatible defaults, or
// operators. A node that has no opset-11 form (BatchNormalization with
// spatial=0, Scan-8 with sequence_lens) is an error naming it. `notes`
// receives one line per kind of upgrade.
void UpgradeToOpset11(onnx::ModelProto* model, std::vector<std::string>* notes);

// ONNX's experimental operators, removed from ONNX at 1.5 (opset 10) and
// still run by ONNX Runtime below opset 10 (its deprecated-operator
// schemas): the models of 2018's converters use them (the ONNX model zoo's
// Tiny YOLOv2 scales its image with ImageScaler; CoreML conversions write
// Affine, ScaledTanh, Crop). In a model at opset 7 to 9 (one below 7 first
// goes through ONNX's converter to 7, which passes them by as it does ONNX
// Runtime's operators: HideNodesFromConverter), each becomes the standard
// operators ONNX's documentation gives for it, subgraphs included:
// ImageScaler -> Mul by the scale, Add of the bias per channel; Affine ->
// Mul, Add; Scale -> Mul; ScaledTanh -> alpha * Tanh(beta * x);
// ParametricSoftplus -> alpha * Softplus(beta * x); Crop -> Slice over H
// and W. Constants take the input's element type. The others stay
// (DynamicSlice: Slice-10's function, becomes Slice in UpgradeToOpset11;
// ThresholdedRelu-1: ThresholdedRelu-10's function; GivenTensorFill and
// GRUUnit, which ONNX Runtime here cannot run). A node missing an attribute
// ONNX Runtime requires (ScaledTanh's alpha, Crop's border) is an error
// naming it. `notes` receives one line per operator replaced. Returns the
// count.
int ReplaceExperimentalOperators(onnx::ModelProto* model, std::vector<std::string>* notes);

// Operators of the default domain that ONNX Runtime runs at `opset` though
// ONNX (1.12) has no schema for them there: the experimental operators
// ReplaceExperimentalOperators leaves (DynamicSlice, GivenTensorFill,
// GRUUnit, ThresholdedRelu-1, ...) below opset 10.
bool IsOrtExperimentalOperator(const std::string& op_type, int64_t opset);
// Any of ONNX's experimental operators where ONNX has no schema of that name
// at `opset` (ThresholdedRelu has one from 10): from opset 10 on, no runtime
// runs them ("ImageScaler(10) is not a registered function/op").
bool IsExperimentalOperator(const std::string& op_type, int64_t opset);

// Before opset 13, Softmax, LogSoftmax and Hardmax work on their input
// coerced to 2-D at `axis`; ONNX's 12 -> 13 adapter needs the input's rank
// to translate that and asserts without it. Each such node whose input rank
// the graph does not state (inputs, initializers, value_info) becomes
// Shape(x), Flatten(x, axis), the op over axis 1 of the 2-D tensor (whose
// rank is then stated), Reshape back: the same function at any rank.
// Returns the number of nodes rewritten.
int ExpandSoftmaxOfUnknownRank(onnx::GraphProto* graph);

// The model's default-domain opset (0 if it imports none).
int64_t DefaultDomainOpset(const onnx::ModelProto& model);

// "ai.onnx", the default domain's other name (ONNX Runtime treats both as
// one; ONNX 1.12's checker and version converter know only ""), renamed to
// "" in the opset imports and in every node, subgraphs' and local
// functions' included. Returns how many names were changed.
int NormaliseDefaultDomainName(onnx::ModelProto* model);

// Operators ONNX Runtime runs in the default (ONNX) domain at opsets where
// ONNX has no such operator: LayerNormalization before 17 (its contrib
// operator, registered in the ONNX domain from version 1 to 16) and
// SimplifiedLayerNormalization (RMS normalisation, any opset), as ONNX
// Runtime's transformer optimiser writes them. Valid for the runtime users
// deploy on, so accepted (as opaque nodes, typed by one ONNX Runtime run).
bool IsOrtOnnxDomainOperator(const std::string& op_type, int64_t opset);

// ONNX's checker refuses IsOrtOnnxDomainOperator's nodes ("No Op registered
// for LayerNormalization with domain_version of 13"). For a check, they move
// to a domain of their own (imported at version 1), which the checker
// leaves alone, and back after it. Returns the number moved.
bool HasOrtOnnxDomainOperators(const onnx::ModelProto& model);
int MoveOrtOnnxDomainOperatorsForChecker(onnx::ModelProto* model);
void RestoreOrtOnnxDomainOperators(onnx::ModelProto* model);

// ONNX's version converter (1.12) looks every node up among ONNX's own
// schemas and fails on a node it has none for ("unordered_map::at"): ONNX
// Runtime's contrib operators (com.microsoft: Attention,
// SkipLayerNormalization, ... as its transformer optimiser writes them),
// IsOrtOnnxDomainOperator's, a converter's custom operators. They are not
// the converter's to change, so around a conversion of a model at `opset`
// each such node, subgraphs included, stands in as a default-domain
// Identity (no adapter between opsets 1 and 13 changes one), named after
// its place in `hidden`, with no attributes; RestoreHiddenNodes then gives
// every stand-in of the converted graph back its operator, domain,
// attributes and name (its inputs and outputs as the converter left them).
// IsOrtExperimentalOperator's nodes stand in the same way. Returns the
// count hidden.
int HideNodesFromConverter(onnx::GraphProto* graph, int64_t opset, std::vector<onnx::NodeProto>* hidden);
// Fails unless every hidden node is found exactly once.
void RestoreHiddenNodes(onnx::GraphProto* graph, const std::vector<onnx::NodeProto>& hidden);

// The newest default-domain opset rlflow imports: the newest the ONNX
// Runtime that ./bazelw installs runs (1.30: 26). Debian's ONNX (1.12)
// knows operators up to opset 17, and reads a node of a newer opset as its
// opset-17 version, which for some operators means something else
// (ReduceMax-18 takes its axes as an input; -13 ignores that input). So
// models at opsets 18 to 26 are converted to 17 on import, node by node
// (DowngradeToOpset17), and back on export (UpgradeFromOpset17).
constexpr int kNewestImportOpset = 26;

// Nodes of opsets 18+ with no opset-17 form (operators added after 17, such
// as Mish, Gelu-20 or GroupNormalization, and versions whose meaning
// changed, such as GridSample-20 or a Reduce* whose axes are computed at run
// time) move to this domain between import and export: ONNX 1.12 then
// reads them as custom operators (no schema, no checks, no shape inference)
// and rlflow as opaque nodes; their output types come from the model's
// value_info or from one run of the model in ONNX Runtime.
inline constexpr char kNewerOpsetDomain[] = "ai.rlflow.newer_opset";

// Rewrites a model at default-domain opset 18 to 26 into opset-17 form and
// sets its opset to 17: per node, subgraphs included, from the changes ONNX's
// changelog lists after 17. Element types added (most changes): nothing to
// do. Reduce* (but ReduceSum) take their axes as an input at 18: a constant
// one becomes the attribute again (no axes with noop_with_empty_axes: an
// Identity). Split-18's num_outputs: dropped where the dimension splits
// evenly, else explicit sizes (constant where the dimension is stated, else
// computed from the input's shape). Attributes added with defaults that
// keep the old function (Resize's antialias, AveragePool's dilations, Cast's
// saturate, ...) are dropped when they have those values. Everything else
// moves to kNewerOpsetDomain. `notes` receives one line per kind of change.
void DowngradeToOpset17(onnx::ModelProto* model, std::vector<std::string>* notes);

// The inverse on an exported opset-17 model: Reduce* axes back to inputs,
// Split gets num_outputs where it has no sizes (or sizes computed as
// DowngradeToOpset17 computes them), kNewerOpsetDomain's nodes return to the
// default domain, and with `fuse_functions` whole bodies of Mish and of
// Gelu's erf form become the operators again; the opset becomes `target`
// (18 to 26).
void UpgradeFromOpset17(onnx::ModelProto* model, int target, bool fuse_functions = true);

}  // namespace rlflow
