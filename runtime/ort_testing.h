#pragma once
// Test helper: runs an ONNX model in ONNX Runtime (npm's onnxruntime-node,
// installed by ./bazelw into third_party/onnxruntime_node) through
// runtime/ort_run.js.
#include <ATen/core/Tensor.h>

#include <string>
#include <utility>
#include <vector>

namespace rlflow::testing {

// Inputs by graph-input name; returns the model's outputs in order. Throws
// rlflow::Error if Node.js or onnxruntime-node is missing or the run fails.
std::vector<at::Tensor> RunOnnxRuntime(const std::string& model_path,
                                       const std::vector<std::pair<std::string, at::Tensor>>& inputs);
// The same for several sets of inputs, run in turn by one session (one
// process, the model loaded once); the outputs per set.
std::vector<std::vector<at::Tensor>> RunOnnxRuntime(
    const std::string& model_path, const std::vector<std::vector<std::pair<std::string, at::Tensor>>>& input_sets);

// Times models `a` and `b` in ONNX Runtime (CPU, one thread) on the same
// inputs, interleaved, after a warm-up: ms per run of each, pair i = (a[i], b[i]).
struct OrtPairedTimes {
  std::vector<double> a, b;
};
OrtPairedTimes TimeOnnxRuntime(const std::string& a, const std::string& b,
                               const std::vector<std::pair<std::string, at::Tensor>>& inputs, int runs);

// Writes `model` as ONNX Runtime optimises it at `level` (basic, extended,
// all) to `out`: the file a session's optimizedModelFilePath saves.
void SaveOrtOptimizedModel(const std::string& model, const std::string& level, const std::string& out);

// A fresh directory under $TEST_TMPDIR (or /tmp).
std::string MakeTempDir(const std::string& prefix);

}  // namespace rlflow::testing
