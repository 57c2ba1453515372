// Imports an ONNX model as the optimiser does and prints what rlflow makes
// of it: import notes (opaque nodes, symbolic dimensions, conversions), op
// counts, values computed from symbolic dimensions; with --roundtrip, the
// same after export and import again.
//
//   ./bazelw run //tools:inspect -- --model=PATH [--free_dim=1] [--input_shape=NAME:D1,...] [--roundtrip]
//
// Each input is printed with its declared shape (symbolic dimension names
// kept) and the shape it was imported at, so that a user sees what
// --input_shape to give the optimiser.
#include <gflags/gflags.h>

#include <cstdio>

#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "runtime/ort_backend.h"

DEFINE_string(model, "", "ONNX file to inspect");
DEFINE_int32(free_dim, 1,
             "value bound to symbolic dimensions of graph inputs not given by --input_shape; where the model "
             "does not fit it (a detector of any resolution at 1 x 1), the dimensions after each input's first "
             "are bound to 224, else 256, 512 or 1024, and a note says so");
DEFINE_string(input_shape, "", "shapes to import at, NAME:D1,D2,...[;NAME2:...] (as the optimiser's flag)");
DEFINE_bool(roundtrip, false, "also export the imported graph and import it again");
DEFINE_string(write, "", "also write the imported graph, exported again, to this path");

namespace rlflow {
namespace {

void Print(const char* what, const Graph& g, const ImportReport& rep) {
  int opaque = 0, symbolic = 0;
  for (NodeId id = 0; id < g.num_nodes(); ++id) opaque += g.node(id).opaque();
  for (ValueId v = 0; v < g.num_values(); ++v) symbolic += g.value(v).symbolic && g.value(v).known != nullptr;
  std::printf(
      "%s: %d nodes (%d opaque), %d shape values computed from symbolic dimensions, %d static dimensions of them "
      "folded, %d folded, hash %016llx\n",
      what, g.num_nodes(), opaque, symbolic, rep.static_dims, rep.folded_nodes,
      static_cast<unsigned long long>(g.StructuralHash()));
  for (const auto& w : rep.warnings) std::printf("  note: %s\n", w.c_str());
  for (ValueId in : g.inputs()) {
    const Value& v = g.value(in);
    std::string declared = DeclaredTypeText(g, v.name);
    if (v.non_tensor) {
      std::printf("  input  %s %s\n", v.name.c_str(), declared.c_str());
      continue;
    }
    std::printf("  input  %s %s%s\n", v.name.c_str(), v.type.ToString().c_str(),
                declared == ShapeToString(v.type.shape) ? "" : ("  (declared " + declared + ")").c_str());
  }
  for (ValueId out : g.outputs()) {
    const Value& v = g.value(out);
    std::printf("  output %s %s\n", v.name.c_str(),
                v.non_tensor ? DeclaredTypeText(g, v.name).c_str() : v.type.ToString().c_str());
  }
}

int Main() {
  if (FLAGS_model.empty()) Fail("--model is required");
  if (FLAGS_free_dim <= 0) Fail("--free_dim must be positive, got ", FLAGS_free_dim);
  ImportOptions options;
  options.free_dim_value = FLAGS_free_dim;
  options.input_shapes = ParseInputShapes(FLAGS_input_shape);
  // Outputs of control flow that ONNX cannot type: one run in ONNX Runtime,
  // as the optimiser types them.
  options.type_oracle = [](const std::string& bytes, const std::vector<std::string>& names) {
    return OrtTensorTypes(bytes, names, 1);
  };
  ImportReport rep;
  // As the optimiser imports it: a model that does not fit at the free
  // binding is bound where it fits (a note says how).
  std::map<std::string, std::vector<int64_t>> fitted;
  Graph g = ImportOnnxFileFitting(ResolveUserPath(FLAGS_model), options, &rep, nullptr, &fitted);
  for (const auto& [name, shape] : fitted) options.input_shapes[name] = shape;
  Print("imported", g, rep);
  if (!FLAGS_write.empty()) WriteOnnxFile(g, ResolveUserPath(FLAGS_write));
  if (FLAGS_roundtrip) {
    ImportReport again_rep;
    WriteOptions at_graph_opset;
    at_graph_opset.at_graph_opset = true;
    Graph again = ReimportGraph(g, "exported", options, at_graph_opset, nullptr, nullptr, &again_rep);
    Print("exported and imported again", again, again_rep);
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "rlflow inspect: ./bazelw run //tools:inspect -- --model=PATH [--roundtrip]",
                           rlflow::Main);
}
