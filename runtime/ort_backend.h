#pragma once
// ONNX Runtime as a timing backend ("ort"): graphs are exported to ONNX and
// timed in ONNX Runtime's CPU execution provider (npm's onnxruntime-node,
// installed by ./bazelw into third_party/onnxruntime_node), so that the cost
// model, the noise rule and the end-to-end verdict measure the runtime a
// user deploys on, with its own graph optimisations (constant folding,
// Conv+BN / activation fusions, MatMul+Add -> Gemm and, at level "all", the
// NCHWc blocked layout).
//
// One Node.js process (runtime/ort_run.js --serve) serves every request of
// a backend; models and inputs go through a private temporary directory that
// the backend removes. In-context node times come from ORT's profiler: each
// kernel event is attributed to the rlflow node it ran (by the node and value
// names the export gives them; a fused kernel to the member whose operator
// it runs, e.g. a Conv+BatchNorm+Relu kernel to the Conv); kernels ORT adds
// (layout reorders) count as per-node overhead, and nodes ORT fuses away or
// folds cost nothing.
#include <ATen/core/Tensor.h>

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "runtime/cost_model.h"

namespace rlflow {

struct OrtOptions {
  int threads = 1;            // intra-op threads (0: ORT's default)
  std::string level = "all";  // graph optimisation level: disabled, basic, extended, all
  std::string script;         // the server script (empty: runtime/ort_run.js)
};

// The backend; throws rlflow::Error (one line) if Node.js or onnxruntime-node
// is missing or the server does not start.
std::unique_ptr<TimingBackend> MakeOrtBackend(const OrtOptions& options);

// Where onnxruntime-node is installed (third_party/onnxruntime_node/node_modules
// of the checkout, or $RLFLOW_ORT_NODE_MODULES) and the ort_run.js script;
// throw rlflow::Error with what to run if missing.
std::string OrtNodeModules();
std::string OrtRunScript();

// Writes `inputs` into `dir` in ort_run.js's format (DIR/inputs.json + raw
// little-endian files).
void WriteOrtInputs(const std::string& dir, const std::vector<std::pair<std::string, at::Tensor>>& inputs);

// One kernel event of ORT's profiler, as ort_run.js reports it.
struct OrtKernel {
  std::string name;  // ORT's node name
  std::string op;    // the operator it ran (e.g. "Conv" for a fused Conv+Relu)
  double ms = 0;
  // The outputs of ORT's node of that name in its optimised graph, where
  // known: a node ORT made by fusing has a name of its own but writes the
  // value of the last node it replaced.
  std::vector<std::string> outputs;
};
// The rlflow node an ORT kernel ran, for a graph exported by the backend
// (nodes named "rlflow_n<id>", computed values "rlflow_v<id>"); kNoNode when
// it is none of them (e.g. a layout reorder ORT inserted).
NodeId AttributeOrtKernel(const Graph& graph, const OrtKernel& kernel);

// A node of ORT's optimised graph: the values it reads and writes (ORT's
// names: the export's tags, graph inputs, initializers, or names of its own).
struct OrtNodeIO {
  std::vector<std::string> inputs, outputs;
  // The kernel's name (ORT names a kernel of the blocked layout after the
  // value it computes, "rlflow_v<id>_nchwc"): where none of its outputs is
  // a value of the graph (it writes tensors of ORT's own, and may read them
  // too), its members are those between its node and that value.
  std::string name = "";
};
// Which nodes ORT fused into another node's kernel (InContextTimes::
// fused_into and fused_distance): for each kernel, charged to node `first`
// (AttributeOrtKernel) and run by ORT's node `second`, the nodes of `graph`
// between that node's inputs and its outputs that no kernel was charged to
// (ran[id] == 0; weight-only nodes apart, which ORT folds at load).
void FindOrtFusions(const Graph& graph, const std::vector<char>& ran,
                    const std::vector<std::pair<NodeId, OrtNodeIO>>& kernels, std::vector<NodeId>* fused_into,
                    std::vector<int>* fused_distance);

// The element type (ONNX code) and shape of the named tensors of a model
// whose inputs all have static shapes, from one run in ONNX Runtime on
// seeded random inputs (floating point: normal; integer and bool: zeros).
// The importer's type oracle (ImportOptions::type_oracle) for outputs of
// control flow that ONNX's shape inference cannot type. Throws
// rlflow::Error (one line) if ONNX Runtime cannot run the model.
std::map<std::string, std::pair<int32_t, std::vector<int64_t>>> OrtTensorTypes(const std::string& model_bytes,
                                                                               const std::vector<std::string>& names,
                                                                               uint64_t seed);

// The outputs of the model at `model_path` (its external data files beside
// it), in order, from one run in ONNX Runtime (CPU, one thread, level all)
// on `inputs` (by graph input name). Throws rlflow::Error (one line) if
// ONNX Runtime cannot run the model or an output is not a tensor of a type
// rlflow holds.
std::vector<at::Tensor> OrtOutputs(const std::string& model_path,
                                   const std::vector<std::pair<std::string, at::Tensor>>& inputs);

// The outputs that runtime/ort_run.js wrote into `dir` (outputs.json and a
// raw file each), in order. Throws rlflow::Error (one line) on an output of
// a type rlflow does not hold or whose bytes do not fit its shape.
std::vector<at::Tensor> ReadOrtOutputs(const std::string& dir);

}  // namespace rlflow
