// Fuzz target: the ONNX importer (the file parsed as it is read, schema
// checks, ONNX shape inference in its child process, rlflow's shape rules and
// folding), the cut at opaque nodes, the executor on tiny graphs, and export.
// Every input must end in a result or an exception, never a crash, a
// sanitizer report or a hang; and the streamed writer must write exactly the
// bytes of the serialized export.
#include <ATen/Parallel.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/passes/interface.h"
#include "runtime/executor.h"
#include "tools/fuzz/fuzz_target.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const bool init = [] {
    rlflow::SetMaxTensorBytes(int64_t{16} << 20);  // 16 MB: refuse big tensors early
    at::set_num_threads(1);
    return true;
  }();
  (void)init;
  using namespace rlflow;
  // Removed when the fuzzer exits (libFuzzer's -max_total_time ends by exit()).
  static const struct Scratch {
    std::string path = MakeTempDir("import_fuzz_");
    ~Scratch() { RemoveTree(path); }
  } scratch;
  const std::string& dir = scratch.path;
  try {
    std::ofstream(dir + "/in.onnx", std::ios::binary | std::ios::trunc)
        .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
    Graph g = ImportOnnxFile(dir + "/in.onnx");
    // A model from opsets 18+ is written at its own opset (its graph's, 17,
    // has nodes in rlflow's private domain); others at the graph's.
    std::string exported = g.info().source_opset > kMaxOpset ? ExportOnnxBytesAtSourceOpset(g) : ExportOnnxBytes(g);
    WriteOptions inline_write;
    inline_write.external = ExternalData::kInline;
    inline_write.at_graph_opset = true;
    WriteOnnxFile(g, dir + "/out.onnx", nullptr, inline_write);
    if (ReadFile(dir + "/out.onnx") != exported) {
      std::fprintf(stderr, "the streamed writer's bytes differ from the serialized export\n");
      std::abort();
    }
    Graph cut = CutAtOpaque(g);
    // Run only tiny graphs (bounded time per input).
    int64_t elements = 0;
    for (ValueId v = 0; v < cut.num_values(); ++v) {
      int64_t n = cut.value(v).type.NumElements();
      elements += n < 0 ? 1 << 20 : n;
    }
    if (cut.num_nodes() <= 64 && elements <= 200000) Executor(cut).Run(RandomInputs(cut, 1));
  } catch (const std::exception&) {
    // A clean error: what the optimiser prints as one 'error:' line.
  }
  return 0;
}
