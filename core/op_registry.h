#pragma once
// The op registry: every operator is described once, in one entry, with
//   - its ONNX mapping (op type, domain, opset range, attributes with types and
//     defaults, input/output arity),
//   - its shape rule,
//   - its CPU kernel (ATen; see core/ops/kernel.h),
//   - its cost facts (FLOPs),
//   - the targets (runtimes) that run it: every ONNX runtime for the
//     standard operators, only ONNX Runtime for its contrib operators,
// and, added by later components to the same entry, the generator's integer
// fingerprint semantics and the verifier's symbolic semantics.
// Entries live in core/ops/*.cc and register themselves statically.
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "core/attribute.h"
#include "core/graph.h"
#include "core/tensor.h"

namespace rlflow {

struct AttrSpec {
  std::string name;
  AttrType type;
  std::optional<Attribute> default_value;  // nullopt: required (or optional with no default, see `required`)
  bool required = false;
};

struct OpDef;

// Typed access to a node's attributes, falling back to the entry's defaults.
class AttrReader {
 public:
  AttrReader(const Node& node, const OpDef& def) : node_(node), def_(def) {}
  const Node& node() const { return node_; }
  const OpDef& def() const { return def_; }
  bool Has(const std::string& name) const;  // set on the node
  int64_t Int(const std::string& name) const;
  float Float(const std::string& name) const;
  std::string String(const std::string& name) const;
  std::vector<int64_t> Ints(const std::string& name) const;
  std::vector<float> Floats(const std::string& name) const;
  TensorDataPtr Tensor(const std::string& name) const;
  [[noreturn]] void Fail(const std::string& message) const;
  // Valid ONNX the entry cannot run (throws rlflow::Unsupported).
  [[noreturn]] void Unsupported(const std::string& message) const;

 private:
  const Attribute* Find(const std::string& name, AttrType type) const;
  const Node& node_;
  const OpDef& def_;
};

// What a shape rule sees: input types, and input values where they are
// constants (weights, folded shapes), nullptr otherwise.
class ShapeContext : public AttrReader {
 public:
  ShapeContext(const Node& node, const OpDef& def, std::vector<const TensorType*> inputs,
               std::vector<const TensorData*> constants)
      : AttrReader(node, def), inputs_(std::move(inputs)), constants_(std::move(constants)) {}
  int num_inputs() const { return static_cast<int>(inputs_.size()); }
  bool has_input(int i) const { return i < num_inputs() && inputs_[i] != nullptr; }
  const TensorType& input(int i) const;
  const TensorData* constant(int i) const { return i < num_inputs() ? constants_[i] : nullptr; }
  // A constant integer input (e.g. Reshape's shape); fails if not constant.
  std::vector<int64_t> ConstantInts(int i, const char* what) const;
  // The same, or nullopt when the input is computed at run time: rules then
  // infer what they can (rank, some dimensions) and leave the rest unknown.
  std::optional<std::vector<int64_t>> MaybeConstantInts(int i) const;
  // Length of a 1-D input (e.g. a shape tensor), or -1 if unknown.
  int64_t Length1D(int i) const;

 private:
  std::vector<const TensorType*> inputs_;
  std::vector<const TensorData*> constants_;
};

struct KernelContext;    // ATen-based, defined in core/ops/kernel.h
struct SymbolicContext;  // Z3-based, defined in core/symbolic.h

using ShapeFn = std::function<std::vector<TensorType>(const ShapeContext&)>;
using KernelFn = void (*)(KernelContext&);
using SymbolicFn = void (*)(SymbolicContext&);
using FlopsFn = std::function<double(const ShapeContext&, const std::vector<TensorType>& outputs)>;

struct OpDef {
  std::string name;     // ONNX op type
  std::string domain;   // "" = default ONNX domain
  int since_opset = 1;  // lowest default-domain opset whose semantics this entry implements
  int min_inputs = 1, max_inputs = 1;
  int min_outputs = 1, max_outputs = 1;
  std::vector<AttrSpec> attrs;
  ShapeFn shape;
  KernelFn kernel = nullptr;
  FlopsFn flops;  // nullptr: zero FLOPs (data movement only)
  // Generator fingerprint semantics: the generator evaluates ops in float64
  // on small integer-valued inputs, which is exact arithmetic when the op
  // maps integers to integers with no rounding (sums, products, max, data
  // movement). `exact_on_integers` says the CPU kernel itself is such an op;
  // `fingerprint` is an exact stand-in for one that is not (e.g. average
  // pooling as a window sum). Ops with neither are not enumerated.
  bool exact_on_integers = false;
  KernelFn fingerprint = nullptr;
  // Verifier semantics: each output element as a Z3 real expression of the
  // input elements (nullptr: the verifier cannot reason about the op).
  // Z3 semantics. Sqrt (and Pow with a non-integer exponent) are
  // uninterpreted functions: proofs hold for any such function, so for the
  // real one, but they cannot be evaluated to numbers.
  SymbolicFn symbolic = nullptr;

  // Normalises attributes whose values are implied by the input shapes (e.g.
  // Conv's kernel_shape, auto_pad resolved into explicit pads), so that one
  // operator built in different ways has one set of effective attributes.
  std::function<void(const ShapeContext&, AttributeMap*)> canonical_attrs;
  // The ATen CPU kernel runs float16 / bfloat16 tensors as they are (data
  // movement and casts). Another op computes them in float32 and rounds its
  // half outputs back (RunKernel).
  bool half_kernel = false;

  // Traits. `commutative`: a two-input op whose inputs may be swapped (the
  // matcher tries both operand orders, the generator enumerates one).
  bool commutative = false;
  // The kernel reads only its input's shape and type, never its values
  // (Shape, Size, EyeLike): folded to a constant wherever that shape is
  // static.
  bool reads_shape_only = false;

  // How the CPU kernel lays out its first output in memory, which changes
  // what the next node costs (an Add reading a transposed view takes about
  // three times as long as one reading the same values contiguous), so the
  // node key tells such inputs apart (PermutedView). kFresh: a new tensor or
  // one of no particular layout (most operators; Reshape and Flatten, which
  // copy a permuted input whose dimensions they merge). kPermutedView: a
  // view of input 0 with its dimensions in another order (Transpose).
  // kSameView: input 0 itself or a view of it with its layout (Unsqueeze,
  // Squeeze, Identity, Dropout): permuted where input 0 is.
  // kSameLayout: a new tensor laid out as input 0 (ATen's unary
  // element-wise operators keep a permuted input's strides): permuted where
  // input 0 is.
  enum class OutputLayout { kFresh, kPermutedView, kSameView, kSameLayout };
  OutputLayout output_layout = OutputLayout::kFresh;

  // The deployment targets (KnownTargets) that run this operator besides
  // rlflow's executor; empty: every target (a standard ONNX operator). A
  // rule that produces an operator is used only when optimising for a
  // target that runs it (RuleRunsOn), so that a model for another runtime
  // never receives it. ONNX Runtime's contrib operators: {"ort"}.
  std::vector<std::string> targets;
  bool RunsOn(const std::string& target) const;

  bool HasFingerprint() const { return exact_on_integers || fingerprint != nullptr; }

  const AttrSpec* FindAttr(const std::string& name) const;
};

class OpRegistry {
 public:
  static OpRegistry& Global();
  void Register(OpDef def);
  // nullptr if the operator is not modelled (it is then kept opaque).
  const OpDef* Find(const std::string& domain, const std::string& op) const;
  // The same by qualified name (QualifiedOp).
  const OpDef* FindQualified(const std::string& qualified) const;
  std::vector<const OpDef*> All() const;

 private:
  std::map<std::pair<std::string, std::string>, std::unique_ptr<OpDef>> ops_;
  // The default domain's by name: Find is on the search's hot path (node
  // keys, layouts), where building a (domain, op) pair of strings per call
  // and comparing pairs down a tree cost 6.5% of a taso run.
  std::unordered_map<std::string, const OpDef*> default_domain_;
};

struct OpRegistrar {
  explicit OpRegistrar(OpDef def) { OpRegistry::Global().Register(std::move(def)); }
};

#define RLFLOW_OP_CONCAT_INNER(a, b) a##b
#define RLFLOW_OP_CONCAT(a, b) RLFLOW_OP_CONCAT_INNER(a, b)
// RLFLOW_REGISTER_OP(MakeConvDef()) at namespace scope in core/ops/*.cc.
#define RLFLOW_REGISTER_OP(def_expr) \
  static ::rlflow::OpRegistrar RLFLOW_OP_CONCAT(rlflow_op_registrar_, __LINE__)(def_expr)

// Deployment targets: "onnx" (any ONNX runtime: standard operators only)
// and "ort" (ONNX Runtime: its contrib operators too).
const std::vector<std::string>& KnownTargets();

// How rules name an operator: its op type in the default ONNX domain
// ("Relu"), else "<domain>.<op type>" ("com.microsoft.SkipLayerNormalization";
// op types have no '.').
std::string QualifiedOp(const std::string& domain, const std::string& op);
// {domain, op type} of a qualified name (split at its last '.').
std::pair<std::string, std::string> SplitQualifiedOp(const std::string& qualified);
// QualifiedOp(domain, op) == qualified, without building the string.
bool IsQualifiedOp(const std::string& domain, const std::string& op, const std::string& qualified);

// Runs the entry's shape rule for node `id` with the graph's current types.
std::vector<TensorType> InferNodeShapes(const Graph& graph, NodeId id, const OpDef& def);
// Infers node `id`'s output types and stores them; a declared type that
// contradicts the inferred one is an error naming the node. With
// `stale_shapes`, a declared shape that contradicts the inferred one (of the
// same element type) is replaced by it and described there instead (ONNX
// Runtime merges such declarations leniently, with a warning).
void InferAndSetNodeShapes(Graph& graph, NodeId id, const OpDef& def, std::vector<std::string>* stale_shapes = nullptr);
// Infers the types of every node output in topological order. Opaque nodes
// keep the types already recorded on their outputs. A declared type that
// contradicts the inferred one is an error naming the node.
void InferShapes(Graph& graph);
// The attributes that determine what a modelled node computes: registry
// defaults dropped, values implied by the input shapes normalised
// (OpDef::canonical_attrs). Two nodes built differently (only `pads`, or
// every attribute explicit, or auto_pad) that compute the same get the same
// map. Opaque and unknown nodes: their attributes as they are.
AttributeMap EffectiveAttributes(const Graph& graph, NodeId id);
// One window attribute (pads, strides, dilations, kernel_shape, group) of a
// Conv / pooling node as it takes effect: EffectiveAttributes' value, or the
// default written out (zeros, ones, the weight's kernel, group 1); nullopt
// if shapes are not known well enough.
std::optional<Attribute> EffectiveWindowAttribute(const Graph& graph, NodeId id, const std::string& name);
// Checks a node's arity and attributes against its entry.
void CheckNodeAgainstDef(const Node& node, const OpDef& def);
// The lowest default-domain opset at which every modelled node of `graph`
// exists (OpDef::since_opset), at least the graph's own opset: a rewrite
// that introduced a newer operator (HardSwish: 14) needs the model written
// at that opset.
int64_t OpsetNeeded(const Graph& graph);

// Helpers for shape rules.
int64_t NormalizeAxis(int64_t axis, int64_t rank, const AttrReader& ctx);
Shape BroadcastShapes(const Shape& a, const Shape& b, const AttrReader& ctx);

}  // namespace rlflow
