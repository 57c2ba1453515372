// Fuzz target: the ONNX importer (schema checks, ONNX shape inference in its
// child process, rlflow's shape rules and folding), the cut at opaque nodes,
// the executor on tiny graphs, and export. Every input must end in a result
// or an exception, never a crash, a sanitizer report or a hang.
#include <ATen/Parallel.h>

#include <string>

#include "core/error.h"
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
  try {
    Graph g = ImportOnnxBytes(std::string(reinterpret_cast<const char*>(data), size), "fuzz input");
    std::string exported = ExportOnnxBytes(g);
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
