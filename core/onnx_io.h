#pragma once
// ONNX import and export.
//
// Import accepts default-domain opsets 1 to 26. Models at 18 to 26 are
// converted to 17 by rlflow and written back at their opset (ONNX 1.12, on
// which import and export are built, stops at 17; see core/onnx_upgrade.h).
// Models at 1 to 6 are first
// converted to 7 by ONNX's version converter; models at 7 to 10 are
// upgraded to 11 by rlflow (core/onnx_upgrade.h); models below opset 13 are
// then upgraded to 13 with ONNX's version converter, so the IR always holds the
// opset-13+ forms (axes and split sizes as inputs). Shape-computing
// subgraphs and Constant nodes are folded into initializers (see
// core/passes/fold_constants.h). Operators the registry
// does not model (and other domains) become opaque nodes that are exported
// unchanged. ONNX shape inference fills in missing types first; then the
// registry's shape rules infer and check every modelled node.
#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "core/file_util.h"
#include "core/graph.h"

namespace onnx {
class ModelProto;
}

namespace rlflow {

struct ImportOptions {
  // Value bound to symbolic / unknown dimensions of graph inputs (batch 1).
  int64_t free_dim_value = 1;
  // Shapes the model will run at, by graph input name (--input_shape): their
  // symbolic dimensions are bound to these values, and so is every other
  // input dimension of the same dim_param name; dimensions not covered get
  // free_dim_value. A name that is not a graph input, a rank or a fixed
  // dimension that differs, or two values for one dim_param are errors.
  // The written model keeps its symbolic dimensions.
  std::map<std::string, std::vector<int64_t>> input_shapes;
  // The directory that tensors stored in external data files are read from
  // (ONNX's external data: a location relative to the model's directory).
  // ImportOnnxFile sets it to the model file's directory; empty (bytes with
  // no file) makes an external tensor an error.
  std::string external_data_dir;
  // Element type (ONNX code) and shape of a tensor, by name.
  using TensorTypes = std::map<std::string, std::pair<int32_t, std::vector<int64_t>>>;
  // Types of the outputs of nodes rlflow does not model (If, Loop, Scan,
  // custom ops) that ONNX's shape inference leaves without a static shape
  // (a Loop's carried values, an If whose branches hold an LSTM): given the
  // model with its inputs bound and the names, it returns the types of those
  // it can find, from running the model once. The optimiser sets it (ONNX
  // Runtime, runtime/ort_backend.h); without it such outputs stay untyped,
  // and a modelled node reading one is an error naming it.
  std::function<TensorTypes(const std::string& model_bytes, const std::vector<std::string>& names)> type_oracle;
  // A static dimension of a tensor whose other dimensions are symbolic
  // (torch's `n, s, w = h.shape`: Gather(Shape(h), 2)) is folded, with the
  // arithmetic on it, where it is the same at three bindings of the symbolic
  // dimensions. Off: such values are computed at run time, as in the file
  // (the graph the user has, which the optimiser's verdict compares with).
  bool fold_static_dims = true;
  // Where static dimensions are folded, ImportReport::as_given gets the
  // graph without that folding as well, from the same import (its weights
  // shared with the returned graph's, not read twice).
  bool also_as_given = false;
  // Weights already in memory (a second import of the same model, or a
  // graph passed through ReimportGraph by reference), by initializer name:
  // a top-level initializer of that name, element type and shape is this
  // tensor, shared, instead of a copy (an inline one where its bytes are
  // equal; one in the model's external data file without reading it again).
  std::shared_ptr<const std::map<std::string, TensorDataPtr>> known_weights;
  // Quantized models in the QDQ format (ONNX Runtime's quantization tool,
  // TensorRT's, torch's QAT export): a node that reads a DequantizeLinear's
  // output or feeds a QuantizeLinear is part of a unit that runtimes run as
  // one integer kernel (ORT fuses DequantizeLinear -> Conv -> QuantizeLinear
  // into QLinearConv). Kept opaque, as it is, so that no rewrite breaks a
  // unit up (a float rewrite of the op in between is not what runs); the
  // float regions between units are optimised as usual.
  bool keep_quantized_units = true;
  // ONNX's shape inference runs in a child process, so that a crash in that
  // third-party code on a malformed model costs only its types. A model
  // rlflow exported itself from a graph it imported (ReimportGraph) may run
  // it in this process instead: the optimiser's costing of many search
  // graphs at a second binding spent most of its time forking (the page
  // tables of a process holding the search's queue, copied per import).
  // Conversions between opsets always run in the child.
  bool onnx_passes_in_process = false;
};
// The graph's initializers of at least `min_bytes`, by name (for
// ImportOptions::known_weights).
std::shared_ptr<const std::map<std::string, TensorDataPtr>> WeightsByName(const Graph& graph, size_t min_bytes = 1024);

// Parses "NAME:D1,D2,...[;NAME2:...]" (the name ends at the last ':', so
// tf2onnx's "input:0" names work; "NAME:" is a scalar). Errors name the item
// and `flag`.
std::map<std::string, std::vector<int64_t>> ParseInputShapes(const std::string& spec,
                                                             const std::string& flag = "--input_shape");
// A second binding of a dimension bound to `value`, to check that what was
// computed at one binding holds at another: halved when even and at least 4
// (keeps a stride-32 detector's 640 at a multiple of 32), else doubled; 0
// (an empty cache, a decoder's first step) moves to 2.
int64_t OtherBindingOf(int64_t value);
// Options for importing the same model at a second binding of its symbolic
// dimensions: free ones at 2 (3 if the first was 2), given ones moved by
// OtherBindingOf (fixed dimensions stay), but every second distinct one
// that halves (by its name; an unnamed one by its input and axis, in the
// order of the inputs' names and axes) doubled instead: an image's aspect
// ratio changes (H/2, W*2: as many pixels), so what depends on it shows
// also in a model that resizes its input to a fixed scale (torchvision's
// detectors: at 160 x 160 their features were those of 320 x 320, a Reshape
// to them was folded, and the written model failed at 256 x 384). The
// importer's second binding moves them the same way. kDoubled: given ones
// doubled instead, for a model that does not fit the first (a stride-32
// detector given 224 does not at 112). kSmaller: given ones made smaller
// (SmallerBindingOf), for a model given its largest size where the first
// doubles it (CLIP's text encoder given its 77 tokens, 154 beyond its
// position table).
enum class SecondBindingKind { kMoved, kDoubled, kSmaller };
ImportOptions SecondBinding(const Graph& imported, const ImportOptions& first,
                            SecondBindingKind kind = SecondBindingKind::kMoved);
// Options for importing the same model at a second binding the user gave
// (--second_input_shape): `given`'s inputs at its shapes; the inputs the
// first binding gave keep their shapes, but a dimension named like one of
// `given`'s (a batch the inputs share) takes its value there; the rest as
// at the first (free_dim_value, or by a dimension name). Names and shapes
// are checked by the import.
ImportOptions GivenSecondBinding(const Graph& imported, const ImportOptions& first,
                                 const std::map<std::string, std::vector<int64_t>>& given);
// The graph inputs of `imported` whose declared type has a symbolic
// dimension (or no shape) that the model does not fix (ModelInfo::
// fixed_axes), in the order of the graph's inputs: those a binding moves.
std::vector<std::string> InputsWithSymbolicDims(const Graph& imported);
// Another value below `value` where there is one that is neither 0 nor 1
// (those broadcast and vanish): v / 2 from 4 on, 3 -> 2; 2, 1, 0 -> 3, 2, 2.
int64_t SmallerBindingOf(int64_t value);
// A node failed at the shapes the importer bound the model's symbolic input
// dimensions to where neither ImportOptions::input_shapes nor a dimension of
// the same name gave them (free_dim_value, 1: a detector of any resolution
// gets a 1 x 1 image, and its upsampled features no longer match the ones
// it concatenates them with). `inputs`: those inputs as bound.
class FreeDimsDoNotFit : public Error {
 public:
  struct Input {
    std::string name;
    std::vector<int64_t> dims;       // as bound
    std::vector<char> free;          // per dimension: bound to free_dim_value
    std::vector<std::string> names;  // per dimension: its dim_param ("" if none)
  };
  FreeDimsDoNotFit(const std::string& message, std::string node_error, std::vector<Input> inputs)
      : Error(message), node_error(std::move(node_error)), inputs(std::move(inputs)) {}
  std::string node_error;  // the node's own message
  std::vector<Input> inputs;
};
// A graph input's declared shape with its symbolic names ("[batch,3,H,W]");
// for a sequence, map or optional value its type ("seq(tensor(float))").
std::string DeclaredTypeText(const Graph& graph, const std::string& name);

struct ImportReport {
  std::vector<std::string> warnings;
  int opset_before_conversion = 0;
  int folded_nodes = 0;  // Constant / shape-computing nodes folded to initializers
  // Static dimensions of symbolic shapes folded (ImportOptions::fold_static_dims).
  int static_dims = 0;
  // Nodes kept opaque as parts of quantized (QDQ) units
  // (ImportOptions::keep_quantized_units).
  int quantized_unit_nodes = 0;
  // Nodes kept opaque because a value they read (an opaque node's output)
  // has no static type.
  int untyped_opaque_nodes = 0;
  // With ImportOptions::also_as_given and static_dims > 0: the graph as the
  // file computes it (every fold but those of the static dimensions).
  std::optional<Graph> as_given;
  // The file's nodes were not in topological order (invalid ONNX) and were
  // sorted: its bytes are not a valid model to write back.
  bool reordered_nodes = false;
  // Nodes of one graph shared a name (invalid in ONNX Runtime): renamed.
  bool renamed_nodes = false;
  // Per graph input, the axes bound to free_dim_value (symbolic, and given
  // a value by neither input_shapes nor a dimension of the same name there).
  std::map<std::string, std::vector<int>> free_axes;
  // The model has symbolic input dimensions but does not infer at any
  // second binding of them, so every shape computed from them was folded at
  // the first: a graph exported from it runs at those shapes only.
  bool folded_at_binding = false;
};

// The file is parsed as it is read (its bytes are never held whole) and the
// weights are moved out of the parsed protobuf into the graph: a model's
// weights are held once. `fingerprint`, if given, receives the file's
// (FingerprintFile's, of the bytes parsed).
Graph ImportOnnxFile(const std::string& path, const ImportOptions& options = {}, ImportReport* report = nullptr,
                     FileFingerprint* fingerprint = nullptr);
// `what` names the source in error messages.
Graph ImportOnnxBytes(const std::string& bytes, const std::string& what, const ImportOptions& options = {},
                      ImportReport* report = nullptr);
Graph ImportOnnxModel(onnx::ModelProto model, const std::string& what, const ImportOptions& options = {},
                      ImportReport* report = nullptr);
// The values ImportOnnxFileFitting tries for the free dimensions after an
// input's first, in turn: ImageNet's size, then powers of two (a stride-64
// or -128 network needs a multiple of it).
inline constexpr int64_t kFittedDims[] = {224, 256, 512, 1024};
// ImportOnnxFile, and where that throws FreeDimsDoNotFit, the file again
// with those inputs' free dimensions after the first bound to each of
// kFittedDims in turn (the first, a batch, stays at free_dim_value; a
// dimension name at the first place of any input stays too): the first that
// imports is kept, `fitted` gets the shapes it bound and the report says so
// in a warning. Where none imports, the first error, saying what was tried.
// Without a failure, `fitted` is left empty.
Graph ImportOnnxFileFitting(const std::string& path, const ImportOptions& options, ImportReport* report,
                            FileFingerprint* fingerprint, std::map<std::string, std::vector<int64_t>>* fitted);
// The shapes FreeDimsDoNotFit's inputs get with their free dimensions after
// the first at `inner` (see ImportOnnxFileFitting).
std::map<std::string, std::vector<int64_t>> FittedInputShapes(const FreeDimsDoNotFit& e, int64_t inner);

// A serialized onnx::TensorProto (e.g. ONNX's test data input_0.pb), with
// its name; errors name `what`.
TensorData ParseTensorProto(const std::string& bytes, const std::string& what, std::string* name = nullptr);
// A tensor file: NumPy's .npy (C order, little-endian; bool, int8 to int64,
// uint8/16, float16/32/64) or a serialized onnx::TensorProto (.pb), told
// apart by NumPy's magic bytes. Errors name the file.
TensorData ReadTensorFile(const std::string& path);
// Parses "NAME:FILE[;NAME2:FILE2...]" (--input_data; the name ends at the
// last ':' before the file, so tf2onnx's "input:0:x.npy" works if the file
// name has no ':'). Errors name the item.
std::map<std::string, std::string> ParseInputData(const std::string& spec);

// How WriteOnnxFile stores initializers: inline in the .onnx file, or in one
// data file beside it, "<file name>.data" (ONNX's external data, offsets
// aligned to 4 KiB), which ONNX Runtime and onnx.load read from the model's
// directory. kAuto: external when the model was read with external data or
// its initializers are too large for one protobuf (kMaxInlineBytes).
enum class ExternalData { kAuto, kInline, kExternal };
struct WriteOptions {
  ExternalData external = ExternalData::kAuto;
  // Initializers of at least this many bytes go to the data file (ONNX's
  // own default threshold); smaller ones stay inline.
  size_t external_min_bytes = 1024;
  // At the graph's own opset, not converted back to the source's.
  bool at_graph_opset = false;
  // ReimportGraph only: initializers of at least external_min_bytes are not
  // serialized; the import takes the graph's own tensors (known_weights).
  // The structure, the small tensors and the binding round-trip, the large
  // weights are shared: a model's weights are held once (a check at another
  // binding of its symbolic dimensions), not three times. Off where the
  // point is that the weights survive the write (they go through it then).
  bool weights_by_reference = false;
  // A model from opsets 18+: Mish's and Gelu's bodies fused into the
  // operators again (UpgradeFromOpset17). Off for timing in ONNX Runtime,
  // which runs the bodies as fast and whose per-node costs (kernel events
  // by node name) cannot see the nodes of a fused body.
  bool fuse_functions = true;
};
// Protobuf cannot serialize a message of 2 GiB or more: initializers beyond
// this (leaving room for the rest of the model) are written externally.
constexpr size_t kMaxInlineBytes = (size_t{2} << 30) - (size_t{64} << 20);
// Whether WriteOnnxFile writes this graph's weights to an external file.
bool WritesExternalData(const Graph& graph, const WriteOptions& options);
// Bytes of the graph's initializers and input default values.
size_t InitializerBytes(const Graph& graph);

// Builds the ONNX model and checks it with onnx::checker (throws on failure).
void ExportOnnxModel(const Graph& graph, onnx::ModelProto* model);
std::string ExportOnnxBytes(const Graph& graph);
// The exported model at the opset of the file it was imported from (a model
// upgraded from opset 11 or 12 is converted back with ONNX's version
// converter); if that fails, at the graph's opset, and `note` says why.
// Models imported at opsets 1 to 10 are written at 11, and `note` says so.
// `written_opset` receives the opset written.
std::string ExportOnnxBytesAtSourceOpset(const Graph& graph, std::string* note = nullptr, int* written_opset = nullptr);
// Export (at the source opset, as above, unless options.at_graph_opset) +
// atomic write + onnx::checker on the written file by path (which also
// checks that external data files exist). With external data the data file
// is written first, then the model; on failure neither is left behind.
// `written_opset` receives the opset written.
void WriteOnnxFile(const Graph& graph, const std::string& path, std::string* note = nullptr,
                   const WriteOptions& options = {}, int* written_opset = nullptr);
// The graph written as ONNX (as WriteOnnxFile would) and imported again
// with `options`: in memory, or through a temporary directory when its
// initializers are too large for one protobuf. `written_opset` and `note`
// as for WriteOnnxFile.
Graph ReimportGraph(const Graph& graph, const std::string& what, const ImportOptions& options,
                    const WriteOptions& write = {}, int* written_opset = nullptr, std::string* note = nullptr,
                    ImportReport* report = nullptr);

constexpr int kMinOpset = 1;
constexpr int kMinWrittenOpset = 11;
constexpr int kMaxOpset = 17;
constexpr int kCanonicalMinOpset = 13;

}  // namespace rlflow
