// Prints a table of the model zoo: nodes, parameters, FLOPs and CPU executor
// latency (median of --runs after --warmup), for the C++-built and the
// torch-exported version of every model.
//
//   ./bazelw run //benchmarks:zoo_stats -- [--models=resnet50,bert_base] [--runs=10]
#include <ATen/Parallel.h>
#include <gflags/gflags.h>
#include <glog/logging.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <sstream>

#include "core/cli.h"
#include "core/error.h"
#include "core/file_util.h"
#include "core/onnx_io.h"
#include "core/summary.h"
#include "runtime/executor.h"
#include "zoo/zoo.h"

DEFINE_string(models, "", "comma-separated zoo models (default: all)");
DEFINE_int32(runs, 10, "timed runs per model (median reported)");
DEFINE_int32(warmup, 2, "untimed runs first");
DEFINE_int32(threads, 1, "ATen intra-op threads");
DEFINE_string(torch_dir, "zoo/torch_zoo",
              "directory of the torch-exported models (the //zoo:torch_zoo "
              "outputs; found in the runfiles under `bazel run`)");

namespace rlflow {
namespace {

double MedianMs(const Executor& ex, const std::vector<at::Tensor>& inputs) {
  for (int i = 0; i < FLAGS_warmup; ++i) ex.Run(inputs);
  std::vector<double> ms;
  for (int i = 0; i < FLAGS_runs; ++i) {
    auto t0 = std::chrono::steady_clock::now();
    ex.Run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - t0).count());
  }
  std::sort(ms.begin(), ms.end());
  return ms[ms.size() / 2];
}

int Main() {
  if (FLAGS_runs <= 0 || FLAGS_warmup < 0 || FLAGS_threads <= 0)
    Fail("--runs and --threads must be positive, --warmup >= 0");
  at::set_num_threads(FLAGS_threads);
  std::vector<std::string> names;
  std::stringstream ss(FLAGS_models);
  for (std::string n; std::getline(ss, n, ',');)
    if (!n.empty()) {
      if (!zoo::IsZooModel(n)) Fail("'", n, "' is not a zoo model");
      names.push_back(n);
    }
  if (names.empty()) names = zoo::ModelNames();
  std::printf("| model | source | nodes | parameters (M) | GFLOPs | CPU executor, %d thread(s), median of %d (ms) |\n",
              FLAGS_threads, FLAGS_runs);
  std::printf("|---|---|---:|---:|---:|---:|\n");
  for (const auto& name : names) {
    for (bool torch : {false, true}) {
      Graph g;
      if (torch) {
        std::string path = FLAGS_torch_dir + "/" + name + ".onnx";
        if (!FileExists(path)) {
          LOG(WARNING) << path << " not found; run under `./bazelw run` or set --torch_dir";
          continue;
        }
        g = ImportOnnxFile(path);
      } else {
        g = ImportOnnxBytes(ExportOnnxBytes(zoo::Build(name, 1)), name);
      }
      GraphSummary s = Summarize(g);
      Executor ex(g);
      double ms = MedianMs(ex, RandomInputs(g, 1));
      std::printf("| %s | %s | %d | %.2f | %.2f | %.1f |\n", name.c_str(), torch ? "torch.onnx.export" : "C++ builder",
                  s.nodes, s.parameters / 1e6, s.flops / 1e9, ms);
      std::fflush(stdout);
    }
  }
  return 0;
}

}  // namespace
}  // namespace rlflow

int main(int argc, char** argv) {
  return rlflow::cli::Main(argc, argv, "zoo_stats [--models=a,b] [--runs=N]", rlflow::Main);
}
