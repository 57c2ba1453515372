#include "runtime/ort_testing.h"

#include <stdlib.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstring>
#include <fstream>

#include "core/error.h"
#include "core/file_util.h"
#include "core/subprocess.h"
#include "runtime/ort_backend.h"

namespace rlflow::testing {

std::string MakeTempDir(const std::string& prefix) { return ::rlflow::MakeTempDir(prefix); }

namespace {

// Writes DIR/inputs.json and the raw input files; returns DIR.
std::string WriteInputs(const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  std::string dir = MakeTempDir("ort_");
  WriteOrtInputs(dir, inputs);
  return dir;
}

// Runs node on ort_run.js with `args`; returns its stdout + stderr.
std::string RunNode(const std::vector<std::string>& args, const std::string& what) {
  std::vector<std::string> argv = {"node", OrtRunScript()};
  argv.insert(argv.end(), args.begin(), args.end());
  int status = 0;
  std::string log = RunProgramOutput(argv, &status, {{"NODE_PATH", OrtNodeModules()}});
  if (status != 0) {
    // ort_run.js's own message ("ort_run: ..."), not ORT's warnings before it.
    size_t at = log.rfind("ort_run: ");
    Fail("ONNX Runtime failed on ", what, ": ",
         status == 127 && log.empty() ? std::string("node could not be started")
                                      : FirstLine(at == std::string::npos ? log : log.substr(at)));
  }
  return log;
}

}  // namespace

void SaveOrtOptimizedModel(const std::string& model, const std::string& level, const std::string& out) {
  RunNode({"--save_optimized", model, level, out}, model);
}

OrtPairedTimes TimeOnnxRuntime(const std::string& a, const std::string& b,
                               const std::vector<std::pair<std::string, at::Tensor>>& inputs, int runs) {
  std::string dir = WriteInputs(inputs);
  std::string log = RunNode({"--bench", a, b, dir, std::to_string(runs)}, a + " / " + b);
  size_t at = log.rfind("{\"a_ms\":");
  if (at == std::string::npos) Fail("ort_run --bench printed no timings: ", FirstLine(log));
  auto array = [&](const std::string& key) {
    std::vector<double> v;
    size_t p = log.find("\"" + key + "\":[", at);
    if (p == std::string::npos) Fail("ort_run --bench printed no '", key, "' runs");
    p = log.find('[', p) + 1;
    while (p < log.size() && log[p] != ']') {
      char* end = nullptr;
      v.push_back(std::strtod(log.c_str() + p, &end));
      p = static_cast<size_t>(end - log.c_str());
      if (p < log.size() && log[p] == ',') ++p;
    }
    return v;
  };
  OrtPairedTimes t;
  t.a = array("a");
  t.b = array("b");
  if (t.a.size() != t.b.size() || t.a.empty()) Fail("ort_run --bench printed unpaired runs");
  return t;
}

std::vector<std::vector<at::Tensor>> RunOnnxRuntime(
    const std::string& model_path, const std::vector<std::vector<std::pair<std::string, at::Tensor>>>& input_sets) {
  std::vector<std::string> args = {model_path}, dirs;
  for (const auto& inputs : input_sets) {
    dirs.push_back(WriteInputs(inputs));
    args.push_back(dirs.back());
  }
  RunNode(args, model_path);
  std::vector<std::vector<at::Tensor>> sets;
  for (const std::string& dir : dirs) {
    sets.push_back(ReadOrtOutputs(dir));
  }
  return sets;
}

std::vector<at::Tensor> RunOnnxRuntime(const std::string& model_path,
                                       const std::vector<std::pair<std::string, at::Tensor>>& inputs) {
  return RunOnnxRuntime(model_path, std::vector<std::vector<std::pair<std::string, at::Tensor>>>{inputs}).at(0);
}

}  // namespace rlflow::testing
